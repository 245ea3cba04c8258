// planc runtime for the CUDA target: one persistent kernel, processors are thread blocks.
//
// The kernel runs the plan body once per iteration. A task group is a `task_seq` call: the
// blocks of its processor range take the task indices the format gives them, and inside a
// block the warps of the resource group's WarpRange form slots of the task's NumWarps warps
// (beginning at the range's first warp, stepping as the range steps), each slot running its
// own sequence with its own share of the SramRange. Processor groups synchronise with grid
// barriers only where the plan needs them.
//
// Dynamic shared memory starts with kReservedSmem bytes of per-warp software barrier words,
// followed by the plan's SRAM (offsets of SramRange are relative to it).
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#include "planc_kernels.h"

#define PLANC_CUDA_CHECK(call)                                                        \
  do {                                                                                \
    const cudaError_t planc_status_ = (call);                                         \
    if (planc_status_ != cudaSuccess) {                                               \
      std::fprintf(stderr, "planc: error: %s:%d: %s failed: %s\n", __FILE__, __LINE__, \
                   #call, cudaGetErrorString(planc_status_));                         \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

namespace planc {

constexpr int kWarpSize = 32;
constexpr int kReservedSmem = 256;

PLANC_DEV unsigned* soft_barrier_state(char* smem, int first_warp) {
  return reinterpret_cast<unsigned*>(smem) + 2 * first_warp;
}

// Arrival at a generation-counting barrier of `count` arrivals (state: arrivals, generation);
// the last arrival resets the count and starts the next generation, so the same state serves
// again right away. `fence` orders memory at the barrier's scope; `pause` eases the spinning.
template <class Fence, class Pause>
PLANC_DEV void arrive_and_wait(unsigned* state, unsigned count, Fence fence, Pause pause) {
  volatile unsigned* generation = state + 1;
  const unsigned seen = *generation;
  fence();
  if (atomicAdd(state, 1u) == count - 1) {
    atomicExch(state, 0u);
    fence();
    atomicAdd(state + 1, 1u);
  } else {
    while (*generation == seen) pause();
  }
  fence();
}

// A barrier among `warps` warps in shared memory, for slots that got no named barrier.
PLANC_DEV void soft_barrier(unsigned* state, unsigned warps) {
  __syncwarp();
  if (threadIdx.x % kWarpSize == 0)
    arrive_and_wait(state, warps, [] { __threadfence_block(); }, [] {});
  __syncwarp();
}

// The warps of one slot. `barrier` is the named barrier (1..15) planc assigned to this slot's
// warps, or -1 for a software barrier.
template <int Warps, long long Sram>
struct CudaSlot {
  static constexpr int threads = Warps * kWarpSize;
  static constexpr long long sram = Sram;
  int tid;
  char* smem;
  int barrier;
  unsigned* soft_state;
  PLANC_DEV void sync() const {
    if constexpr (Warps == 1) {
      __syncwarp();
    } else if (barrier > 0) {
      asm volatile("bar.sync %0, %1;" ::"r"(barrier), "r"(threads) : "memory");
    } else {
      soft_barrier(soft_state, Warps);
    }
  }
};

// Matmul on the GPU is the cooperative shared-memory form of planc_kernels.h.
template <long long M, long long N, long long K, long long TM, long long TN, long long TK,
          class OutShape, class CStrides, class AStrides, class BStrides, class Slot, class T>
PLANC_DEV void matmul(const Slot& slot, long long task, T* c, const T* a, const T* b) {
  matmul_cooperative<M, N, K, TM, TN, TK, OutShape, CStrides, AStrides, BStrides>(slot, task, c,
                                                                                 a, b);
}

// One task group (ARK's task_seq, with range steps and starts, WarpRange and SramRange
// begins honoured). BarrierIds holds the named barrier of each slot.
template <long long PBegin, long long PEnd, long long PStep, long long First, long long TBegin,
          long long TEnd, long long TStep, long long Granularity, int NumSlots, int SlotWarps,
          long long SlotSram, long long WBegin, long long WEnd, long long WStep,
          long long SramBegin, class Task, int... BarrierIds>
PLANC_DEV void task_seq(char* arena, char* smem) {
  const long long proc = blockIdx.x;
  if (!in_range(proc, PBegin, PEnd, PStep)) return;
  const WarpPlace place =
      place_warp(threadIdx.x / kWarpSize, WBegin, WEnd, WStep, SlotWarps, NumSlots);
  if (place.slot < 0) return;
  constexpr long long processors = range_len(PBegin, PEnd, PStep);
  const long long p = processor_number(proc, PBegin, PStep, processors, First);
  const int barriers[NumSlots] = {BarrierIds...};
  const int first_warp = static_cast<int>(WBegin + place.slot * SlotWarps * WStep);
  const CudaSlot<SlotWarps, SlotSram> slot{
      place.rank * kWarpSize + static_cast<int>(threadIdx.x % kWarpSize),
      smem + kReservedSmem + SramBegin + place.slot * SlotSram, barriers[place.slot],
      soft_barrier_state(smem, first_warp)};
  for (long long t = place.slot;; t += NumSlots) {
    const long long task = task_of(p, t, Granularity, processors, TBegin, TStep);
    if (task >= TEnd) break;
    Task::run(slot, arena, task);
  }
}

// A barrier of the `count` blocks of a processor range (generation counting, so the same
// state serves every iteration of the persistent loop).
PLANC_DEV void grid_barrier(unsigned* state, unsigned count) {
  __syncthreads();
  if (threadIdx.x == 0)
    arrive_and_wait(state, count, [] { __threadfence(); }, [] { __nanosleep(64); });
  __syncthreads();
}

PLANC_DEV void clear_reserved_smem(char* smem) {
  for (int i = threadIdx.x; i < kReservedSmem / 4; i += blockDim.x)
    reinterpret_cast<unsigned*>(smem)[i] = 0u;
  __syncthreads();
}

}  // namespace planc
