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
