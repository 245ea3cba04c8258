"""A fixed-seed slice of bench/fuzz.py: mutants of real and shipped documents of every format
never end in an internal error, a time-out or a memory failure (bench/README.md has the large
runs)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("fuzz", ROOT / "bench" / "fuzz.py")
fuzz = importlib.util.module_from_spec(spec)
sys.modules["fuzz"] = fuzz      # its dataclasses look their module up while being defined
spec.loader.exec_module(fuzz)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2))
def test_mutants_end_cleanly(seed):
    """Run in this process (`--in-process`: a CPU-time alarm per run, one memory limit for
    the campaign): the same mutants, commands and verdicts as the forked runner at half the
    CPU (a fork of the test process costs ~0.1 CPU s a run); the limit is put back after.
    `test_forked_mutants_end_cleanly` is the real-process sample."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_AS)
    try:
        failures = fuzz.fuzz(mutants=6, seed=100 + seed, lower=seed % 2 == 1, timeout=60,
                             memory_gb=3, report=lambda _: None, in_process=True)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, limit)
    assert not failures, [(f.args, f.code, f.why, f.stderr) for f in failures[:3]]


@pytest.mark.skipif(not hasattr(fuzz.os, "fork"), reason="the forked runner needs POSIX fork")
def test_forked_mutants_end_cleanly():
    """The real-process sample: an ONNX and an MLIR mutant (the formats read by C
    extensions and by xDSL's printer of diagnostics) through every command, each in a
    forked child with its own CPU and memory limits and its own file descriptors, where a
    crash, a signal or output written past sys.stderr would show."""
    failures = fuzz.fuzz(mutants=1, seed=102, lower=True, timeout=60, memory_gb=3,
                         report=lambda _: None, fork=True, formats={"onnx", "mlir"})
    assert not failures, [(f.args, f.code, f.why, f.stderr) for f in failures[:3]]


@pytest.mark.parametrize("fmt, mutator, kinds", [
    ("onnx", "mutate_onnx", "ONNX_KINDS"), ("mlir", "mutate_mlir", "MLIR_KINDS")])
def test_onnx_and_mlir_mutations_change_the_input(tmp_path, fmt, mutator, kinds):
    """Every kind of mutation is drawn, and nearly every mutant differs from its seed."""
    import random

    if fmt == "onnx":
        pytest.importorskip("onnx", reason="ONNX mutants need the onnx package")
        data = fuzz._mlp().SerializeToString()
    else:
        out = tmp_path / "m.mlir"
        assert fuzz._quiet_planc([str(ROOT / "examples" / "ffn.json"), "-t", "mlir", "-o",
                                  str(out)]) == 0
        data = out.read_bytes()
    rng = random.Random(0)
    mutants = [getattr(fuzz, mutator)(data, rng) for _ in range(200)]
    assert {kind for _, kind in mutants} == set(getattr(fuzz, kinds))
    assert sum(m != data for m, _ in mutants) >= 180


def test_the_verdicts():
    assert fuzz.verdict(["check", "m"], 0, "") is None
    assert fuzz.verdict(["check", "m"], 1, "planc: error: a\nplanc: warning: b\n") is None
    assert fuzz.verdict(["m", "-t", "ark"], 1, "planc: error: a\nplanc: error: b\n") == \
        "not one line"
    assert fuzz.verdict(["m", "-t", "ark"], 1, "Traceback (most recent call last):\n") == \
        "internal"
    assert fuzz.verdict(["planc-opt", "m"], 1, "planc-opt: error: x\n") is None
    assert fuzz.verdict(["m"], 2, "planc: internal error: X\n") == "internal"
    assert fuzz.verdict(["m"], 3, "planc: error: out of memory\n") == "memory"
    assert fuzz.verdict(["m"], None, "") == "hang"


