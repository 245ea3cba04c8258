"""`--target cuda`: the emitted sources compile for their plan's architecture (sm_80 for A100
plans, sm_90 for H100 plans), and match the model on a GPU.

The kernels are compiled (not linked) with nvcc, warnings as errors, for the architecture the
emitted build files name (each plan's own: the runtime has no architecture-specific code, and a
plan's tiles and shared memory are sized for its device); one case is also linked with its host
program. Running needs a GPU: that test compares every
output with the numpy model interpreter, and is skipped with the reason where no device is.
(The GPU forms of the kernels also run on the CPU, under warp emulation, in test_cpu.py.)
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from backends.ark_plan import model_pipeline
from compiler.pipeline import run_pipeline
from frontends.ark_model import import_document as import_model
from frontends.ark_plan import import_document
from ground.json_reader import load_json_file
from targets.ark.model_interpreter import run_model
from tests.codegen import plans, programs
from tests.codegen.cases import CASES
from tests.conftest import EXAMPLES, corpus_root

pytestmark = [pytest.mark.skipif(programs.NVCC is None, reason="nvcc is not installed"),
              # One xdist worker runs them all: the nvcc builds are a session fixture, which
              # every worker running one of these tests would otherwise build again.
              pytest.mark.xdist_group("cuda-builds"),
              # The nvcc builds take minutes (276 s of fixture set-up under load).
              pytest.mark.slow]

COMPILED_CASES = ["fp32_ops", "bf16_ops", "task_groups_chain", "fused_softmax"]
"""Every kernel family and data type (fused_softmax is the FP16 model), fused operators,
multi-warp slots that get named barriers, steps and starts (and, linked below, a matmul with
only part of its K tile in SRAM)."""
COMPILED_CORPUS = ["tutorial_plan_cuda80.json", "tutorial_default_plan_rocm942.json"]
"""Split-K with in-place reuse on 108 processors, and a 304 x 4 ROCm plan (its 128x256 matmul
tiles on 4 warps)."""
LINKED = "fused_chain"
H100 = "ffn-h100"
"""planc's own H100 plan of the FFN example (CUDA_90: its tiles and SRAM sized for sm_90)."""


def gpu_present() -> bool:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    result = subprocess.run([smi, "-L"], capture_output=True, text=True, check=False)
    return result.returncode == 0 and "GPU" in result.stdout


def case_module(name: str):
    case = CASES[name]
    return plans.import_plan_doc(case.plan(case.model()))


def h100_plan():
    module = import_model(load_json_file(EXAMPLES / "ffn.json"))
    run_pipeline(module, model_pipeline("h100"))
    return module


@pytest.fixture(scope="session")
def cuda_builds(tmp_path_factory) -> dict[str, Path | AssertionError]:
    """Each case's directory after nvcc, or the error nvcc reported."""
    root = tmp_path_factory.mktemp("cuda")
    sm80 = ("80",)
    jobs = {name: (case_module(name), False, sm80) for name in COMPILED_CASES}
    # Linked for its plan's own architecture, as its CMakeLists.txt builds it: the host
    # program has no architecture-specific code, and sm_90's device code is compiled for the
    # H100 plan below (linking for both cost 14.7 CPU s, one 10.3).
    jobs[LINKED] = (case_module(LINKED), True, sm80)
    jobs[H100] = (h100_plan(), False, ("90",))
    folder = corpus_root() / "ark"
    for name in COMPILED_CORPUS:
        if (folder / name).is_file():
            # Both are compiled as A100 code: the ROCm plan too (its 304 x 4 layout).
            jobs[name] = (import_document(load_json_file(folder / name)), False, sm80)

    def build(item) -> tuple[str, Path | AssertionError]:
        name, (module, link, archs) = item
        directory = programs.emit(module, "cuda", root / name.removesuffix(".json"))
        try:
            # The linked program (what a GPU would run) at -O3; the kernels only compiled, at
            # -O0 (see compile_cuda).
            programs.compile_cuda(directory, archs, link=link, optimize=link)
        except AssertionError as e:
            return name, e
        return name, directory

    return dict(programs.in_parallel(jobs.items(), build))


def built(cuda_builds, name: str) -> Path:
    result = cuda_builds[name]
    if isinstance(result, AssertionError):
        raise result
    return result


@pytest.mark.parametrize("case", COMPILED_CASES)
def test_kernel_compiles_for_its_architecture(cuda_builds, case):
    assert (built(cuda_builds, case) / "kernel_sm80.cubin").stat().st_size > 0


def test_an_h100_plan_compiles_for_sm90(cuda_builds):
    directory = built(cuda_builds, H100)
    assert "CMAKE_CUDA_ARCHITECTURES 90" in (directory / "CMakeLists.txt").read_text()
    assert (directory / "kernel_sm90.cubin").stat().st_size > 0


@pytest.mark.parametrize("name", COMPILED_CORPUS)
def test_corpus_plan_kernel_compiles(cuda_builds, name):
    if name not in cuda_builds:
        pytest.skip(f"upstream corpus file {name} not found under {corpus_root()}")
    assert (built(cuda_builds, name) / "kernel_sm80.cubin").stat().st_size > 0


def test_host_program_links(cuda_builds):
    program = built(cuda_builds, LINKED) / "plan"
    assert program.stat().st_size > 0
    if not gpu_present():
        result = subprocess.run([program, "in", "out"], capture_output=True, text=True,
                                check=False)
        assert result.returncode == 1 and result.stderr.startswith("planc: error: ")


@pytest.mark.skipif(not gpu_present(), reason="no CUDA GPU on this machine (nvidia-smi lists "
                                               "none); the kernels run under warp emulation "
                                               "in test_cpu.py instead")
@pytest.mark.parametrize("case", list(CASES))
def test_program_on_the_gpu_matches_the_model(case, tmp_path):
    directory = programs.emit(case_module(case), "cuda", tmp_path / "program")
    programs.run_checked([programs.NVCC, "-std=c++17", "-O3", "-arch=native", "host.cu",
                          "kernel.cu", "-o", "plan"], cwd=directory)
    run = run_model(plans.import_model_doc(CASES[case].model()))
    programs.compare(programs.run_program(directory / "plan", run, tmp_path), run)
