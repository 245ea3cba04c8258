"""Export the `plan` dialect as ARK plan files (`--target ark`).

The layout is ARK's own "denser JSON" by default (a tensor, an argument or a task group per
line; `--json-layout indented` writes plain 2-space JSON). Keys come in the order of ARK's
printer, or in the file's own order where the import recorded an unusual one.
"""

from __future__ import annotations

import logging
from argparse import Namespace
from time import process_time
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from backends.json_format import PLAN_DEPTH, denser_json, indented_json
from backends.plan_json import plan_json
from dialects import plan
from dialects.utils import single_root
from ground.diagnostics import (
    ArgumentError,
    PlancError,
    UnsupportedInput,
    did_you_mean,
    one_of,
)

DEFAULT_DEVICE = "a100"
LOG = logging.getLogger("planc.validation")


def single_plan(module: ModuleOp) -> plan.PlanOp:
    """The module's plan; a pipeline (`--pipeline`) that made none is told which passes do."""
    if not any(isinstance(op, plan.PlanOp) for op in module.ops):
        held = ", ".join(dict.fromkeys(op.name for op in module.ops)) or "nothing"
        raise PlancError(
            f"this target needs an ARK plan, and the pipeline ended without one (the IR holds "
            f"{held}, no plan.plan op); the passes that make a plan are ark-plan, "
            f"ark-default-plan, or sched-to-plan after ark-to-sched, sched-fuse, sched-tile, "
            f"sched-partition and sched-allocate (the target's own pipeline, without "
            f"--pipeline)")
    return single_root(module, plan.PlanOp)


ARK_FORMATS = ("current", "legacy", "torch")
"""Versions of the plan file: ARK main; before mid-2024 (plans had no Architecture key); ARK's
PyTorch-interface branch (#235), whose buffers always state IsExternal."""


def in_ark_format(doc: dict[str, Any], ark_format: str) -> dict[str, Any]:
    """`doc` (a plan_json result) as plan file version `ark_format` writes it."""
    if ark_format == "legacy":
        doc.pop("Architecture", None)
    elif ark_format == "torch":
        for task in doc["TaskInfos"]:
            for op in task["Ops"]:
                for key in ("ReadTensors", "WriteTensors", "ResultTensors"):
                    op[key] = [{**t, "Buffer": {**t["Buffer"], "IsExternal": t["Buffer"].get(
                        "IsExternal", False)}} for t in op[key]]
    return doc


def emit_plan(module: ModuleOp, layout: str = "denser", ark_format: str = "current") -> str:
    if layout != "indented" and ark_format in ("current", "legacy"):
        # The usual text, written straight from the IR (the same bytes as below).
        from backends.plan_text import plan_text

        return plan_text(single_plan(module), legacy=ark_format == "legacy")
    doc = in_ark_format(plan_json(single_plan(module), shared=True), ark_format)
    return indented_json(doc) if layout == "indented" else denser_json(doc, PLAN_DEPTH)


PLANNERS = ("planc", "ark-default")
"""`--planner` values: planc's own pipeline, or ARK's default planner (the baseline)."""

PLANC_PIPELINE = "ark-plan{{device={device}}}"
"""planc's planner: the passes of `passes.ark_plan`, run as one (verified once, at the end)."""
PLANC_PASSES = ("ark-compress,ark-to-sched{{device={device}}},sched-fuse,sched-tile,"
                "sched-partition,sched-allocate,sched-to-plan")
"""The same, pass by pass (e.g. for --pipeline with --print-ir-after-all)."""
ARK_DEFAULT_PIPELINE = "ark-default-plan{{device={device}}}"


def model_pipeline(device: str, planner: str = "planc") -> str:
    """The passes that turn an ARK model into a plan for `device`."""
    from devices.hardware import gpu_device

    gpu_device(device)  # an unknown or non-GPU device is a usage error, reported here
    if planner not in PLANNERS:
        raise ArgumentError(f"unknown planner '{planner}'{did_you_mean(planner, PLANNERS)} "
                            f"(known planners: {one_of(PLANNERS)})")
    template = ARK_DEFAULT_PIPELINE if planner == "ark-default" else PLANC_PIPELINE
    return template.format(device=device)


KEEPS_UNKNOWN_OPERATORS = ("ark-plan",)
"""A plan is written back as it was read, operators of types ARK does not register
included (`planc check` reports them); a model with them is refused."""


def pipeline(source_format: str, options: Namespace) -> str:
    if source_format == "ark-plan":
        return ""
    if source_format == "ark-model":
        return model_pipeline(getattr(options, "arch", None) or DEFAULT_DEVICE,
                              getattr(options, "planner", None) or "planc")
    raise UnsupportedInput("ark", "an ARK plan", source_format)


def snapshot(module: ModuleOp, source_format: str, options: Namespace) -> Any:
    """What the pipeline starts from, for `validate` to prove the plan against: the canonical
    expressions of the input model(s) (`targets.ark.equivalence`), or None for a plan in."""
    from dialects.ark import ModelOp
    from targets.ark.equivalence import snapshot as take

    if source_format != "ark-model":
        return None
    return take([op for op in module.ops if isinstance(op, ModelOp)])


def prove(module: ModuleOp, before: Any) -> list[str]:
    """The differences between what the IR's model, schedule or plan computes and the input
    `before` (a `snapshot`): the proof `validate` runs on the product, and the pipeline's
    pass-by-pass search for the pass that broke it runs after each pass."""
    from dialects.ark import ModelOp
    from dialects.plan import PlanOp
    from dialects.sched import ScheduleOp
    from targets.ark.equivalence import compare

    if before is None:
        return []
    roots = [op for op in module.ops if isinstance(op, (ModelOp, ScheduleOp, PlanOp))]
    return compare(before, roots)


def stages(spec: str) -> list[str] | None:
    """The passes `spec` runs one by one, where it is planc's planner run as one pass (to
    name the pass at fault when validation fails); None otherwise."""
    import re

    found = re.fullmatch(r"ark-plan\{device=([\w.-]+)\}", spec)
    return PLANC_PASSES.format(device=found[1]).split(",") if found else None


def validate(module: ModuleOp, source_format: str, options: Namespace,
             before: Any = None) -> list[str]:
    """Translation validation of a plan planned from a model: the error findings of `planc
    check`'s whole-plan rules (`targets.ark.plan_check`: task distribution and coverage,
    split-K, ordering and value flow against the model the plan carries), and the model the
    plan carries against the input model (`before`, a `snapshot`: `targets.ark.equivalence`),
    both decided symbolically. A plan re-emitted as read (`ark-plan` in) is the user's, not a
    lowering's: `planc check` judges it."""
    from dialects.findings import ERROR
    from dialects.plan import PlanOp
    from targets.ark.plan_check import check

    plans = [op for op in module.ops if isinstance(op, PlanOp)]
    if source_format != "ark-model" or len(plans) != 1:
        return []   # no plan made: `emit` says what the pipeline ended with
    problems = [f"{f.rule} at {f.path or '$'}: {f.message}"
                for f in check(plans[0], options) if f.severity == ERROR]
    start = process_time()
    against_input = prove(module, before)
    if before is not None:
        LOG.info("proof against the input model: %.3f CPU s (snapshot %.3f s, comparison "
                 "%.3f s)", before.seconds + process_time() - start, before.seconds,
                 process_time() - start)
    return problems + [f"against the input model: {p}" for p in against_input]


def emit(module: ModuleOp, options: Namespace) -> str:
    return emit_plan(module, getattr(options, "json_layout", None) or "denser",
                     getattr(options, "ark_format", None) or "current")
