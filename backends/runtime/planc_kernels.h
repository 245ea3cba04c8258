// planc runtime: the format's task distribution and the per-operator tile kernels.
//
// Shared by the CPU and CUDA targets. A kernel computes the output tile of one task index for
// the threads of one *slot* (the warps a task runs on); its `Slot` argument provides
//   Slot::threads   the number of threads of the slot (a compile-time constant),
//   slot.tid        this thread's index in the slot,
//   slot.smem       the slot's shared memory (Slot::sram bytes),
//   slot.sync()     a barrier among the slot's threads.
// On the CPU a slot is one thread. Shapes and strides are template arguments, so every index
// computation folds to constants. Tensors are viewed in 4 dims (NCHW, leading dims of size 1)
// and each input is addressed by *element strides per output dim* (0 where it broadcasts), so
// broadcasting, transposes, reductions and strided views are all the same loop.
#pragma once

#include "planc_types.h"

namespace planc {

template <long long D0, long long D1, long long D2, long long D3>
struct Dims4 {
  static constexpr long long d0 = D0, d1 = D1, d2 = D2, d3 = D3;
};

PLANC_HD constexpr long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }
PLANC_HD constexpr long long min_of(long long a, long long b) { return a < b ? a : b; }
PLANC_HD constexpr long long max_of(long long a, long long b) { return a > b ? a : b; }

template <class S>
PLANC_HD long long offset(long long i0, long long i1, long long i2, long long i3) {
  return i0 * S::d0 + i1 * S::d1 + i2 * S::d2 + i3 * S::d3;
}

// -- the format's task distribution (dialects/plan.py `distribute`) ---------------------------

PLANC_HD constexpr long long range_len(long long begin, long long end, long long step) {
  return end > begin ? (end - begin + step - 1) / step : 0;
}

PLANC_HD constexpr bool in_range(long long value, long long begin, long long end,
                                 long long step) {
  return value >= begin && value < end && (value - begin) % step == 0;
}

// The task index that the processor numbered `p` (counted from the rotated first processor of
// its range) runs as its `t`-th task: begin + step * (p*g + t%g + (t/g)*g*P), for granularity
// g and P processors; it runs on slot t % NumSlots, and the sequence stops at the range end.
PLANC_HD long long task_of(long long p, long long t, long long granularity, long long processors,
                           long long begin, long long step) {
  return begin + step * (p * granularity + t % granularity +
                         (t / granularity) * granularity * processors);
}

// The number of processor `proc` in a processor range, counted from the range's rotated first
// processor `first` (0 .. processors-1).
PLANC_HD long long processor_number(long long proc, long long begin, long long step,
                                    long long processors, long long first) {
  return ((proc - begin) / step - first + processors) % processors;
}

// Where a warp of a processor works in a resource group: slot `slot` (-1: none, the warp is
// outside the WarpRange or beyond the last whole slot), as the `rank`-th warp of the slot.
// Slots take the range's warps in order, `slot_warps` at a time.
struct WarpPlace {
  int slot;
  int rank;
};

PLANC_HD WarpPlace place_warp(long long warp, long long begin, long long end, long long step,
                              int slot_warps, int num_slots) {
  if (!in_range(warp, begin, end, step)) return {-1, 0};
  const int position = static_cast<int>((warp - begin) / step);
  const int slot = position / slot_warps;
  return slot < num_slots ? WarpPlace{slot, position % slot_warps} : WarpPlace{-1, 0};
}

// -- tiles -----------------------------------------------------------------------------------

struct Tile {
  long long begin[4];
  long long extent[4];
};

// Task indices enumerate the tiles of `Unit` over `Shape` in row-major order (W fastest), as
// dialects/plan.py `task_tile` (ARK's UnitOp order); edge tiles are clipped.
template <class Shape, class Unit>
struct Tiling {
  static constexpr long long n0 = ceil_div(Shape::d0, Unit::d0);
  static constexpr long long n1 = ceil_div(Shape::d1, Unit::d1);
  static constexpr long long n2 = ceil_div(Shape::d2, Unit::d2);
  static constexpr long long n3 = ceil_div(Shape::d3, Unit::d3);
  static constexpr long long count = n0 * n1 * n2 * n3;

