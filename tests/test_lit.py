"""Runs the lit/FileCheck suite (tests/filecheck) as part of pytest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_filecheck_suite() -> None:
    pytest.importorskip("lit", reason="lit is part of the test extra: pip install -e '.[test]'")
    result = subprocess.run(
        [sys.executable, "-c", "import lit.main; lit.main.main()", "-q", "-v",
         str(ROOT / "tests" / "filecheck")],
        cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
