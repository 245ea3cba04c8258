"""Small ARK plan documents for tests: the small test model, one task per operator."""

from __future__ import annotations

import copy

from tests.ark.fixtures import small_model_doc


def small_plan_doc() -> dict:
    """x[4,8] @ w[16,8]^T (one 4x16 tile) -> sigmoid -> add, element-wise tiles [1,8]."""
    model = small_model_doc()
    task_infos = []
    groups = []
    for node in model["Nodes"]:
        op = copy.deepcopy(node["Op"])
        task_id = node["Id"]
        if op["Type"] == "Matmul":
            op["Config"] = {"NumWarps": 4, "SramBytes": 8192, "TileShapeMNK": [4, 16, 8],
                            "NumTasks": 1}
        else:
            op["Config"] = {"NumWarps": 1, "SramBytes": 0, "Tile": [1, 8], "NumTasks": 8}
        config = op["Config"]
        task_infos.append({"Id": task_id, "NumWarps": config["NumWarps"],
                           "SramBytes": config["SramBytes"], "Ops": [op]})
        groups.append({"ProcessorRange": [0, 2], "ResourceGroups": [{
            "ProcessorRange": [0, 2], "WarpRange": [0, 4], "SramRange": [0, config["SramBytes"]],
            "TaskGroups": [{"TaskId": task_id, "TaskRange": [0, config["NumTasks"]],
                            "Granularity": 1}]}]})
    return {"Rank": 0, "WorldSize": 1, "Architecture": "CUDA_80", "NumProcessors": 2,
            "NumWarpsPerProcessor": 4, "TaskInfos": task_infos, "ProcessorGroups": groups}


def sigmoid_over_matmul(doc: dict) -> None:
    """Edit `small_plan_doc()` in place: sigmoid writes its result into the matmul result's
    buffer, which add still reads (two live tensors in one buffer)."""
    mm = doc["TaskInfos"][0]["Ops"][0]["WriteTensors"][0]["Buffer"]
    sig = doc["TaskInfos"][1]["Ops"][0]
    sig_id = sig["ResultTensors"][0]["Id"]
    for key in ("WriteTensors", "ResultTensors"):
        sig[key][0]["Buffer"] = copy.deepcopy(mm)
    for t in doc["TaskInfos"][2]["Ops"][0]["ReadTensors"]:
        if t["Id"] == sig_id:
            t["Buffer"] = copy.deepcopy(mm)
