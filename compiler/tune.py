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
    failures,
    progress_printer,
    ranked,
    run_study,
    verify,
)
from compiler.tune_space import check_target, space_for
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
    _check_types(options)
    if options.objective not in OBJECTIVES:
        raise UsageError(f"--objective must be one of {', '.join(OBJECTIVES)}")
    if options.budget < 1:
        raise UsageError("--budget must be at least 1")
    check_target(options.target)
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
    interrupted = False
    try:
        for model, arch in studies:
            label = study_name(model, arch, options.target)
            result = run_study(space, model, arch, store=store, budget=options.budget,
                               strategy=options.strategy, objective=options.objective,
                               executor=executor, seed=options.seed,
                               progress=progress_printer(label) if options.progress else None,
                               notify=_notice(label) if options.progress else None)
            name = best_name(options, model, arch)
            verify(result, space, store, options.objective, options.out, options.verify, name)
            results.append(result)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        executor.close(interrupted)
        store.close()
    return results


def _notice(label: str):
    """A line on stderr about a study (`planc tune` without -q), e.g. that it resumed."""
    import sys

    def notice(text: str) -> None:
        sys.stderr.write(f"planc tune: {label}: {text}\n")
        sys.stderr.flush()

    return notice


def _check_types(options: TuneOptions) -> None:
    """Options of the wrong type are a UsageError naming the option (`seed="x"` reached
    numpy as a TypeError)."""
    for name in ("budget", "workers", "seed", "verify"):
        value = getattr(options, name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise UsageError(f"planc tune option '{name}' must be an integer, got {value!r}")


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
    for arch in options.archs:
        if arch is not None:
            _check_arch(options.target, arch)


def _check_arch(target: str, arch: str) -> None:
    """An unknown device is one error before the study, not a refusal of every candidate."""
    from backends import make_options

    make_options(target, arch=arch)      # a target without --arch: an error naming who has it
    if target == "ark":
        from devices.hardware import gpu_device

        gpu_device(arch)
    elif target in ("tt", "tt-metal"):
        from devices.tt import device_named

        device_named(arch)


def study_name(model: str | None, arch: str | None, target: str | None) -> str:
    """`ffn.json on a100`: the model and the device it is tuned for, the target's default
    device when none was asked for (it read `on default`); targets without one (gemini,
    mscclpp) name the model alone."""
    name = Path(model).name if model else "generated"
    device = arch or _default_device(target)
    return f"{name} on {device}" if device else name


def _default_device(target: str | None) -> str | None:
    if target == "ark":
        from backends.ark_plan import DEFAULT_DEVICE

        return DEFAULT_DEVICE
    if target == "tt":
        from devices.tt import DEFAULT_DEVICE

        return DEFAULT_DEVICE
    return None


def summary(results: list[StudyResult], objective: str) -> str:
    """What `planc tune` prints: per study, the best candidate against planc's default, and
    why candidates failed (each reason's count and first message)."""
    lines = []
    for r in results:
        head = study_name(r.model, r.arch, r.target)
        scored = [x for x in r.rows if x["status"] == "scored"]
        resumed = f"{r.resumed} resumed, " if r.resumed else ""
        lines.append(f"{head}: {len(r.rows)} candidates ({resumed}{len(scored)} scored, "
                     f"{len(r.front)} on the time/memory front)")
        if r.default:
            lines.append(f"  planc's default: {_figures(r.default)}")
        lines += _failure_lines(r.rows)
        if r.baselines_only:
            lines.append("  no candidate of the space was scored, only ARK's default planner "
                         "(planner=ark-default, a baseline): the study failed")
        if r.best is None and r.unverified:
            lines.append("  --verify 0: no candidate was checked or simulated, and no plan "
                         "written (the scores are in the study's store)")
            continue
        if r.best is None:
            lines.append("  no candidate passed planc check --strict and planc simulate")
            continue
        gain = (f" ({r.default['modeled_time_s'] / r.best['modeled_time_s']:.2f}x faster"
                f"{_static_gain(r.default, r.best)}, "
                f"{r.best['device_bytes'] / max(r.default['device_bytes'], 1):.2f}x memory)"
                if r.default and r.default.get("modeled_time_s") is not None
                and r.best['modeled_time_s'] else "")
        lines.append(f"  best ({objective}): {_figures(r.best)}{gain}")
        lines.append(f"    {_decisions(r.best['decisions'])}")
        lines.append(f"    verified: planc check --strict ok, planc simulate ok; written to "
                     f"{r.best_file}")
    return "\n".join(lines)


def _static_gain(default: dict[str, Any], best: dict[str, Any]) -> str:
    """`, 1.10x under the static roofline` when both rows have its figure."""
    if default.get("static_s") is None or not best.get("static_s"):
        return ""
    return f", {default['static_s'] / best['static_s']:.2f}x under the static roofline"


def _failure_lines(rows: list[dict[str, Any]], indent: str = "  ") -> list[str]:
    """`4 refused: <the first message>` per reason (see `tune_search.failures`)."""
    return [f"{indent}{f['count']} {f['status']}: {' '.join(f['first'].split())}"
            for f in failures(rows)]


def _figures(row: dict[str, Any]) -> str:
    from compiler.report import seconds, size

    if row.get("modeled_time_s") is None or row.get("device_bytes") is None:
        return f"not scored ({row.get('status', 'failed')})"     # a candidate that failed
    static = (f" (static roofline {seconds(row['static_s'])})"
              if row.get("static_s") is not None else "")
    return f"{seconds(row['modeled_time_s'])}{static}, {size(row['device_bytes'])}"


def _decisions(decisions: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in decisions.items())


def _stored(directory: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    path = Path(directory) / "tune.sqlite"
    if not path.exists():
        raise UsageError(f"{directory}: no planc tune results here (no tune.sqlite)")
    store = Store(directory)
    try:
        return store.get("study", {}), store.rows()
    finally:
        store.close()


def report_json(directory: str | Path, top: int = 5) -> str:
    """`planc tune --report DIR --json`: per study, the best rows and the failures."""
    study, rows = _stored(directory)
    objective = study.get("objective", "time")
    studies = []
    for model, arch in dict.fromkeys((r["model"], r["arch"]) for r in rows):
        mine = [r for r in rows if r["model"] == model and r["arch"] == arch]
        studies.append({"model": model, "arch": arch, "candidates": len(mine),
                        "best": ranked(mine, objective)[:top], "failures": failures(mine)})
    return json.dumps({"directory": str(directory), "target": study.get("target"),
                       "objective": objective, "studies": studies})


def report(directory: str | Path, top: int = 5, plot: str | None = None) -> str:
    """`planc tune --report DIR`: the best configurations of every study in the store, and
    why the others failed."""
    study, rows = _stored(directory)
    objective = study.get("objective", "time")
    lines = [f"{directory}: --target {study.get('target')}, objective {objective}, "
             f"{len(rows)} candidates"]
    for model, arch in dict.fromkeys((r["model"], r["arch"]) for r in rows):
        mine = [r for r in rows if r["model"] == model and r["arch"] == arch]
        lines.append(f"{study_name(model, arch, study.get('target'))}:")
        for rank, row in enumerate(ranked(mine, objective)[:top], 1):
            verdict = row["verdict"]
            mark = (" [verified]" if verdict and verdict.get("check") == "ok"
                    and verdict.get("simulate") == "ok" else "")
            lines.append(f"  {rank}. {_figures(row)}{mark}: {_decisions(row['decisions'])}")
        lines += _failure_lines(mine)
    if plot:
        _pareto_picture(rows, plot, study)
        lines.append(f"picture: {plot}")
    return "\n".join(lines)


def _pareto_picture(rows: list[dict[str, Any]], path: str,
                    study: dict[str, Any] | None = None) -> None:
    """Every scored candidate by modeled time (a log axis: one slow outlier no longer squeezes
    the rest into a corner) and device memory, with each study's Pareto front
    joined, its untuned plan (the space's first values) and ARK's default planner marked,
    and its best candidate under the study's objective ringed."""
    try:
        import matplotlib
    except ImportError:
        raise UsageError("the picture needs matplotlib: pip install 'planc[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from compiler.tune_search import pareto_front

    study = study or {}
    untuned = {name: values[0] for name, values in study.get("space", {}).items()}
    objective = study.get("objective", "time")
    figure, ax = plt.subplots(figsize=(8, 5))
    colours = plt.get_cmap("tab10")
    for index, (model, arch) in enumerate(dict.fromkeys((r["model"], r["arch"]) for r in rows)):
        mine = [r for r in rows if r["model"] == model and r["arch"] == arch
                and r["status"] == "scored"]
        if not mine:
            continue
        colour = colours(index % 10)
        name = study_name(model, arch, study.get("target"))
        ax.scatter(*_xy(mine), s=12, alpha=0.35, color=colour, label=f"{name}: candidates")
        front = pareto_front(mine)
        ax.plot(*_xy(front), drawstyle="steps-post", color=colour, marker="o", markersize=4,
                label=f"{name}: Pareto front")
        marks = [("untuned planc", "s", [r for r in mine if r["decisions"] == untuned]),
                 ("ARK default planner", "D",
                  [r for r in mine if r["decisions"].get("planner") == "ark-default"]),
                 (f"best ({objective})", "*", ranked(mine, objective)[:1])]
        for label, marker, chosen in marks:
            if chosen:
                ax.scatter(*_xy(chosen[:1]), s=140 if marker == "*" else 60, marker=marker,
                           facecolors="none" if marker != "*" else colour,
                           edgecolors="black", linewidths=1.2, label=f"{name}: {label}",
                           zorder=3)
    from matplotlib.ticker import LogFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
    ax.xaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 1)))
    ax.set_xlabel("modeled time (µs, log scale)")
    ax.set_ylabel("device memory (MB)")
    ax.set_title("planc tune: candidates, Pareto front, untuned and default plans, best")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _xy(rows: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """Candidates' (modeled time in µs, device memory in MB), for plotting."""
    return ([r["modeled_time_s"] * 1e6 for r in rows], [r["device_bytes"] / 1e6 for r in rows])


def dump(results: list[StudyResult]) -> str:
    """`planc tune --json`: per study, the best, planc's default, and the failures (each
    reason's status, count and first message)."""
    return json.dumps([{"model": r.model, "arch": r.arch, "best": r.best,
                        "default": r.default, "best_file": r.best_file, "ok": r.succeeded,
                        "candidates": len(r.rows), "resumed": r.resumed,
                        "failures": failures(r.rows)} for r in results])
