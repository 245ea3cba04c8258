"""planc's plans run as real programs: `--target cpu` builds a C++ program from each plan
(another team's code generator and runtime), and its outputs must equal the model's. This
checks the plans against an executor written independently of planc's simulator (it found
that rotary embeddings must not write in place: each element needs its pair partner)."""

from __future__ import annotations

import pytest

from backends.ark_plan import model_pipeline, single_plan
from compiler.pipeline import run_pipeline
from frontends.ark_model import import_document
from ground.json_reader import load_json_file
from targets.ark.model_interpreter import Memory, buffer_sizes, run_model
from tests.codegen import programs
from tests.codegen.conftest import EMULATED_WARP_THREADS
from tests.conftest import EXAMPLES
from tests.sched.models import MODELS

CASES = {
    "attention": lambda: import_document(load_json_file(EXAMPLES / "attention.json")),
    "ffn": lambda: import_document(load_json_file(EXAMPLES / "ffn.json")),
    "llama_layer": MODELS["llama_layer"],
    "norms": MODELS["norms"],
    "deep_matmul": MODELS["deep_matmul"],
    "in_place": MODELS["in_place"],
}


def program_inputs(listing: dict, run, p) -> dict:
    """The model run's inputs as the program's input tensors see them (a plan may read an
    input through views of its own, such as split-K slices)."""
    tensors = [r.type for op in p.graph.ops for r in op.results]
    by_id = {t.tensor_id: t for t in tensors}
    memory = Memory(buffer_sizes([run.types[t] for t in run.inputs] + tensors))
    for tid, values in run.inputs.items():
        memory.write(run.types[tid], values)
    return {t["id"]: memory.read(by_id[t["id"]]) for t in listing["inputs"]}


needs_compiler = pytest.mark.skipif(programs.CXX is None,
                                    reason="no C++ compiler (g++ or clang++) on PATH")


FAST = {("llama_layer", "a100")}
"""The pair `-m "not slow"` builds (2.2 CPU s, most of it g++): a whole layer (norms, rotary
embeddings, attention, fused MLP); the other eleven pairs, and the warp
emulation of fused tasks (3.3 CPU s each; tests/codegen/test_cpu.py emulates warps on every
kernel family and on fused softmax rows in the fast set), are slow."""


@needs_compiler
@pytest.mark.parametrize("name,arch", [
    pytest.param(name, arch, id=f"{name}-{arch}",
                 marks=[] if (name, arch) in FAST else [pytest.mark.slow])
    for name in sorted(CASES) for arch in ("a100", "mi300x")])
def test_planned_programs_compute_the_model(name, arch, tmp_path):
    check_program(CASES[name](), arch, tmp_path)


@needs_compiler
@pytest.mark.slow
@pytest.mark.parametrize("name", ["attention", "llama_layer"])
def test_fused_tasks_hold_under_warp_emulation(name, tmp_path):
    """The GPU forms of the kernels (several threads per slot, slot barriers) on fused tasks:
    softmax and norm rows, matmul epilogues, multi-slot resource groups."""
    # At -Og like the plain builds (not -O0 as tests/codegen/conftest.py's emulated builds):
    # they then share one precompiled header (3.6 CPU s less), and these two build and run in
    # the same CPU as at -O0 (g++ -Og keeps -Wmaybe-uninitialized on the emulated forms).
    check_program(CASES[name](), "a100", tmp_path,
                  (f"-DPLANC_EMULATE_WARPS={EMULATED_WARP_THREADS}",))


def check_program(module, arch: str, tmp_path, flags: tuple[str, ...] = ()) -> None:
    run = run_model(module, seed=5)
    run_pipeline(module, model_pipeline(arch))
    directory = programs.emit(module, "cpu", tmp_path / "program")
    program = programs.build_cpu(directory, (*programs.CPU_FLAGS, *flags))
    listing = programs.manifest(directory)
    programs.write_inputs(tmp_path / "in", listing["inputs"],
                          program_inputs(listing, run, single_plan(module)))
    programs.run_checked([program, tmp_path / "in", tmp_path / "out"])
    programs.compare(programs.read_outputs(tmp_path / "out", listing["outputs"]), run)