  PLANC_HD static Tile tile(long long task) {
    Tile t;
    if (task < 0 || task >= count) {  // no such tile: nothing to compute
      for (int d = 0; d < 4; ++d) t.begin[d] = t.extent[d] = 0;
      return t;
    }
    const long long c3 = task % n3;
    task /= n3;
    const long long c2 = task % n2;
    task /= n2;
    const long long c1 = task % n1;
    const long long c0 = task / n1;
    t.begin[0] = c0 * Unit::d0;
    t.begin[1] = c1 * Unit::d1;
    t.begin[2] = c2 * Unit::d2;
    t.begin[3] = c3 * Unit::d3;
    t.extent[0] = min_of(Unit::d0, Shape::d0 - t.begin[0]);
    t.extent[1] = min_of(Unit::d1, Shape::d1 - t.begin[1]);
    t.extent[2] = min_of(Unit::d2, Shape::d2 - t.begin[2]);
    t.extent[3] = min_of(Unit::d3, Shape::d3 - t.begin[3]);
    return t;
  }
};

// The index type of the elements of a tile of `Unit`: 32 bits unless the tile is larger (on a
// GPU, 64-bit division is a long subroutine).
template <class Unit>
using tile_index_t = std::conditional_t<(Unit::d0 * Unit::d1 * Unit::d2 * Unit::d3 >
                                         2147483647LL), long long, int>;

// Calls f(i0, i1, i2, i3) for every element of task tile `t` of `Unit`s, each on one thread of
// the slot. Threads walk the whole unit (divisions by constants) and skip what an edge tile
// clips, W fastest, so neighbouring threads touch neighbouring elements.
template <class Unit, class Slot, class F>
PLANC_DEV void for_each_in_tile(const Slot& slot, const Tile& t, F&& f) {
  if constexpr (Slot::threads == 1) {
    for (long long i0 = t.begin[0]; i0 < t.begin[0] + t.extent[0]; ++i0)
      for (long long i1 = t.begin[1]; i1 < t.begin[1] + t.extent[1]; ++i1)
        for (long long i2 = t.begin[2]; i2 < t.begin[2] + t.extent[2]; ++i2)
          for (long long i3 = t.begin[3]; i3 < t.begin[3] + t.extent[3]; ++i3) f(i0, i1, i2, i3);
  } else {
    using I = tile_index_t<Unit>;
    constexpr I u1 = static_cast<I>(Unit::d1), u2 = static_cast<I>(Unit::d2),
                u3 = static_cast<I>(Unit::d3);
    constexpr I count = static_cast<I>(Unit::d0) * u1 * u2 * u3;
    for (I i = static_cast<I>(slot.tid); i < count; i += Slot::threads) {
      const I i3 = i % u3, i2 = (i / u3) % u2, i1 = (i / (u3 * u2)) % u1, i0 = i / (u3 * u2 * u1);
      if (i0 < t.extent[0] && i1 < t.extent[1] && i2 < t.extent[2] && i3 < t.extent[3])
        f(t.begin[0] + i0, t.begin[1] + i1, t.begin[2] + i2, t.begin[3] + i3);
    }
  }
}

// An input of an element-wise kernel: elements read by output coordinates.
template <class T, class Strides>
struct In {
  const T* data;
  PLANC_HD compute_t<T> operator()(long long i0, long long i1, long long i2, long long i3) const {
    return to_compute(data[offset<Strides>(i0, i1, i2, i3)]);
  }
};

// -- element-wise functions (the numpy reference's formulas) ---------------------------------

namespace math {
PLANC_HD float exp(float x) { return expf(x); }
PLANC_HD double exp(double x) { return ::exp(x); }
PLANC_HD float sqrt(float x) { return sqrtf(x); }
PLANC_HD double sqrt(double x) { return ::sqrt(x); }
PLANC_HD float tanh(float x) { return tanhf(x); }
PLANC_HD double tanh(double x) { return ::tanh(x); }
}  // namespace math

