"""`--target cpu`: an ARK plan as a portable C++17 program that runs on any CPU.

Every processor of the plan is a `std::thread` running the plan body: processor groups in
order, a barrier (`planc::Barrier`, blocking, so plans with far more processors than cores
still run well) wherever `plan.barriers` puts one, and for each task group the task indices the
format gives the processor, every warp slot's sequence in turn. So the program executes the
plan's own distribution and synchronisation, and its outputs can be checked against the model
on any machine. Kernels are the shared tile kernels of `planc_kernels.h`; matmul packs panels
for a vectorised micro-kernel (`planc_cpu.h`).

Output directory: `plan.cpp`, `runtime/*.h`, `tensors.json`, `README.md`, `CMakeLists.txt`.
"""

from __future__ import annotations

from argparse import Namespace

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
from dialects import ark, plan

BUILD = "g++ -std=c++17 -O3 -march=native -ffp-contract=fast -pthread plan.cpp -o plan"
"""The one-line build; -march=native lets the compiler vectorise the matmul micro-kernel for
this machine, and contracting a*b+c into FMAs is what BLAS libraries do too."""

EMULATION_NOTE = """
To check the GPU forms of the kernels on this machine, build with `-DPLANC_EMULATE_WARPS=N`:
every warp slot then runs as N threads per warp with its own shared memory and slot barriers,
as the CUDA program runs it (slower; for checking, not for speed).
"""

CMAKE = """cmake_minimum_required(VERSION 3.16)
project(planc_plan LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()
find_package(Threads REQUIRED)
add_executable(plan plan.cpp)
target_compile_options(plan PRIVATE -march=native -ffp-contract=fast)
target_link_libraries(plan PRIVATE Threads::Threads)
"""


class CpuPrinter(PlanPrinter):
    """Processors are threads; a slot is the processor's thread."""

    target = "cpu"

    def body_signature(self) -> str:
        return "void body(int proc, char* arena, const planc::CpuSlot& slot) {"

    def print_body_declarations(self) -> None:
        for site, (group, processors) in enumerate(self.barrier_sites):
            self.line(f"planc::Barrier barrier_{site}{{{len(processors)}}};  "
                      f"// before processor group {group}: processors {processors}")
        self.line()

    def print_barrier(self, site: int, processors: plan.Range) -> None:
        self.line(f"if (planc::in_range(proc, {range_args(processors)})) barrier_{site}.wait();")

    def print_task_group(self, rg: plan.ResourceGroupOp, schedule: plan.TaskGroupSchedule,
                         first: int) -> None:
        tg, layout = schedule.task_group, schedule.layout
        self.line(f"// task {tg.task}, indices {tg.tasks}, granularity {tg.gran}: "
                  f"{layout.num_slots} slot(s) of {layout.slot_warps} warp(s)")
        self.line(f"planc::task_seq<{range_args(rg.processors)}, {first}, "
                  f"{range_args(tg.tasks)}, {tg.gran}, {layout.num_slots}, {layout.slot_warps}, "
                  f"{layout.slot_sram}, Task{tg.task}>(proc, arena, slot);")

    def scratch_floats(self) -> str:
        """The largest matmul packing scratch any scheduled operator needs, as C++."""
        sizes = ["0LL"]
        for op in self.scheduled_operators():
            if isinstance(op, ark.MatmulOp):
                tile_m, tile_n, _ = op.config_value()["TileShapeMNK"]
                sizes.append(f"planc::cpu::matmul_scratch_floats({tile_m}, {tile_n}, "
                             f"{op.problem_mnk()[2]})")
        return f"std::max({{{', '.join(sizes)}}})"

    def program(self) -> str:
        self.header_comment("CPU program")
        self.line('#include <algorithm>')
        self.line('#include <vector>')
        self.line()
        self.line('#include "runtime/planc_cpu.h"')
        self.line('#include "runtime/planc_host.h"')
        self.line()
        self.line("namespace {")
        self.line()
        self.line(f"constexpr int kProcessors = {self.plan.processor_count};")
        self.line(f"constexpr long long kArenaBytes = {self.layout.total_bytes};")
        self.line(f"constexpr long long kScratchFloats = {self.scratch_floats()};")
        self.line()
        self.print(self.plan)
        self.line()
        self.tensor_tables()
        self.line()
        self.line("}  // namespace")
        self.line()
        with self.block("int main(int argc, char** argv) {"):
            self.line("const planc::Options options = planc::parse_options(argc, argv);")
            self.line("std::vector<char> arena(static_cast<size_t>(kArenaBytes) + 1, 0);")
            self.line("planc::load_inputs(arena.data(), kInputs.data(), "
                      "static_cast<int>(kInputs.size()), options.inputs);")
            self.line("const double seconds = planc::run_processors(")
            self.line("    kProcessors, kScratchFloats, options.warmup, options.iterations,")
            self.line("    [&](int proc, const planc::CpuSlot& slot) "
                      "{ body(proc, arena.data(), slot); });")
            self.line("planc::save_outputs(arena.data(), kOutputs.data(), "
                      "static_cast<int>(kOutputs.size()), options.outputs);")
            self.line("if (options.iterations > 1 || options.warmup > 0) "
                      "planc::report_time(seconds, options.iterations);")
            self.line("return 0;")
        return self.take()


def pipeline(source_format: str, options: Namespace) -> str:
    return plan_pipeline("cpu", source_format, options)


validate = validate_program
"""Translation validation (`plan_cxx.validate_program`) and what it needs of the `ark`
target: the input's snapshot, the proof of intermediate IR, the planner's passes one by one."""
snapshot, prove, stages = ark_plan.snapshot, ark_plan.prove, ark_plan.stages


def emit(module: ModuleOp, options: Namespace) -> dict[str, str]:
    printer = CpuPrinter(ark_plan.single_plan(module))
    return {
        "plan.cpp": printer.program(),
        **runtime_files("planc_cpu.h"),
        "tensors.json": printer.manifest(),
        "README.md": program_readme(printer, "planc CPU program", BUILD,
                                    "cmake -B build && cmake --build build", EMULATION_NOTE),
        "CMakeLists.txt": CMAKE,
    }
