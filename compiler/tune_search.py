"""`planc tune`: search a target's decisions, score them with the cost model, verify the best.

For every MODEL x ARCH (a study), candidates come from a strategy, are evaluated by an
executor, and land in the store as they finish:

* strategies: `exhaustive` (every candidate), `random` (seeded, without repeats), `tpe`
  (model-guided: optuna's Tree-structured Parzen Estimator, told every stored result, so a
  resumed study goes on learning); `auto` is exhaustive when the space fits the budget, else
  tpe (random without optuna). planc's own decision is always the first candidate;
* executors: this process (`--workers 1`), a local process pool (`--workers N`), or Ray
  (`--ray local` or `--ray ADDRESS`): the same `evaluate` function in each;
* objectives: `time` (modeled time, then memory), `memory` (device bytes, then time), or
  `pareto` (the candidates no other beats on both); the best ones are then compiled again and
  must pass `planc check --strict` and `planc simulate` before one is reported;
* determinism: candidates are proposed in rounds (`ROUND`), numbered in proposal order
  (`sequence`), and a strategy learns a round's results in that order; ties in the ranking go
  to the lower `sequence`. So every executor, with any number of workers, explores the same
  candidates and returns the same best for the same seed and budget.
"""

from __future__ import annotations

import itertools
import logging
import random
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiler.tune_evaluate import Job, evaluate, product
from compiler.tune_space import Space, Value, candidate_key
from compiler.tune_store import Store
from ground.diagnostics import PlancError, UsageError

STRATEGIES = ("auto", "exhaustive", "random", "tpe")
OBJECTIVES = ("time", "memory", "pareto")


# ---------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------


class Exhaustive:
    def __init__(self, space: Space, seed: int):
        self.candidates = space.all()

    def propose(self) -> dict[str, Value] | None:
        return next(self.candidates, None)

    def observe(self, decisions: dict[str, Value], row: dict[str, Any]) -> None:
        pass


class RandomSearch:
    def __init__(self, space: Space, seed: int):
        self.space, self.rng = space, random.Random(seed)
        self.first: dict[str, Value] | None = space.default()
        self.seen: set[str] = set()

    def propose(self) -> dict[str, Value] | None:
        if self.first is not None:
            first, self.first = self.first, None
            self.seen.add(candidate_key(first))
            return first
        for _ in range(1000):   # bounded: a space nearly used up ends the search
            decisions = self.space.sample(self.rng)
            if candidate_key(decisions) not in self.seen:
                self.seen.add(candidate_key(decisions))
                return decisions
        return None

    def observe(self, decisions: dict[str, Value], row: dict[str, Any]) -> None:
        self.seen.add(candidate_key(decisions))


class TreeParzen:
    """optuna's TPE sampler through its ask/tell interface (categorical dimensions)."""

    def __init__(self, space: Space, seed: int, objective: str = "time"):
        try:
            import optuna
        except ImportError:
            raise UsageError("--strategy tpe needs optuna: pip install 'planc[tune]'") from None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna, self.space, self.objective = optuna, space, objective
        self.study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
        self.choices = {d.name: [_token(v) for v in d.values] for d in space.dimensions}
        self.values = {d.name: dict(zip(self.choices[d.name], d.values, strict=True))
                       for d in space.dimensions}
        self.study.enqueue_trial({n: c[0] for n, c in self.choices.items()})
        self.pending: dict[str, Any] = {}
        self.seen: set[str] = set()

    def _distributions(self):
        return {n: self.optuna.distributions.CategoricalDistribution(c)
                for n, c in self.choices.items()}

    def propose(self) -> dict[str, Value] | None:
        for _ in range(200):
            trial = self.study.ask(self._distributions())
            decisions = self.space.canonical({n: self.values[n][trial.params[n]]
                                              for n in self.choices})
            key = candidate_key(decisions)
            if key not in self.seen:
                self.seen.add(key)
                self.pending[key] = trial
                return decisions
            self.study.tell(trial, state=self.optuna.trial.TrialState.PRUNED)
        return None

    def observe(self, decisions: dict[str, Value], row: dict[str, Any]) -> None:
        key = candidate_key(decisions)
        self.seen.add(key)
        value = _objective_value(row, self.objective)
        trial = self.pending.pop(key, None)
        if trial is None:   # a stored result (resumed study): teach the sampler anyway
            params = {n: _token(decisions[n]) for n in self.choices if n in decisions}
            if len(params) != len(self.choices):
                return
            trial = self.optuna.trial.create_trial(
                params=params, distributions=self._distributions(),
                value=value if value is not None else None,
                state=(self.optuna.trial.TrialState.COMPLETE if value is not None
                       else self.optuna.trial.TrialState.FAIL))
            self.study.add_trial(trial)
            return
        if value is None:
            self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, value)


