"""The ARK plan file's document as Python values, built from the `plan` dialect: what
`--target ark` writes (`plan_json`), and the parts of it that the plan text writer
(`backends.plan_text`) falls back on for task groups with unusual members."""

from __future__ import annotations

from typing import Any

from backends.ark_model import operator_json
from dialects import plan
from dialects.json_value import dict_value


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


def plan_json(p: plan.PlanOp, shared: bool = False) -> dict[str, Any]:
    """The plan file's document. With `shared`, operators whose Config attribute is one
    object (kernels with one tiling) share one Config dict: for writing it out at once, not
    for editing."""
    operators = p.task_operators()
    tensors: dict = {}
    configs: dict | None = {} if shared else None
    task_infos = [{"Id": task.task_id, "NumWarps": task.warps, "SramBytes": task.sram,
                   "Ops": [operator_json(op, tensors, configs)
                           for op in operators.get(task.task_id, [])],
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
