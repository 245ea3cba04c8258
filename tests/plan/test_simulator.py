"""`planc simulate` on ARK plans: correct plans pass, and plans that compute wrong results
(missing tiles, producer and consumer with no barrier, live tensors sharing memory) are caught;
the cost model ranks plans the way their structure says it should."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from devices.hardware import gpu_device
from dialects import plan
from dialects.locations import verify_module
from frontends.ark_plan import import_document
from ground.json_reader import JsonNode
from targets.ark import cost_model
from targets.ark.plan_simulator import simulate_plan
from tests.conftest import write_json
from tests.plan.fixtures import sigmoid_over_matmul, small_plan_doc


def simulate(doc: dict, **options) -> dict:
    module = import_document(JsonNode(doc))
    verify_module(module)
    return simulate_plan(module, type("Options", (), options)())


def edited(fn) -> dict:
    doc = small_plan_doc()
    fn(doc)
    return doc


def rg(doc, pg: int) -> dict:
    return doc["ProcessorGroups"][pg]["ResourceGroups"][0]


class TestCorrectPlans:
    def test_small_plan_matches_its_model(self):
        report = simulate(small_plan_doc())
        assert report["ok"], report["problems"]
        assert report["problem_counts"] == {}
        assert report["max_abs_error"] < 1e-5
        assert report["tasks_run"] == 1 + 8 + 8
        assert set(report) >= {"ok", "modeled_time_s", "device_bytes", "max_abs_error",
                               "processor_utilisation", "warp_occupancy"}

    def test_legitimate_in_place_write(self):
        """add may write its result over sigmoid's: each task reads its tile first."""
        def in_place(doc):
            sig_out = doc["TaskInfos"][1]["Ops"][0]["WriteTensors"][0]
            add = doc["TaskInfos"][2]["Ops"][0]
            add["WriteTensors"][0]["Buffer"] = copy.deepcopy(sig_out["Buffer"])
            add["ResultTensors"][0]["Buffer"] = copy.deepcopy(sig_out["Buffer"])
        report = simulate(edited(in_place))
        assert report["ok"], report["problems"]
        assert report["buffers"] == simulate(small_plan_doc())["buffers"] - 1

    def test_granularity_and_several_slots(self):
        def blocked(doc):
            rg(doc, 1)["TaskGroups"][0]["Granularity"] = 3
            rg(doc, 2)["TaskGroups"][0]["Granularity"] = 2
        assert simulate(edited(blocked))["ok"]


class TestWrongPlansAreCaught:
    def test_missing_tiles(self):
        report = simulate(edited(lambda d: rg(d, 1)["TaskGroups"][0].update(TaskRange=[0, 7])))
        assert not report["ok"]
        assert report["problem_counts"]["not-run"] == 1
        assert "task 1 never runs task indices 7 (1 of 8)" in " ".join(report["problems"])
        assert report["problem_counts"]["missing"] >= 1
        assert report["max_abs_error"] == float("inf")

    def test_consumer_without_barrier(self):
        """sigmoid on processors [2, 4] runs concurrently with the matmul on [0, 2]."""
        def concurrent(doc):
            doc["NumProcessors"] = 4
            doc["ProcessorGroups"][1]["ProcessorRange"] = [2, 4]
            rg(doc, 1)["ProcessorRange"] = [2, 4]
        report = simulate(edited(concurrent))
        assert not report["ok"]
        assert report["problem_counts"]["race"] >= 1
        assert ("'sigmoid' (task 1) reads tensor 3 (buffer 2) that task 0 on processor 0 "
                "writes with no barrier in between") in report["problems"][0]

    def test_tiles_read_across_processors_within_one_group(self):
        """sigmoid and add in one resource group: add's tile i ran on another processor."""
        def merged(doc):
            rg(doc, 1)["TaskGroups"][0]["TaskRange"] = [0, 8]
            rg(doc, 1)["TaskGroups"].insert(0, {"TaskId": 0, "TaskRange": [0, 1],
                                                "Granularity": 1})
            rg(doc, 1)["SramRange"] = [0, 8192]
            rg(doc, 1)["TaskGroups"].append(rg(doc, 2)["TaskGroups"][0])
            del doc["ProcessorGroups"][2]
            del doc["ProcessorGroups"][0]
        report = simulate(edited(merged))
        assert report["problem_counts"].get("race", 0) >= 1

    def test_live_tensors_sharing_a_buffer(self):
        """sigmoid writes over the matmul result, which add still reads."""
        report = simulate(edited(sigmoid_over_matmul))
        assert not report["ok"]
        assert report["problem_counts"]["clobbered"] >= 1
        assert "but 'sigmoid' overwrote it" in report["problems"][0]

    def test_rotary_embedding_written_in_place(self):
        """Each output element of a rotary embedding needs its pair partner: writing over
        the input lets one thread overwrite what another has yet to read."""
        from backends.ark_plan import single_plan
        from backends.plan_json import plan_json
        from frontends.model_builder import ModelBuilder
        from passes.ark_default_plan import ArkDefaultPlanPass

        m = ModelBuilder()
        x = m.tensor([1, 4, 2, 8], "FP32")
        m.rope(x, m.tensor([1, 4, 1, 8], "FP32"), output=x)
        module = m.finish()
        ArkDefaultPlanPass().apply(None, module)
        report = simulate(plan_json(single_plan(module)))
        assert not report["ok"]
        assert report["problem_counts"]["in-place"] == 1
        assert "Rope 'rope' (task 0) writes tensor" in report["problems"][0]

    def test_consumer_scheduled_before_its_producer(self):
        def swapped(doc):
            groups = doc["ProcessorGroups"]
            groups[0], groups[1] = groups[1], groups[0]
        report = simulate(edited(swapped))
        assert not report["ok"]
        assert "'sigmoid' (task 1) starts before 'matmul' (task 0)" in \
            " ".join(report["problems"])