def _token(value: Value) -> str | int | float | bool | None:
    return value


def _objective_value(row: dict[str, Any], objective: str) -> float | None:
    if row.get("status") != "scored":
        return None
    if objective == "memory":
        return float(row["device_bytes"])
    return float(row["modeled_time_s"])


def strategy_for(name: str, space: Space, budget: int, seed: int, objective: str):
    if name == "auto":
        name = "exhaustive" if space.size <= budget else "tpe"
        if name == "tpe":
            try:
                import optuna  # noqa: F401
            except ImportError:
                name = "random"
    if name == "exhaustive":
        return Exhaustive(space, seed)
    if name == "random":
        return RandomSearch(space, seed)
    if name == "tpe":
        return TreeParzen(space, seed, "memory" if objective == "memory" else "time")
    raise UsageError(f"--strategy must be one of {', '.join(STRATEGIES)}, got '{name}'")


# ---------------------------------------------------------------------------------------------
# Executors
# ---------------------------------------------------------------------------------------------


def _ignore_interrupts() -> None:
    """In a pool worker: Ctrl-C reaches every process of the terminal's process group, and
    each worker printed its own traceback. The study's process alone answers it (one line)
    and stops the workers."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def _forking_without_interrupts() -> Iterator[None]:
    """The pool forks its workers inside `submit`: with Ctrl-C ignored meanwhile, a worker is
    born ignoring it, instead of from its initializer on (an interrupt between the fork and
    the initializer printed a traceback and broke the pool on a loaded machine)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class LocalExecutor:
    """This process (one worker) or a pool of local processes."""

    def __init__(self, workers: int):
        self.workers = max(1, workers)
        self.pool = None
        if self.workers > 1:
            from concurrent.futures import ProcessPoolExecutor

            self.pool = ProcessPoolExecutor(self.workers, initializer=_ignore_interrupts)

    def run(self, jobs: list[Job]) -> Iterator[tuple[Job, dict[str, Any]]]:
        if self.pool is None:
            for job in jobs:
                yield job, evaluate(job)
            return
        from concurrent.futures import as_completed

        with _forking_without_interrupts():
            futures = {self.pool.submit(evaluate, job): job for job in jobs}
        for future in as_completed(futures):
            yield futures[future], future.result()

    def close(self, interrupted: bool = False) -> None:
        """Wait for the pool's workers, or (`interrupted`) drop the queued candidates and end
        the running ones now: an interrupted study keeps what it stored."""
        if self.pool is None:
            return
        if interrupted:
            for process in list(getattr(self.pool, "_processes", {}).values()):
                process.terminate()
        self.pool.shutdown(wait=True, cancel_futures=interrupted)


