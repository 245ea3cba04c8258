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