template <class X> PLANC_HD real_t<X> real(X x) { return static_cast<real_t<X>>(x); }

struct Copy {
  template <class X> PLANC_HD X operator()(X x) const { return x; }
};
struct Exp {
  template <class X> PLANC_HD auto operator()(X x) const { return math::exp(real(x)); }
};
struct Sqrt {
  template <class X> PLANC_HD auto operator()(X x) const { return math::sqrt(real(x)); }
};
struct Rsqrt {
  template <class X> PLANC_HD auto operator()(X x) const {
    return real_t<X>(1) / math::sqrt(real(x));
  }
};
struct Sigmoid {
  template <class X> PLANC_HD auto operator()(X x) const {
    return real_t<X>(1) / (real_t<X>(1) + math::exp(-real(x)));
  }
};
struct Relu {
  // x < 0 ? 0 : x keeps nan, as numpy's maximum does.
  template <class X> PLANC_HD X operator()(X x) const { return x < X(0) ? X(0) : x; }
};
struct Gelu {
  // The tanh approximation, as ARK's kernel.
  template <class X> PLANC_HD auto operator()(X x) const {
    using R = real_t<X>;
    const R v = real(x);
    return R(0.5) * v *
           (R(1) + math::tanh(R(0.7978845608) * (v + R(0.044715) * v * v * v)));
  }
};
// Cast: the conversion happens in the store; float32 to integer truncates first (a C cast),
// while fp16/bf16 to integer round to nearest, as the reference does.
struct Cast {
  template <class X> PLANC_HD X operator()(X x) const { return x; }
};
struct TruncatingCast {
  PLANC_HD double operator()(float x) const { return ::trunc(static_cast<double>(x)); }
};
struct ScalarAdd {
  float factor;
  PLANC_HD float operator()(float x) const { return x + factor; }
  PLANC_HD double operator()(int64_t x) const { return static_cast<double>(x) + factor; }
};
struct ScalarMul {
  float factor;
  PLANC_HD float operator()(float x) const { return x * factor; }
  PLANC_HD double operator()(int64_t x) const { return static_cast<double>(x) * factor; }
};
struct Fill {
  float value;
  PLANC_HD float operator()() const { return value; }
};
struct Add {
  template <class X> PLANC_HD X operator()(X a, X b) const { return a + b; }
};
struct Sub {
  template <class X> PLANC_HD X operator()(X a, X b) const { return a - b; }
};
struct Mul {
  template <class X> PLANC_HD X operator()(X a, X b) const { return a * b; }
};
struct Div {
  // Integers divide as C++ integers do on the device, truncating toward zero (computed in
  // double, so a division by zero saturates on store as the reference's does).
  template <class X> PLANC_HD real_t<X> operator()(X a, X b) const {
    if constexpr (std::is_integral_v<X>) {
      return ::trunc(real(a) / real(b));
    } else {
      return real(a) / real(b);
    }
  }
};

// -- kernels ---------------------------------------------------------------------------------

// out = fn(inputs...) element by element over the output tile of `task`.
template <class Shape, class Unit, class OutStrides, class Slot, class OutT, class Fn,
          class... Ins>
PLANC_DEV void elementwise(const Slot& slot, long long task, Fn fn, OutT* out, Ins... ins) {
  const Tile t = Tiling<Shape, Unit>::tile(task);
  for_each_in_tile<Unit>(slot, t, [&](long long i0, long long i1, long long i2, long long i3) {
    out[offset<OutStrides>(i0, i1, i2, i3)] = store_as<OutT>(fn(ins(i0, i1, i2, i3)...));
  });
}

// Transpose: a copy whose input strides are the permuted ones.
template <class Shape, class Unit, class OutStrides, class InStrides, class Slot, class OutT,
          class InT>
PLANC_DEV void transpose(const Slot& slot, long long task, OutT* out, const InT* in) {
  elementwise<Shape, Unit, OutStrides>(slot, task, Copy{}, out, In<InT, InStrides>{in});
}

// Rotary embedding over pairs of the last dim: (a0 + i a1) * (b0 + i b1).
template <class Shape, class Unit, class OutStrides, class AStrides, class BStrides, class Slot,
          class OutT, class AT, class BT>
