"""Runs the lit/FileCheck suite (tests/filecheck) as part of pytest: one test per lit file, so
pytest-xdist spreads them over the cores and a failure names its file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
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
"""The lit files `pytest -m "not slow"` runs: one cheap file for each target's dialects. Every
other file is marked slow: CI runs them all, and `python3 -m pytest tests/test_lit.py` or
`lit tests/filecheck` runs them locally. Without the fork server (conftest.py) most of a file's
cost was the start-up of lit and of the ~6 processes of its RUN lines (0.2 CPU s for Python and
the site-packages' .pth files, 0.1-0.3 s of imports each): all 53 files took 151 CPU s, 57 with
it."""


def _lit_param(path: Path):
    name = str(path.relative_to(SUITE))
    return pytest.param(path, marks=[pytest.mark.slow] if name not in FAST_LIT else [], id=name)


@pytest.mark.parametrize("path", [_lit_param(p) for p in LIT_FILES])
def test_lit_file(path: Path, tmp_path: Path, forkserver_folder: str | None) -> None:
    pytest.importorskip("lit", reason="lit is part of the test extra: pip install -e '.[test]'")
    # Its own exec root (see lit.cfg.py): lit files run in parallel would otherwise share
    # Output/ and the timing file lit rewrites after every run. The fork server (conftest.py)
    # runs lit and the tools of its RUN lines where there is one.
    env = {**os.environ, "PLANC_LIT_EXEC_ROOT": str(tmp_path)}
    args = ["-q", "-v", str(path)]
    result = None
    if forkserver_folder:
        env["PLANC_FORKSERVER"] = forkserver_folder
        result = forkserver.call(forkserver_folder, "lit", args, cwd=ROOT, env=env)
    if result is None:
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


LIT_SUBPROCESS_BUILTINS = {"diff", "cat"}
"""Commands lit (17-23) runs as `python lit/builtin_commands/NAME.py`: for them it sets
PYTHONPATH to lit's own folder in the RUN lines' shared environment, so every later RUN line
of the file runs without the checkout's PYTHONPATH (the installed planc, not this tree's),
and the fork server refuses them (an interpreter setting differs): each became a whole
process, 0.4-1.3 CPU s instead of 0.01-0.7 (roundtrip/*.test: 2-4 CPU s each)."""
TOOLS = {"planc", "planc-opt", "filecheck"}


def run_commands(path: Path) -> list[str]:
    """The command names of a lit file's RUN lines, in order (`not` dropped)."""
    names = []
    for line in path.read_text().splitlines():
        _, run, command = line.partition("RUN:")
        if not run:
            continue
        for part in re.split(r"\|\||&&|\||;", command):
            words = [w for w in part.split() if w != "not"]
            if words:
                names.append(words[0])
    return names


def test_tools_run_before_lits_python_builtins() -> None:
    """No planc, planc-opt or filecheck after a `diff` or `cat` in a lit file (see
    LIT_SUBPROCESS_BUILTINS): put the comparisons last."""
    late = []
    for path in LIT_FILES:
        names = run_commands(path)
        first = next((i for i, n in enumerate(names) if n in LIT_SUBPROCESS_BUILTINS), None)
        if first is not None and TOOLS & set(names[first:]):
            late.append(str(path.relative_to(SUITE)))
    assert not late, f"tools run after lit's diff/cat (PYTHONPATH lost): {late}"
