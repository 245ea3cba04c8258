"""`--target cpu`: the emitted programs compute what the model computes.

Every case (tests/codegen/cases.py) is emitted, built with g++ and run on the random inputs the
numpy model interpreter draws; every output tensor must match the interpreter within its data
type's tolerance. The same programs built with warp emulation run the GPU forms of the kernels
(several threads per slot, shared memory, slot barriers) and must match too.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from dialects.locations import verify_module
from frontends.ark_plan import import_document
from ground.json_reader import load_json_file
from targets.ark.model_interpreter import run_model
from tests.codegen import plans, programs
from tests.codegen.cases import CASES
from tests.codegen.conftest import EMULATED
from tests.conftest import corpus_root

# One xdist worker builds the session's C++ programs (cpu_cases, each on first use) and runs
# these tests.
pytestmark = pytest.mark.xdist_group("cpu-builds")


SLOW_PLANS = {"renumbered_chain", "concurrent_chain"}
"""Cases `-m "not slow"` does not build (1.3-1.5 CPU s of g++ each): two more plans of the
chain model whose other plans (fused, task groups on strided ranges) are in the fast set."""


@pytest.mark.parametrize("case", [
    pytest.param(case, marks=[pytest.mark.slow] if case in SLOW_PLANS else [])
    for case in CASES])
def test_program_matches_the_model(cpu_cases, case, tmp_path):
    built = cpu_cases[case]
    run = built.reference()
    programs.compare(programs.run_program(built.programs["plan"], run, tmp_path), run)


FAST_EMULATED = {"fp32_ops", "fused_softmax"}
"""The emulated builds `-m "not slow"` runs (1.5-2.5 CPU s of g++ each): every kernel family,
and softmax rows fused into one task; the other five are slow."""


@pytest.mark.parametrize("case", [
    pytest.param(case, marks=[] if case in FAST_EMULATED else [pytest.mark.slow])
    for case in EMULATED])
def test_gpu_kernels_under_warp_emulation_match_the_model(cpu_cases, case, tmp_path):
    built = cpu_cases[case]
    run = built.reference()
    programs.compare(programs.run_program(built.programs["emulated"], run, tmp_path), run)


def test_repeated_iterations_recompute_the_same_outputs_and_report_time(cpu_cases, tmp_path):
    built = cpu_cases["fused_chain"]
    run = built.reference()
    listing = programs.manifest(built.directory)
    programs.write_inputs(tmp_path / "in", listing["inputs"], run.inputs)
    result = subprocess.run([built.programs["plan"], tmp_path / "in", tmp_path / "out",
                             "--iterations", "3", "--warmup", "1"],
                            capture_output=True, text=True, check=True)
    assert result.stdout.startswith("planc: 3 iteration(s) in ")
    programs.compare(programs.read_outputs(tmp_path / "out", listing["outputs"]), run)


def test_different_inputs_give_different_outputs(cpu_cases, tmp_path):
    """The outputs come from the inputs (not from anything baked into the program)."""
    built = cpu_cases["small_plan"]
    first, second = built.reference(), built.reference()
    for values in second.inputs.values():
        values *= 2
    a = programs.run_program(built.programs["plan"], first, tmp_path / "a")
    b = programs.run_program(built.programs["plan"], second, tmp_path / "b")
    assert all(not np.allclose(a[t], b[t]) for t in a)


class TestProgramErrors:
    def run(self, built, *args) -> subprocess.CompletedProcess:
        return subprocess.run([built.programs["plan"], *map(str, args)], capture_output=True,
                              text=True, check=False)

    def test_missing_input_file(self, cpu_cases, tmp_path):
        result = self.run(cpu_cases["small_plan"], tmp_path / "nothing", tmp_path / "out")
        assert result.returncode == 1
        assert "t0.bin: cannot read input tensor 0" in result.stderr
        assert not (tmp_path / "out").exists()

    def test_input_file_of_the_wrong_size(self, cpu_cases, tmp_path):
        built = cpu_cases["small_plan"]
        run = built.reference()
        programs.write_inputs(tmp_path, programs.manifest(built.directory)["inputs"], run.inputs)
        (tmp_path / "t1.bin").write_bytes(b"\0" * 12)
        result = self.run(built, tmp_path, tmp_path / "out")
        assert result.returncode == 1
        assert "input tensor 1 (FP32, 128 elements) needs 512 bytes, the file has 12" in \
            result.stderr

    def test_bad_command_line(self, cpu_cases, tmp_path):
        built = cpu_cases["small_plan"]
        assert "expected INPUT_DIR and OUTPUT_DIR" in self.run(built, tmp_path).stderr
        result = self.run(built, tmp_path, tmp_path, "--iterations", "0")
        assert result.returncode == 1 and "--iterations expects an integer >= 1" in result.stderr


@pytest.mark.slow  # 160 s under load
# Its own group: it builds its own program (not cpu_cases), so it need not queue behind the
# cpu-builds worker's 16 builds (xdist names an item's group after all its xdist_group
# marks: this one's is "cpu-builds_upstream-split-k", a group of its own).
@pytest.mark.xdist_group("upstream-split-k")
def test_upstream_split_k_plan_runs_like_its_operators(tmp_path):
    """ARK's tutorial plan at full size: 108 processors, the last matmul split along K into two
    concurrent processor groups, element-wise results written in place into a shared buffer."""
    path = corpus_root() / "ark" / "tutorial_plan_cuda80.json"
    if not path.is_file():
        pytest.skip(f"upstream corpus file not found: {path}")
    module = import_document(load_json_file(path))
    directory = programs.emit(module, "cpu", tmp_path / "program")
    programs.build_cpu(directory, programs.LONG_RUN_FLAGS, precompiled=False)
    reference = plans.plan_as_model(module)
    verify_module(reference)
    run = run_model(reference)
    programs.compare(programs.run_program(directory / "plan", run, tmp_path), run)
