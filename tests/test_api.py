"""The Python API (`compiler.api`, re-exported by `compiler`) does what the command line does."""

from __future__ import annotations

import subprocess
import sys

import pytest

import compiler as planc
from backends import options_type
from backends.mlir import print_module
from ground.diagnostics import PlancError
from tests.conftest import EXAMPLES, ROOT, write_json


def test_compile_writes_what_the_command_line_writes(planc_cli, tmp_path):
    cli = tmp_path / "cli.json"
    assert planc_cli(EXAMPLES / "ffn.json", "-t", "ark", "--arch", "h100", "-o", cli).code == 0
    text = planc.compile(EXAMPLES / "ffn.json", "ark", arch="h100")
    assert text == cli.read_text()


def test_compile_leaves_its_module_alone(tmp_path):
    model = planc.load(EXAMPLES / "ffn.json")
    before = print_module(model)
    files = planc.compile(model, "cpu", output=tmp_path / "prog")
    assert print_module(model) == before
    assert (tmp_path / "prog" / "plan.cpp").read_text() == files["plan.cpp"]


def test_options_are_typed_and_scoped():
    fields = options_type("gemini").__dataclass_fields__
    assert set(fields) == {"mesh", "buffer_size", "dram_bw", "l2_budget", "batch"}
    with pytest.raises(ValueError, match="ark has no option 'mesh'"):
        planc.compile(EXAMPLES / "ffn.json", "ark", mesh="2x2")
    with pytest.raises(ValueError, match="must be one of"):
        planc.compile(EXAMPLES / "ffn.json", "ark", ark_format="newest")


def test_check_and_simulate_results(tmp_path):
    verdict = planc.check(EXAMPLES / "ffn.json")
    assert verdict.ok and verdict.format == "ark-model" and not verdict.findings
    broken = write_json(tmp_path / "broken.json", {"Nodes": [{"Id": "x"}]})
    verdict = planc.check(broken)
    assert not verdict.ok and verdict.findings[0].severity == "error"
    assert verdict.findings[0].path and verdict.findings[0].file == str(broken)
    result = planc.simulate(EXAMPLES / "ffn.json", seed=1)
    assert result.ok and result.format == "ark-model" and "outputs" in result.figures
    with pytest.raises(PlancError):
        planc.load(broken)


def test_the_api_tour_runs(tmp_path):
    run = subprocess.run([sys.executable, str(EXAMPLES / "api_tour.py"), str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("check ok, simulation ok") == 2
    assert (tmp_path / "mlp.h100.plan.json").exists()


@pytest.mark.parametrize("argv, message", [
    (["-t", "ark-model", "--mesh", "9x9"], "--mesh is not an option of --target ark-model "
                                           "(it is one of --target gemini)"),
    (["-t", "ark", "--ranks", "3"], "--ranks is not an option of --target ark"),
    (["check", "--collective", "allreduce"], "--collective is not an option of planc check"),
    (["simulate", "--mesh", "2x2"], "--mesh is not an option of planc simulate"),
])
def test_flags_are_scoped_by_target_and_command(planc_cli, argv, message):
    command, rest = (argv[:1], argv[1:]) if argv[0] in ("check", "simulate") else ([], argv)
    result = planc_cli(*command, EXAMPLES / "ffn.json", *rest)
    assert result.code == 1 and message in result.err


# ---------------------------------------------------------------------------------------------
# One exception family, verdicts, option types, readable results (issue 27)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("call, message", [
    (lambda: planc.simulate(EXAMPLES / "ffn.json", seed="x"),
     "option 'seed' of simulate must be an integer, got 'x'"),
    (lambda: planc.simulate(EXAMPLES / "ffn.json", seed=True), "must be an integer, got True"),
    (lambda: planc.check(EXAMPLES / "ffn.json", strict="yes"),
     "option 'strict' of check must be True or False"),
    (lambda: planc.compile(EXAMPLES / "ffn.json", "gemini", buffer_size="8M"),
     "option 'buffer_size' of gemini must be an integer"),
    (lambda: planc.compile(EXAMPLES / "ffn.json", "arkk"), "unknown target 'arkk': did you "
                                                          "mean ark?"),
    (lambda: planc.compile(EXAMPLES / "ffn.json", "ark", mesh="2x2"),
     "ark has no option 'mesh' (it is one of --target gemini; its options: json_layout"),
    (lambda: planc.simulate(EXAMPLES / "ffn.json", arch="h100"),
     "--arch does not apply to ark-model documents"),
    (lambda: planc.load(EXAMPLES / "ffn.json", format="ark-modl"), "did you mean ark-model?"),
    (lambda: planc.check(42), "the source must be a path or an imported module"),
    # An AttributeError ('str' object has no attribute 'ops') before.
    (lambda: planc.document_format(str(EXAMPLES / "ffn.json")),
     "document_format takes an imported module"),
])
def test_wrong_calls_raise_the_family_naming_the_option(call, message):
    with pytest.raises(planc.ArgumentError, match=message.replace("(", r"\(").replace("?", r"\?")
                       ) as raised:
        call()
    assert isinstance(raised.value, planc.UsageError) and isinstance(raised.value, PlancError)
    assert isinstance(raised.value, ValueError)      # what these were before


