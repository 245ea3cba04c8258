"""planc tune: the same best on local workers and on Ray, never worse than planc's default,
verified, resumable, and equal to a brute force over the command line."""

from __future__ import annotations

import sqlite3
import time

import pytest

from compiler import api
from compiler.tune import TuneOptions, tune
from compiler.tune_evaluate import Job
from compiler.tune_search import RayExecutor
from compiler.tune_space import parse_space, space_for
from ground.diagnostics import PlancError
from tests.conftest import EXAMPLES

# A small ARK space: 2 planners x 2 granularities x 2 split-K, the other passes as planc's.
SMALL = ("planner=planc,ark-default; sched-partition.granularity=1,2; "
         "sched-partition.split_k=true,false; sched-fuse.elementwise=true; "
         "sched-fuse.epilogue=true; sched-fuse.rows=true; sched-partition.concurrency=auto; "
         "sched-allocate.reuse=true")


def run(tmp_path, name, model=EXAMPLES / "ffn.json", **overrides):
    options = TuneOptions(target="ark", models=[str(model)], archs=["a100"],
                          out=tmp_path / name, space=SMALL, budget=64, progress=False)
    for key, value in overrides.items():
        setattr(options, key, value)
    (result,) = tune(options)
    return result


def test_space_declares_plancs_decision_first():
    space = space_for("ark", SMALL)
    assert space.size == 8
    candidates = list(space.all())
    assert candidates[0] == space.default() and candidates[0]["planner"] == "planc"
    # ark-default has no pass options: its variants are one candidate.
    assert len(candidates) == 5
    assert parse_space("a=1,x; b=true,none") == {"a": (1, "x"), "b": (True, None)}


@pytest.fixture(scope="module")
def local(tmp_path_factory, small_ffn):
    """On the small ffn of tests/conftest.py: the same candidates, a fraction of the work.
    Built once per xdist worker: the tests using it share the group "tune-local"."""
    return run(tmp_path_factory.mktemp("tune"), "local", small_ffn, workers=2,
               strategy="exhaustive")


@pytest.mark.xdist_group("tune-local")
def test_exhaustive_on_two_workers_finds_a_verified_best_no_worse_than_default(local):
    assert len(local.rows) == 5 and all(r["status"] == "scored" for r in local.rows)
    assert local.default is not None and local.best is not None
    assert local.best["modeled_time_s"] <= local.default["modeled_time_s"]
    assert local.best["modeled_time_s"] == min(r["modeled_time_s"] for r in local.rows)
    # The written best passes the checks on its own (a second look, not the tuner's word).
    assert api.check(local.best_file, strict=True).ok
    simulated = api.simulate(local.best_file)
    assert simulated.ok
    assert simulated["modeled_time_s"] == pytest.approx(local.best["modeled_time_s"])


@pytest.mark.slow
@pytest.mark.xdist_group("tune-local")
def test_ray_local_mode_finds_the_same_best(local, small_ffn, tmp_path):
    """Ray scores every candidate as the local pool does, and its best ties the pool's. On the
    small ffn two granularities model the same time and bytes, and which of them is `best`
    follows the order results arrive in (the local pool's and Ray's differ), so the best is
    compared by its figures."""
    pytest.importorskip("ray", reason="Ray is the planc[ray] extra")
    on_ray = run(tmp_path, "ray", small_ffn, workers=2, ray="local", strategy="exhaustive",
                 ray_stall_s=120.0)
    assert {r["key"]: r["modeled_time_s"] for r in on_ray.rows} == {
        r["key"]: r["modeled_time_s"] for r in local.rows}
    assert len(on_ray.rows) == 5 and on_ray.best is not None
    figures = ("modeled_time_s", "device_bytes")
    assert [on_ray.best[f] for f in figures] == [local.best[f] for f in figures]
    assert api.check(on_ray.best_file, strict=True).ok
    import ray

    assert not ray.is_initialized()     # the Ray tune started is stopped again


def test_an_interrupted_study_resumes(tmp_path, small_ffn):
    first = run(tmp_path, "resume", small_ffn, budget=2, strategy="random", verify=0)
    assert len(first.rows) == 2
    again = run(tmp_path, "resume", small_ffn, budget=4, strategy="random", verify=1)
    assert len(again.rows) == 4
    assert [r["key"] for r in again.rows[:2]] == [r["key"] for r in first.rows]
    assert [r["eval_s"] for r in again.rows[:2]] == [r["eval_s"] for r in first.rows]
    db = sqlite3.connect(tmp_path / "resume" / "tune.sqlite")
    assert db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0] == 4


@pytest.mark.slow
def test_tpe_strategy_runs_within_its_budget(tmp_path, small_ffn):
    pytest.importorskip("optuna", reason="the tpe strategy is the planc[tune] extra")
    result = tune(TuneOptions(target="tt", models=[str(small_ffn)], archs=[None],
                              out=tmp_path / "tpe", budget=6, strategy="tpe", verify=1,
                              progress=False))[0]
    assert len(result.rows) == 6 and result.best is not None
    assert result.best["modeled_time_s"] <= result.default["modeled_time_s"]


