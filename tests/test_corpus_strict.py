"""Every real file of the upstream corpus passes `planc check --strict`, or is one whose
producer's runtime gets it wrong, listed below with the rules it breaks and why.

The corpus is read where `PLANC_CORPUS` points (or `../shared/corpus`); without it the test
is skipped with that reason. Files that are no plan of any format (a JSON Schema) are left
out."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends import make_options
from compiler.checking import check_file
from tests.conftest import corpus_root

# Files that real runtimes refuse, hang on or get wrong: the rules planc reports, and why.
KNOWN_DEFECTS = {
    "mscclpp/dsl/ut_switch_reduce_test.json": (
        {"mscclpp.operation-table"},
        "the DSL emits 'glre', which the executor's operation table does not have (SOURCES.md)"),
    "mscclpp/draft/allreduce_packet2.json": (
        {"mscclpp.out-of-range", "mscclpp.deadlock", "mscclpp.race"},
        "packets into scratch sized for protocol Simple: the writes run past the scratch"),
    "mscclpp/draft/language_tests_allgather.json": (
        {"mscclpp.in-flight-at-end", "mscclpp.peer-start"},
        "puts with no signal, and no nop after the wait"),
    "mscclpp/draft/pipeline.json": (
        {"mscclpp.peer-start"}, "puts right after a wait, with no nop: a race"),
    "mscclpp/executor-tests__execution-plans__reduce_tbg.json": (
        {"mscclpp.tbg-race"},
        "each block of a thread-block group copies a different slice and waits only for its "
        "own peer block; the executor never synchronises a group's blocks, so a real race "
        "that timing hides (a warning naming the missing edge)"),
    # A chunk count of 0: the executor's checkMessageSize takes the message size modulo it
    # when it loads the plan (reference mscclpp.md §4.6 #10).
    "mscclpp/execution-files__allreduce_pipeline.json": ({"mscclpp.zero-chunks"}, "§4.6 #10"),
    "mscclpp/draft/allreduce_nvls_2.json": ({"mscclpp.zero-chunks"}, "§4.6 #10"),
    "mscclpp/dsl/ut_barrier_test.json": ({"mscclpp.zero-chunks"}, "§4.6 #10"),
    "mscclpp/dsl/ut_get_get_fuse_test.json": (
        {"mscclpp.zero-chunks", "mscclpp.replay"},
        "§4.6 #10; also the executor's swapped get offsets (§4.6 #1) write the input of an "
        "out-of-place collective"),
}


def _corpus_files() -> list:
    root = corpus_root()
    files = sorted(p for p in root.rglob("*.json") if not p.name.endswith(".schema.json")) \
        if root.is_dir() else []
    if not files:
        return [pytest.param(None, id="no-corpus", marks=pytest.mark.skip(
            reason=f"upstream corpus not found at {root} (set PLANC_CORPUS to its path)"))]
    return [pytest.param(p, id=str(p.relative_to(root))) for p in files]


@pytest.mark.parametrize("path", _corpus_files())
def test_every_real_file_passes_strict_check_or_is_a_known_defect(path: Path):
    report = check_file(str(path), make_options("check", strict=True))
    name = str(path.relative_to(corpus_root()))
    if name not in KNOWN_DEFECTS:
        assert report.ok, [str(f) for f in report.findings]
        assert report.format is not None and not report.findings
        return
    rules, _why = KNOWN_DEFECTS[name]
    assert not report.ok and {f.rule for f in report.findings} == rules, \
        [str(f) for f in report.findings]


def test_the_known_defects_are_in_the_corpus():
    root = corpus_root()
    if not root.is_dir():
        pytest.skip(f"upstream corpus not found at {root} (set PLANC_CORPUS to its path)")
    assert all((root / name).is_file() for name in KNOWN_DEFECTS)
