"""Shared test helpers: the upstream corpus location and an in-process `planc`."""

from __future__ import annotations

import itertools
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

# Bytecode caches even under PYTHONDONTWRITEBYTECODE: without them every xdist worker compiles
# planc's modules and rewrites the asserts of ~170 test modules again on every run (about 2.7
# CPU s per worker); __pycache__ is git-ignored and Python checks each file's mtime.
sys.dont_write_bytecode = False

from compiler.driver import main as planc_main  # noqa: E402
from compiler.driver import single_threaded_blas  # noqa: E402

# As the command line does, before any test module imports numpy: simulating plans multiplies
# many small matrices.
single_threaded_blas()

# No time limit on a hypothesis example: its default 200 ms deadline is a timed assertion,
# which fails on the shared machine under load (test_nesting_limit at 236 ms, 2026-11-28).
settings.register_profile("planc", deadline=None)
settings.load_profile("planc")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def corpus_root() -> Path:
    """`../shared/corpus` next to the checkout, or $PLANC_CORPUS."""
    return Path(os.environ.get("PLANC_CORPUS", ROOT.parent / "shared" / "corpus"))


def corpus_params(subdir: str, pattern: str = "*.json") -> list:
    """Corpus files as pytest params; one skipped placeholder when the corpus is absent."""
    folder = corpus_root() / subdir
    files = sorted(folder.glob(pattern)) if folder.is_dir() else []
    if not files:
        return [pytest.param(None, id="no-corpus", marks=pytest.mark.skip(
            reason=f"upstream corpus not found at {folder} (set PLANC_CORPUS to its path)"))]
    return [pytest.param(f, id=f.name) for f in files]


def diagonal(*axes: list, ids=None) -> list:
    """The product of `axes` as pytest params, all but a covering "diagonal" marked slow.

    Combination k of the diagonal takes value k mod len(axis) of every axis (k below the
    longest axis' length), so `-m "not slow"` still tries every value of every axis once while
    CI runs the whole product. For parametrized tests whose cost is the product of independent
    choices (model x target, model x architecture)."""
    fast = {tuple(k % len(axis) for axis in axes) for k in range(max(map(len, axes)))}
    params = []
    for index in itertools.product(*(range(len(axis)) for axis in axes)):
        values = [axis[i] for axis, i in zip(axes, index, strict=True)]
        params.append(pytest.param(
            *values, marks=[] if index in fast else [pytest.mark.slow],
            id="-".join(ids(v) if ids else str(v) for v in values)))
    return params


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def planc(capsys):
    """Run the planc CLI in-process: planc("model.json", "--target", "mlir")."""

    def run(*args: str | Path) -> Result:
        code = planc_main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


SMALL_FFN_SIZES = {256: 128, 1024: 256, 2816: 768}
"""examples/ffn.json's tokens, model and hidden sizes, and the small model's: still multiples
of ARK's default 128x256 tile, so ARK's default planner accepts it too."""


def small_ffn_doc() -> dict:
    """examples/ffn.json (a gated MLP: three matmuls, a sigmoid, two muls) at smaller sizes
    (1/29 of its multiply-adds): the same operators, tensors and plan structure, but its
    functional simulation takes about 0.1 CPU s instead of 1.3 (the example's FP16 matmuls
    have no BLAS in numpy)."""
    doc = json.loads((EXAMPLES / "ffn.json").read_text())

    def shrink(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("Shape", "Strides", "PaddedShape"):
                    node[key] = [SMALL_FFN_SIZES.get(v, v) for v in value]
                else:
                    shrink(value)
        elif isinstance(node, list):
            for value in node:
                shrink(value)

    shrink(doc)
    return doc


@pytest.fixture(scope="session")
def small_ffn(tmp_path_factory) -> Path:
    """`small_ffn_doc()` as a file."""
    return write_json(tmp_path_factory.mktemp("small_ffn") / "ffn.json", small_ffn_doc())


@pytest.fixture(scope="session")
def ffn_plan_text(small_ffn, tmp_path_factory) -> str:
    """`planc ffn.json -t ark` (an A100 plan) of the small ffn, compiled once per session."""
    out = tmp_path_factory.mktemp("ffn_plan") / "p.json"
    assert planc_main([str(small_ffn), "-t", "ark", "-o", str(out)]) == 0
    return out.read_text()


@pytest.fixture
def ffn_plan(tmp_path, ffn_plan_text) -> Path:
    """A fresh copy of that plan, `tmp_path / "p.json"`, for the test to read or damage."""
    path = tmp_path / "p.json"
    path.write_text(ffn_plan_text)
    return path


@pytest.fixture
def planc_cli(planc):
    """`planc` under a name that does not shadow `import compiler as planc`."""
    return planc


def write_json(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc, indent=2))
    return path


SLOW_CASES = Path(__file__).with_name("slow_cases.txt")


def pytest_collection_modifyitems(config, items) -> None:
    """Mark the measured heavy cases of `slow_cases.txt` slow (node ids, without xdist's
    `@group` suffix)."""
    listed = {line.strip() for line in SLOW_CASES.read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    for item in items:
        if item.nodeid.split("@")[0] in listed:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def opt(capsys):
    """`planc-opt ARGS` in this process: (exit code, stdout, stderr)."""
    from compiler.opt import run

    def call(*args):
        code = run([str(a) for a in args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err
    return call


@pytest.fixture(scope="session")
def forkserver_folder() -> Iterator[str | None]:
    """The folder of this pytest worker's fork server (tests/forkserver.py): lit, planc,
    planc-opt and filecheck imported once, instead of a Python start-up and the imports in each
    of the lit suite's ~350 processes. None where the platform cannot run it, or with
    PLANC_TEST_FORKSERVER=0 (to compare, or to rule the server out): the programs then run as
    they are."""
    from tests import forkserver

    if not forkserver.supported() or os.environ.get("PLANC_TEST_FORKSERVER") == "0":
        yield None
        return
    # A short folder: the path of a unix socket has at most ~100 bytes.
    with tempfile.TemporaryDirectory(prefix="planc-fs-") as folder, \
            forkserver.Servers(folder, log=os.path.join(folder, "log")):
        yield folder
