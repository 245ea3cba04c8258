"""planc tune: the same best on local workers and on Ray, never worse than planc's default,
verified, resumable, and equal to a brute force over the command line."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from compiler import api
from compiler.tune import TuneOptions, tune
from compiler.tune_evaluate import Job, evaluate
from compiler.tune_search import LocalExecutor, RayExecutor, ranked, run_study
from compiler.tune_space import parse_space, space_for
from compiler.tune_store import Store
from ground.diagnostics import PlancError, UsageError
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


def explored(result):
    """The candidates of a study in proposal order, with their figures."""
    return [(r["sequence"], r["key"], r["modeled_time_s"], r["device_bytes"])
            for r in sorted(result.rows, key=lambda r: r["sequence"])]


@pytest.mark.slow
@pytest.mark.xdist_group("tune-local")
def test_ray_local_mode_finds_the_same_best(local, small_ffn, tmp_path, monkeypatch):
    """Ray explores the candidates the local pool explores, in the same order, and returns
    the same best: on the small ffn two granularities model the same time and bytes, and
    the tie goes to the one proposed first whichever result arrives first. `--ray local`
    starts a Ray of its own even where RAY_ADDRESS (or /tmp/ray's latest cluster, another
    user's) names a cluster to join."""
    pytest.importorskip("ray", reason="Ray is the planc[ray] extra")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")    # (nothing listens there)
    on_ray = run(tmp_path, "ray", small_ffn, workers=2, ray="local", strategy="exhaustive",
                 ray_stall_s=120.0)
    assert explored(on_ray) == explored(local) and len(on_ray.rows) == 5
    assert on_ray.best["key"] == local.best["key"]
    assert api.check(on_ray.best_file, strict=True).ok
    import ray

    assert not ray.is_initialized()     # the Ray tune started is stopped again


@pytest.mark.slow
@pytest.mark.xdist_group("tune-local")
def test_a_two_node_ray_cluster_finds_the_same_best(local, small_ffn, tmp_path):
    """A real Ray cluster of two nodes on this machine (one CPU each), joined by address as
    `--ray ADDRESS` does: the same candidates in the same order, the same best."""
    pytest.importorskip("ray", reason="Ray is the planc[ray] extra")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1,
                                                            "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        on_cluster = run(tmp_path, "cluster", small_ffn, ray=cluster.address,
                         strategy="exhaustive", ray_stall_s=300.0)
    finally:
        cluster.shutdown()
    assert explored(on_cluster) == explored(local)
    assert on_cluster.best["key"] == local.best["key"]


class ReversedExecutor:
    """Evaluates a round in this process and hands the results back last first: the order
    in which a pool or Ray may deliver them."""

    workers = 1

    def run(self, jobs):
        yield from reversed([(job, evaluate(job)) for job in jobs])


def study(tmp_path, name, model, executor, strategy="exhaustive", space=SMALL, budget=64,
          **kwargs):
    store = Store(tmp_path / name)
    try:
        return run_study(space_for("ark", space), str(model), "a100", store=store,
                         budget=budget, strategy=strategy, objective="time",
                         executor=executor, seed=0, **kwargs)
    finally:
        store.close()


def test_the_order_results_arrive_in_changes_neither_exploration_nor_best(tmp_path, small_ffn):
    """On the small ffn granularities and split-K tie in time and bytes: the best is the first
    proposed of them (planc's own granularity, 1), however the results arrive."""
    in_order = study(tmp_path, "in-order", small_ffn, LocalExecutor(1))
    reversed_ = study(tmp_path, "reversed", small_ffn, ReversedExecutor())
    assert explored(in_order) == explored(reversed_)
    best = ranked(reversed_.rows, "time")[0]
    assert best["key"] == ranked(in_order.rows, "time")[0]["key"]
    tied = [r for r in reversed_.rows if (r["modeled_time_s"], r["device_bytes"]) == (
        best["modeled_time_s"], best["device_bytes"])]
    assert len(tied) >= 2 and best["sequence"] == min(r["sequence"] for r in tied)
    assert best["decisions"]["sched-partition.granularity"] == 1