@pytest.mark.slow
def test_tt_best_equals_a_brute_force_over_the_command_line(planc, tmp_path, small_ffn):
    """On the small ffn, whose four candidates model four different times (as the full one's
    do, with the same best: 4x4 row-major)."""
    grids, partitions = ("2x2", "4x4"), ("row_major", "block")
    result = tune(TuneOptions(target="tt", models=[str(small_ffn)], archs=[None],
                              out=tmp_path / "tt", budget=10, verify=1, progress=False,
                              space=f"grid={','.join(grids)}; partition={','.join(partitions)}"
                              ))[0]
    times = {}
    for grid in grids:
        for partition in partitions:
            plan = tmp_path / f"{grid}-{partition}.json"
            assert planc(small_ffn, "-t", "tt", "--grid", grid, "--partition",
                         partition, "-o", plan).code == 0
            times[grid, partition] = planc("simulate", plan, "--cost-only", "--json"
                                           ).json()["modeled_time_s"]
    assert len(set(times.values())) == len(times)     # no ties: the best is one candidate
    assert result.best["modeled_time_s"] == pytest.approx(min(times.values()))
    best = result.best["decisions"]
    assert times[best["grid"], best["partition"]] == pytest.approx(min(times.values()))


def test_cli_report_and_picture(planc, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "cli"
    result = planc("tune", EXAMPLES / "ffn.json", "-t", "gemini", "--budget", "3", "--space",
                   "mesh=1x1,2x2; buffer_size=8388608", "-o", out, "-q")
    assert result.code == 0, result.err
    assert "planc's default" in result.out and (out / "best.json").exists()
    report = planc("tune", "--report", out, "--plot", tmp_path / "front.png")
    assert report.code == 0 and "1." in report.out and "[verified]" in report.out
    assert (tmp_path / "front.png").stat().st_size > 10_000


def test_explored_and_fixed_options_are_checked(planc, tmp_path):
    result = planc("tune", "-t", "mscclpp", "--mesh", "2x2", "-o", tmp_path / "x")
    assert result.code == 1 and "--mesh is not an option of --target mscclpp" in result.err
    result = planc("tune", EXAMPLES / "ffn.json", "-t", "ark-model", "-o", tmp_path / "y")
    assert result.code == 1 and "planc tune explores --target" in result.err


class StandInRay:
    """Ray's `wait`, `get` and `cancel`, and a remote function, over tasks that finish at once
    except the copies listed in `lost` (by submission number), whose results never come."""

    def __init__(self, lost=(), eval_s=0.5):
        self.lost, self.eval_s = set(lost), eval_s
        self.submitted, self.cancelled, self.waits = [], [], []

    def remote(self, job):
        self.submitted.append(job)
        return len(self.submitted) - 1

    def wait(self, refs, num_returns, timeout):
        self.waits.append(timeout)
        ready = [r for r in refs if r not in self.lost][:num_returns]
        if not ready:
            time.sleep(timeout)     # what ray.wait does when nothing finishes in time
        return ready, [r for r in refs if r not in ready]

    def get(self, ref):
        assert ref not in self.lost
        return {"key": self.submitted[ref].key, "eval_s": self.eval_s}

    def cancel(self, ref):
        self.cancelled.append(ref)


def jobs(n):
    return [Job(None, "ark", "a100", {"planner": "planc", "sched-partition.granularity": g}, {})
            for g in range(1, n + 1)]


def test_a_ray_result_that_never_comes_is_an_error_not_a_hang():
    ray = StandInRay(lost={1, 3})      # the second candidate's task and its second copy
    executor = RayExecutor.over(ray, ray, stall_s=0.01)
    done = []
    with pytest.raises(PlancError, match="Ray returned no result for 0.01 s, after submitting "
                                         "the 1 outstanding candidate"):
        for _job, row in executor.run(jobs(3)):
            done.append(row["key"])
    assert len(done) == 2 and ray.submitted[3] is ray.submitted[1]   # retried once, then out


def test_a_lost_ray_result_is_computed_again():
    ray = StandInRay(lost={0})
    executor = RayExecutor.over(ray, ray, stall_s=0.01)
    keys = [row["key"] for _, row in executor.run(jobs(2))]
    assert sorted(keys) == sorted(j.key for j in jobs(2))
    assert ray.submitted[2] is ray.submitted[0] and ray.cancelled == [0]


def test_the_ray_stall_bound_follows_the_slowest_evaluation():
    ray = StandInRay(eval_s=30.0)
    executor = RayExecutor.over(ray, ray)
    assert executor.stall_bound() == RayExecutor.FIRST_RESULT_S
    list(executor.run(jobs(2)))
    assert ray.waits == [RayExecutor.FIRST_RESULT_S, 300.0]
    assert executor.stall_bound() == 10 * 30.0
    ray.eval_s = 0.001      # never below the floor, never shrinking
    list(executor.run(jobs(1)))
    assert executor.stall_bound() == 300.0
    assert RayExecutor.over(ray, ray, stall_s=5).stall_bound() == 5
    with pytest.raises(Exception, match="must be positive"):
        RayExecutor.over(ray, ray, stall_s=0)
