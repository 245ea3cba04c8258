"""planc-opt behaves like an xdsl-opt for planc: one-line errors, planc's passes and targets
only, and planc's flag spellings accepted next to xDSL's."""

from __future__ import annotations

import pytest

from compiler.opt import PlancOptMain, run
from passes import get_all_passes


@pytest.fixture
def ffn_ir(tmp_path, planc):
    from tests.conftest import EXAMPLES

    path = tmp_path / "ffn.mlir"
    path.write_text(planc(EXAMPLES / "ffn.json").out)
    return path


def one_line_error(code, err, expected):
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("planc-opt: error: "), err
    assert expected in err, err


def test_parse_error_names_line_and_column(opt, tmp_path):
    """The first line names where; xDSL's snippet with its caret follows (as in xdsl-opt)."""
    bad = tmp_path / "bad.mlir"
    bad.write_text('builtin.module {\n  %0 = "foo"(\n}\n')
    code, _, err = opt(bad)
    assert code == 1 and err.startswith(f"planc-opt: error: {bad}:") and "^" in err


def test_missing_file(opt, tmp_path):
    code, _, err = opt(tmp_path / "none.mlir")
    one_line_error(code, err, "cannot read: No such file or directory")


@pytest.mark.parametrize("spec, expected", [
    ("nope", "unknown pass 'nope'"),
    ("ark-compress{bogus=1}", "pass ark-compress has no option 'bogus'"),
    ("ark-compress{", "Error parsing pass pipeline specification"),
])
def test_bad_pipelines(opt, ffn_ir, spec, expected):
    code, _, err = opt(ffn_ir, "-p", spec)
    one_line_error(code, err, expected)


def test_verifier_error(opt, tmp_path):
    bad = tmp_path / "v.mlir"
    bad.write_text('"builtin.module"() ({\n  "ark.model"() : () -> ()\n}) : () -> ()\n')
    code, _, err = opt(bad)
    one_line_error(code, err, f"{bad}:2:3: 'ark.model' op: Expected 1 region")


def test_only_plancs_passes_and_targets(ffn_ir):
    tool = PlancOptMain(args=[str(ffn_ir)])
    assert sorted(tool.available_passes) == sorted(get_all_passes())
    assert "mlir" in tool.available_targets and "ark" in tool.available_targets
    assert "llvm" not in tool.available_targets


def test_unknown_target_is_a_usage_error(opt, ffn_ir, capsys):
    with pytest.raises(SystemExit) as exit_:
        run([str(ffn_ir), "-t", "llvm"])
    err = capsys.readouterr().err
    assert exit_.value.code == 1 and "invalid choice: 'llvm'" in err and err.count("\n") == 1


def test_planc_spellings_are_aliases(opt, ffn_ir):
    code, xdsl_out, _ = opt(ffn_ir, "-p", "ark-compress", "--print-op-generic")
    assert code == 0 and '"ark.model"' in xdsl_out
    code, planc_out, _ = opt(ffn_ir, "--pipeline", "ark-compress", "--generic")
    assert code == 0 and planc_out == xdsl_out


def test_json_inputs_pass_the_schema(opt, tmp_path):
    """planc-opt reads JSON through the same schema as planc: a list where a tensor Id belongs
    crashed the ARK plan importer's fast path (TypeError: unhashable type) when the schema was
    skipped; with it, one line names the path."""
    import json

    from tests.conftest import ROOT

    doc = json.loads((ROOT / "tests" / "filecheck" / "plan" / "Inputs" /
                      "small_plan.json").read_text())
    doc["TaskInfos"][0]["Ops"][0]["ResultTensors"][0]["Id"] = [1]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    code, _, err = opt(bad)
    one_line_error(code, err, "$.TaskInfos[0].Ops[0].ResultTensors[0].Id: expected an integer")