def test_cli_json_report(planc, tmp_path):
    path = write_json(tmp_path / "p.json", small_plan_doc())
    r = planc("simulate", path, "--json")
    assert r.code == 0
    report = r.json()
    assert report["format"] == "ark-plan" and report["ok"] is True
    bad = write_json(tmp_path / "bad.json",
                     edited(lambda d: rg(d, 1)["TaskGroups"][0].update(TaskRange=[0, 4])))
    r = planc("simulate", bad, "--json")
    assert r.code == 1 and r.json()["ok"] is False
    r = planc("simulate", bad, "--cost-only", "--json")
    assert r.code == 0 and "max_abs_error" not in r.json()


class TestCostModel:
    def test_assignment_arrays_match_the_distribution_rule(self):
        for procs, tasks, gran, slots, first in [
                (plan.Range(0, 5), plan.Range(0, 37), 3, 2, 1),
                (plan.Range(2, 30, 4), plan.Range(5, 90, 7), 2, 3, 4)]:
            expected = plan.distribute(procs, tasks, gran, slots, first)
            got = plan.task_assignment(procs, tasks, gran, slots, first)
            rebuilt = {p: [[] for _ in range(slots)] for p in procs}
            for task, proc, slot, _ in sorted(zip(got.tasks, got.processors, got.slots,
                                                    got.positions, strict=True),
                                                key=lambda x: (x[1], x[3])):
                rebuilt[int(proc)][int(slot)].append(int(task))
            assert rebuilt == expected

    def plan_time(self, doc) -> float:
        module = import_document(JsonNode(doc))
        p = module.ops.first
        return cost_model.plan_cost(p, gpu_device("a100")).modeled_time_s

    def test_one_warp_tasks_in_sequence_are_slower_than_one_big_tile(self):
        """ARK's default element-wise plan: one 1-warp slot per processor runs its tasks one
        after another, each paying a memory round trip."""
        def one_slot(doc):
            for t in (1, 2):
                rg(doc, t)["WarpRange"] = [0, 1]

        def big(doc):
            for t in (1, 2):
                op = doc["TaskInfos"][t]["Ops"][0]
                op["Config"].update(NumWarps=4, Tile=[4, 16], NumTasks=1)
                doc["TaskInfos"][t]["NumWarps"] = 4
                rg(doc, t)["TaskGroups"][0]["TaskRange"] = [0, 1]
        assert self.plan_time(edited(big)) < self.plan_time(edited(one_slot))
        # Four concurrent 1-warp slots hide the round trips as well as one 4-warp task does.
        assert self.plan_time(small_plan_doc()) < self.plan_time(edited(one_slot))

    def test_disjoint_groups_overlap_and_barriers_cost_time(self):
        base = self.plan_time(small_plan_doc())

        def no_barrier(doc):
            doc["NumProcessors"] = 4
            doc["ProcessorGroups"][1]["ProcessorRange"] = [2, 4]
            rg(doc, 1)["ProcessorRange"] = [2, 4]
        assert self.plan_time(edited(no_barrier)) < base

    def test_utilisation_and_occupancy_are_fractions(self):
        module = import_document(JsonNode(small_plan_doc()))
        p = module.ops.first
        summary = cost_model.plan_cost(p, gpu_device("a100")).summary(2, 4)
        assert 0 < summary["processor_utilisation"] <= 1
        assert 0 < summary["warp_occupancy"] <= 1
        assert len(summary["per_processor_utilisation"]) == 2
        assert summary["barriers"] == 2

    def test_work_of_a_matmul_tile(self):
        doc = small_plan_doc()
        module = import_document(JsonNode(doc))
        mm = module.ops.first.task_operators()[0][0]
        work = cost_model.task_work([mm], [mm.config_value()], np.array([0]), 1)
        assert work.matmul_flops[0] == 2 * 4 * 16 * 8
        # Reads 4x8 and 16x8 FP32 operands, writes 4x16.
        assert work.l2_bytes[0] == (4 * 8 + 16 * 8 + 4 * 16) * 4