def test_a_misplaced_option_carries_the_command_lines_hint(planc_cli):
    with pytest.raises(planc.ArgumentError) as raised:
        planc.compile(EXAMPLES / "ffn.json", "ark", mesh="2x2")
    assert raised.value.hint == "it is one of --target gemini"
    cli = planc_cli(EXAMPLES / "ffn.json", "-t", "ark", "--mesh", "2x2")
    assert raised.value.hint in cli.err


def test_model_builder_mistakes_are_in_the_family():
    from frontends.model_builder import ModelBuilder

    m = ModelBuilder()
    with pytest.raises(planc.ArgumentError, match="do not broadcast"):
        m.add(m.tensor([2, 3]), m.tensor([4, 5]))


def test_check_is_a_verdict_and_load_raises_with_the_same_message(tmp_path):
    missing = tmp_path / "none.json"
    verdict = planc.check(missing)
    assert not verdict.ok and verdict.format is None
    (finding,) = verdict.findings
    with pytest.raises(PlancError) as raised:
        planc.load(missing)
    assert (finding.file, finding.path, finding.message) == (
        raised.value.file, raised.value.path, raised.value.message)
    assert "verdict" in planc.check.__doc__ and "raise" in planc.load.__doc__


def test_document_format_reads_well():
    fmt = planc.document_format(planc.load(EXAMPLES / "ffn.json"))
    assert "lambda" not in repr(fmt) and repr(fmt).startswith("InputFormat(name='ark-model'")


def test_simulation_result_get():
    result = planc.simulate(EXAMPLES / "ffn.json", seed=1)
    assert result.get("outputs") is result["outputs"]
    assert result.get("no such figure") is None and result.get("no such figure", 3) == 3


API_CLASSES = ("compiler.api.SimulationResult", "compiler.checking.CheckReport",
               "dialects.findings.Finding", "frontends.InputFormat",
               "ground.diagnostics.PlancError", "ground.diagnostics.UsageError",
               "ground.diagnostics.ArgumentError")


def test_the_api_page_shows_every_public_class_and_documents_its_members():
    """mkdocstrings shows a class's heading only with `show_root_heading`; griffe (what it
    reads docstrings with) must find a docstring for every public field."""
    griffe = pytest.importorskip("griffe", reason="the docs extra (mkdocstrings) reads it")
    page = (ROOT / "docs" / "api.md").read_text()
    exported = {name for name in planc.__all__ if isinstance(getattr(planc, name), type)}
    assert exported == {path.rpartition(".")[2] for path in API_CLASSES}
    loader = griffe.GriffeLoader(search_paths=[str(ROOT)])
    for path in API_CLASSES:
        assert f"::: {path}\n    options:\n      show_root_heading: true" in page, path
        module, _, name = path.rpartition(".")
        cls = loader.load(module)[name]
        assert cls.docstring is not None, path
        for member in cls.members.values():
            if member.is_attribute and not member.name.startswith("_"):
                assert member.docstring is not None, f"{path}.{member.name}"
