"""Progress lines: drawn on a terminal only, silenced by -q, naming the stage that runs."""

from __future__ import annotations

import pytest

from ground import progress


@pytest.fixture
def terminal(monkeypatch):
    """stderr counts as a terminal (pytest captures it, so it is not one)."""
    monkeypatch.setattr(progress, "enabled", lambda: not progress.QUIET)
    monkeypatch.setattr(progress, "QUIET", False)


def run_stages(**kwargs) -> None:
    with progress.Stages(2, "pipeline", **kwargs) as stages:
        stages.start("sched-tile")
        stages.done()
        stages.start("sched-fuse")
        stages.done()


def test_stages_name_the_running_pass(terminal, capsys):
    run_stages(delay=0.0)
    err = capsys.readouterr().err
    assert "planc: pipeline: sched-tile [0/2]" in err and "sched-fuse [1/2]" in err, err


def test_quiet_draws_nothing(terminal, capsys, monkeypatch):
    monkeypatch.setattr(progress, "QUIET", True)
    run_stages(delay=0.0)
    assert list(progress.progress(range(3), "x")) == [0, 1, 2]
    assert capsys.readouterr().err == ""


def test_pipes_draw_nothing(capsys):
    run_stages(delay=0.0)           # pytest's captured stderr is no terminal
    assert capsys.readouterr().err == ""


def test_command_steps_show_progress_and_time_each_step(terminal, capsys, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="planc"), \
            progress.Steps("simulate", 2, delay=0.0) as steps:
        with steps.step("load"):
            pass
        with steps.step("simulate the ark-plan"):
            pass
    err = capsys.readouterr().err
    assert "planc: simulate: load [0/2]" in err and "simulate the ark-plan [1/2]" in err, err
    logged = [r.getMessage() for r in caplog.records if r.name == "planc.simulate"]
    assert [m.split(":")[0] for m in logged] == ["load", "simulate the ark-plan"]


@pytest.mark.parametrize("command, steps", [
    ("simulate", ["load", "simulate the ark-plan"]),
    ("check", ["check"]),
])
def test_verbose_names_every_step_of_a_command(planc, small_ffn, tmp_path, command, steps):
    plan = tmp_path / "p.json"
    assert planc(small_ffn, "-t", "ark", "-o", plan).code == 0
    extra = ["--cost-only"] if command == "simulate" else []
    result = planc(command, plan, "-v", *extra)
    assert result.code == 0, result.err
    named = [line.split(": ")[1] for line in result.err.splitlines()
             if line.startswith("planc: ") and line.endswith(" s")]
    assert named == steps, result.err


def test_planc_run_names_its_steps_with_v(planc, small_ffn, tmp_path):
    """`planc run -v` printed nothing, even while a plan ran tile by tile."""
    import numpy as np

    from compiler.api import load
    from targets.ark.model_interpreter import run_model

    run = run_model(load(small_ffn).ops.first)
    values = tmp_path / "in.npz"
    rng = np.random.default_rng(0)
    np.savez(values, **{f"t{t}": rng.random(run.types[t].shape_list).astype(np.float16)
                        for t in run.inputs})
    result = planc("run", small_ffn, "--inputs", values, "-o", tmp_path / "out.npz", "-v")
    assert result.code == 0, result.err
    named = [line.split(": ")[1] for line in result.err.splitlines()
             if line.startswith("planc: ") and line.endswith(" s")]
    assert named == ["load", "run the ark-model", "write"], result.err



def test_planc_run_says_how_to_feed_a_model_not_lowered_from_onnx(planc, small_ffn, tmp_path):
    """The hint named only `--weights MODEL.onnx`, which a hand-written model has none of."""
    import numpy as np

    values = tmp_path / "in.npz"
    np.savez(values, t0=np.zeros((1, 128, 256), np.float16))
    result = planc("run", small_ffn, "--inputs", values)
    assert result.code == 1 and result.err.count("\n") == 1
    assert result.err.endswith("(give them in --inputs, named t<id> by tensor id)\n"), result.err
