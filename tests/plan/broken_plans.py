"""ARK plans of the classes that break on real runtimes, built from the small test plan.
tests/plan/test_check.py checks planc check rejects each; `python3 -m tests.plan.broken_plans`
rewrites the lit inputs in tests/filecheck/plan/Inputs from these builders."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from tests.plan.fixtures import small_plan_doc

INPUTS = Path(__file__).resolve().parent.parent / "filecheck" / "plan" / "Inputs"


def _groups(doc: dict, *pgs: tuple[list[int], list[tuple[int, list[int]]]]) -> dict:
    """Replace the processor groups: each (processor range, [(task id, task range)])."""
    doc["ProcessorGroups"] = [
        {"ProcessorRange": procs, "ResourceGroups": [{
            "ProcessorRange": procs, "WarpRange": [0, 4], "SramRange": [0, 8192],
            "TaskGroups": [{"TaskId": task, "TaskRange": tasks, "Granularity": 1}
                           for task, tasks in groups]}]}
        for procs, groups in pgs]
    return doc


def rotation_skips_tasks() -> dict:
    """Six processors; the element-wise task split over two task groups of one resource group
    [2, 5): ARK rotates the second group's start within the group (to processor 3) but
    computes positions modulo the grid of 6, so processor 2 gets position 5 and skips."""
    doc = small_plan_doc()
    doc["NumProcessors"] = 6
    return _groups(doc, ([0, 6], [(0, [0, 1])]), ([2, 5], [(1, [0, 4]), (1, [4, 8])]),
                   ([0, 6], [(2, [0, 8])]))


def too_few_tasks() -> dict:
    """The sigmoid's task groups run 4 of its 8 tiles."""
    doc = small_plan_doc()
    return _groups(doc, ([0, 2], [(0, [0, 1])]), ([0, 2], [(1, [0, 4])]),
                   ([0, 2], [(2, [0, 8])]))


def overlapping_split_matmul() -> dict:
    """The matmul tiled by rows (4 tiles) and split over two TaskInfos whose task ranges
    [0, 3) and [1, 3) overlap on tiles 1 and 2 and both miss tile 3."""
    doc = small_plan_doc()
    matmul = doc["TaskInfos"][0]
    matmul["Ops"][0]["Config"].update(TileShapeMNK=[1, 16, 8], NumTasks=4)
    copy_ = copy.deepcopy(matmul)
    copy_["Id"] = 3
    doc["TaskInfos"].append(copy_)
    return _groups(doc, ([0, 2], [(0, [0, 3])]), ([0, 2], [(3, [1, 3])]),
                   ([0, 2], [(1, [0, 8])]), ([0, 2], [(2, [0, 8])]))


def unordered_read_through_a_slice() -> dict:
    """The sigmoid reads rows 2-3 of the matmul's output through a view of its own (tensor 99,
    no SSA link to the matmul) on processor 1, while the matmul runs on processor 0 in the
    group before: the two processor ranges are disjoint, so ARK puts no barrier between them
    and the sigmoid may read the rows before the matmul wrote them."""
    doc = small_plan_doc()
    sigmoid = doc["TaskInfos"][1]["Ops"][0]
    sigmoid["ReadTensors"][0].update(Id=99, Shape=[2, 16], Offsets=[2, 0],
                                     PaddedShape=[2, 16])
    for key, new_id in (("WriteTensors", 97), ("ResultTensors", 96)):
        sigmoid[key][0].update(Id=new_id, Shape=[2, 16], Offsets=[2, 0], PaddedShape=[2, 16])
    sigmoid["Config"]["NumTasks"] = 4
    return _groups(doc, ([0, 1], [(0, [0, 1])]), ([1, 2], [(1, [0, 4])]),
                   ([0, 2], [(2, [0, 8])]))


BROKEN = {"rotation_skips_tasks": rotation_skips_tasks, "too_few_tasks": too_few_tasks,
          "overlapping_split_matmul": overlapping_split_matmul,
          "unordered_read_through_a_slice": unordered_read_through_a_slice}


def main() -> None:
    INPUTS.mkdir(parents=True, exist_ok=True)
    for name, build in BROKEN.items():
        (INPUTS / f"{name}.json").write_text(json.dumps(build(), indent=1) + "\n")


if __name__ == "__main__":
    main()