PLANC_DEV void rope(const Slot& slot, long long task, OutT* out, const AT* a, const BT* b) {
  const Tile t = Tiling<Shape, Unit>::tile(task);
  for_each_in_tile<Unit>(slot, t, [&](long long i0, long long i1, long long i2, long long i3) {
    const long long even = i3 & ~1LL, odd = i3 | 1LL;
    const auto a0 = to_compute(a[offset<AStrides>(i0, i1, i2, even)]);
    const auto a1 = to_compute(a[offset<AStrides>(i0, i1, i2, odd)]);
    const auto b0 = to_compute(b[offset<BStrides>(i0, i1, i2, even)]);
    const auto b1 = to_compute(b[offset<BStrides>(i0, i1, i2, odd)]);
    const auto value = (i3 & 1) ? a0 * b1 + a1 * b0 : a0 * b0 - a1 * b1;
    out[offset<OutStrides>(i0, i1, i2, i3)] = store_as<OutT>(value);
  });
}

struct ReduceSum {
  template <class X> PLANC_HD static X init() { return X(0); }
  template <class X> PLANC_HD static X combine(X a, X b) { return a + b; }
  template <class X> PLANC_HD static X finish(X a, long long) { return a; }
};
struct ReduceMax {
  template <class X> PLANC_HD static X init() {
    if constexpr (std::is_integral<X>::value) return X(-9223372036854775807LL - 1);
    else return -X(INFINITY);
  }
  // A nan, once seen, stays (numpy's max propagates nan).
  template <class X> PLANC_HD static X combine(X a, X b) { return (b > a || b != b) ? b : a; }
  template <class X> PLANC_HD static X finish(X a, long long) { return a; }
};
struct ReduceMean {
  template <class X> PLANC_HD static X init() { return X(0); }
  template <class X> PLANC_HD static X combine(X a, X b) { return a + b; }
  template <class X> PLANC_HD static real_t<X> finish(X a, long long n) {
    return real(a) / static_cast<real_t<X>>(n);
  }
};

// Reduction along one input axis: each output element of the tile combines AxisLen inputs,
// AxisStride elements apart. WarpWise (CUDA) gives each output element to one warp, whose
// lanes split the axis; otherwise each thread computes whole output elements.
template <class Shape, class Unit, class OutStrides, class InStrides, long long AxisLen,
          long long AxisStride, class Kind, bool WarpWise, class Slot, class OutT, class InT>
PLANC_DEV void reduce(const Slot& slot, long long task, OutT* out, const InT* in) {
  using C = compute_t<InT>;
  const Tile t = Tiling<Shape, Unit>::tile(task);
#if defined(__CUDA_ARCH__)
  if constexpr (WarpWise && Slot::threads >= 32) {
    constexpr int warps = Slot::threads / 32;
    const int warp = slot.tid / 32, lane = slot.tid % 32;
    using I = tile_index_t<Unit>;
    constexpr I u1 = static_cast<I>(Unit::d1), u2 = static_cast<I>(Unit::d2),
                u3 = static_cast<I>(Unit::d3);
    constexpr I count = static_cast<I>(Unit::d0) * u1 * u2 * u3;
    for (I i = warp; i < count; i += warps) {
      const I j3 = i % u3, j2 = (i / u3) % u2, j1 = (i / (u3 * u2)) % u1, j0 = i / (u3 * u2 * u1);
      if (!(j0 < t.extent[0] && j1 < t.extent[1] && j2 < t.extent[2] && j3 < t.extent[3]))
        continue;
      const long long i0 = t.begin[0] + j0, i1 = t.begin[1] + j1, i2 = t.begin[2] + j2,
                      i3 = t.begin[3] + j3;
      const InT* base = in + offset<InStrides>(i0, i1, i2, i3);
      C acc = Kind::template init<C>();
      for (long long r = lane; r < AxisLen; r += 32)
        acc = Kind::combine(acc, to_compute(base[r * AxisStride]));
      for (int delta = 16; delta > 0; delta /= 2)
        acc = Kind::combine(acc, __shfl_xor_sync(0xffffffffu, acc, delta));
      if (lane == 0)
        out[offset<OutStrides>(i0, i1, i2, i3)] = store_as<OutT>(Kind::finish(acc, AxisLen));
    }
    return;
  }
#endif
  for_each_in_tile<Unit>(slot, t, [&](long long i0, long long i1, long long i2, long long i3) {
    const InT* base = in + offset<InStrides>(i0, i1, i2, i3);
    C acc = Kind::template init<C>();
    for (long long r = 0; r < AxisLen; ++r)
      acc = Kind::combine(acc, to_compute(base[r * AxisStride]));
    out[offset<OutStrides>(i0, i1, i2, i3)] = store_as<OutT>(Kind::finish(acc, AxisLen));
  });
}

