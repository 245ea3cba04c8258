"""Runs the lit/FileCheck suite (tests/filecheck) as part of pytest: one test per lit file, so
pytest-xdist spreads them over the cores and a failure names its file."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import forkserver

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "tests" / "filecheck"
EXCLUDED = {"Inputs", "Output", "examples", "docs", "bench", "build"}  # as lit excludes
LIT_FILES = sorted(p for p in SUITE.rglob("*") if p.suffix in (".mlir", ".test")
                   and not EXCLUDED & set(p.relative_to(SUITE).parts[:-1]))


FAST_LIT = {"ark/export.test", "tt/tile.test", "codegen/cpu.test", "gemini/verify.test",
            "mscclpp/verify.mlir"}
"""The lit files `pytest -m "not slow"` runs: one cheap file for each target's dialects (0.5-0.9
CPU s each, most of it the start-up of lit and of the `planc`/`planc-opt` processes they run).
Every other file (0.6-2.1 CPU s each, 52 CPU s in all) is marked slow: CI runs them all, and
`python3 -m pytest tests/test_lit.py` or `lit tests/filecheck` runs them locally."""


def _lit_param(path: Path):
    name = str(path.relative_to(SUITE))
    return pytest.param(path, marks=[pytest.mark.slow] if name not in FAST_LIT else [], id=name)


@pytest.fixture(scope="session")
def forkserver_env() -> Iterator[dict[str, str]]:
    """PLANC_FORKSERVER for the lit runs of this pytest worker: one fork server (per tool)
    that imported planc, planc-opt and filecheck once, instead of a Python start-up and the
    imports in each of the ~300 processes of the RUN lines (tests/forkserver.py). Empty where
    the platform cannot run it: the tools then run as programs."""
    if not forkserver.supported():
        yield {}
        return
    # A short folder: a unix socket's path has at most ~100 bytes.
    with tempfile.TemporaryDirectory(prefix="planc-fs-") as folder, \
            forkserver.Servers(folder, log=os.path.join(folder, "log")):
        yield {"PLANC_FORKSERVER": folder}


@pytest.mark.parametrize("path", [_lit_param(p) for p in LIT_FILES])
def test_lit_file(path: Path, tmp_path: Path, forkserver_env: dict[str, str]) -> None:
    pytest.importorskip("lit", reason="lit is part of the test extra: pip install -e '.[test]'")
    # Its own exec root (see lit.cfg.py): lit files run in parallel would otherwise share
    # Output/ and the timing file lit rewrites after every run.
    env = {**os.environ, **forkserver_env, "PLANC_LIT_EXEC_ROOT": str(tmp_path)}
    args = ["-q", "-v", str(path)]
    # lit too runs in the fork server where there is one (~0.3 CPU s of start-up per file).
    result = forkserver_env and forkserver.call(forkserver_env["PLANC_FORKSERVER"], "lit", args,
                                                cwd=ROOT, env=env)
    if not result:
        result = subprocess.run([sys.executable, "-c", "import lit.main; lit.main.main()", *args],
                                cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_lit_file_is_collected() -> None:
    """lit itself discovers the same files (none is skipped by the per-file split)."""
    pytest.importorskip("lit", reason="lit is part of the test extra: pip install -e '.[test]'")
    listed = subprocess.run(
        [sys.executable, "-c", "import lit.main; lit.main.main()", "--show-tests", str(SUITE)],
        cwd=ROOT, capture_output=True, text=True).stdout
    names = {line.split("::", 1)[1].strip() for line in listed.splitlines() if "::" in line}
    assert names == {str(p.relative_to(ROOT)) for p in LIT_FILES}


def test_the_fast_lit_files_exist() -> None:
    """A renamed file would otherwise leave `-m "not slow"` without lit."""
    assert FAST_LIT <= {str(p.relative_to(SUITE)) for p in LIT_FILES}
