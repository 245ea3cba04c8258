"""The planc command line: targets, pipelines, check/simulate, and failure behaviour."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.ark.fixtures import small_model_doc
from tests.conftest import EXAMPLES, write_json


@pytest.fixture
def model(tmp_path):
    return write_json(tmp_path / "m.json", small_model_doc())


@pytest.fixture
def bad_model(tmp_path):
    doc = small_model_doc()
    doc["Nodes"][0]["Op"]["ReadTensors"][0]["Shape"] = [4, 8, 1, 1, 1]
    return write_json(tmp_path / "bad.json", doc)


def test_default_target_prints_ir(planc, model):
    result = planc(model)
    assert result.code == 0
    assert "ark.model rank 0 of 1" in result.out and "ark.matmul" in result.out


def test_ark_model_target_writes_the_model(planc, model, tmp_path):
    out = tmp_path / "out.json"
    assert planc(model, "--target", "ark-model", "-o", out).code == 0
    assert json.loads(out.read_text()) == small_model_doc()


def test_unknown_target_lists_known_ones(planc, model):
    result = planc(model, "--target", "cuda-xyz")
    assert result.code == 1
    from backends import TARGETS

    known = ", ".join(t.name for t in TARGETS)
    assert result.err == (f"planc: error: unknown target 'cuda-xyz': did you mean cuda? (known "
                          f"targets: {known})\n")
    assert {"mlir", "ark-model", "ark", "tt", "tt-metal", "gemini", "gemini-layers",
            "mscclpp", "cpu", "cuda"} <= {t.name for t in TARGETS}


def test_bad_input_error_names_file_and_path(planc, bad_model):
    result = planc(bad_model, "--target", "ark-model")
    assert result.code == 1
    assert result.err == (f"planc: error: {bad_model}: $.Nodes[0].Op.ReadTensors[0].Shape: "
                          "expected 1 to 4 integers, got 5\n")
    assert result.out == ""


def test_failure_leaves_no_output_and_keeps_existing_file(planc, bad_model, tmp_path):
    fresh = tmp_path / "fresh.json"
    assert planc(bad_model, "-t", "ark-model", "-o", fresh).code == 1
    assert not fresh.exists()
    existing = tmp_path / "existing.json"
    existing.write_text("precious")
    assert planc(bad_model, "-t", "ark-model", "-o", existing).code == 1
    assert existing.read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "existing.json"]


def test_malformed_json(planc, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"Rank": 0,\n "Nodes": [}\n')
    result = planc(path)
    assert result.code == 1
    assert result.err.startswith(f"planc: error: {path}: invalid JSON at line 2 column 12:")


def test_duplicate_keys_are_rejected(planc, tmp_path):
    path = tmp_path / "dup.json"
    path.write_text('{"Rank": 0, "Rank": 1, "WorldSize": 1, "Nodes": []}')
    assert planc(path).err == f"planc: error: {path}: $.Rank: invalid JSON: duplicate key 'Rank'\n"


def test_undetectable_format(planc, tmp_path):
    path = write_json(tmp_path / "x.json", {"hello": 1})
    result = planc(path)
    assert result.code == 1
    assert "$: cannot tell the format of this document" in result.err


def test_missing_input_file(planc, tmp_path):
    result = planc(tmp_path / "nope.json")
    assert result.err == f"planc: error: {tmp_path / 'nope.json'}: no such file\n"


def test_pipeline_and_print_ir_after_all(planc, model):
    result = planc(model, "--pipeline", "ark-compress{renumber=false}", "--print-ir-after-all")
    assert result.code == 0
    assert "// -----// IR Dump After ark-compress //----- //" in result.err
    assert "ark.model" in result.err


def test_pipeline_errors(planc, model):
    assert "unknown pass 'nope'" in planc(model, "--pipeline", "nope").err
    result = planc(model, "--pipeline", "ark-compress{bogus=1}")
    assert result.code == 1 and result.err.startswith("planc: error: --pipeline:")


def test_check_ok_and_json(planc, model):
    result = planc("check", model)
    assert result.code == 0
    assert result.out == (f"{model}: ok: ark-model (rank 0 of 1, 3 nodes, 3 operators, "
                          "8 tensors, 5 buffers)\n")
    report = planc("check", model, "--json").json()
    assert report["ok"] is True and report["format"] == "ark-model"


def test_check_invalid(planc, bad_model):
    result = planc("check", bad_model, "--json")
    assert result.code == 1
    report = result.json()
    assert report["ok"] is False and report["errors"] == 1
    assert report["findings"] == [{
        "file": str(bad_model), "path": "$.Nodes[0].Op.ReadTensors[0].Shape", "rule": "format",
        "severity": "error", "message": "expected 1 to 4 integers, got 5"}]


def test_simulate_json(planc, model):
    report = planc("simulate", model, "--json").json()
    assert report["format"] == "ark-model" and report["ok"] is True
    assert report["outputs"]["7"]["shape"] == [4, 16]


def test_mlir_input_round_trip(planc, model, tmp_path):
    ir = tmp_path / "m.mlir"
    ir.write_text(planc(model).out)
    out = tmp_path / "again.json"
    assert planc(ir, "-t", "ark-model", "-o", out).code == 0
    assert json.loads(out.read_text()) == small_model_doc()


def test_directory_output_is_refused_for_file_targets(planc, model, tmp_path):
    result = planc(model, "-t", "ark-model", "-o", tmp_path)
    assert result.code == 1 and "is a directory" in result.err


def test_help_and_version_run_as_processes():
    help_text = subprocess.run([sys.executable, "-m", "compiler.driver", "--help"],
                               capture_output=True, text=True, check=True).stdout
    assert "targets:" in help_text and "ark-model" in help_text
    # --help must not pull in xDSL: start-up stays instant however large the toolchain grows.
    probe = ("import sys; sys.argv=['planc','--help']\n"
             "import compiler.driver as d\n"
             "try: d.main()\n"
             "except SystemExit: pass\n"
             "print('xdsl' in sys.modules)")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True).stdout.strip().splitlines()[-1]
    assert loaded == "False"


def test_examples_compile_from_the_readme(planc, tmp_path):
    out = tmp_path / "ffn.json"
    assert planc(EXAMPLES / "ffn.json", "--target", "ark-model", "-o", out).code == 0
    assert out.read_text() == (EXAMPLES / "ffn.json").read_text()


def test_empty_documents_survive_ir_text(planc, tmp_path):
    # An empty body prints as `{}`, which MLIR parses to a region with no block.
    for doc, target in (({"Rank": 0, "WorldSize": 1, "Nodes": []}, "ark-model"),
                        ({"Rank": 0, "WorldSize": 1, "NumProcessors": 1,
                          "NumWarpsPerProcessor": 1, "TaskInfos": [], "ProcessorGroups": []},
                         "ark")):
        path = write_json(tmp_path / "d.json", doc)
        ir = tmp_path / "d.mlir"
        ir.write_text(planc(path).out)
        out = tmp_path / "d.out.json"
        assert planc(ir, "-t", target, "-o", out).code == 0
        assert json.loads(out.read_text()) == doc


def test_verbose_logs_every_pass_and_step(planc, model, tmp_path):
    result = planc(model, "--target", "tt", "-o", tmp_path / "p.json", "-v")
    assert result.code == 0, result.err
    passes = [line.split()[2].rstrip(":") for line in result.err.splitlines()
              if line.startswith("planc: pass ")]
    from backends import make_options, target_named

    spec = target_named("tt").load().pipeline("ark-model", make_options("tt"))
    assert passes == [p.split("{")[0] for p in spec.split(",")]
    assert "planc: load " in result.err and " emit " in result.err
    quiet = planc(model, "--target", "tt", "-o", tmp_path / "q.json")
    assert quiet.code == 0 and quiet.err == "" and quiet.out == ""


def test_compile_json_summary(planc, model, tmp_path):
    result = planc(model, "--target", "ark", "-o", tmp_path / "p.json", "--json", "-q")
    summary = json.loads(result.out)
    assert summary["ok"] and summary["bytes"] == (tmp_path / "p.json").stat().st_size
    assert [p["name"] for p in summary["passes"]] and set(summary["seconds"]) == {
        "load", "pipeline", "emit", "write"}
    refused = planc(model, "--target", "ark", "--json")
    assert refused.code == 1 and "give the output with -o" in refused.err


def test_json_errors_are_objects(planc, bad_model):
    result = planc("simulate", bad_model, "--json")
    assert result.code == 1 and result.err.count("\n") == 1
    (error,) = json.loads(result.out)["errors"]
    assert error["file"] == str(bad_model) and error["path"].startswith("$.")
    assert error["message"] in result.err


@pytest.mark.parametrize("flags, verified", [((), 1), (("--verify-each",), "all")])
def test_verification_after_the_last_pass_or_each(planc, model, tmp_path, monkeypatch, flags,
                                                   verified):
    import dialects.locations as locations

    calls = []
    real = locations.verify_module
    monkeypatch.setattr(locations, "verify_module", lambda m: calls.append(1) or real(m))
    result = planc(model, "--target", "tt", "-o", tmp_path / "p.json", "--json", *flags)
    passes = len(json.loads(result.out)["passes"])
    assert passes > 1
    # One more call: the input is verified when it is loaded.
    assert len(calls) == 1 + (passes if verified == "all" else verified)


def test_verbose_twice_in_one_process(model, tmp_path, capsys):
    """`-v` in a second in-process run, after the first run's stderr was closed: setting the
    log stream flushed the closed one (an internal error in the next test using -v)."""
    from compiler.driver import main

    old = open(tmp_path / "stderr.txt", "w")  # noqa: SIM115 -- closed below, as pytest's is
    sys_stderr = sys.stderr
    sys.stderr = old
    try:
        assert main([str(model), "-t", "tt", "-o", str(tmp_path / "a.json"), "-v"]) == 0
    finally:
        sys.stderr = sys_stderr
    old.close()
    assert main([str(model), "-t", "tt", "-o", str(tmp_path / "b.json"), "-v"]) == 0
    assert "planc: load " in capsys.readouterr().err
