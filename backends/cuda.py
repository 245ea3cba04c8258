"""`--target cuda`: an ARK plan as a CUDA host program and one persistent kernel.

The kernel (`kernel.cu`) is ARK's design: a block per processor, NumWarpsPerProcessor warps per
block, one body that runs the processor groups in order with grid barriers only where
`plan.barriers` needs them, and for every task group a `task_seq` call that gives each block
and warp slot the task indices of `plan.resource_group_schedule`. Unlike ARK's own code
generator it honours range steps and starts, the WarpRange and SramRange begins, and puts a
slot barrier between the operators of a fused task. It launches cooperatively, so a plan whose
blocks cannot all be resident fails with an error instead of deadlocking in a grid barrier.

Slots of several warps synchronise with named barriers (`bar.sync id, threads`). Ids are
assigned here so that warp groups that may run at the same time never share one: groups are
colored in the graph whose edges join disjoint warp sets (overlapping sets run one after the
other on the same warps, which is safe). Groups beyond the 15 ids use a barrier in shared
memory.

The host program (`host.cu`) reads the input tensors, copies the arena (laid out by
`plan.buffer_layout`) to the device, launches, copies back and writes the outputs, checking
every CUDA call. Output directory: `kernel.cu`, `host.cu`, `runtime/*.h`, `tensors.json`,
`README.md`, `CMakeLists.txt`.
"""

from __future__ import annotations

import re
from argparse import Namespace
from collections.abc import Iterator

import networkx as nx
from xdsl.dialects.builtin import ModuleOp

from backends import ark_plan
from backends.plan_cxx import (
    PlanPrinter,
    plan_pipeline,
    program_readme,
    range_args,
    runtime_files,
    validate_program,
)
from dialects import plan
from ground.diagnostics import PlancError, UsageError

WARP_SIZE = 32
MAX_THREADS_PER_BLOCK = 1024
RESERVED_SMEM = 256
"""Bytes of shared memory before the plan's SRAM: the software barriers (planc_cuda.h)."""
NAMED_BARRIERS = 15
"""bar.sync ids 1..15; id 0 is __syncthreads, used by the grid barrier."""

WarpSet = frozenset[int]


def slot_warp_sets(p: plan.PlanOp) -> Iterator[WarpSet]:
    """The warps of every multi-warp slot of every task group of the plan."""
    tasks = p.tasks()
    for pg in p.processor_groups():
        for rg in pg.resource_groups():
            warps = list(rg.warps)
            for schedule in plan.resource_group_schedule(rg, tasks):
                layout = schedule.layout
                if layout.slot_warps < 2 or len(schedule.task_group.tasks) == 0:
                    continue
                for k in range(layout.num_slots):
                    yield frozenset(warps[k * layout.slot_warps:(k + 1) * layout.slot_warps])


def named_barriers(p: plan.PlanOp) -> dict[WarpSet, int]:
    """A bar.sync id (1..15) for each multi-warp slot's warps, or -1 for a software barrier.

    Disjoint warp sets may be active at once, so they need different ids; that is graph
    coloring, with greedy largest-first coloring as the heuristic.
    """
    groups = sorted(set(slot_warp_sets(p)), key=sorted)
    graph = nx.Graph()
    graph.add_nodes_from(groups)
    graph.add_edges_from((a, b) for i, a in enumerate(groups) for b in groups[i + 1:]
                         if a.isdisjoint(b))
    colors = nx.greedy_color(graph, strategy="largest_first")
    return {group: color + 1 if color < NAMED_BARRIERS else -1
            for group, color in colors.items()}


def sm_arch(p: plan.PlanOp, options: Namespace) -> str:
    """The compute capability digits ("80") of the build files."""
    requested = getattr(options, "cuda_arch", None)
    if requested:
        found = re.fullmatch(r"(?:sm_|compute_)?(\d{2,3}a?)", requested)
        if found is None:
            raise UsageError(f"--cuda-arch: expected an architecture like sm_80 or 90, got "
                             f"'{requested}'")
        return found.group(1)
    found = re.fullmatch(r"CUDA_(\d{2,3})", p.arch_name or "")
    return found.group(1) if found else "80"