class RayExecutor:
    """Ray tasks: `--ray local` starts Ray on this machine, `--ray ADDRESS` joins a cluster.

    Every wait for a result is bounded (see `stall_bound`): a task whose result never comes
    (once in about six test runs, `ray.wait` waited forever with both local workers idle) is
    submitted again, and a second wait in vain without any result in between ends the study
    with a PlancError instead of a hang."""

    FIRST_RESULT_S = 300.0
    """The bound before any result: long enough for a worker to start and import and compile
    one candidate of a large model."""
    STALL_FLOOR_S = 60.0
    STALL_FACTOR = 10.0
    """After results have come: no new result for STALL_FACTOR times the slowest evaluation
    seen (at least STALL_FLOOR_S) is a stall, whatever the size of the model."""
    RETRIES = 1

    def __init__(self, address: str, workers: int, stall_s: float | None = None):
        try:
            import ray
        except ImportError:
            raise UsageError("--ray needs Ray: pip install 'planc[ray]'") from None
        root = str(Path(__file__).resolve().parents[1])     # the checkout holding compiler/
        runtime = {"env_vars": {"PYTHONPATH": root, "OPENBLAS_NUM_THREADS": "1"}}
        self.started = not ray.is_initialized()
        if self.started:
            kwargs: dict[str, Any] = {"runtime_env": runtime, "include_dashboard": False,
                                      "logging_level": "ERROR", "log_to_driver": False}
            # "local" starts a Ray of our own: without an address, ray.init joins whatever
            # cluster /tmp/ray/ray_current_cluster or RAY_ADDRESS names (another user's, or the
            # two-node test's next door), which then refuses num_cpus.
            kwargs["address"] = address
            if address == "local":
                kwargs["num_cpus"] = max(1, workers)
            ray.init(**kwargs)
        self._attach(ray, ray.remote(num_cpus=1)(evaluate), stall_s)

    @classmethod
    def over(cls, ray, remote, stall_s: float | None = None) -> RayExecutor:
        """An executor on an initialised `ray` (module or stand-in) running `remote` tasks."""
        executor = cls.__new__(cls)
        executor.started = False
        executor._attach(ray, remote, stall_s)
        return executor

    def _attach(self, ray, remote, stall_s: float | None) -> None:
        if stall_s is not None and not stall_s > 0:
            raise UsageError(f"the Ray stall bound must be positive, got {stall_s}")
        self.ray, self.remote, self.stall_s = ray, remote, stall_s
        self.slowest_s: float | None = None

    def stall_bound(self) -> float:
        """Seconds without a new result after which the outstanding tasks count as lost."""
        if self.stall_s is not None:
            return self.stall_s
        if self.slowest_s is None:
            return self.FIRST_RESULT_S
        return max(self.STALL_FLOOR_S, self.STALL_FACTOR * self.slowest_s)

    def run(self, jobs: list[Job]) -> Iterator[tuple[Job, dict[str, Any]]]:
        owners = {self.remote.remote(job): job for job in jobs}   # task -> its candidate
        retries = 0
        while owners:
            bound = self.stall_bound()
            ready, _ = self.ray.wait(list(owners), num_returns=1, timeout=bound)
            if not ready:
                lost = list({id(j): j for j in owners.values()}.values())
                if retries >= self.RETRIES:
                    raise PlancError(
                        f"Ray returned no result for {bound:.3g} s, after submitting the "
                        f"{len(lost)} outstanding candidate(s) again; are its workers alive? "
                        f"(first lost: {candidate_key(lost[0].decisions)})")
                retries += 1
                for job in lost:     # the first copy to finish wins; the others are cancelled
                    owners[self.remote.remote(job)] = job
                continue
            job = owners.pop(ready[0])
            row = self.ray.get(ready[0])
            for ref in [r for r, j in owners.items() if j is job]:
                del owners[ref]
                self._cancel(ref)
            retries = 0
            seconds = row.get("eval_s") if isinstance(row, dict) else None
            if isinstance(seconds, (int, float)):
                self.slowest_s = max(self.slowest_s or 0.0, float(seconds))
            yield job, row

    def _cancel(self, ref) -> None:
        try:
            self.ray.cancel(ref)
        except Exception:   # noqa: BLE001 - a copy that already finished or died: nothing to do
            pass

    def close(self, interrupted: bool = False) -> None:
        """Stop the Ray this executor started (not one the caller had initialised): left
        running, its object store stays mapped into this process (a later fork with an
        address-space limit, as bench/fuzz.py's runner sets, then fails with MemoryError) and
        its daemons outlive the study."""
        if self.started:
            self.ray.shutdown()
            self.started = False


# ---------------------------------------------------------------------------------------------
# Studies
# ---------------------------------------------------------------------------------------------


@dataclass
class StudyResult:
    model: str | None
    arch: str | None
    target: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    best: dict[str, Any] | None = None
    default: dict[str, Any] | None = None
    front: list[dict[str, Any]] = field(default_factory=list)
    best_file: str | None = None
    resumed: int = 0
    """Candidates of the space that were in the store already (they count in the budget)."""
    baselines_only: bool = False
    """No candidate of the space's own decisions was scored, only baselines (ARK's default
    planner): the study failed, whatever is best (see `Space.baseline`)."""
    unverified: bool = False
    """`--verify 0`: the user asked for scores only; nothing was compiled again or written."""

    @property
    def succeeded(self) -> bool:
        """A verified best (or none asked for), and a candidate of the space itself scored:
        what exit 0 says."""
        return (self.best is not None or self.unverified) and not self.baselines_only


def ranked(rows: Iterable[dict[str, Any]], objective: str) -> list[dict[str, Any]]:
    """The scored rows, best first: by modeled time then device bytes (`time`, `pareto`: the
    front only) or bytes then time (`memory`); candidates equal in both go in proposal order
    (`sequence`: planc's own decision first), so the best never depends on which result
    arrived first."""
    scored = [r for r in rows if r["status"] == "scored"]
    if objective == "memory":
        return sorted(scored, key=lambda r: (r["device_bytes"], r["modeled_time_s"],
                                             r["sequence"]))
    if objective == "pareto":
        scored = pareto_front(scored)
    return sorted(scored, key=_time_first)