@pytest.mark.parametrize("name, barriers, device_bytes", [
    ("tutorial_plan.json", 6, 316932096),
    # ark.md §5: "Tutorial FFN on A100: 10 buffers, 335,282,176 bytes".
    ("tutorial_default_plan.json", 5, 335282176),
])
def test_corpus_plans_cost_and_memory(name, barriers, device_bytes):
    from tests.conftest import corpus_root

    path = corpus_root() / "ark" / name
    if not path.is_file():
        pytest.skip(f"upstream corpus not found at {path.parent}")
    # The cost model only: the full functional run of these plans takes a minute (it is
    # checked on small plans above).
    report = simulate(json.loads(path.read_text()), cost_only=True)
    assert report["ok"] and report["barriers"] == barriers
    assert report["device_bytes"] == device_bytes


class TestSampledRuns:
    """Above `--full-run-limit` task executions the schedule is decided symbolically and a
    stated sample of tiles is computed; what it proves is said, and it catches what those
    two can see."""

    def test_a_correct_plan_says_what_was_proved(self):
        report = simulate(small_plan_doc(), full_run_limit=0)
        assert report["ok"] and report["mode"] == "sampled", report["problems"]
        assert report["tiles_total"] == 1 + 8 + 8
        assert 3 <= report["sampled_tiles"] <= report["tiles_total"]
        assert report["proved"][0].startswith("symbolically, for every task")
        assert "equal the model's" in report["proved"][1]

    def test_a_view_of_bytes_several_operators_wrote_is_read_as_it_was(self, planc, tmp_path):
        """The torch.onnx (dynamo) MobileNet's a100 plan reads an im2col table through a view
        of a buffer two copies write, which later operators reuse: the sampled run took the
        view's values from one copy's result seen through the view and reported a tile of
        'embedding_3' different from the model (0.94) while the tile-by-tile run was ok. A
        view's values are now those the model's operator read."""
        pytest.importorskip("onnx", reason="the export is read with the onnx package")
        from tests.conftest import ROOT

        out = tmp_path / "plan.json"
        made = planc(ROOT / "tests" / "onnx" / "exports" / "mobilenet_dynamo.onnx", "-t", "ark",
                     "--arch", "a100", "-o", out)
        assert made.code == 0, made.err
        result = planc("simulate", out, "--full-run-limit", "0", "--json")
        report = json.loads(result.out)
        assert result.code == 0 and report["mode"] == "sampled", report["problems"]

    def test_the_full_run_below_the_limit(self):
        report = simulate(small_plan_doc())
        assert "mode" not in report and "tile by tile" in report["proved"][0]

    @pytest.mark.parametrize("mutate, words", [
        (lambda d: rg(d, 1)["TaskGroups"][0].update(TaskRange=[0, 7]),
         "ark-plan.task-coverage: task 1 ('sigmoid') has NumTasks 8"),
        (lambda d: (d.update(NumProcessors=4),
                    d["ProcessorGroups"][1].update(ProcessorRange=[2, 4]),
                    rg(d, 1).update(ProcessorRange=[2, 4])),
         "ark-plan.unordered-access: read after write"),
    ])
    def test_wrong_schedules_are_caught(self, mutate, words):
        report = simulate(edited(mutate), full_run_limit=0)
        assert not report["ok"]
        assert any(words in problem for problem in report["problems"]), report["problems"]
        assert not report["proved"][0].startswith("symbolically")

    def test_a_plan_computing_another_model_is_caught(self):
        """The add replaced by a subtraction: the sample's tiles agree with what the plan's
        own operators compute, but not with the model the plan was made from."""
        from frontends.ark_model import import_document as import_model
        from targets.ark.model_interpreter import run_model
        from targets.ark.plan_simulator import simulate as simulate_op
        from tests.ark.fixtures import small_model_doc

        model = import_model(JsonNode(small_model_doc()))
        verify_module(model)
        doc = small_plan_doc()
        doc["TaskInfos"][2]["Ops"][0]["Type"] = "Sub"
        plan_module = import_document(JsonNode(doc))
        verify_module(plan_module)
        report = simulate_op(plan_module.ops.first, model=run_model(model), full_run_tasks=0)
        assert not report["ok"]
        assert any("is not what the plan's operators compute" in p for p in report["problems"])