class CudaPrinter(PlanPrinter):
    """Processors are blocks of one persistent kernel; slots are groups of warps."""

    target = "cuda"

    def __init__(self, p: plan.PlanOp):
        super().__init__(p)
        self.threads = p.warps_per_processor * WARP_SIZE
        if self.threads > MAX_THREADS_PER_BLOCK:
            raise PlancError(f"NumWarpsPerProcessor {p.warps_per_processor} needs "
                             f"{self.threads} threads per block; CUDA allows "
                             f"{MAX_THREADS_PER_BLOCK}", path="$.NumWarpsPerProcessor")
        self.barrier_ids = named_barriers(p)
        self.shared_bytes = RESERVED_SMEM + max(
            (rg.sram.end for pg in p.processor_groups() for rg in pg.resource_groups()),
            default=0)

    def body_signature(self) -> str:
        return "__device__ __forceinline__ void body(char* arena, char* smem) {"

    def print_body_declarations(self) -> None:
        self.line("// Grid barrier states (arrivals, generation): one per barrier of the body,")
        self.line("// then the one between iterations of the persistent loop.")
        self.line(f"__device__ unsigned planc_barrier_state[{2 * (len(self.barrier_sites) + 1)}];")
        self.line()

    def print_barrier(self, site: int, processors: plan.Range) -> None:
        group = self.barrier_sites[site][0]
        self.line(f"// barrier before processor group {group}")
        self.line(f"if (planc::in_range(blockIdx.x, {range_args(processors)})) "
                  f"planc::grid_barrier(&planc_barrier_state[{2 * site}], {len(processors)});")

    def slot_barrier_ids(self, rg: plan.ResourceGroupOp, layout: plan.SlotLayout) -> list[int]:
        if layout.slot_warps < 2:
            return [0] * layout.num_slots
        warps = list(rg.warps)
        return [self.barrier_ids[frozenset(warps[k * layout.slot_warps:
                                                 (k + 1) * layout.slot_warps])]
                for k in range(layout.num_slots)]

    def print_task_group(self, rg: plan.ResourceGroupOp, schedule: plan.TaskGroupSchedule,
                         first: int) -> None:
        tg, layout = schedule.task_group, schedule.layout
        ids = ", ".join(map(str, self.slot_barrier_ids(rg, layout)))
        self.line(f"// task {tg.task}, indices {tg.tasks}, granularity {tg.gran}: "
                  f"{layout.num_slots} slot(s) of {layout.slot_warps} warp(s) and "
                  f"{layout.slot_sram} SRAM bytes")
        self.line(f"planc::task_seq<{range_args(rg.processors)}, {first}, "
                  f"{range_args(tg.tasks)}, {tg.gran}, {layout.num_slots}, {layout.slot_warps}, "
                  f"{layout.slot_sram}, {range_args(rg.warps)}, {rg.sram.begin}, "
                  f"Task{tg.task}, {ids}>(arena, smem);")

    def kernel(self) -> str:
        self.header_comment("CUDA kernel")
        self.line('#include "runtime/planc_cuda.h"')
        self.line()
        self.line("namespace {")
        self.line()
        self.print(self.plan)
        self.line()
        self.line("}  // namespace")
        self.line()
        self.line(f"constexpr int kProcessors = {self.plan.processor_count};")
        self.line(f"constexpr int kThreads = {self.threads};")
        self.line(f"constexpr int kSharedBytes = {self.shared_bytes};")
        self.line()
        with self.block("extern \"C\" __global__ void __launch_bounds__(kThreads, 1) "
                        "planc_kernel(char* arena, int iterations) {"):
            self.line("extern __shared__ __align__(16) char smem[];")
            self.line("planc::clear_reserved_smem(smem);")
            with self.block("for (int iteration = 0; iteration < iterations; ++iteration) {"):
                self.line("if (iteration > 0) planc::grid_barrier(&planc_barrier_state["
                          f"{2 * len(self.barrier_sites)}], kProcessors);")
                self.line("body(arena, smem);")
        self.line()
        self.line("// Cooperative launch: all blocks must be resident for the grid barriers.")
        with self.block("extern \"C\" cudaError_t planc_launch(char* arena, int iterations, "
                        "cudaStream_t stream) {"):
            self.line("cudaError_t status = cudaFuncSetAttribute(")
            self.line("    planc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, "
                      "kSharedBytes);")
            self.line("if (status != cudaSuccess) return status;")
            self.line("void* args[] = {&arena, &iterations};")
            self.line("return cudaLaunchCooperativeKernel(reinterpret_cast<void*>(planc_kernel), "
                      "dim3(kProcessors),")
            self.line("                                   dim3(kThreads), args, kSharedBytes, "
                      "stream);")
        return self.take()

    def host(self) -> str:
        self.header_comment("CUDA host program")
        for header in ("<vector>", '"runtime/planc_cuda.h"', '"runtime/planc_host.h"'):
            self.line(f"#include {header}")
        self.line()
        self.line('extern "C" cudaError_t planc_launch(char* arena, int iterations, '
                  "cudaStream_t stream);")
        self.line()
        self.line("namespace {")
        self.line()
        self.line(f"constexpr long long kArenaBytes = {self.layout.total_bytes};")
        self.line()
        self.tensor_tables()
        self.line()
        self.line("}  // namespace")
        self.line()
        with self.block("int main(int argc, char** argv) {"):
            for row in HOST_MAIN:
                self.line(row)
        return self.take()


