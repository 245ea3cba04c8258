"""`planc tune`: design-space exploration of a target's decisions (see `search`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compiler.tune_search import (
    OBJECTIVES,
    LocalExecutor,
    RayExecutor,
    StudyResult,
    progress_printer,
    ranked,
    run_study,
    verify,
)
from compiler.tune_space import space_for
from compiler.tune_store import Store
from ground.diagnostics import PlancError, UsageError


@dataclass
class TuneOptions:
    target: str
    models: list[str]
    archs: list[str | None]
    out: Path
    space: str | None = None
    budget: int = 64
    strategy: str = "auto"
    objective: str = "time"
    workers: int = 1
    ray: str | None = None
    ray_stall_s: float | None = None
    """Seconds without a Ray result before the outstanding tasks count as lost (None: bounded
    by the slowest evaluation seen, see `RayExecutor.stall_bound`)."""
    seed: int = 0
    verify: int = 3
    fixed: dict[str, Any] | None = None
    progress: bool = True


def tune(options: TuneOptions) -> list[StudyResult]:
    """Every study of `options` (each model on each architecture); results in the store, the
    best documents in `options.out`."""
    if options.objective not in OBJECTIVES:
        raise UsageError(f"--objective must be one of {', '.join(OBJECTIVES)}")
    if options.budget < 1:
        raise UsageError("--budget must be at least 1")
    _check_request(options)
    space = space_for(options.target, options.space, options.fixed)
    store = Store(options.out)
    store.set("study", {"target": options.target, "objective": options.objective,
                        "space": {d.name: list(d.values) for d in space.dimensions},
                        "fixed": space.fixed})
    executor = (RayExecutor(options.ray, options.workers, options.ray_stall_s) if options.ray
                else LocalExecutor(options.workers))
    results = []
    studies = [(m, a) for m in (options.models or [None]) for a in options.archs]
    try:
        for model, arch in studies:
            label = f"{Path(model).name if model else options.target} on {arch or 'default'}"
            result = run_study(space, model, arch, store=store, budget=options.budget,
                               strategy=options.strategy, objective=options.objective,
                               executor=executor, seed=options.seed,
                               progress=progress_printer(label) if options.progress else None)
            name = best_name(options, model, arch)
            verify(result, space, store, options.objective, options.out, options.verify, name)
            results.append(result)
    finally:
        executor.close()
        store.close()
    return results


def best_name(options: TuneOptions, model: str | None, arch: str | None) -> str:
    """The file in `options.out` that receives the best document of a study."""
    if len(options.models or [None]) * len(options.archs) == 1:
        return "best.json"
    return f"best.{Path(model).stem if model else options.target}.{arch or 'default'}.json"


def _refuse_replacing_models(options: TuneOptions) -> None:
    """A model kept in the results directory under a name tune writes (`best.json`, the
    store) would be replaced by a result, and removed when no candidate passes."""
    written = {options.out / "tune.sqlite"} | {
        options.out / best_name(options, m, a) for m in options.models or [None]
        for a in options.archs}
    for model in options.models:
        for path in written:
            if path.exists() and Path(model).exists() and os.path.samefile(path, model):
                raise UsageError(f"the model {model} is {path}, which planc tune writes its "
                                 "results to; choose another results directory")


def _check_request(options: TuneOptions) -> None:
    """What the command line can get wrong before any work: found by hand, each of these was
    an internal error (FileExistsError, AttributeError) or an exit 1 with no message."""
    if options.verify < 0:
        raise UsageError(f"--verify must be at least 0, got {options.verify}")
    if not 0 <= options.seed < 2**32:       # the tpe strategy's generator takes these only
        raise UsageError(f"--tune-seed must be in [0, 2^32), got {options.seed}")
    if options.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {options.workers}")
    if options.out.exists() and not options.out.is_dir():
        raise PlancError("exists and is not a directory; planc tune writes its results "
                         "into a directory", file=str(options.out))
    _refuse_replacing_models(options)
    if not options.models and options.target != "mscclpp":
        raise UsageError(f"planc tune --target {options.target} needs a MODEL (only "
                         "--target mscclpp generates its input, with --collective)")


def summary(results: list[StudyResult], objective: str) -> str:
    """What `planc tune` prints: per study, the best candidate against planc's default."""
    lines = []
    for r in results:
        head = f"{Path(r.model).name if r.model else 'generated'} on {r.arch or 'default'}"
        scored = [x for x in r.rows if x["status"] == "scored"]
        lines.append(f"{head}: {len(r.rows)} candidates ({len(scored)} scored, "
                     f"{len(r.front)} on the time/memory front)")
        if r.default:
            lines.append(f"  planc's default: {_figures(r.default)}")
        if r.best is None:
            lines.append("  no candidate passed planc check --strict and planc simulate")
            continue
        gain = (f" ({r.default['modeled_time_s'] / r.best['modeled_time_s']:.2f}x faster, "
                f"{r.best['device_bytes'] / max(r.default['device_bytes'], 1):.2f}x memory)"
                if r.default and r.default.get("modeled_time_s") is not None
                and r.best['modeled_time_s'] else "")
        lines.append(f"  best ({objective}): {_figures(r.best)}{gain}")
        lines.append(f"    {_decisions(r.best['decisions'])}")
        lines.append(f"    verified: planc check --strict ok, planc simulate ok; written to "
                     f"{r.best_file}")
    return "\n".join(lines)


