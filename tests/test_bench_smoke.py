"""Every benchmark in `bench/` runs at HEAD: each on its smallest setting, as a subprocess of
this checkout. A benchmark added without a smallest setting here fails the listing test, so
none can silently rot (issue 11 found `bench/cpu_ffn.py` broken)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.codegen import programs
from tests.conftest import ROOT, corpus_root, small_ffn_doc, write_json

BENCH = ROOT / "bench"

SMALLEST: dict[str, list[str]] = {
    "aliasing_models.py": ["--seeds", "2", "--cpu", "1"],
    "check_scale.py": ["--ops", "100"],
    "check_simulate.py": ["--smoke"],
    "compile_speed.py": ["--ops", "100"],
    "cpu_ffn.py": ["--iterations", "1", "--rounds", "1", "--model", "{small_ffn}"],
    # One format: tests/test_fuzz.py runs its fuzzing on every format (this checks the script).
    "fuzz.py": ["--mutants", "1", "--fork", "--formats", "model"],
    "gemini_schedule.py": ["--smoke"],
    "llama_layer.py": ["--smoke"],
    "mscclpp_allreduce.py": ["--ranks", "2", "--sizes", "1024"],
    "onnx_gemini.py": ["--smoke"],
    "onnx_models.py": ["--smoke"],
    "plan_candidates.py": ["{small_ffn}", "--arch", "a100", "--top", "2"],
    "plan_quality.py": ["--arch", "a100", "--seq", "64"],
    # Two targets: a model compiled and a plan imported (the two ways the script runs planc;
    # every target takes the first), each with the baseline tree interleaved.
    "scale.py": ["--ops", "20,40", "--targets", "ark,plan-import", "--baseline", str(ROOT)],
    "schema_speed.py": ["--ops", "100", "--repeat", "1", str(ROOT / "examples" / "ffn.json")],
    "tt_plans.py": ["--grid", "2x2"],
    "tune.py": ["--smoke"],
}
"""The smallest setting of each benchmark: its arguments ("{small_ffn}" is the small ffn of
tests/conftest.py: the example's operators and plan structure at 1/29 of its work)."""

MODULES = {"roofline.py": "a model plan_quality.py imports, not a benchmark of its own",
           "same_outputs.py": "a before/after tool for moves (809 commands, minutes), run by hand "
                              "around a refactor; its record/compare logic has no smaller setting"}
"""Files of `bench/` that are not benchmarks, and why."""

NEEDS = {
    "aliasing_models.py": "compiler", "cpu_ffn.py": "compiler",
    "gemini_schedule.py": "corpus",
}


def benchmarks() -> list[str]:
    return sorted(p.name for p in BENCH.glob("*.py"))


def test_every_benchmark_has_a_smallest_setting():
    missing = [name for name in benchmarks() if name not in SMALLEST and name not in MODULES]
    assert not missing, f"benchmarks without a smallest setting in {__file__}: {missing}"
    assert not (set(SMALLEST) | set(MODULES)) - set(benchmarks()), "entries for files gone"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALLEST))
def test_benchmark_runs_on_its_smallest_setting(name, tmp_path):
    need = NEEDS.get(name)
    if need == "compiler" and programs.CXX is None:
        pytest.skip("no C++ compiler (g++ or clang++) on PATH")
    if need == "corpus" and not (corpus_root() / "gemini").is_dir():
        pytest.skip(f"upstream corpus not found at {corpus_root()}")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    args = SMALLEST[name]
    if "{small_ffn}" in args:
        small = str(write_json(tmp_path / "small_ffn.json", small_ffn_doc()))
        args = [small if a == "{small_ffn}" else a for a in args]
    done = subprocess.run([sys.executable, str(BENCH / name), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"{name} {args} failed:\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"{name} printed nothing"
