"""Programs built once per session (in parallel) and shared by the code generator's tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from targets.ark.model_interpreter import ModelRun, run_model
from tests.codegen import plans, programs
from tests.codegen.cases import CASES

EMULATED_WARP_THREADS = 3
"""Threads per emulated warp: not a power of two, so the cooperative kernels' partitioning of a
tile over threads has remainders."""


EMULATED = [name for name in CASES if name not in ("small_plan", "concurrent_chain")]
"""Cases whose plans use what warp emulation checks: every kernel family and data type,
matmuls with little or no SRAM, fused operators, slot layouts."""


class _Programs(dict):
    """A case's programs by kind ("plan", and "emulated" for EMULATED cases), each built with
    g++ on first use: a run selecting a few cases (`-m "not slow"`) builds only theirs."""

    def __init__(self, directory: Path, name: str):
        super().__init__()
        self.directory, self.name = directory, name

    def __missing__(self, kind: str) -> Path:
        if kind == "plan":
            flags: tuple[str, ...] = ()
        elif kind == "emulated" and self.name in EMULATED:
            # -Og, as the plain builds: they share one precompiled header (its build costs
            # 3.6 CPU s; at -O0 these builds needed one of their own and took about as long:
            # 11.0 CPU s for fp32_ops, fp16_attention, bf16_ops, fused_softmax and
            # task_groups_chain at -O0, 12.3 at -Og), and -Wmaybe-uninitialized sees them.
            flags = (f"-DPLANC_EMULATE_WARPS={EMULATED_WARP_THREADS}",)
        else:
            raise KeyError(kind)
        programs.run_checked(programs.cpu_command((*programs.CPU_FLAGS, *flags), "plan.cpp",
                                                  "-o", kind), cwd=self.directory)
        self[kind] = self.directory / kind
        return self[kind]


@dataclass
class Built:
    """A test case's CPU program, built normally and with warp emulation (on first use)."""

    directory: Path
    model_doc: dict
    programs: _Programs

    def reference(self) -> ModelRun:
        return run_model(plans.import_model_doc(self.model_doc))


class _Cases(dict):
    """Every case of tests/codegen/cases.py by name, emitted on first use."""

    def __init__(self, root: Path):
        super().__init__()
        self.root = root

    def __missing__(self, name: str) -> Built:
        case = CASES[name]
        model_doc = case.model()
        module = plans.import_plan_doc(case.plan(model_doc))
        directory = programs.emit(module, "cpu", self.root / name)
        self[name] = Built(directory, model_doc, _Programs(directory, name))
        return self[name]


@pytest.fixture(scope="session")
def cpu_cases(tmp_path_factory) -> dict[str, Built]:
    """The cases' CPU programs, each emitted and built once per session when a test first
    asks for it (a full run builds all 16 programs, 25 CPU s)."""
    if programs.CXX is None:
        pytest.skip("no C++ compiler (g++ or clang++) on PATH")
    return _Cases(tmp_path_factory.mktemp("cpu_cases"))