def test_tpe_explores_the_same_candidates_whatever_the_arrival_order(tmp_path, small_ffn):
    """The model-guided search learns a round's results in proposal order."""
    pytest.importorskip("optuna", reason="the tpe strategy is the planc[tune] extra")
    space = "sched-partition.granularity=1,2,4; sched-fuse.rows=true,false"
    runs = [study(tmp_path, name, small_ffn, executor, strategy="tpe", space=space, budget=10)
            for name, executor in (("a", LocalExecutor(1)), ("b", ReversedExecutor()))]
    assert explored(runs[0]) == explored(runs[1]) and len(runs[0].rows) == 10


def test_an_unknown_space_key_is_an_error_naming_the_nearest(planc, tmp_path):
    result = planc("tune", EXAMPLES / "ffn.json", "-t", "ark", "--space", "splitk=true,false",
                   "-o", tmp_path / "x")
    assert result.code == 1 and result.err.count("\n") == 1
    assert "--space: --target ark has no decision 'splitk': did you mean " \
           "sched-partition.split_k?" in result.err
    assert not (tmp_path / "x").exists()
    assert space_for("ark", "sched-partition.split-k=false").dimensions[5].name == \
        "sched-partition.split_k"         # the pipeline's spelling is accepted


def test_a_pass_option_value_of_the_wrong_type_is_an_error_before_the_study(planc, tmp_path):
    """`granularity=x` refused every candidate with it, each with xDSL's message naming
    neither the pass nor the option, and the study still exited 0 on the others."""
    result = planc("tune", EXAMPLES / "ffn.json", "-t", "ark", "--space",
                   "sched-partition.granularity=1,x", "-o", tmp_path / "x")
    assert result.code == 1 and result.err.count("\n") == 1, result.err
    assert "--space: sched-partition.granularity: pass sched-partition: option granularity " \
           "takes a value of type int, got 'x'" in result.err
    assert not (tmp_path / "x").exists()
    with pytest.raises(UsageError, match="option split-k takes a value of type bool"):
        space_for("ark", "sched-partition.split_k=yes")
    assert space_for("ark", "sched-partition.split_k=false").dimensions[5].values == (False,)


def test_an_unknown_device_is_one_error_before_the_study(planc, tmp_path):
    result = planc("tune", EXAMPLES / "ffn.json", "-t", "ark", "--arch", "A100", "-o",
                   tmp_path / "x")
    assert result.code == 1 and "unknown device 'A100': did you mean a100?" in result.err
    result = planc("tune", EXAMPLES / "ffn.json", "-t", "gemini", "--arch", "a100", "-o",
                   tmp_path / "x")
    assert result.code == 1 and "gemini has no option 'arch'" in result.err


def test_failure_reasons_are_counted_and_shown(planc, small_ffn, tmp_path):
    """Two grids too large for the device fail for one reason (their sizes differ): counted
    once, with the first message, in the summary, --report and --json."""
    out = tmp_path / "tt"
    argv = ("tune", small_ffn, "-t", "tt", "--space", "grid=2x2,99x99,98x98; "
            "partition=row_major", "--verify", "1", "-q", "-o", out)
    result = planc(*argv)
    assert result.code == 0, result.err
    line = "  2 refused: --grid 99x99 does not fit the wormhole_b0 compute grid 8x8"
    assert line in result.out.splitlines()
    assert line in planc("tune", "--report", out).out.splitlines()
    (study_json,) = planc(*argv[:-5], "--verify", "0", "-o", out, "--json").json()
    assert study_json["resumed"] == 3 and study_json["candidates"] == 3
    assert study_json["failures"] == [{
        "status": "refused", "count": 2, "first": line.split(": ", 1)[1],
        "reason": "--grid NxN does not fit the wormhole_bN compute grid NxN"}]
    report = json.loads(planc("tune", "--report", out, "--json").out)
    assert report["studies"][0]["failures"] == study_json["failures"]
    db = sqlite3.connect(out / "tune.sqlite")
    assert db.execute("SELECT COUNT(*) FROM candidates WHERE reason IS NOT NULL").fetchone() \
        == (2,)


def test_a_space_whose_own_candidates_all_fail_exits_1(planc, small_ffn, tmp_path):
    """ARK's default planner is scored, but every candidate of planc's planner is refused:
    the study failed, though a 'best' (the baseline) exists."""
    result = planc("tune", small_ffn, "-t", "ark", "--space", "sched-partition.granularity=0",
                   "--budget", "4", "--verify", "1", "-q", "-o", tmp_path / "x")
    assert result.code == 1
    assert "no candidate of the space was scored, only ARK's default planner" in result.out
    assert "refused: $: Granularity must be a positive integer, got 0" in result.out


