"""ARK plans for the code generator's tests, written directly (no planner).

`plan_doc(model)` gives every operator of a model its own TaskInfo with a simple Config and
its own processor group; the other helpers reshape such a plan into what hand-tuned plans do:
fused tasks, non-contiguous ids, several task groups per resource group, steps and starts,
concurrent processor groups.
"""

from __future__ import annotations

import copy
import json
import math

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region

from backends.ark_model import emit_model
from dialects import ark
from dialects.locations import verify_module
from dialects.plan import output_tile_count
from frontends.ark_model import import_document as import_model
from frontends.ark_plan import import_document as import_plan
from ground.json_reader import JsonNode


def model_doc(module: ModuleOp) -> dict:
    return json.loads(emit_model(module))


def config_for(op: dict, tile: list[int] | None = None) -> dict:
    """A simple valid Config for one operator (JSON form)."""
    kind = op["Type"]
    out = (op["WriteTensors"] or op["ResultTensors"])[0]["Shape"]
    if kind == "Matmul":
        a, b = (t["Shape"] for t in op["ReadTensors"])
        trans_a = op["Args"]["TransposeInput"]["BOOL"]
        trans_b = op["Args"]["TransposeOther"]["BOOL"]
        m = a[-1] if trans_a else ([1] + a)[-2]
        n = b[-2] if trans_b else b[-1]
        k = ([1] + a)[-2] if trans_a else a[-1]
        tm, tn, tk = tile or [min(16, m), min(32, n), min(16, k)]
        batch = math.prod(out[:-2]) if len(out) > 2 else 1
        return {"NumWarps": 4, "SramBytes": (tm + tn) * tk * 4, "TileShapeMNK": [tm, tn, tk],
                "NumTasks": batch * math.ceil(m / tm) * math.ceil(n / tn)}
    if kind.startswith("Reduce"):
        x = op["ReadTensors"][0]["Shape"]
        last = op["Args"]["Axis"]["INT"] == len(x) - 1
        config = {"NumWarps": 1, "ImplType": "WarpWise" if last else "ElementWise",
                  "SramBytes": 0, "NumTasks": math.prod(out)}
        if tile is not None:
            config["Tile"] = tile
            config["NumTasks"] = output_tile_count(out, tile)
        return config
    if kind == "Embedding":
        return {"NumWarps": 1, "SramBytes": 0, "NumTasks": math.prod(out[:-1])}
    if kind in ("Send", "SendDone", "Recv", "DeviceSync"):
        return {"ChannelType": "Proxy", "NumTasks": 1, "NumWarps": 1, "SramBytes": 0}
    if kind == "Noop":
        return {"NumWarps": 1, "SramBytes": 0, "NumTasks": 0}
    tile = tile or ([4, 4] if kind == "Transpose" else [2, 8])
    return {"NumWarps": 1, "SramBytes": 0, "Tile": tile,
            "NumTasks": output_tile_count(out, tile)}


