// planc runtime for the CPU target: processors are std::threads.
//
// Each processor of the plan is one thread that runs the plan body: its task groups in order,
// the task indices the format gives it (every warp slot's sequence, one slot after the other),
// and a barrier wherever the plan's processor groups need one. A slot is one thread here, so
// the kernels of planc_kernels.h run with Slot::threads == 1; matmul has its own CPU form
// (packed panels, a register-blocked micro-kernel the compiler vectorises with
// -O3 -march=native).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "planc_kernels.h"

namespace planc {

struct CpuSlot {
  static constexpr int threads = 1;
  static constexpr long long sram = 0;
  int tid = 0;
  char* smem = nullptr;
  float* scratch = nullptr;  // this processor's matmul packing buffers
  void sync() const {}
};

// A reusable barrier for `count` threads (generation counting, so it can be waited on again
// right away). Threads block rather than spin: a plan may have far more processors than the
// machine has cores.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const unsigned long long generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return;
    }
    changed_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  const int count_;
  int arrived_ = 0;
  unsigned long long generation_ = 0;
};

// Warp emulation (build with -DPLANC_EMULATE_WARPS=N): every slot runs as N threads per warp
// with its own shared memory and a barrier, so the GPU forms of the kernels (the cooperative
// shared-memory matmul, strided element loops, slot barriers between fused operators) run
// and can be checked on a CPU. Slower; for checking, not for speed.
template <int Threads, long long Sram>
struct EmulatedSlot {
  static constexpr int threads = Threads;
  static constexpr long long sram = Sram;
  int tid;
  char* smem;
  Barrier* barrier;
  void sync() const { barrier->wait(); }
};

template <int SlotWarps, long long SlotSram, class Work>
inline void run_slot(const CpuSlot& slot, Work&& work) {
#if defined(PLANC_EMULATE_WARPS)
  (void)slot;
  constexpr int threads = SlotWarps * (PLANC_EMULATE_WARPS);
  Barrier barrier(threads);
  std::vector<char> smem(static_cast<size_t>(SlotSram) + 16);
  std::vector<std::thread> lanes;
  for (int tid = 0; tid < threads; ++tid)
    lanes.emplace_back([&, tid] {
      work(EmulatedSlot<threads, SlotSram>{tid, smem.data(), &barrier});
    });
  for (auto& lane : lanes) lane.join();
#else
  work(slot);
#endif
}

// One task group on processor `proc`: ARK's task_seq, with the range steps and starts and the
// rotation of the first processor honoured. Slots run one after another.
template <long long PBegin, long long PEnd, long long PStep, long long First, long long TBegin,
          long long TEnd, long long TStep, long long Granularity, int NumSlots, int SlotWarps,
          long long SlotSram, class Task>
inline void task_seq(int proc, char* arena, const CpuSlot& slot) {
  if (!in_range(proc, PBegin, PEnd, PStep)) return;
  constexpr long long processors = range_len(PBegin, PEnd, PStep);
  const long long p = processor_number(proc, PBegin, PStep, processors, First);
  for (int s = 0; s < NumSlots; ++s) {
    run_slot<SlotWarps, SlotSram>(slot, [&](const auto& lane) {
      for (long long t = s;; t += NumSlots) {
        const long long task = task_of(p, t, Granularity, processors, TBegin, TStep);
        if (task >= TEnd) break;
        Task::run(lane, arena, task);
      }
    });
  }
}

// -- matmul ------------------------------------------------------------------------------------

