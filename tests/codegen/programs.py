"""Emit, build and run the programs planc writes, and compare their outputs with the model.

Programs are built in parallel (the machine's cores) and each at most once per test session.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from argparse import Namespace
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from compiler.output import write_product
from ground import dtypes
from targets.ark.model_interpreter import ModelRun

CXX = shutil.which("g++") or shutil.which("clang++")
NVCC = shutil.which("nvcc")
CPU_FLAGS = ("-std=c++17", "-Og", "-march=native", "-pthread", "-Wall", "-Wextra", "-Werror")
"""Tests build quickly but with the vector width users get (-march=native). -Og, not -O1:
g++ builds a program in 25-35% less CPU (fp32_ops 1.9 -> 1.3 s, the FFN 1.6 -> 1.3), still
runs the flow analyses that -Wall's warnings such as -Wmaybe-uninitialized need (at -O0 they
are silent), and the programs run about as fast as at -O1 (the FFN at full size 0.6-0.8 s;
4.5 s at -O0)."""
LONG_RUN_FLAGS = tuple("-O2" if f == "-Og" else f for f in CPU_FLAGS)
"""For a program whose run outweighs its build (the upstream split-K plan at full size, 23
GFLOP of FP16 matmul): g++ -O2 vectorises the kernels, so the run takes 4.7 CPU s instead of
16 at -Og, for 0.5 s more of g++; the same warnings (-O2 runs the flow analyses -Og does)."""
CUDA_ARCHS = ("80", "90")


def emit(module: ModuleOp, target: str, directory: Path, **options) -> Path:
    from backends import target_named

    backend = target_named(target).load()
    write_product(directory, backend.emit(module, Namespace(**options)))
    return directory


def run_checked(command: Sequence[str | Path], cwd: Path | None = None) -> str:
    result = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True,
                            text=True, check=False)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, command))} failed ({result.returncode}):\n"
                             f"{result.stdout[-4000:]}{result.stderr[-4000:]}")
    return result.stdout


RUNTIME = Path(__file__).resolve().parents[2] / "backends" / "runtime"

_PRECOMPILED: dict[tuple[str, ...], list[str]] = {}
_PRECOMPILED_LOCK = threading.Lock()


def precompiled_std(flags: Sequence[str]) -> list[str]:
    """`-include` options for a precompiled header of the standard headers the CPU runtime
    includes, built once per process and flag set (g++ only; [] where it cannot be built).

    Parsing those headers is half of each program's g++ time (2.8 -> 1.3 CPU s on the FFN),
    and the suite builds about a hundred programs. g++ takes a precompiled header only under
    the same optimisation level and target options, so the key is the flags less the macro
    definitions (which the standard headers do not read). The headers are read from the
    runtime's sources, so the set follows them. It would mask an include missing from emitted
    code, so two builds stay without it: the bench smoke test of `bench/cpu_ffn.py` builds an
    emitted program with the command users run (`backends.cpu.BUILD`), and test_runtime.py
    builds the runtime headers alone."""
    if CXX is None or not Path(CXX).name.startswith("g++"):
        return []
    key = tuple(f for f in flags if not f.startswith("-D"))
    with _PRECOMPILED_LOCK:
        if key not in _PRECOMPILED:
            _PRECOMPILED[key] = _build_precompiled(key)
        return _PRECOMPILED[key]


def _build_precompiled(flags: tuple[str, ...]) -> list[str]:
    names = sorted({name for header in RUNTIME.glob("*.h")
                    for name in re.findall(r"#include <([a-z_]+)>", header.read_text())})
    directory = Path(tempfile.mkdtemp(prefix="planc-pch-"))
    atexit.register(shutil.rmtree, directory, True)
    header = directory / "std.h"
    header.write_text("".join(f"#include <{name}>\n" for name in names))
    result = subprocess.run([CXX, *flags, "-x", "c++-header", str(header), "-o",
                             f"{header}.gch"], capture_output=True, text=True, check=False)
    return ["-include", str(header)] if result.returncode == 0 else []


def cpu_command(flags: Sequence[str], *args: str | Path) -> list[str | Path]:
    """g++ with `flags` (and the precompiled standard headers) on `args`. -Winvalid-pch (an
    error under -Werror): a header g++ does not take fails the build instead of silently
    costing the parse again."""
    header = precompiled_std(flags)
    return [CXX, *flags, *(["-Winvalid-pch", *header] if header else []), *args]


def build_cpu(directory: Path, flags: Sequence[str] = CPU_FLAGS, *,
              precompiled: bool = True) -> Path:
    """g++ plan.cpp; `precompiled=False` for a flag set only one build uses (building its
    precompiled header, 3.7 CPU s, would cost more than it saves)."""
    command = cpu_command(flags, "plan.cpp", "-o", "plan") if precompiled else \
        [CXX, *flags, "plan.cpp", "-o", "plan"]
    run_checked(command, cwd=directory)
    return directory / "plan"


def compile_cuda(directory: Path, archs: Sequence[str] = CUDA_ARCHS, *, link: bool = False,
                 optimize: bool = True) -> None:
    """nvcc on the kernel (and the host program when `link`), for every architecture: through
    cicc and ptxas to SASS, warnings as errors. Without `link`, only the device side is built,
    to `kernel_sm<arch>.cubin` (`-cubin`: nvcc's front end still parses and checks the whole
    file, host launch function included, but skips the host compiler, about a third of the
    CPU; the linked program compiles that launch function with g++). Without `optimize`, ptxas
    runs at -O0 (15-20% less CPU over the kernels of test_cuda.py; the same front end, PTX and
    SASS checks, and ptxas still refuses what does not fit the device), for builds that are
    only checked, never run."""
    levels = ["-O3"] if optimize else ["-O0", "-Xptxas", "-O0"]
    common = [NVCC, "-std=c++17", *levels, "-Werror", "all-warnings"]
    if link:
        gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
        run_checked([*common, *gencode, "host.cu", "kernel.cu", "-o", "plan"], cwd=directory)
        return
    for arch in archs:
        run_checked([*common, f"-arch=sm_{arch}", "-cubin", "kernel.cu", "-o",
                     f"kernel_sm{arch}.cubin"], cwd=directory)


def in_parallel(jobs: Iterable, function) -> list:
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        return list(pool.map(function, jobs))


def manifest(directory: Path) -> dict:
    return json.loads((directory / "tensors.json").read_text())


def write_inputs(directory: Path, tensors: list[dict], values: dict[int, np.ndarray]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for t in tensors:
        data = dtypes.to_storage(np.broadcast_to(values[t["id"]], t["shape"]), t["dtype"])
        np.ascontiguousarray(data).tofile(directory / t["file"])


def read_outputs(directory: Path, tensors: list[dict]) -> dict[int, np.ndarray]:
    return {t["id"]: dtypes.to_compute(
        np.fromfile(directory / t["file"], dtype=dtypes.STORAGE[t["dtype"]]).reshape(t["shape"]),
        t["dtype"]) for t in tensors}


def run_program(program: Path, run: ModelRun, work: Path, *extra: str) -> dict[int, np.ndarray]:
    """Run `program` on the inputs the reference run used; its outputs by tensor id."""
    listing = manifest(program.parent)
    missing = [t["id"] for t in listing["inputs"] if t["id"] not in run.inputs]
    assert not missing, f"the program reads tensors {missing} the model never reads as inputs"
    write_inputs(work / "in", listing["inputs"], run.inputs)
    run_checked([program, work / "in", work / "out", *extra])
    return read_outputs(work / "out", listing["outputs"])


def compare(outputs: dict[int, np.ndarray], run: ModelRun) -> None:
    """Every output equals the reference within its data type's tolerance."""
    assert outputs, "the program writes no outputs"
    assert sorted(outputs) == sorted(run.outputs), (
        f"outputs {sorted(outputs)} differ from the model's {sorted(run.outputs)}")
    wrong = []
    for tensor_id, got in outputs.items():
        expected, dtype = run.tensors[tensor_id], run.types[tensor_id].data_type
        tol = dtypes.tolerance(dtype)
        if not np.allclose(got, expected, rtol=tol.rtol, atol=tol.atol, equal_nan=True):
            error = np.nanmax(np.abs(got.astype(np.float64) - expected))
            wrong.append(f"tensor {tensor_id} ({dtype}) differs from the model by up to {error} "
                         f"(rtol {tol.rtol}, atol {tol.atol})")
    assert not wrong, "; ".join(wrong)
