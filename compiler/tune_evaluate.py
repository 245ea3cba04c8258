"""One evaluation of `planc tune`: compile a candidate and score it with the cost model.

`evaluate(job)` is a plain function of plain data, so the same code runs in this process, in a
local process pool and as a Ray task. Models are imported once per worker process.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from compiler.tune_space import ARK_PASSES, Value, candidate_key
from ground.diagnostics import PlancError

# The document format each tunable target writes (its simulator scores a candidate).
OUTPUT_FORMATS = {"ark": "ark-plan", "tt": "tt", "gemini": "gemini-ir", "mscclpp": "mscclpp"}


@dataclass(frozen=True)
class Job:
    model: str | None
    """The input file (None for targets that synthesize, e.g. a collective)."""
    target: str
    arch: str | None
    decisions: dict[str, Value]
    fixed: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return candidate_key({**self.decisions, "@model": self.model or "-",
                              "@arch": self.arch or "-"})


def options_of(job: Job) -> tuple[dict[str, Any], str | None]:
    """The target options and, when pass options are explored, the pipeline of a candidate."""
    options = dict(job.fixed)
    if job.arch is not None:
        options["arch"] = job.arch
    for name, value in job.decisions.items():
        if "." not in name and value is not None:
            options[name] = value
    passes = {name: value for name, value in job.decisions.items() if "." in name}
    if not passes or options.get("planner", "planc") != "planc":
        return options, None
    if job.target != "ark":
        raise PlancError(f"pass options are explored for --target ark only, not {job.target}")
    from backends.ark_plan import DEFAULT_DEVICE

    settings: dict[str, list[str]] = {}
    for name, value in passes.items():
        pass_name, _, option = name.partition(".")
        if pass_name not in ARK_PASSES:
            raise PlancError(f"unknown pass '{pass_name}' in the search space (ARK plans go "
                             f"through {', '.join(ARK_PASSES)})")
        text = str(value).lower() if isinstance(value, bool) else str(value)
        settings.setdefault(pass_name, []).append(f"{option.replace('_', '-')}={text}")
    settings.setdefault("ark-to-sched", []).append(
        f"device={options.get('arch') or DEFAULT_DEVICE}")
    pipeline = ",".join(p + ("{" + " ".join(settings[p]) + "}" if p in settings else "")
                        for p in ARK_PASSES)
    return options, pipeline


@cache
def _model(path: str):
    from compiler.api import load

    return load(path)


def build(job: Job):
    """The candidate's document in IR (the target's dialect), and its options."""
    from backends import make_options, target_named
    from compiler.api import document_format
    from compiler.pipeline import run_pipeline, without_garbage_collection

    options, pipeline = options_of(job)
    opts = make_options(job.target, **options)
    backend = target_named(job.target).load()
    with without_garbage_collection():
        if job.model is None:
            module = backend.synthesize(opts)
        else:
            module = _model(job.model).clone()
            spec = pipeline if pipeline is not None else backend.pipeline(
                document_format(module).name, opts)
            run_pipeline(module, spec)
    return module, opts


def score(module, job: Job) -> dict[str, Any]:
    """The cost model's figures of a built candidate (no functional run)."""
    from backends import make_options
    from frontends import format_named, load_hook

    fmt = format_named(OUTPUT_FORMATS[job.target])
    values = {"cost_only": True}
    if job.arch is not None and job.target in ("ark", "tt"):
        values["arch"] = job.arch
    for name in ("dram_bw", "message_size", "mscclpp_hw"):
        if job.fixed.get(name) is not None:
            values[name] = job.fixed[name]
    report = load_hook(fmt.simulate)(module, make_options("simulate", **values))
    scores = {"modeled_time_s": float(report["modeled_time_s"]),
              "device_bytes": int(report.get("device_bytes") or 0),
              "cost_ok": bool(report.get("ok", True))}
    if job.target == "ark":
        from targets.ark.static_roofline import module_seconds

        scores["static_s"] = module_seconds(module, job.arch)
    return scores


def evaluate(job: Job) -> dict[str, Any]:
    """Compile and score one candidate; a candidate planc cannot compile is a row too."""
    import os
    import socket

    started = time.perf_counter()
    row: dict[str, Any] = {"key": job.key, "decisions": job.decisions, "model": job.model,
                           "arch": job.arch, "worker": f"{socket.gethostname()}:{os.getpid()}"}
    try:
        module, _ = build(job)
        row.update(score(module, job), status="scored")
    except PlancError as e:
        row.update(status="refused", error=str(e), reason=reason_of(e.message))
    row["eval_s"] = time.perf_counter() - started
    return row


def reason_of(message: str) -> str:
    """The kind of a refusal: its message without the particulars (JSON paths, quoted names,
    numbers), so that candidates refused for one cause count under one reason however their
    sizes differ. `planc tune` prints each reason's count and its first message."""
    text = re.sub(r"\$[^\s:,;)]*", "$", message)
    text = re.sub(r"'[^']*'", "'_'", text)
    text = re.sub(r"-?\d+(\.\d+)?", "N", text)
    return " ".join(text.split())[:300]


def product(job: Job) -> str | dict[str, str]:
    """The document the candidate compiles to (what `planc` would write)."""
    module, opts = build(job)
    from backends import target_named

    return target_named(job.target).load().emit(module, opts)