// Embedding: output element (i0, i1, i2, i3) is weight[indices[i0, i1, i2], i3]. An index
// outside the table gives zeros rather than reading outside the weight.
template <class Shape, class Unit, class OutStrides, class IndexStrides, long long Rows,
          long long RowStride, long long ColStride, class Slot, class OutT, class IndexT,
          class WeightT>
PLANC_DEV void embedding(const Slot& slot, long long task, OutT* out, const IndexT* indices,
                         const WeightT* weight) {
  const Tile t = Tiling<Shape, Unit>::tile(task);
  for_each_in_tile<Unit>(slot, t, [&](long long i0, long long i1, long long i2, long long i3) {
    const long long row = static_cast<long long>(
        to_compute(indices[offset<IndexStrides>(i0, i1, i2, 0)]));
    const bool inside = row >= 0 && row < Rows;
    const auto value = inside ? to_compute(weight[row * RowStride + i3 * ColStride])
                              : compute_t<WeightT>(0);
    out[offset<OutStrides>(i0, i1, i2, i3)] = store_as<OutT>(value);
  });
}

// -- matmul, cooperative (GPU) form ------------------------------------------------------------

// The K step whose A and B tiles (as float) fit `sram` bytes; 0 if not even one column does.
PLANC_HD constexpr long long matmul_k_step(long long sram, long long tm, long long tn,
                                           long long tk) {
  return min_of(tk, sram / ((tm + tn) * static_cast<long long>(sizeof(float))));
}

// Threads along N: a power of two up to 32 that divides the slot's threads and fits the tile.
PLANC_HD constexpr int matmul_threads_n(int threads, long long tn) {
  int tx = 1;
  while (tx < 32 && tx * 2 <= tn && threads % (tx * 2) == 0) tx *= 2;
  return tx;
}

// One TM x TN output tile of C = A B: the slot's threads stage K steps of A and B in shared
// memory and each accumulates a strided RM x RN block of the tile in registers. Strides are
// (batch0, batch1, m, k) for A, (batch0, batch1, k, n) for B and (batch0, batch1, m, n) for C,
// so transposed operands and broadcast batches are only other strides.
template <long long M, long long N, long long K, long long TM, long long TN, long long TK,
          class OutShape, class CStrides, class AStrides, class BStrides, class Slot, class T>
