"""Export the `plan` dialect as ARK plan files (`--target ark`).

The layout is ARK's own "denser JSON" by default (a tensor, an argument or a task group per
line; `--json-layout indented` writes plain 2-space JSON). Keys come in the order of ARK's
printer, or in the file's own order where the import recorded an unusual one.
"""

from __future__ import annotations

from argparse import Namespace
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from backends.ark_model import operator_json
from backends.json_format import PLAN_DEPTH, denser_json, indented_json
from compiler.diagnostics import PlancError
from dialects import plan
from dialects.json_value import dict_value
from dialects.utils import single_root


def _range(attr: plan.RangeAttr) -> list[int]:
    return attr.as_list()


def task_group_json(tg: plan.TaskGroupOp) -> dict[str, Any]:
    return {"TaskId": tg.task, "TaskRange": _range(tg.task_range), "Granularity": tg.gran,
            **dict_value(tg.extra)}


def resource_group_json(rg: plan.ResourceGroupOp) -> dict[str, Any]:
    return {"ProcessorRange": _range(rg.processor_range), "WarpRange": _range(rg.warp_range),
            "SramRange": _range(rg.sram_range),
            "TaskGroups": [task_group_json(tg) for tg in rg.task_groups()],
            **dict_value(rg.extra)}


def processor_group_json(pg: plan.ProcessorGroupOp) -> dict[str, Any]:
    return {"ProcessorRange": _range(pg.processor_range),
            "ResourceGroups": [resource_group_json(rg) for rg in pg.resource_groups()],
            **dict_value(pg.extra)}


def plan_json(p: plan.PlanOp) -> dict[str, Any]:
    operators = p.task_operators()
    task_infos = [{"Id": task.task_id, "NumWarps": task.warps, "SramBytes": task.sram,
                   "Ops": [operator_json(op) for op in operators.get(task.task_id, [])],
                   **dict_value(task.extra)}
                  for task in p.tasks().values()]
    header: dict[str, Any] = {
        "Rank": p.rank.value.data, "WorldSize": p.world_size.value.data,
        "Architecture": p.arch_name,
        "NumProcessors": p.processor_count, "NumWarpsPerProcessor": p.warps_per_processor,
        "TaskInfos": task_infos,
        "ProcessorGroups": [processor_group_json(pg) for pg in p.processor_groups()],
    }
    if p.arch_name is None:
        del header["Architecture"]
    order = ([a.data for a in p.key_order.data] if p.key_order is not None
             else list(plan.PlanOp.HEADER_KEYS))
    doc = {key: header[key] for key in order if key in header}
    doc.update(dict_value(p.extra))
    return doc


def single_plan(module: ModuleOp) -> plan.PlanOp:
    return single_root(module, plan.PlanOp)


def emit_plan(module: ModuleOp, layout: str = "denser") -> str:
    doc = plan_json(single_plan(module))
    return indented_json(doc) if layout == "indented" else denser_json(doc, PLAN_DEPTH)


def pipeline(source_format: str, options: Namespace) -> str:
    if source_format == "ark-plan":
        return ""
    raise PlancError(f"cannot make an ARK plan from a {source_format} document yet")


def emit(module: ModuleOp, options: Namespace) -> str:
    return emit_plan(module, getattr(options, "json_layout", None) or "denser")