def test_a_resumed_study_counts_its_stored_candidates(planc, small_ffn, tmp_path):
    """Rerun with another seed (as an interrupted run's stored candidates, which the new run
    would not propose first): the stored ones count in the budget and the counter goes on."""
    out = tmp_path / "tt"
    base = ("tune", small_ffn, "-t", "tt", "--strategy", "random", "--verify", "0", "-o", out)
    planc(*base, "--budget", "3", "--tune-seed", "1", "-q")
    again = planc(*base, "--budget", "5", "--tune-seed", "2")
    # The study is named by the device it is tuned for, the target's default (`on default`
    # before).
    assert "planc tune: ffn.json on wormhole_b0: resumed 3 stored candidates\n" in again.err
    assert "ffn.json on wormhole_b0: 5 candidates (3 resumed, " in again.out
    db = sqlite3.connect(out / "tune.sqlite")
    assert db.execute("SELECT COUNT(*) FROM candidates").fetchone() == (5,)
    counted = []
    space = space_for("tt", None)
    store = Store(out)
    try:
        result = run_study(space, str(small_ffn), None, store=store, budget=7,
                           strategy="random", objective="time", executor=LocalExecutor(1),
                           seed=3, progress=lambda done, total, best: counted.append(done))
    finally:
        store.close()
    assert result.resumed == 5 and counted == [6, 7] and len(result.rows) == 7
    assert sorted(r["sequence"] for r in result.rows) == list(range(7))


def test_verify_0_scores_only_and_succeeds(planc, small_ffn, tmp_path):
    """`--verify 0` asks for scores only: it said "no candidate passed planc check --strict
    and planc simulate" and exited 1 although nothing had been checked."""
    out = tmp_path / "t"
    done = planc("tune", small_ffn, "-t", "tt", "--strategy", "random", "--budget", "2",
                 "--verify", "0", "-q", "-o", out)
    assert done.code == 0, done.out + done.err
    assert "--verify 0: no candidate was checked or simulated, and no plan written" in done.out
    assert "no candidate passed" not in done.out
    assert sorted(p.name for p in out.iterdir()) == ["tune.sqlite"]


def test_the_counter_counts_to_the_spaces_candidates_when_they_are_fewer(small_ffn, tmp_path):
    """A space of 3 under the default budget of 64 counted `1/64 candidates`, and its time
    left assumed 61 more."""
    space = space_for("tt", "grid=1x1; partition=auto,row_major,block")
    seen = []
    store = Store(tmp_path / "s")
    try:
        run_study(space, str(small_ffn), None, store=store, budget=64, strategy="exhaustive",
                  objective="time", executor=LocalExecutor(1), seed=0,
                  progress=lambda done, total, best: seen.append((done, total)))
    finally:
        store.close()
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_interrupted_pool_workers_stay_quiet(capfd):
    """Ctrl-C reaches every process of the terminal's group: an idle pool worker printed a
    traceback and died. Workers ignore it; the study's process answers."""
    import os
    import signal

    executor = LocalExecutor(2)
    try:
        assert len(list(executor.run(jobs_for_errors(2)))) == 2      # the workers started
        for process in list(executor.pool._processes.values()):
            os.kill(process.pid, signal.SIGINT)
        time.sleep(0.5)         # a traceback, if any, is written by then (not a timing test)
        assert len(list(executor.run(jobs_for_errors(2)))) == 2      # and they still work
    finally:
        executor.close()
    assert "Traceback" not in capfd.readouterr().err


def jobs_for_errors(n):
    """Candidates refused at once (their model is missing): quick work for a pool."""
    return [Job("/no/such/model.json", "tt", None, {"grid": f"{i + 1}x1"}, {})
            for i in range(n)]