namespace cpu {

#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
constexpr int kMR = 8;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
constexpr int kMR = 6;
#else
constexpr int kVectorBytes = 16;
constexpr int kMR = 4;
#endif
constexpr int kVL = kVectorBytes / static_cast<int>(sizeof(float));
constexpr int kNR = 2 * kVL;
constexpr long long kKC = 256;

constexpr long long round_up(long long v, long long m) { return (v + m - 1) / m * m; }

// Floats of packing buffers one matmul tile needs: an A block, a B block, the C tile and one
// column of B.
constexpr long long matmul_scratch_floats(long long tm, long long tn, long long k) {
  return round_up(tm, kMR) * min_of(kKC, k) + min_of(kKC, k) * round_up(tn, kNR) +
         round_up(tm, kMR) * round_up(tn, kNR) + min_of(kKC, k);
}

// c[kMR x kNR] (row stride ldc) += a times b over kc steps of k: a(r, k) = a[r*ar + k*ak] and
// b (kc x kNR) is k-major. Accumulators stay in registers; a is broadcast, b loaded in vectors.
#if defined(__GNUC__)
typedef float vfloat __attribute__((vector_size(kVectorBytes)));
inline vfloat vload(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void vstore(float* p, vfloat v) { std::memcpy(p, &v, sizeof v); }

inline void micro_kernel(long long kc, const float* a, long long ar, long long ak, const float* b,
                         float* c, long long ldc) {
  vfloat acc[kMR][2];
  for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = vfloat{};
  for (long long k = 0; k < kc; ++k) {
    const vfloat b0 = vload(b + k * kNR), b1 = vload(b + k * kNR + kVL);
    const float* ak_ = a + k * ak;
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
      const vfloat av = ak_[r * ar] - vfloat{};  // a broadcast (x - 0 is x, exactly)
      acc[r][0] += av * b0;
      acc[r][1] += av * b1;
    }
  }
  for (int r = 0; r < kMR; ++r) {
    vstore(c + r * ldc, vload(c + r * ldc) + acc[r][0]);
    vstore(c + r * ldc + kVL, vload(c + r * ldc + kVL) + acc[r][1]);
  }
}
#else
inline void micro_kernel(long long kc, const float* a, long long ar, long long ak, const float* b,
                         float* c, long long ldc) {
  float acc[kMR][kNR] = {};
  for (long long k = 0; k < kc; ++k)
    for (int r = 0; r < kMR; ++r)
      for (int j = 0; j < kNR; ++j) acc[r][j] += a[r * ar + k * ak] * b[k * kNR + j];
  for (int r = 0; r < kMR; ++r)
    for (int j = 0; j < kNR; ++j) c[r * ldc + j] += acc[r][j];
}
#endif

// n contiguous elements as floats. The fp16 form is branch-free bit manipulation (the same
// result as float_from_half_bits), so compilers vectorise it.
template <class T>
inline void to_floats(const T* src, float* dst, long long n) {
  for (long long i = 0; i < n; ++i) dst[i] = as_float(src[i]);
}
inline void to_floats(const fp16* src, float* dst, long long n) {
  for (long long i = 0; i < n; ++i) {
    const uint32_t h = src[i].bits, magnitude = h & 0x7fffu, sign = (h & 0x8000u) << 16;
    const uint32_t normal = (magnitude << 13) + 0x38000000u;   // rebias the exponent
    const uint32_t special = (magnitude << 13) + 0x70000000u;  // inf and nan
    const uint32_t subnormal =
        float_bits(static_cast<float>(magnitude) * 5.9604644775390625e-8f);  // m * 2^-24
    // Selections as masks: branches would keep the compiler from vectorising.
    const uint32_t is_subnormal = 0u - static_cast<uint32_t>(magnitude < 0x0400u);
    const uint32_t is_special = 0u - static_cast<uint32_t>(magnitude >= 0x7c00u);
    const uint32_t bits = (subnormal & is_subnormal) |
                          (~is_subnormal & ((special & is_special) | (normal & ~is_special)));
    dst[i] = bits_float(bits | sign);
  }
}
inline void to_floats(const bf16* src, float* dst, long long n) {
  for (long long i = 0; i < n; ++i) dst[i] = bits_float(static_cast<uint32_t>(src[i].bits) << 16);
}

// Asks for the cache lines of a run of n elements a few iterations ahead: the rows of a
// transposed operand are separate streams that hardware prefetchers pick up too late.
constexpr long long kPrefetchRows = 4;
template <class T>
inline void prefetch_run(const T* p, long long n) {
#if defined(__GNUC__)
  for (long long i = 0; i < n; i += 64 / static_cast<long long>(sizeof(T)))
    __builtin_prefetch(p + i);
#else
  (void)p;
  (void)n;
#endif
}

inline void zero(float* dst, long long n) {
  for (long long i = 0; i < n; ++i) dst[i] = 0.f;
}

}  // namespace cpu

template <long long M, long long N, long long K, long long TM, long long TN, class OutShape,
          class CStrides, class AStrides, class BStrides, class Slot, class T>
inline void matmul_packed(const Slot& slot, long long task, T* c, const T* a, const T* b);

// One TM x TN output tile of C = A B (same contract as matmul_cooperative): K is walked in
// blocks of kKC; each block of A and B is packed, converted to float, into panels the
// micro-kernel streams; the tile accumulates in float and is rounded once on store.
template <long long M, long long N, long long K, long long TM, long long TN, long long TK,
          class OutShape, class CStrides, class AStrides, class BStrides, class Slot, class T>
inline void matmul(const Slot& slot, long long task, T* c, const T* a, const T* b) {
  if constexpr (std::is_same<Slot, CpuSlot>::value) {
    matmul_packed<M, N, K, TM, TN, OutShape, CStrides, AStrides, BStrides>(slot, task, c, a, b);
  } else {  // warp emulation: the GPU's form
    matmul_cooperative<M, N, K, TM, TN, TK, OutShape, CStrides, AStrides, BStrides>(slot, task,
                                                                                   c, a, b);
  }
}

template <long long M, long long N, long long K, long long TM, long long TN, class OutShape,
          class CStrides, class AStrides, class BStrides, class Slot, class T>
