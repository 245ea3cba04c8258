"""`ark-lift-plan`: the model an ARK plan computes, its scheduling stripped.

An ARK plan file carries its operators (with their tensors) inside task infos, and the order
and placement the runtime follows. Lifting keeps what is computed and drops how: each original
operator once (split-K parts and other copies folded back, see
`targets.ark.plan_simulator.derive_model`), in an order where every producer comes before its
readers, as an `ark.model`. `planc plan.json -t ark-model` writes it, so a published plan can be
planned again (`-t ark`) or tuned (`planc tune`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from dialects import ark, plan
from targets.ark.plan_simulator import derive_model

LOG = logging.getLogger("planc.pipeline")


@dataclass(frozen=True)
class ArkLiftPlanPass(ModulePass):
    name = "ark-lift-plan"

    def apply(self, ctx: Context, module: ModuleOp) -> None:
        for op in list(module.ops):
            if isinstance(op, plan.PlanOp):
                model, ordered, problems = derive_model(op, run_only=True)
                for problem in problems:
                    # The plan starts a reader before its producer (planc check reports it as
                    # a hazard); the model puts the producer first, as the data flow says.
                    LOG.warning("ark-lift-plan: %s; the model orders them by data flow",
                                problem)
                _report_never_run(op, ordered)
                strip_schedule(model)
                Rewriter.replace_op(op, model, [])


def _report_never_run(p: plan.PlanOp, kept: list[ark.ArkOp]) -> None:
    """Operators of TaskInfos no task group runs compute nothing the plan delivers (ARK's own
    allreduce-sm plans define seven receives and a barrier they never schedule), so the model
    the plan computes leaves them out; say which, since the plan file holds them."""
    kept_tasks = {op.task_id for op in kept}
    left = sorted({op.task_id for op in p.walk() if isinstance(op, ark.ArkOp)} - kept_tasks)
    if left:
        shown = ", ".join(map(str, left[:8])) + (", ..." if len(left) > 8 else "")
        s, are, them = ("s", "are", "them") if len(left) > 1 else ("", "is", "it")
        LOG.warning("ark-lift-plan: %d TaskInfo%s (%s) %s in no task group: the plan never "
                    "runs %s, and the model leaves %s out", len(left), s, shown, are, them,
                    them)


def strip_schedule(model: ark.ModelOp) -> None:
    """One node per operator, in the model's order (a model file groups operators in nodes; a
    plan has none), and no task id or kernel Config (the plan's, not the model's)."""
    for node, op in enumerate(model.operators()):
        op.properties["node"] = IntegerAttr(node, i64)
        op.properties.pop("task", None)
        op.properties.pop("config", None)