def _figures(row: dict[str, Any]) -> str:
    from compiler.report import seconds, size

    if row.get("modeled_time_s") is None or row.get("device_bytes") is None:
        return f"not scored ({row.get('status', 'failed')})"     # a candidate that failed
    return f"{seconds(row['modeled_time_s'])}, {size(row['device_bytes'])}"


def _decisions(decisions: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in decisions.items())


def report(directory: str | Path, top: int = 5, plot: str | None = None) -> str:
    """`planc tune --report DIR`: the best configurations of every study in the store."""
    path = Path(directory) / "tune.sqlite"
    if not path.exists():
        raise UsageError(f"{directory}: no planc tune results here (no tune.sqlite)")
    store = Store(directory)
    try:
        study = store.get("study", {})
        rows = store.rows()
    finally:
        store.close()
    objective = study.get("objective", "time")
    lines = [f"{directory}: --target {study.get('target')}, objective {objective}, "
             f"{len(rows)} candidates"]
    for model, arch in dict.fromkeys((r["model"], r["arch"]) for r in rows):
        mine = [r for r in rows if r["model"] == model and r["arch"] == arch]
        lines.append(f"{Path(model).name if model else 'generated'} on {arch or 'default'}:")
        for rank, row in enumerate(ranked(mine, objective)[:top], 1):
            verdict = row["verdict"]
            mark = (" [verified]" if verdict and verdict.get("check") == "ok"
                    and verdict.get("simulate") == "ok" else "")
            lines.append(f"  {rank}. {_figures(row)}{mark}: {_decisions(row['decisions'])}")
    if plot:
        _pareto_picture(rows, plot)
        lines.append(f"picture: {plot}")
    return "\n".join(lines)


def _pareto_picture(rows: list[dict[str, Any]], path: str) -> None:
    try:
        import matplotlib
    except ImportError:
        raise UsageError("the picture needs matplotlib: pip install 'planc[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from compiler.tune_search import pareto_front

    figure, ax = plt.subplots(figsize=(8, 5))
    for model, arch in dict.fromkeys((r["model"], r["arch"]) for r in rows):
        mine = [r for r in rows if r["model"] == model and r["arch"] == arch
                and r["status"] == "scored"]
        label = f"{Path(model).name if model else 'generated'} on {arch or 'default'}"
        ax.scatter([r["modeled_time_s"] * 1e6 for r in mine],
                   [r["device_bytes"] / 1e6 for r in mine], s=10, alpha=0.5, label=label)
        front = pareto_front(mine)
        ax.plot([r["modeled_time_s"] * 1e6 for r in front],
                [r["device_bytes"] / 1e6 for r in front], drawstyle="steps-post")
    ax.set_xlabel("modeled time (us)")
    ax.set_ylabel("device memory (MB)")
    ax.set_title("planc tune: every candidate, and the time/memory front")
    ax.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def dump(results: list[StudyResult]) -> str:
    return json.dumps([{"model": r.model, "arch": r.arch, "best": r.best,
                        "default": r.default, "best_file": r.best_file} for r in results])