inline void matmul_packed(const Slot& slot, long long task, T* c, const T* a, const T* b) {
  using namespace cpu;
  const Tile t = Tiling<OutShape, Dims4<1, 1, TM, TN>>::tile(task);
  const long long m0 = t.begin[2], n0 = t.begin[3], em = t.extent[2], en = t.extent[3];
  const T* A = a + t.begin[0] * AStrides::d0 + t.begin[1] * AStrides::d1 + m0 * AStrides::d2;
  const T* B = b + t.begin[0] * BStrides::d0 + t.begin[1] * BStrides::d1 + n0 * BStrides::d3;
  T* C = c + t.begin[0] * CStrides::d0 + t.begin[1] * CStrides::d1;
  constexpr long long MP = round_up(TM, kMR), NP = round_up(TN, kNR), KC = min_of(kKC, K);
  const long long mpanels = ceil_div(em, kMR), npanels = ceil_div(en, kNR);
  const long long rows = mpanels * kMR, cols = npanels * kNR;
  // A is held m-major (row r at ap + r*KC) when its k is contiguous, else k-major (ap + k*MP).
  constexpr bool a_rows = AStrides::d3 == 1 || AStrides::d2 != 1;
  float* ap = slot.scratch;
  float* bp = ap + MP * KC;
  float* ct = bp + KC * NP;
  zero(ct, rows * NP);

  for (long long k0 = 0; k0 < K; k0 += KC) {
    const long long kc = min_of(KC, K - k0);
    // B panels of kNR columns, k-major: bp[(j*kc + k)*kNR + jj] = B(k0+k, j*kNR+jj).
    if constexpr (BStrides::d3 == 1) {
      for (long long k = 0; k < kc; ++k) {
        const T* row = B + (k0 + k) * BStrides::d2;
        for (long long j = 0; j < npanels; ++j) {
          float* dst = bp + (j * kc + k) * kNR;
          const long long width = min_of(kNR, en - j * kNR);
          to_floats(row + j * kNR, dst, width);
          zero(dst + width, kNR - width);
        }
      }
    } else {  // k contiguous (a transposed B) or strided: convert along k, then transpose
      float* column = ct + rows * NP;  // scratch after the C tile
      for (long long n = 0; n < cols; ++n) {
        float* panel = bp + (n / kNR) * kc * kNR + n % kNR;
        if (n >= en) {
          for (long long k = 0; k < kc; ++k) panel[k * kNR] = 0.f;
          continue;
        }
        const T* src = B + n * BStrides::d3 + k0 * BStrides::d2;
        if constexpr (BStrides::d2 == 1) {
          prefetch_run(src + kPrefetchRows * BStrides::d3, kc);
          to_floats(src, column, kc);
        } else {
          for (long long k = 0; k < kc; ++k) column[k] = as_float(src[k * BStrides::d2]);
        }
        for (long long k = 0; k < kc; ++k) panel[k * kNR] = column[k];
      }
    }
    // A: rows (k contiguous) or k-major rows of m (m contiguous); unused panel rows are 0.
    if constexpr (a_rows) {
      for (long long m = 0; m < rows; ++m) {
        float* dst = ap + m * KC;
        if (m >= em) {
          zero(dst, kc);
        } else if constexpr (AStrides::d3 == 1) {
          to_floats(A + m * AStrides::d2 + k0, dst, kc);
        } else {
          for (long long k = 0; k < kc; ++k)
            dst[k] = as_float(A[m * AStrides::d2 + (k0 + k) * AStrides::d3]);
        }
      }
    } else {
      for (long long k = 0; k < kc; ++k) {
        to_floats(A + (k0 + k) * AStrides::d3, ap + k * MP, em);
        zero(ap + k * MP + em, rows - em);
      }
    }
    constexpr long long ar = a_rows ? KC : 1, ak = a_rows ? 1 : MP;
    for (long long j = 0; j < npanels; ++j)
      for (long long i = 0; i < mpanels; ++i)
        micro_kernel(kc, ap + i * kMR * ar, ar, ak, bp + j * kc * kNR,
                     ct + i * kMR * NP + j * kNR, NP);
  }
  for (long long i = 0; i < em; ++i)
    for (long long j = 0; j < en; ++j)
      C[(m0 + i) * CStrides::d2 + (n0 + j) * CStrides::d3] = store_as<T>(ct[i * NP + j]);
}

// -- running a plan ----------------------------------------------------------------------------

// Runs `body(proc, slot)` on one thread per processor, `warmup + iterations` times with a
// barrier of all processors between iterations; returns the seconds the timed iterations took.
template <class Body>
double run_processors(int processors, long long scratch_floats, int warmup, int iterations,
                      Body body) {
  Barrier iteration_barrier(processors);
  std::chrono::steady_clock::time_point start, stop;
  std::vector<std::thread> threads;
  threads.reserve(processors);
  for (int proc = 0; proc < processors; ++proc) {
    threads.emplace_back([&, proc] {
      std::vector<float> scratch(static_cast<size_t>(scratch_floats) + 16);
      CpuSlot slot;
      slot.scratch = scratch.data();
      for (int it = 0; it < warmup + iterations; ++it) {
        iteration_barrier.wait();
        if (proc == 0 && it == warmup) start = std::chrono::steady_clock::now();
        body(proc, slot);
      }
      iteration_barrier.wait();
      if (proc == 0) stop = std::chrono::steady_clock::now();
    });
  }
  for (auto& thread : threads) thread.join();
  return std::chrono::duration<double>(stop - start).count();
}

}  // namespace planc