def test_the_workspace_sees_damage(tmp_path):
    """The fuzzer's own check for damaged files can fail: a failing run that changed the
    user's file, or a file left in the output directory, is reported."""
    work = fuzz.Workspace(tmp_path)
    mutant = tmp_path / "m.json"
    mutant.write_bytes(b"{}")
    names = work.prepare()
    assert work.damage(1, mutant, b"{}") is None
    Path(names["o"]).write_text("changed")
    assert work.damage(0, mutant, b"{}") is None            # a successful run may write it
    assert work.damage(1, mutant, b"{}") == "failing run changed out.json"
    work.prepare()
    (Path(names["d"]) / ".x.tmp").write_text("")
    assert work.damage(0, mutant, b"{}") == "temporary file left"
    work.prepare()
    assert work.damage(0, mutant, b"{ }") == "input changed"


def test_in_process_runs_report_codes_messages_and_time_outs(monkeypatch):
    ok = fuzz.run_in_process(["check", str(ROOT / "examples" / "ffn.json")], 60, 0)
    assert ok == (0, "")
    missing = fuzz.run_in_process(["check", "/nonexistent.json"], 60, 0)
    assert missing[0] == 1 and "no such file" in missing[1]
    assert fuzz.run_in_process(["planc-opt", "--bogus"], 60, 0)[0] == 1

    def endless(args):
        while True:
            pass

    monkeypatch.setattr(fuzz, "_dispatch", endless)
    assert fuzz.run_in_process(["check"], 0.2, 0)[0] is None


def test_mutations_change_the_document():
    import json
    import random

    doc = json.loads((ROOT / "examples" / "ffn.json").read_text())
    text = json.dumps(doc)
    rng = random.Random(0)
    assert sum(fuzz.mutate(doc, text, rng) != text for _ in range(20)) >= 18


@pytest.mark.skipif(not hasattr(fuzz.os, "fork"), reason="the forked runner needs POSIX fork")
def test_forked_runner_reports_codes_and_messages(tmp_path):
    ok = fuzz.run_forked(["check", str(ROOT / "examples" / "ffn.json")], 60, 3 << 30)
    assert ok == (0, "")            # stderr only, as the other runners: stdout is the result
    missing = fuzz.run_forked(["check", str(tmp_path / "none.json")], 60, 3 << 30)
    assert missing[0] == 1 and "no such file" in missing[1]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["model", "plan", "tt", "mscclpp", "gemini"])
def test_importers_never_accept_what_the_schema_refuses(kind):
    """The schema and the importers judge structure two ways: on mutants, a document the schema
    refuses must be refused by the importer and verifiers too (never accepted, never a crash),
    since scripts and planc-opt may call importers directly. Run over 800 mutants per format,
    the same comparison found an ARK plan importer that crashed on a list where a result's Id
    belongs (and planc-opt skipping the schema)."""
    import random

    from xdsl.utils.exceptions import VerifyException

    from dialects.locations import verify_module
    from frontends import detect_format
    from frontends.schemas import validate
    from ground.diagnostics import PlancError
    from ground.json_reader import parse_json

    files = fuzz.seeds().get(kind)
    if not files:
        pytest.skip(f"no seed documents for {kind} (the corpus is absent)")
    rng = random.Random(7)
    refused = 0
    read = {}                              # mutate leaves its document as it was
    for _ in range(40):
        source = rng.choice(files)
        if source not in read:
            text = source.read_text()
            read[source] = text, json.loads(text)
        text, value = read[source]
        try:
            doc = parse_json(fuzz.mutate(value, text, rng))
        except PlancError:
            continue                       # the reader's refusal: tested elsewhere
        fmt = detect_format(doc.value)
        if fmt is None:
            continue
        try:
            validate(fmt.schema, doc.value)
            continue
        except PlancError:
            refused += 1
        with pytest.raises((PlancError, VerifyException)):
            verify_module(fmt.import_document(doc))
    assert refused >= 5                    # the slice exercised the comparison


def test_a_parse_errors_caret_snippet_is_not_a_second_error():
    verdict = fuzz.verdict
    snippet = "planc-opt: error: m.mlir:1:3: '}' expected\n  ark.x {\n    ^\n"
    assert verdict(["planc-opt", "m.mlir"], 1, snippet) is None
    assert verdict(["planc-opt", "m.mlir"], 1, snippet.replace("^", "x")) == "not one line"
    assert verdict(["check", "m.json"], 1, snippet) == "not one line"   # planc: one line