HOST_MAIN = (
    "const planc::Options options = planc::parse_options(argc, argv);",
    "int devices = 0;",
    "if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)",
    "  planc::fail(\"no CUDA device is available\");",
    "std::vector<char> host(static_cast<size_t>(kArenaBytes) + 1, 0);",
    "planc::load_inputs(host.data(), kInputs.data(), static_cast<int>(kInputs.size()), "
    "options.inputs);",
    "char* arena = nullptr;",
    "PLANC_CUDA_CHECK(cudaMalloc(&arena, host.size()));",
    "PLANC_CUDA_CHECK(cudaMemcpy(arena, host.data(), host.size(), cudaMemcpyHostToDevice));",
    "if (options.warmup > 0) {",
    "  PLANC_CUDA_CHECK(planc_launch(arena, options.warmup, 0));",
    "  PLANC_CUDA_CHECK(cudaDeviceSynchronize());",
    "}",
    "cudaEvent_t start, stop;",
    "PLANC_CUDA_CHECK(cudaEventCreate(&start));",
    "PLANC_CUDA_CHECK(cudaEventCreate(&stop));",
    "PLANC_CUDA_CHECK(cudaEventRecord(start, 0));",
    "PLANC_CUDA_CHECK(planc_launch(arena, options.iterations, 0));",
    "PLANC_CUDA_CHECK(cudaEventRecord(stop, 0));",
    "PLANC_CUDA_CHECK(cudaEventSynchronize(stop));",
    "PLANC_CUDA_CHECK(cudaGetLastError());",
    "float milliseconds = 0.f;",
    "PLANC_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, start, stop));",
    "PLANC_CUDA_CHECK(cudaEventDestroy(start));",
    "PLANC_CUDA_CHECK(cudaEventDestroy(stop));",
    "PLANC_CUDA_CHECK(cudaMemcpy(host.data(), arena, host.size(), cudaMemcpyDeviceToHost));",
    "PLANC_CUDA_CHECK(cudaFree(arena));",
    "planc::save_outputs(host.data(), kOutputs.data(), static_cast<int>(kOutputs.size()), "
    "options.outputs);",
    "if (options.iterations > 1 || options.warmup > 0)",
    "  planc::report_time(milliseconds / 1e3, options.iterations);",
    "return 0;",
)


def cmake(arch: str) -> str:
    return f"""cmake_minimum_required(VERSION 3.18)
project(planc_plan LANGUAGES CXX CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES {arch})
endif()
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()
add_executable(plan host.cu kernel.cu)
"""


def pipeline(source_format: str, options: Namespace) -> str:
    return plan_pipeline("cuda", source_format, options)


validate = validate_program
"""Translation validation (`plan_cxx.validate_program`) and what it needs of the `ark`
target: the input's snapshot, the proof of intermediate IR, the planner's passes one by one."""
snapshot, prove, stages = ark_plan.snapshot, ark_plan.prove, ark_plan.stages


def emit(module: ModuleOp, options: Namespace) -> dict[str, str]:
    p = ark_plan.single_plan(module)
    arch = sm_arch(p, options)
    printer = CudaPrinter(p)
    return {
        "kernel.cu": printer.kernel(),
        "host.cu": printer.host(),
        **runtime_files("planc_cuda.h"),
        "tensors.json": printer.manifest(),
        "README.md": program_readme(
            printer, "planc CUDA program",
            f"nvcc -std=c++17 -O3 -arch=sm_{arch} host.cu kernel.cu -o plan",
            "cmake -B build && cmake --build build"),
        "CMakeLists.txt": cmake(arch),
    }
