"""planc check on ARK plans: the symbolic verdicts against brute force, the broken classes,
the real plans and planc's own."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.checking import check_file
from dialects.plan import Range
from targets.ark.coverage import Progression, cover
from targets.ark.plan_check import runtime_blocks
from tests.conftest import EXAMPLES, corpus_params, small_ffn_doc, write_json
from tests.plan import broken_plans

# -- the arithmetic, against counting --------------------------------------------------------

progressions = st.builds(lambda b, n, s: Progression(b, b + n, s),
                         st.integers(-5, 40), st.integers(0, 40), st.integers(1, 6))


@settings(max_examples=300, deadline=None)
@given(st.lists(progressions, max_size=6), st.integers(0, 60))
def test_cover_counts_like_brute_force(aps, size):
    counts = {}
    for p in aps:
        for i in range(p.begin, p.end, p.step):
            counts[i] = counts.get(i, 0) + 1
    result = cover(aps, size)
    inside = [counts.get(i, 0) for i in range(size)]
    assert result.missing == inside.count(0)
    assert result.repeated == sum(c > 1 for c in inside)
    assert result.outside == sum(c for i, c in counts.items() if not 0 <= i < size)
    if result.missing:
        assert result.first_missing == inside.index(0)
    if result.repeated:
        assert result.first_repeated == next(i for i, c in enumerate(inside) if c > 1)


def ark_task_seq(grid: int, procs: Range, current: int, tasks: Range, gran: int) -> list[int]:
    """Every task index ARK's task_seq template runs, executed as the CUDA code does it."""
    ran = []
    n = len(procs)
    for block in range(grid):
        if not (procs.begin <= block < procs.end and (block - procs.begin) % procs.step == 0):
            continue
        p = ((block + grid - current) % grid) // procs.step
        t = 0
        while True:
            task = tasks.begin + p * tasks.step * gran + tasks.step * (
                t % gran + t // gran * gran * n)
            if task >= tasks.end:
                break
            ran.append(task)
            t += 1
    return ran


@pytest.mark.parametrize("seed", range(40))
def test_runtime_distribution_matches_arks_task_seq(seed):
    rng = random.Random(seed)
    grid = rng.randint(1, 24)
    step = rng.randint(1, 3)
    begin = rng.randint(0, grid - 1)
    procs = Range(begin, rng.randint(begin + 1, grid), step)
    first = rng.randrange(len(procs))
    tasks = Range(rng.randint(0, 5), rng.randint(6, 80), 1)
    gran = rng.randint(1, 4)
    ran = ark_task_seq(grid, procs, procs.begin + first * step, tasks, gran)
    blocks = -(-len(tasks) // gran)
    result = cover(runtime_blocks(procs, first, grid, blocks, "ark"), blocks)
    expected = sorted(ran) == list(tasks)
    assert (result.missing == 0 and result.repeated == 0) == expected
    # The planc runtime (rotation within the group) always runs every task once.
    assert cover(runtime_blocks(procs, first, grid, blocks, "planc"), blocks).exact


# -- the broken classes ----------------------------------------------------------------------


@pytest.mark.parametrize("name, rule, words", [
    ("rotation_skips_tasks", "ark-plan.task-distribution", "1 task never run"),
    ("too_few_tasks", "ark-plan.task-coverage", "4 tasks never run"),
    ("overlapping_split_matmul", "ark-plan.split-coverage", "1 tiles never run"),
    ("unordered_read_through_a_slice", "ark-plan.unordered-access", "buffer 2 bytes [128, 256)"),
])
def test_broken_classes_are_rejected(tmp_path, name, rule, words):
    doc = broken_plans.BROKEN[name]()
    report = check_file(str(write_json(tmp_path / f"{name}.json", doc)))
    errors = [f for f in report.findings if f.severity == "error"]
    assert not report.ok and errors[0].rule == rule and words in errors[0].message
    assert errors[0].path.startswith("$.")


def test_lit_inputs_are_what_the_builders_make():
    for name, build in broken_plans.BROKEN.items():
        path = broken_plans.INPUTS / f"{name}.json"
        assert json.loads(path.read_text()) == build(), f"rerun python3 -m {broken_plans.__name__}"


def test_ordering_through_a_barrier_is_accepted(tmp_path):
    """The same slice read with the reader's processor group overlapping the writer's: ARK
    synchronises them, and the plan is right."""
    doc = broken_plans.unordered_read_through_a_slice()
    doc["ProcessorGroups"][1]["ProcessorRange"] = [0, 2]
    doc["ProcessorGroups"][1]["ResourceGroups"][0]["ProcessorRange"] = [0, 2]
    report = check_file(str(write_json(tmp_path / "ordered.json", doc)))
    assert report.ok and not report.findings


def test_disjoint_slices_do_not_conflict(tmp_path):
    """Writer and reader on concurrent processors, on column halves of one [4, 16] buffer:
    their byte hulls overlap, but boxes of one layout are compared per dimension, so the
    matmul writing columns [0, 8) and the sigmoid reading columns [8, 16) do not conflict;
    moved onto the same columns, they do."""
    def plan(read_columns_from: int) -> dict:
        doc = broken_plans.unordered_read_through_a_slice()
        matmul = doc["TaskInfos"][0]["Ops"][0]
        for key, new_id in (("WriteTensors", 88), ("ResultTensors", 87)):
            matmul[key][0].update(Id=new_id, Shape=[4, 8], PaddedShape=[4, 8])
        matmul["ReadTensors"][1].update(Id=86, Shape=[8, 8], PaddedShape=[8, 8])
        matmul["Config"].update(TileShapeMNK=[4, 8, 8])
        sigmoid = doc["TaskInfos"][1]["Ops"][0]
        sigmoid["ReadTensors"][0].update(Shape=[4, 8], Offsets=[0, read_columns_from],
                                         PaddedShape=[4, 8])
        for key, new_id in (("WriteTensors", 85), ("ResultTensors", 84)):
            sigmoid[key][0].update(Id=new_id, Shape=[4, 8], Offsets=[0, 0],
                                   PaddedShape=[4, 8])
        return doc

    def rules(doc):
        return {f.rule for f in check_file(str(write_json(tmp_path / "d.json", doc))).findings}

    assert "ark-plan.unordered-access" not in rules(plan(8))
    assert "ark-plan.unordered-access" in rules(plan(0))


# -- real plans and planc's own --------------------------------------------------------------


@pytest.mark.parametrize("path", corpus_params("ark", "*plan*.json"))
def test_real_ark_plans_have_no_errors(path):
    report = check_file(str(path))
    assert report.ok, [str(f) for f in report.findings if f.severity == "error"][:3]


@pytest.mark.parametrize("arch", ["a100", "h100", "mi300x"])
@pytest.mark.parametrize("example", ["ffn.json", "attention.json"])
def test_plancs_plans_pass_strict_check_under_arks_runtime(planc, tmp_path, arch, example):
    plan = tmp_path / "p.json"
    assert planc(EXAMPLES / example, "-t", "ark", "--arch", arch, "-o", plan).code == 0
    result = planc("check", "--strict", plan)
    assert result.code == 0, result.err


# -- a task group removed ----------------------------------------------------------------------


def _without(doc, pg, rg=None):
    changed = json.loads(json.dumps(doc))
    if rg is None:
        del changed["ProcessorGroups"][pg]
    else:
        del changed["ProcessorGroups"][pg]["ResourceGroups"][rg]
    return changed


def test_a_removed_producer_task_group_is_an_error(planc, tmp_path):
    """planc's plan of the small FFN: task 0 (the fused gate and up projections) and task 1
    (the down projection, the model's output). Removing either group leaves a reader, or the
    model's output, with bytes nothing wrote: an error at that TaskInfo (it was only a
    warning, `unscheduled-task`). The tile simulator, run on NaN-filled memory, agrees."""
    plan = tmp_path / "ffn.plan.json"
    model = write_json(tmp_path / "ffn.json", small_ffn_doc())
    assert planc(model, "-t", "ark", "--arch", "a100", "-o", plan).code == 0
    doc = json.loads(plan.read_text())
    assert [t["Ops"][-1]["Name"] for t in doc["TaskInfos"]] == ["mul_1", "matmul_2"]
    cases = {"gate": (0, "'matmul_2' (task 1) reads what 'mul_1' produces"),
             "down": (1, "'matmul_2' computes an output of the model")}
    for name, (task, text) in cases.items():
        path = write_json(tmp_path / f"{name}.json", _without(doc, task))
        found = check_file(str(path)).findings
        assert [(f.rule, f.severity, f.path) for f in found] == [
            ("ark-plan.missing-producer", "error", f"$.TaskInfos[{task}]")], found
        assert text in found[0].message
        assert planc("simulate", path).code == 1, name


def test_a_removed_split_k_half_is_an_error(planc, tmp_path):
    """planc's plan of examples/ffn.json splits the down projection over K (tasks 1 to 3,
    summed by task 4): without one part's resource group, the sum reads a partial product
    nothing computed."""
    plan = tmp_path / "ffn.plan.json"
    assert planc(EXAMPLES / "ffn.json", "-t", "ark", "--arch", "a100", "-o", plan).code == 0
    doc = json.loads(plan.read_text())
    assert [t["Ops"][0]["Name"] for t in doc["TaskInfos"]][1:] == [
        "matmul_2", "matmul_2_k1", "matmul_2_k2", "matmul_2_sum"]
    found = check_file(str(write_json(tmp_path / "half.json", _without(doc, 1, 0)))).findings
    assert [(f.rule, f.severity, f.path) for f in found] == [
        ("ark-plan.missing-producer", "error", "$.TaskInfos[1]")]
    assert "'matmul_2_sum' (task 4) reads what 'matmul_2' produces" in found[0].message