@pytest.mark.slow
def test_ctrl_c_ends_a_study_with_one_line(tmp_path):
    """SIGINT to the whole process group (what a terminal's Ctrl-C does) once candidates
    are stored: one line, exit 130, the stored candidates kept; rerun, the study resumes."""
    import shutil
    import subprocess
    import sys

    from tests.conftest import EXAMPLES, ROOT

    out = tmp_path / "t"
    # The whole ARK space (576 decisions, 289 distinct candidates of 0.3-0.5 CPU s on the
    # example's full-size FFN): the study cannot end before the test interrupts it. With a
    # budget of 40 it did, on a loaded machine, before this process was scheduled to see
    # three candidates stored (exit 0, not 130); `interrupted_study` interrupts only a study
    # it has stopped in the middle.
    budget = space_for("ark", None).size
    candidates = sum(1 for _ in space_for("ark", None).all())     # distinct: 289
    argv = [sys.executable, "-m", "compiler.driver", "tune", str(EXAMPLES / "ffn.json"), "-t",
            "ark", "--workers", "2", "--budget", str(budget), "--verify", "0", "-o", str(out)]
    for _attempt in range(5):
        process, out_text, err = interrupted_study(argv, out, candidates)
        if process is not None:
            break
        shutil.rmtree(out)      # every candidate done before the stop: not a Ctrl-C; again
    else:
        raise AssertionError("five studies of 289 candidates ended before their interrupt")
    assert process.returncode == 130, (stored(out), out_text, err)
    assert err == (f"planc: interrupted; the candidates evaluated so far are in "
                   f"{out / 'tune.sqlite'}: the same command resumes\n")
    kept = stored(out)
    assert 3 <= kept < candidates
    again = subprocess.run(argv[:-6] + ["--budget", str(kept), "--verify", "0", "-o", str(out)],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert f"resumed {kept} stored candidates" in again.stderr and stored(out) == kept


def interrupted_study(argv, out, candidates):
    """Start the study, let it store three candidates, stop its process group, and interrupt
    it if it is still in the study (not exited, fewer than `candidates` stored; read
    while it is stopped, so it stays so); (process, stdout, stderr) then, else (None, ...)
    after killing it."""
    import os
    import signal
    import subprocess

    from tests.conftest import ROOT

    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        while process.poll() is None and stored(out) < 3:
            time.sleep(0.05)
        os.killpg(process.pid, signal.SIGSTOP)
        ended = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if ended is not None or stored(out) >= candidates:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return None, "", ""
        os.killpg(process.pid, signal.SIGINT)
        os.killpg(process.pid, signal.SIGCONT)
        out_text, err = process.communicate(timeout=300)
        return process, out_text, err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def stored(out) -> int:
    try:
        db = sqlite3.connect(out / "tune.sqlite")
        try:
            return db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0


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


def test_verbose_tune_logs_each_candidate_and_verification(planc, small_ffn, tmp_path):
    """`planc tune -v` logged each pass's time of every candidate, and not which candidate
    it was or what it scored."""
    result = planc("tune", small_ffn, "-t", "ark", "--space", "sched-partition.granularity=1,2;"
                   "planner=planc", "--budget", "2", "--verify", "1", "-v", "-o", tmp_path / "x")
    assert result.code == 0, result.err
    lines = [x for x in result.err.splitlines() if x.startswith(("planc: candidate",
                                                                 "planc: verify"))]
    assert lines[0].startswith("planc: candidate 1/2 (planc's default): ")
    # Named by the decisions that differ from planc's own.
    assert lines[1].startswith("planc: candidate 2/2 (") and "planc's default" not in lines[1]
    assert "sched-partition.granularity=1" not in lines[1] and "=" in lines[1]
    assert lines[0].endswith(" MB") and " us, " in lines[0]
    assert lines[2] == "planc: verify candidate 0: check ok, simulate ok" or \
        lines[2] == "planc: verify candidate 1: check ok, simulate ok"


def test_plot_after_a_study_draws_its_front_and_help_lists_only_target_options(
        planc, small_ffn, tmp_path):
    """`--plot` without `--report` was silently ignored (exit 0, no picture), and `--help`
    listed simulate's --trace, --seed, --cost-only as fixed target options, each refused."""
    pytest.importorskip("matplotlib", reason="the plot extra draws the front")
    from compiler.driver import tune_parser

    out, image = tmp_path / "x", tmp_path / "front.png"
    result = planc("tune", small_ffn, "-t", "tt", "--space", "grid=1x1,2x2; partition=auto",
                   "--verify", "1", "-q", "-o", out, "--plot", image)
    assert result.code == 0, result.err
    assert result.out.endswith(f"picture: {image}\n") and image.stat().st_size > 10_000
    listed = tune_parser().format_help()
    for flag in ("--trace", "--seed", "--cost-only", "--full-run-limit", "--strict"):
        assert f"  {flag} " not in listed, flag
    assert "  --mesh XxY" in listed and "  --message-size BYTES" in listed
