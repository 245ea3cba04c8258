"""Value flow of ARK plans (issue 25): generated families of realistic single mistakes in
planc's own plans, each rejected by `planc check` with the right rule at the right place, and
look-alike legal edits accepted. The places are found by the tests from the plan's JSON alone
(which tensor each operator reads and which processor group runs it), not from the checker;
on a few cases the tile simulator, run on NaN-filled memory, gives the same verdict a second
way."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path

import pytest

from backends.ark_model import emit_model
from compiler.checking import check_file
from frontends.model_zoo import generated
from tests.conftest import EXAMPLES, write_json

# -- the plans and what the tests read from their JSON ---------------------------------------


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict[str, dict]:
    """planc's A100 plans of a generated 40-operator MLP stack and of examples/ffn.json (whose
    down projection planc splits along K into parts summed by a later task)."""
    from compiler.driver import main

    tmp = tmp_path_factory.mktemp("plans")
    model = tmp / "stack.json"
    model.write_text(emit_model(generated(40, width=128, seq=32)))
    found = {}
    for name, source in (("stack", model), ("ffn", EXAMPLES / "ffn.json")):
        out = tmp / f"{name}.plan.json"
        assert main([str(source), "-t", "ark", "--arch", "a100", "-o", str(out)]) == 0
        found[name] = json.loads(out.read_text())
    return found


def processor_group_of(doc: dict) -> dict[int, int]:
    """TaskInfo id -> the first processor group that runs it."""
    found: dict[int, int] = {}
    for i, pg in enumerate(doc["ProcessorGroups"]):
        for rg in pg["ResourceGroups"]:
            for tg in rg["TaskGroups"]:
                found.setdefault(tg["TaskId"], i)
    return found


def operators(doc: dict):
    """(TaskInfo index, op index, TaskInfo id, op) of every operator."""
    for ti, task in enumerate(doc["TaskInfos"]):
        for oi, op in enumerate(task["Ops"]):
            yield ti, oi, task["Id"], op


def findings(tmp_path: Path, doc: dict, name: str = "c.json") -> set[tuple[str, str, str]]:
    return {(f.rule, f.severity, f.path or "$")
            for f in check_file(str(write_json(tmp_path / name, doc))).findings}


def _set_buffer(node, ids: set[int], buffer: dict) -> None:
    """Put the tensors of `ids` (wherever an operator names them) in `buffer`."""
    if isinstance(node, dict):
        if node.get("Id") in ids and "Buffer" in node:
            node["Buffer"] = dict(buffer)
        for value in node.values():
            _set_buffer(value, ids, buffer)
    elif isinstance(node, list):
        for value in node:
            _set_buffer(value, ids, buffer)


# -- mistakes ---------------------------------------------------------------------------------


def result_over_live_tensor(doc: dict, most: int = 12):
    """The memory planner puts an operator Q's result in the buffer of a tensor L that is
    still live: produced in an earlier processor group and read in a later one than Q's (of
    the same layout, so only the liveness is wrong). Expected: `clobbered-value` at Q."""
    pg = processor_group_of(doc)
    produced, read_in = {}, {}
    for _, _, task, op in operators(doc):
        for t in op["ReadTensors"]:
            read_in.setdefault(t["Id"], []).append(pg[task])
        for t in op["ResultTensors"]:
            produced.setdefault(t["Id"], (pg[task], t))
    made = 0
    for ti, oi, task, op in operators(doc):
        w = op["WriteTensors"][0]
        for tensor, (when, live) in produced.items():
            if (live["Buffer"]["Id"] != w["Buffer"]["Id"] and live["Strides"] == w["Strides"]
                    and live["DataType"] == w["DataType"] and when < pg[task]
                    and any(r > pg[task] for r in read_in.get(tensor, []))):
                changed = copy.deepcopy(doc)
                _set_buffer(changed, {w["Id"], op["ResultTensors"][0]["Id"]}, live["Buffer"])
                yield (f"{op['Name']} over tensor {tensor}", changed,
                       ("ark-plan.clobbered-value", f"$.TaskInfos[{ti}].Ops[{oi}]"))
                made += 1
                break
        if made >= most:
            return


def removed_producer_group(doc: dict, most: int = 6):
    """A processor group deleted whose TaskInfo's results a later one reads (each of planc's
    processor groups runs one TaskInfo): `missing-producer` at that TaskInfo."""
    index = {t["Id"]: i for i, t in enumerate(doc["TaskInfos"])}
    for i, pg in enumerate(doc["ProcessorGroups"][:most]):
        (task,) = {tg["TaskId"] for rg in pg["ResourceGroups"] for tg in rg["TaskGroups"]}
        changed = copy.deepcopy(doc)
        del changed["ProcessorGroups"][i]
        yield (f"processor group {i} removed", changed,
               ("ark-plan.missing-producer", f"$.TaskInfos[{index[task]}]"))


def consumer_before_producer(doc: dict, most: int = 6):
    """Two processor groups swapped where the second reads what the first produces: the
    reader (the first operator of the second's TaskInfo that reads a result of the first's)
    runs before its producer: `unwritten-read` at it."""
    pg = processor_group_of(doc)
    by_pg = {i: t for t, i in pg.items()}
    results = {t["Id"]: task for _, _, task, op in operators(doc)
               for t in op["ResultTensors"]}
    made = 0
    for i in range(len(doc["ProcessorGroups"]) - 1):
        producer, consumer = by_pg[i], by_pg[i + 1]
        reader = next(((ti, oi) for ti, oi, task, op in operators(doc) if task == consumer
                       and any(results.get(t["Id"]) == producer for t in op["ReadTensors"])),
                      None)
        if reader is None:
            continue
        changed = copy.deepcopy(doc)
        groups = changed["ProcessorGroups"]
        groups[i], groups[i + 1] = groups[i + 1], groups[i]
        yield (f"processor groups {i} and {i + 1} swapped", changed,
               ("ark-plan.unwritten-read", f"$.TaskInfos[{reader[0]}].Ops[{reader[1]}]"))
        made += 1
        if made >= most:
            return


def k_parts(doc: dict) -> list[tuple[int, int]]:
    """(TaskInfo index, K offset) of the FFN's split down projection: the one-Matmul tasks
    that run concurrently as resource groups of one processor group, in K order."""
    index = {task["Id"]: i for i, task in enumerate(doc["TaskInfos"])}
    pg = next(pg for pg in doc["ProcessorGroups"] if len(pg["ResourceGroups"]) > 1)
    parts = []
    for rg in pg["ResourceGroups"]:
        ti = index[rg["TaskGroups"][0]["TaskId"]]
        ops = doc["TaskInfos"][ti]["Ops"]
        if len(ops) == 1 and ops[0]["Type"] == "Matmul":
            parts.append((ti, ops[0]["ReadTensors"][0]["Offsets"][-1]))
    return sorted(parts, key=lambda part: part[1])


def overlapping_split_k(doc: dict):
    """A K part of the FFN's split down projection reads K slices that overlap the part
    before it (its K offset moved down by one and two tiles of 64, by half its distance to the
    part before, or onto that part's start), or the part before reads into it (moved up by one
    tile): `split-k-overlap` at the later part, whatever the number of parts the planner
    chose."""
    parts = k_parts(doc)
    assert len(parts) >= 2, parts

    def shifted(task: int, shift: int, later: int):
        changed = copy.deepcopy(doc)
        op = changed["TaskInfos"][task]["Ops"][0]
        for tensor in op["ReadTensors"]:
            tensor["Offsets"][-1] += shift
            tensor["Id"] += 1000          # a view of its own (the same Id must agree)
        return (f"K part of task {task} shifted by {shift}", changed,
                ("ark-plan.split-k-overlap", f"$.TaskInfos[{later}].Ops[0]"))

    for (before, start), (later, offset) in itertools.pairwise(parts):
        gap = offset - start
        for shift in sorted({64, 128, gap // 2 // 64 * 64 or 64, gap}):
            yield shifted(later, -shift, later)
        yield shifted(before, 64, later)


def mistakes(plans: dict[str, dict]) -> list[tuple[str, dict, tuple[str, str]]]:
    stack, ffn = plans["stack"], plans["ffn"]
    return [*result_over_live_tensor(stack), *removed_producer_group(stack),
            *consumer_before_producer(stack), *overlapping_split_k(ffn)]


def test_the_family_is_large(plans):
    assert len(mistakes(plans)) >= 20


VALUE_FLOW = {"ark-plan.unwritten-read", "ark-plan.clobbered-value"}


def test_each_mistake_is_rejected_with_its_rule_at_its_place(plans, tmp_path):
    for name, doc, (rule, path) in mistakes(plans):
        found = findings(tmp_path, doc)
        assert (rule, "error", path) in found, (name, found)
        if "swapped" in name:
            # A swap has two victims: the reader that now runs first, and values the moved
            # producer's writes now go over (each a value-flow error of its own).
            assert {r for r, _, _ in found} <= VALUE_FLOW, (name, found)
        else:
            # The mistake, not its symptoms: no other operator or TaskInfo is blamed.
            assert {p for _, _, p in found} == {path}, (name, found)


# -- look-alike legal edits --------------------------------------------------------------------


def _renamed(doc: dict) -> dict:
    changed = copy.deepcopy(doc)
    for _, _, _, op in operators(changed):
        op["Name"] = "renamed_" + op["Name"]
    return changed


def _renumbered_tensors(doc: dict) -> dict:
    changed = copy.deepcopy(doc)

    def shift(node):
        if isinstance(node, dict):
            if "Buffer" in node and "Id" in node:
                node["Id"] += 5000
                node["Buffer"]["Id"] += 300
            for value in node.values():
                shift(value)
        elif isinstance(node, list):
            for value in node:
                shift(value)

    shift(changed["TaskInfos"])
    return changed


def _independent_groups_swapped(doc: dict) -> dict:
    """The FFN's K parts run concurrently as resource groups of one processor group:
    their order in the group is cosmetic."""
    changed = copy.deepcopy(doc)
    rgs = next(pg for pg in changed["ProcessorGroups"] if len(pg["ResourceGroups"]) > 1
               )["ResourceGroups"]
    rgs.reverse()
    return changed


def look_alikes(plans: dict[str, dict]) -> list[tuple[str, dict]]:
    return [(f"{kind} {name}", edit(plans[name])) for name in ("stack", "ffn")
            for kind, edit in (("renamed", _renamed), ("renumbered", _renumbered_tensors))
            ] + [("K parts reordered", _independent_groups_swapped(plans["ffn"]))]


def test_look_alike_edits_are_accepted(plans, tmp_path):
    for name, doc in [("as planned", plans["stack"]), ("as planned", plans["ffn"]),
                      *look_alikes(plans)]:
        result = check_file(str(write_json(tmp_path / "ok.json", doc)))
        assert result.ok and not result.findings, (name, result.findings)


# -- a second way: the tile simulator ------------------------------------------------------------


def test_the_simulator_agrees_on_samples(plans, tmp_path, planc):
    """The tile simulator runs the plan in ARK's order on NaN-filled memory and compares every
    output with the model's: it fails the value-flow mistakes the checker rejects, and passes
    the look-alikes it accepts."""
    rejected = [m for m in mistakes(plans) if m[2][0] != "ark-plan.split-k-overlap"]
    samples = [rejected[0], rejected[13], rejected[-1]]
    for name, doc, _ in samples:
        path = write_json(tmp_path / "bad.json", doc)
        assert planc("simulate", path).code == 1, name
    for name, doc in look_alikes(plans)[:2]:
        path = write_json(tmp_path / "good.json", doc)
        assert planc("simulate", path).code == 0, name


# -- translation validation ----------------------------------------------------------------------


def test_a_lowering_whose_plan_is_wrong_is_an_internal_error_and_writes_nothing(
        planc, tmp_path, monkeypatch):
    """`planc MODEL -t ark` proves its plan (`targets.ark.plan_check`) before writing it. A
    planner bug is simulated: the `ark-plan` pass leaves out the plan's first processor group
    (the FFN's gate and up projections, which the down projection reads). The result is an
    internal error (exit 2) naming the pass and the rule, and no file; without the bug the
    same command writes a plan that checks."""
    from dialects import plan as pl
    from passes.ark_plan import ArkPlanPass

    out = tmp_path / "ffn.plan.json"
    assert planc(EXAMPLES / "ffn.json", "-t", "ark", "--arch", "a100", "-o", out).code == 0
    assert check_file(str(out)).ok
    out.unlink()
    planned = ArkPlanPass.apply

    def dropping_a_group(self, ctx, module):
        planned(self, ctx, module)
        plan = next(op for op in module.walk() if isinstance(op, pl.PlanOp))
        plan.processor_groups()[0].detach()

    monkeypatch.setattr(ArkPlanPass, "apply", dropping_a_group)
    result = planc(EXAMPLES / "ffn.json", "-t", "ark", "--arch", "a100", "-o", out)
    assert result.code == 2, result.err
    assert "translation validation" in result.err and "pass 'ark-plan'" in result.err
    assert "ark-plan.missing-producer" in result.err
    assert not out.exists()
    monkeypatch.setenv("PLANC_VALIDATE", "0")     # the bug, unguarded, writes a wrong plan
    assert planc(EXAMPLES / "ffn.json", "-t", "ark", "--arch", "a100", "-o", out).code == 0
    assert not check_file(str(out)).ok


# -- linear in the plan's size ----------------------------------------------------------------


def test_the_work_of_the_value_flow_sweep_grows_linearly(tmp_path, monkeypatch):
    """Counted, not timed: the byte-region comparisons and ordering questions of `check` on
    planc's plans of 100- and 400-operator models grow 4x (at most 5x), not 16x as comparing
    every pair of accesses of a buffer would (planc's memory reuse puts hundreds of tensors
    in a few buffers)."""
    from compiler.driver import main
    from targets.ark import plan_check

    counts = {"overlaps": 0, "before": 0}
    overlaps, before = plan_check.overlaps, plan_check._Order.before

    def counting_overlaps(a, b):
        counts["overlaps"] += 1
        return overlaps(a, b)

    def counting_before(self, a, b):
        counts["before"] += 1
        return before(self, a, b)

    monkeypatch.setattr(plan_check, "overlaps", counting_overlaps)
    monkeypatch.setattr(plan_check._Order, "before", counting_before)
    work = []
    for ops in (100, 400):
        model, out = tmp_path / f"m{ops}.json", tmp_path / f"p{ops}.json"
        model.write_text(emit_model(generated(ops, width=64, seq=32)))
        monkeypatch.setenv("PLANC_VALIDATE", "0")
        assert main([str(model), "-t", "ark", "--arch", "a100", "-o", str(out)]) == 0
        counts.update(overlaps=0, before=0)
        assert check_file(str(out)).ok
        work.append(dict(counts))
    small, large = work
    assert small["overlaps"] > 0 and small["before"] > 0
    assert large["overlaps"] <= 5 * small["overlaps"], work
    assert large["before"] <= 5 * small["before"], work