def plan_doc(model: ModuleOp | dict, *, processors: int = 4, warps: int = 4,
             tiles: dict[str, list[int]] | None = None) -> dict:
    """One TaskInfo and one processor group per operator, ARK's default planner's shape.

    `tiles` overrides the tile of operators by name.
    """
    doc = model if isinstance(model, dict) else model_doc(model)
    tiles = tiles or {}
    task_infos, groups = [], []
    for node in doc["Nodes"]:
        op = copy.deepcopy(node["Op"])
        if op["IsVirtual"]:
            continue
        op["Config"] = config = config_for(op, tiles.get(op["Name"]))
        task_id = len(task_infos)
        task_infos.append({"Id": task_id, "NumWarps": config["NumWarps"],
                           "SramBytes": config["SramBytes"], "Ops": [op]})
        count = config["NumTasks"]
        used = max(1, min(processors, count))
        slots = max(1, warps // config["NumWarps"])
        groups.append({"ProcessorRange": [0, used], "ResourceGroups": [{
            "ProcessorRange": [0, used], "WarpRange": [0, warps],
            "SramRange": [0, config["SramBytes"] * slots],
            "TaskGroups": [{"TaskId": task_id, "TaskRange": [0, count], "Granularity": 1}]}]})
    return {"Rank": doc["Rank"], "WorldSize": doc["WorldSize"], "Architecture": "CUDA_80",
            "NumProcessors": processors, "NumWarpsPerProcessor": warps,
            "TaskInfos": task_infos, "ProcessorGroups": groups}


def import_plan_doc(doc: dict) -> ModuleOp:
    module = import_plan(JsonNode(doc))
    verify_module(module)
    return module


def import_model_doc(doc: dict) -> ModuleOp:
    module = import_model(JsonNode(doc))
    verify_module(module)
    return module


# -- reshaping plans ---------------------------------------------------------------------------


def task_index(doc: dict, task_id: int) -> int:
    return next(i for i, t in enumerate(doc["TaskInfos"]) if t["Id"] == task_id)


def group_of(doc: dict, task_id: int) -> dict:
    return next(pg for pg in doc["ProcessorGroups"]
                if any(tg["TaskId"] == task_id for rg in pg["ResourceGroups"]
                       for tg in rg["TaskGroups"]))


def fuse(doc: dict, task_ids: list[int]) -> dict:
    """One TaskInfo running the operators of `task_ids` per task index, in the first's place
    (the operators must tile their outputs alike)."""
    doc = copy.deepcopy(doc)
    first = doc["TaskInfos"][task_index(doc, task_ids[0])]
    for task_id in task_ids[1:]:
        info = doc["TaskInfos"].pop(task_index(doc, task_id))
        first["Ops"].extend(info["Ops"])
        first["NumWarps"] = max(first["NumWarps"], info["NumWarps"])
        first["SramBytes"] = max(first["SramBytes"], info["SramBytes"])
        doc["ProcessorGroups"].remove(group_of(doc, task_id))
    return doc


def renumber(doc: dict, new_ids: dict[int, int]) -> dict:
    """TaskInfo ids replaced (e.g. by non-contiguous ones), references updated."""
    doc = copy.deepcopy(doc)
    for info in doc["TaskInfos"]:
        info["Id"] = new_ids.get(info["Id"], info["Id"])
    for pg in doc["ProcessorGroups"]:
        for rg in pg["ResourceGroups"]:
            for tg in rg["TaskGroups"]:
                tg["TaskId"] = new_ids.get(tg["TaskId"], tg["TaskId"])
    return doc


def num_tasks(doc: dict, task_id: int) -> int:
    return doc["TaskInfos"][task_index(doc, task_id)]["Ops"][0]["Config"]["NumTasks"]


def split_task_group(doc: dict, task_id: int, parts: list[dict]) -> dict:
    """The resource group running `task_id` runs it as several task groups instead: `parts`
    are TaskGroup fields ({"TaskRange": [b, e, s], "Granularity": g}) that together cover
    NumTasks."""
    doc = copy.deepcopy(doc)
    rg = group_of(doc, task_id)["ResourceGroups"][0]
    rg["TaskGroups"] = [{"TaskId": task_id, **part} for part in parts]
    return doc


def set_resources(doc: dict, task_id: int, *, processors: list[int] | None = None,
                  warps: list[int] | None = None, sram: list[int] | None = None,
                  group_processors: list[int] | None = None) -> dict:
    doc = copy.deepcopy(doc)
    pg = group_of(doc, task_id)
    rg = pg["ResourceGroups"][0]
    if processors is not None:
        rg["ProcessorRange"] = processors
        pg["ProcessorRange"] = group_processors or processors
    if warps is not None:
        rg["WarpRange"] = warps
    if sram is not None:
        rg["SramRange"] = sram
    return doc


def set_task_sram(doc: dict, task_id: int, sram: int) -> dict:
    """The task (and its operators' Configs) reserve `sram` bytes; its resource group has
    exactly that much."""
    doc = copy.deepcopy(doc)
    info = doc["TaskInfos"][task_index(doc, task_id)]
    info["SramBytes"] = sram
    for op in info["Ops"]:
        op["Config"]["SramBytes"] = sram
    group_of(doc, task_id)["ResourceGroups"][0]["SramRange"] = [0, sram]
    return doc


def merge_groups(doc: dict, task_ids: list[int]) -> dict:
    """The processor groups of `task_ids` become one whose resource groups run side by side
    (their processor ranges must be disjoint or their warps distinct)."""
    doc = copy.deepcopy(doc)
    groups = [group_of(doc, t) for t in task_ids]
    merged = groups[0]
    for pg in groups[1:]:
        merged["ResourceGroups"].extend(pg["ResourceGroups"])
        doc["ProcessorGroups"].remove(pg)
    ranges = [rg["ProcessorRange"] for rg in merged["ResourceGroups"]]
    merged["ProcessorRange"] = [min(r[0] for r in ranges), max(r[1] for r in ranges)]
    return doc


def plan_as_model(module: ModuleOp) -> ModuleOp:
    """The plan's operators, in TaskInfo order, as a model: the reference for a plan that was
    not made from a model at hand (e.g. a hand-tuned upstream plan)."""
    from backends.ark_plan import single_plan
    from dialects import plan

    p = single_plan(module)
    block, mapping = Block(), {}
    for op in p.graph.ops:
        if not isinstance(op, (plan.TaskOp, plan.ProcessorGroupOp)):
            block.add_op(op.clone(value_mapper=mapping))
    return ModuleOp([ark.ModelOp(p.rank.value.data, p.world_size.value.data, Region(block))])


def operators_by_name(module: ModuleOp) -> dict[str, ark.ArkOp]:
    return {op.label.data: op for op in module.walk() if isinstance(op, ark.ArkOp)}
