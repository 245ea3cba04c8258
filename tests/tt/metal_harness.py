"""Compile and run what `--target tt-metal` writes, against the mock SDK in tests/tt/mock_sdk.

`syntax_check` runs `g++ -fsyntax-only` on every emitted file. `build_emulator` compiles the
host program together with all its kernels into one executable: each kernel is included into
a namespace of its own and registered under the path the host passes to CreateKernel, so the
mock SDK's mesh workload can run it. `run_emulator` feeds it the inputs of a reference run and
returns the tensors it writes back.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from ground import dtypes

MOCK_SDK = Path(__file__).resolve().parent / "mock_sdk"
GXX = shutil.which("g++")
CXX_FLAGS = ["-std=c++20", "-Wall", "-Werror"]


def compile_command(*args: str | Path) -> list[str]:
    return [GXX, *CXX_FLAGS, "-I", str(MOCK_SDK), *map(str, args)]


def syntax_check(outdir: Path) -> list[Path]:
    """g++ -fsyntax-only every C++ file (one g++ per file kind); returns the files checked."""
    kernels = sorted(outdir.glob("kernels/*/*.cpp"))
    groups = [kernels, [outdir / "main.cpp"]]
    for files in groups:
        result = subprocess.run(compile_command("-fsyntax-only", "-I", outdir, *files),
                                capture_output=True, text=True, cwd=outdir)
        assert result.returncode == 0, result.stderr
    return [f for group in groups for f in group]


def _translation_unit(outdir: Path, kernels: list[Path], headers: list[str], entry: str) -> str:
    lines = [f'#include "{h}"' for h in headers]
    for i, path in enumerate(kernels):
        rel = path.relative_to(outdir).as_posix()
        lines += [f"namespace k{i} {{", f'#include "{rel}"', "}",
                  f'static const bool registered_{i} = sim::register_kernel("{rel}", '
                  f"&k{i}::{entry});"]
    return "\n".join(lines) + "\n"


def _compile_objects(sources: list[Path], cwd: Path, *flags: str | Path) -> list[Path]:
    """Compile the sources to object files, in parallel."""
    jobs = []
    for source in sources:
        obj = cwd / (source.stem + ".o")
        jobs.append((obj, subprocess.Popen(
            # -Og: as tests/codegen/programs.py's CPU_FLAGS (less g++ CPU than -O1, the same
            # warnings).
            compile_command("-Og", "-pthread", *flags, "-c", source, "-o", obj),
            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    for _, job in jobs:
        _, err = job.communicate()
        assert job.returncode == 0, err
    return [obj for obj, _ in jobs]


@functools.cache
def _runtime_object() -> Path:
    """The mock SDK's sim_runtime.cpp compiled once per process (3.4 CPU s each time): it does
    not depend on the program."""
    directory = Path(tempfile.mkdtemp(prefix="planc-tt-sim-"))
    atexit.register(shutil.rmtree, directory, True)
    return _compile_objects([MOCK_SDK / "sim_runtime.cpp"], directory)[0]


def build_emulator(outdir: Path) -> Path:
    """Host program + kernels + emulating SDK as one executable in `outdir`."""
    kernels = sorted(outdir.glob("kernels/*/*.cpp"))
    compute = [k for k in kernels if k.name == "compute.cpp"]
    dataflow = [k for k in kernels if k.name != "compute.cpp"]
    compute_headers = sorted(p.relative_to(MOCK_SDK).as_posix()
                             for p in (MOCK_SDK / "compute_kernel_api").rglob("*.h"))
    (outdir / "emulated_dataflow.cpp").write_text(
        _translation_unit(outdir, dataflow, ["dataflow_api.h"], "kernel_main"))
    (outdir / "emulated_compute.cpp").write_text(
        _translation_unit(outdir, compute, compute_headers, "chlkc_compute::compute_main"))
    sources = [outdir / "main.cpp", outdir / "emulated_dataflow.cpp",
               outdir / "emulated_compute.cpp"]
    objects = [*_compile_objects(sources, outdir, "-I", outdir), _runtime_object()]
    exe = outdir / "emulated"
    result = subprocess.run([GXX, "-pthread", *map(str, objects), "-o", str(exe)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return exe


def run_emulator(exe: Path, data: Path, inputs: dict, types: dict,
                 outputs: list[int]) -> dict[int, np.ndarray]:
    """Write `inputs` (tensor id -> values) as in_t<id>.bin, run, read out_t<id>.bin."""
    data.mkdir(exist_ok=True)
    for tensor_id, values in inputs.items():
        dtype = types[tensor_id].data_type
        dtypes.to_storage(np.asarray(values), dtype).tofile(data / f"in_t{tensor_id}.bin")
    result = subprocess.run([str(exe), str(data)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    found = {}
    for tensor_id in outputs:
        tensor = types[tensor_id]
        raw = np.fromfile(data / f"out_t{tensor_id}.bin", dtype=dtypes.STORAGE[tensor.data_type])
        found[tensor_id] = dtypes.to_compute(raw.reshape(tensor.shape_list), tensor.data_type)
    return found