def _time_first(row: dict[str, Any]) -> tuple[float, int, int]:
    return row["modeled_time_s"], row["device_bytes"], row["sequence"]


def pareto_front(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows no other row beats in both time and memory (sorted sweep, O(n log n)); of
    rows equal in both, the first proposed."""
    front, best_bytes = [], None
    for row in sorted(rows, key=_time_first):
        if best_bytes is None or row["device_bytes"] < best_bytes:
            front.append(row)
            best_bytes = row["device_bytes"]
    return front


ROUND = 8
"""Candidates proposed per round. A strategy learns from a round's results in the order it
proposed them, after the whole round, so the candidates explored (and so the best) are the
same whichever executor evaluates them, with how many workers, in whatever order results
arrive; at most ROUND evaluations run at once."""


def run_study(space: Space, model: str | None, arch: str | None, *, store: Store, budget: int,
              strategy: str, objective: str, executor, seed: int,
              progress: Callable[[int, int, dict[str, Any] | None], None] | None = None,
              notify: Callable[[str], None] | None = None) -> StudyResult:
    """Explore `space` for `model` on `arch` until `budget` candidates of the space are in the
    store. Candidates already stored (an interrupted or earlier run) count in the budget and
    teach the strategy first; the rest are proposed round by round (`ROUND`), each numbered
    in proposal order (`sequence`, the ranking's tie-break)."""
    result = StudyResult(model, arch, space.target)
    stored = {r["key"]: r for r in store.rows(model, arch)}
    mine = sorted((r for r in stored.values() if space.contains(r["decisions"])),
                  key=lambda r: r["sequence"])
    search = strategy_for(strategy, space, budget, seed, objective)
    for row in mine:
        search.observe(row["decisions"], row)
    result.resumed = evaluated = len(mine)
    if mine and notify is not None:
        notify(f"resumed {len(mine)} stored candidate{'s' * (len(mine) != 1)}")
    sequence = max((r["sequence"] for r in stored.values()), default=-1) + 1
    exhausted = False
    # What the counter counts to: the budget, or the space's distinct candidates when they
    # are fewer (it read 2/64 for a space of 2, and its time left assumed 62 more).
    total = sum(1 for _ in itertools.islice(space.all(), budget))
    while evaluated < budget and not exhausted:
        jobs: list[Job] = []
        while len(jobs) < min(ROUND, budget - evaluated):
            decisions = search.propose()
            if decisions is None:
                exhausted = True
                break
            job = Job(model, space.target, arch, decisions, space.fixed)
            if job.key not in stored and all(job.key != j.key for j in jobs):
                jobs.append(job)
        numbers = {job.key: sequence + i for i, job in enumerate(jobs)}
        sequence += len(jobs)
        arrived: dict[str, dict[str, Any]] = {}
        for job, row in executor.run(jobs):
            row["sequence"] = numbers[job.key]
            store.add(row)                   # at once: an interrupted study keeps it
            stored[job.key] = arrived[job.key] = row
            evaluated += 1
            _log_candidate(evaluated, total, row, space)
            if progress:
                best = next(iter(ranked(stored.values(), objective)), None)
                progress(evaluated, total, best)
        for job in jobs:                     # in proposal order, whatever the arrival order
            search.observe(job.decisions, arrived[job.key])
    result.rows = store.rows(model, arch)
    default_key = Job(model, space.target, arch, space.canonical(space.default()),
                      space.fixed).key
    result.default = next((r for r in result.rows if r["key"] == default_key), None)
    result.front = pareto_front([r for r in result.rows if r["status"] == "scored"])
    result.baselines_only = any(not space.baseline(r["decisions"]) for r in result.rows) and \
        not any(r["status"] == "scored" and not space.baseline(r["decisions"])
                for r in result.rows)
    return result


def _log_candidate(done: int, budget: int, row: dict[str, Any], space: Space) -> None:
    """`planc tune -v`: each candidate as it is stored, by the decisions that differ from
    planc's own (the passes' timings alone said nothing of which candidate they were)."""
    log = logging.getLogger("planc.tune")
    if not log.isEnabledFor(logging.INFO):
        return
    default = space.default()
    changed = ", ".join(f"{k}={v}" for k, v in row["decisions"].items()
                        if default.get(k) != v) or "planc's default"
    if row["status"] == "scored":
        from compiler.report import seconds, size

        outcome = f"{seconds(row['modeled_time_s'])}, {size(row['device_bytes'])}"
    else:
        outcome = f"{row['status']}: {row.get('error') or '(no message)'}"
    log.info("candidate %d/%d (%s): %s", done, budget, changed, outcome)


def failures(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Why candidates failed: one entry per reason (refused by planc, or failing the
    verification of the best), with its count and the first message of that reason, most
    frequent first."""
    from compiler.tune_evaluate import reason_of

    found: dict[tuple[str, str], dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: r["sequence"]):
        verdict = row.get("verdict") or {}
        if row["status"] != "scored":
            status, message = row["status"], row.get("error") or "(no message stored)"
            reason = row.get("reason") or reason_of(message)
        elif verdict and not (verdict.get("check") == "ok" and verdict.get("simulate") == "ok"):
            status, message = "unverified", _verdict_message(verdict)
            reason = reason_of(message)
        else:
            continue
        entry = found.setdefault((status, reason), {"status": status, "reason": reason,
                                                    "count": 0, "first": message})
        entry["count"] += 1
    return sorted(found.values(), key=lambda e: -e["count"])


def _verdict_message(verdict: dict[str, Any]) -> str:
    if "error" in verdict:
        return str(verdict["error"])
    if verdict.get("check") != "ok":
        findings = verdict.get("check") or ["no verdict"]
        return f"planc check --strict: {findings[0]}"
    return "planc simulate failed"


def no_worse(row: dict[str, Any], default: dict[str, Any] | None) -> bool:
    """Whether a candidate may be returned: no slower than planc's untuned plan under the cost
    model nor under the static-distribution roofline (ARK plans; `static_s`), so that tuning
    against one model never returns a plan the other rates worse than the untuned one."""
    if default is None or default.get("status") != "scored" or row is default:
        return True
    for figure in ("modeled_time_s", "static_s"):
        mine, theirs = row.get(figure), default.get(figure)
        if mine is not None and theirs is not None and mine > theirs:
            return False
    return True


def verify(result: StudyResult, space: Space, store: Store, objective: str, out: Path,
           how_many: int, name: str) -> None:
    """Compile the best candidates again; the first that passes `planc check --strict` and
    `planc simulate` is the study's best, written to `out / name`. Only candidates
    `no_worse` than planc's untuned plan are considered (the untuned plan itself always is).
    `how_many` 0 verifies and writes nothing (`result.unverified`)."""
    from compiler import api

    result.unverified = how_many <= 0
    from compiler.output import write_product

    for row in [r for r in ranked(result.rows, objective)
                if no_worse(r, result.default)][:how_many]:
        job = Job(result.model, space.target, result.arch, row["decisions"], space.fixed)
        path = out / name
        verdict: dict[str, Any] = {}
        try:
            text = product(job)
            if not isinstance(text, str):
                raise PlancError(f"--target {space.target} writes a directory")
            write_product(path, text)
            checked = api.check(path, strict=True)
            verdict["check"] = "ok" if checked.ok else [str(f) for f in checked.findings][:5]
            simulated = api.simulate(path)
            verdict["simulate"] = "ok" if simulated.ok else "failed"
        except PlancError as e:
            verdict["error"] = str(e)
        store.set_verdict(row["key"], verdict)
        row["verdict"] = verdict
        logging.getLogger("planc.tune").info(
            "verify candidate %d: %s", row["sequence"],
            ", ".join(f"{k} {v if isinstance(v, str) else v[:1]}" for k, v in verdict.items()))
        if verdict.get("check") == "ok" and verdict.get("simulate") == "ok":
            result.best, result.best_file = row, str(path)
            return
        path.unlink(missing_ok=True)


def progress_printer(label: str) -> Callable[[int, int, dict[str, Any] | None], None]:
    """A one-line progress report on stderr when it is a terminal: candidates done, best so
    far, estimated time left."""
    started = time.perf_counter()
    interactive = sys.stderr.isatty()

    def report(done: int, total: int, best: dict[str, Any] | None) -> None:
        if not interactive:
            return
        elapsed = time.perf_counter() - started
        left = elapsed / done * (total - done) if done else 0.0
        best_text = (f"best {best['modeled_time_s'] * 1e6:.1f} us" if best else "no best yet")
        sys.stderr.write(f"\r{label}: {done}/{total} candidates, {best_text}, "
                         f"~{left:.0f} s left   ")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return report
