"""Programs built once per session (in parallel) and shared by the code generator's tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from compiler.model_interpreter import ModelRun, run_model
from tests.codegen import plans, programs
from tests.codegen.cases import CASES

EMULATED_WARP_THREADS = 3
"""Threads per emulated warp: not a power of two, so the cooperative kernels' partitioning of a
tile over threads has remainders."""


EMULATED = [name for name in CASES if name not in ("small_plan", "concurrent_chain")]
"""Cases whose plans use what warp emulation checks: every kernel family and data type,
matmuls with little or no SRAM, fused operators, slot layouts."""


@dataclass
class Built:
    """A test case's CPU program, built normally and with warp emulation."""

    directory: Path
    model_doc: dict
    programs: dict[str, Path] = field(default_factory=dict)

    def reference(self) -> ModelRun:
        return run_model(plans.import_model_doc(self.model_doc))


def _build(job: tuple[Path, str, tuple[str, ...]]) -> None:
    directory, name, flags = job
    programs.run_checked([programs.CXX, *programs.CPU_FLAGS, *flags, "plan.cpp", "-o", name],
                         cwd=directory)


@pytest.fixture(scope="session")
def cpu_cases(tmp_path_factory) -> dict[str, Built]:
    if programs.CXX is None:
        pytest.skip("no C++ compiler (g++ or clang++) on PATH")
    root = tmp_path_factory.mktemp("cpu_cases")
    built, jobs = {}, []
    for name, case in CASES.items():
        model_doc = case.model()
        module = plans.import_plan_doc(case.plan(model_doc))
        directory = programs.emit(module, "cpu", root / name)
        built[name] = Built(directory, model_doc)
        jobs.append((directory, "plan", ()))
        built[name].programs["plan"] = directory / "plan"
        if name in EMULATED:
            # -O0: the emulated build only has to be right, and builds 40% faster.
            jobs.append((directory, "emulated",
                         ("-O0", f"-DPLANC_EMULATE_WARPS={EMULATED_WARP_THREADS}")))
            built[name].programs["emulated"] = directory / "emulated"
    programs.in_parallel(jobs, _build)
    return built