PLANC_DEV void matmul_cooperative(const Slot& slot, long long task, T* c, const T* a,
                                  const T* b) {
  const Tile t = Tiling<OutShape, Dims4<1, 1, TM, TN>>::tile(task);
  const long long m0 = t.begin[2], n0 = t.begin[3];
  const T* A = a + t.begin[0] * AStrides::d0 + t.begin[1] * AStrides::d1;
  const T* B = b + t.begin[0] * BStrides::d0 + t.begin[1] * BStrides::d1;
  T* C = c + t.begin[0] * CStrides::d0 + t.begin[1] * CStrides::d1;
  constexpr int threads = Slot::threads;
  constexpr int TX = matmul_threads_n(threads, TN);
  constexpr int TY = threads / TX;
  constexpr int RM = static_cast<int>(ceil_div(TM, TY));
  constexpr int RN = static_cast<int>(ceil_div(TN, TX));
  constexpr long long KS = matmul_k_step(Slot::sram, TM, TN, TK);
  const int tx = slot.tid % TX, ty = slot.tid / TX;
  float acc[RM][RN];
PLANC_UNROLL
  for (int i = 0; i < RM; ++i)
PLANC_UNROLL
    for (int j = 0; j < RN; ++j) acc[i][j] = 0.f;

  auto multiply = [&](const float* av, const float* bv) {
PLANC_UNROLL
    for (int i = 0; i < RM; ++i)
PLANC_UNROLL
      for (int j = 0; j < RN; ++j) acc[i][j] += av[i] * bv[j];
  };

  if constexpr (KS > 0) {
    constexpr int ks = static_cast<int>(KS), tm = static_cast<int>(TM), tn = static_cast<int>(TN);
    float* As = reinterpret_cast<float*>(slot.smem);  // [KS][TM]
    float* Bs = As + ks * tm;                          // [KS][TN]
    for (long long k0 = 0; k0 < K; k0 += KS) {
      // Stage the tiles, walking the operand's contiguous dim fastest (coalesced loads).
      for (int i = slot.tid; i < ks * tm; i += threads) {
        constexpr bool k_fast = AStrides::d3 == 1;
        const int kk = k_fast ? i % ks : i / tm, mm = k_fast ? i / ks : i % tm;
        const long long m = m0 + mm, k = k0 + kk;
        As[kk * tm + mm] =
            (m < M && k < K) ? as_float(A[m * AStrides::d2 + k * AStrides::d3]) : 0.f;
      }
      for (int i = slot.tid; i < ks * tn; i += threads) {
        constexpr bool n_fast = BStrides::d3 == 1 || BStrides::d2 != 1;
        const int kk = n_fast ? i / tn : i % ks, nn = n_fast ? i % tn : i / ks;
        const long long n = n0 + nn, k = k0 + kk;
        Bs[kk * tn + nn] =
            (n < N && k < K) ? as_float(B[k * BStrides::d2 + n * BStrides::d3]) : 0.f;
      }
      slot.sync();
      const int steps = static_cast<int>(min_of(KS, K - k0));
      for (int kk = 0; kk < steps; ++kk) {
        float av[RM], bv[RN];
PLANC_UNROLL
        for (int i = 0; i < RM; ++i) {
          const int mm = ty + i * TY;  // always inside when TY divides TM (ty < TY)
          av[i] = (TM % TY == 0 || mm < tm) ? As[kk * tm + mm] : 0.f;
        }
PLANC_UNROLL
        for (int j = 0; j < RN; ++j) {
          const int nn = tx + j * TX;
          bv[j] = (TN % TX == 0 || nn < tn) ? Bs[kk * tn + nn] : 0.f;
        }
        multiply(av, bv);
      }
      slot.sync();
    }
  } else {
    // No shared memory for even one K column: read the operands from global memory.
    for (long long k = 0; k < K; ++k) {
      float av[RM], bv[RN];
PLANC_UNROLL
      for (int i = 0; i < RM; ++i) {
        const long long mm = ty + static_cast<long long>(i) * TY;
        av[i] = mm < t.extent[2] ? as_float(A[(m0 + mm) * AStrides::d2 + k * AStrides::d3]) : 0.f;
      }
PLANC_UNROLL
      for (int j = 0; j < RN; ++j) {
        const long long nn = tx + static_cast<long long>(j) * TX;
        bv[j] = nn < t.extent[3] ? as_float(B[k * BStrides::d2 + (n0 + nn) * BStrides::d3]) : 0.f;
      }
      multiply(av, bv);
    }
  }
PLANC_UNROLL
  for (int i = 0; i < RM; ++i) {
    const long long mm = ty + static_cast<long long>(i) * TY;
PLANC_UNROLL
    for (int j = 0; j < RN; ++j) {
      const long long nn = tx + static_cast<long long>(j) * TX;
      if (mm < t.extent[2] && nn < t.extent[3])
        C[(m0 + mm) * CStrides::d2 + (n0 + nn) * CStrides::d3] = store_as<T>(acc[i][j]);
    }
  }
}

}  // namespace planc
