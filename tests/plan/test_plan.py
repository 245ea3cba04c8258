"""The plan dialect: lossless ARK plan files, the format's rules, and its distribution rule."""

from __future__ import annotations

import json

import pytest

from backends.ark_plan import emit_plan, single_plan
from backends.plan_json import plan_json
from dialects import plan
from dialects.locations import verify_module
from frontends.ark_plan import import_document
from ground.diagnostics import PlancError
from ground.json_reader import JsonNode, load_json_file
from tests.conftest import corpus_params
from tests.plan.fixtures import small_plan_doc

PLAN_FILES = [p for p in corpus_params("ark")
              if p.values[0] is None or "TaskInfos" in json.loads(p.values[0].read_text())]


@pytest.mark.parametrize("path", PLAN_FILES)
def test_corpus_plan_round_trip(path):
    module = import_document(load_json_file(path))
    verify_module(module)
    assert json.loads(emit_plan(module)) == json.loads(path.read_text())


def round_trip(doc: dict) -> dict:
    module = import_document(JsonNode(doc))
    verify_module(module)
    return plan_json(single_plan(module))


def check_error(doc) -> PlancError:
    with pytest.raises(PlancError) as info:
        verify_module(import_document(JsonNode(doc)))
    return info.value


class TestRoundTrip:
    def test_small_plan(self):
        doc = small_plan_doc()
        assert round_trip(doc) == doc

    def test_ranges_keep_their_written_form_and_unknown_fields_survive(self):
        doc = small_plan_doc()
        doc["ProcessorGroups"][0]["ProcessorRange"] = [0, 2, 1]
        doc["ProcessorGroups"][0]["Note"] = "hand-tuned"
        doc["TaskInfos"][0]["Priority"] = 1
        doc["TaskInfos"][0]["Ops"][0]["Config"]["Extra"] = {"a": [1, 2]}
        doc["Version"] = 2
        assert round_trip(doc) == doc

    def test_header_key_order_is_kept(self):
        doc = small_plan_doc()
        arch = doc.pop("Architecture")
        tail = {k: doc.pop(k) for k in ("TaskInfos", "ProcessorGroups")}
        doc["Architecture"] = arch
        doc.update(tail)
        text = emit_plan(import_document(JsonNode(doc)))
        assert list(json.loads(text)) == list(doc)

    def test_operator_repeated_in_two_tasks(self):
        doc = small_plan_doc()
        first = json.loads(json.dumps(doc["TaskInfos"][0]))
        first["Id"] = 9
        first["Ops"][0]["Config"]["NumWarps"] = 2
        doc["TaskInfos"].insert(1, first)
        module = import_document(JsonNode(doc))
        verify_module(module)
        p = single_plan(module)
        (original,), (copy,) = p.task_operators()[0], p.task_operators()[9]
        # Consumers keep using the first copy's results.
        sigmoid = p.task_operators()[1][0]
        assert sigmoid.read_tensors[0] is original.result_tensors[0]
        assert copy.result_tensors[0] is not original.result_tensors[0]
        assert plan_json(p) == doc

    def test_ir_text_round_trip(self, planc, tmp_path):
        path = tmp_path / "p.json"
        path.write_text(json.dumps(small_plan_doc()))
        ir = tmp_path / "p.mlir"
        ir.write_text(planc(path).out)
        out = tmp_path / "again.json"
        assert planc(ir, "-t", "ark", "-o", out).code == 0
        assert json.loads(out.read_text()) == small_plan_doc()


def edit(fn):
    doc = small_plan_doc()
    fn(doc)
    return doc


class TestRules:
    @pytest.mark.parametrize("change, path, message", [
        (lambda d: d["ProcessorGroups"][0].update(ProcessorRange=[0, 3]),
         "$.ProcessorGroups[0]", "ProcessorRange [0, 3] is not inside [0, NumProcessors 2)"),
        (lambda d: d["ProcessorGroups"][0]["ResourceGroups"][0].update(ProcessorRange=[1, 3]),
         "$.ProcessorGroups[0].ResourceGroups[0]",
         "resource group processors [1, 3] are not inside the processor group's [0, 2]"),
        (lambda d: d["ProcessorGroups"][0]["ResourceGroups"][0].update(WarpRange=[0, 8]),
         "$.ProcessorGroups[0].ResourceGroups[0]",
         "WarpRange [0, 8] is not inside [0, NumWarpsPerProcessor 4)"),
        (lambda d: d["ProcessorGroups"][0]["ResourceGroups"][0].update(SramRange=[0, 8192, 2]),
         "$.ProcessorGroups[0].ResourceGroups[0]", "SramRange [0, 8192, 2] must have step 1"),
        (lambda d: d["ProcessorGroups"][0]["ResourceGroups"][0].update(SramRange=[0, 4096]),
         "$.ProcessorGroups[0].ResourceGroups[0].TaskGroups[0]",
         "task 0 needs 4 warps and 8192 SRAM bytes, but the resource group has 4 warps and "
         "4096 SRAM bytes: no slot fits"),
        (lambda d: d["ProcessorGroups"][1]["ResourceGroups"][0]["TaskGroups"][0].update(
            TaskRange=[0, 9]),
         "$.ProcessorGroups[1].ResourceGroups[0].TaskGroups[0]",
         "TaskRange [0, 9] is not inside [0, NumTasks 8) of task 1"),
        (lambda d: d["ProcessorGroups"][1]["ResourceGroups"][0]["TaskGroups"][0].update(TaskId=7),
         "$.ProcessorGroups[1].ResourceGroups[0].TaskGroups[0]", "TaskId 7 names no TaskInfo"),
        (lambda d: d["ProcessorGroups"][1]["ResourceGroups"][0]["TaskGroups"][0].update(
            Granularity=0),
         "$.ProcessorGroups[1].ResourceGroups[0].TaskGroups[0]",
         "Granularity must be a positive integer, got 0"),
        (lambda d: d["TaskInfos"][1]["Ops"][0]["Config"].pop("Tile"),
         "$.TaskInfos[1].Ops[0]", "Config of Sigmoid 'sigmoid' lacks 'Tile'"),
        (lambda d: d["TaskInfos"][0]["Ops"][0]["Config"].pop("TileShapeMNK"),
         "$.TaskInfos[0].Ops[0]", "Config of Matmul 'matmul' lacks 'TileShapeMNK'"),
        (lambda d: d["TaskInfos"][1]["Ops"][0]["Config"].update(NumTasks=5),
         "$.TaskInfos[1].Ops[0]",
         "NumTasks of 'sigmoid' is 5, but its tiling covers the output with 8 tiles"),
        (lambda d: d["TaskInfos"][0]["Ops"][0]["Config"].update(NumWarps=8),
         "$.TaskInfos[0].Ops[0]",
         "'matmul' needs 8 warps and 8192 SRAM bytes, more than its task 0 reserves (4, 8192)"),
        (lambda d: d["TaskInfos"][1].update(Id=0),
         "$.TaskInfos[1]", "TaskInfo id 0 is used twice"),
        (lambda d: d.update(Architecture="TPU_5"), "$", "unknown Architecture 'TPU_5'"),
        (lambda d: d["ProcessorGroups"][0].update(ProcessorRange=[2, 1]),
         "$.ProcessorGroups[0].ProcessorRange", "range [2, 1] must have 0 <= begin <= end"),
        (lambda d: d["ProcessorGroups"][0].update(ProcessorRange=[0]),
         "$.ProcessorGroups[0].ProcessorRange", "expected 2 to 3 integers, got 1"),
    ])
    def test_each_rule_reports_its_path(self, change, path, message):
        error = check_error(edit(change))
        assert error.path == path
        assert error.message.startswith(message)

    def test_fused_operators_must_share_num_tasks(self):
        def fuse(d):
            d["TaskInfos"][1]["Ops"].append(d["TaskInfos"][2]["Ops"][0])
            d["TaskInfos"][1]["Ops"][1]["Config"]["Tile"] = [1, 16]
            d["TaskInfos"][1]["Ops"][1]["Config"]["NumTasks"] = 4
            del d["TaskInfos"][2]
            del d["ProcessorGroups"][2]
        error = check_error(edit(fuse))
        assert error.path == "$.TaskInfos[1].Ops[1]"
        assert error.message == ("all operators of task 1 must have the same NumTasks; 'add' "
                                 "has 4, an earlier one 8")


class TestDistribution:
    def test_round_robin(self):
        got = plan.distribute(plan.Range(0, 3), plan.Range(0, 7), 1, 1)
        assert got == {0: [[0, 3, 6]], 1: [[1, 4]], 2: [[2, 5]]}

    def test_granularity_blocks(self):
        got = plan.distribute(plan.Range(0, 2), plan.Range(0, 7), 2, 1)
        assert got == {0: [[0, 1, 4, 5]], 1: [[2, 3, 6]]}

    def test_slots_take_consecutive_tasks(self):
        got = plan.distribute(plan.Range(0, 2), plan.Range(0, 8), 1, 2)
        # Processor 0 runs tasks 0, 2, 4, 6: t-th goes to slot t % 2.
        assert got[0] == [[0, 4], [2, 6]]

    def test_steps_and_offsets(self):
        got = plan.distribute(plan.Range(4, 10, 3), plan.Range(1, 12, 2), 1, 1)
        assert got == {4: [[1, 5, 9]], 7: [[3, 7, 11]]}

    def test_every_task_runs_exactly_once(self):
        for procs, tasks, gran, slots in [(plan.Range(0, 5), plan.Range(0, 37), 3, 2),
                                          (plan.Range(2, 30, 4), plan.Range(5, 90, 7), 2, 3)]:
            got = plan.distribute(procs, tasks, gran, slots)
            ran = sorted(t for per_proc in got.values() for slot in per_proc for t in slot)
            assert ran == list(tasks)

    def test_rotation_continues_after_the_previous_group(self):
        doc = small_plan_doc()
        rg = doc["ProcessorGroups"][1]["ResourceGroups"][0]
        rg["WarpRange"] = [0, 1]  # one slot per processor
        rg["TaskGroups"].append({"TaskId": 2, "TaskRange": [0, 8], "Granularity": 1})
        rg["TaskGroups"][0]["TaskRange"] = [0, 3]
        module = import_document(JsonNode(doc))
        p = single_plan(module)
        group = p.processor_groups()[1].resource_groups()[0]
        first, second = plan.resource_group_schedule(group, p.tasks())
        assert first.assignment == {0: [[0, 2]], 1: [[1]]}
        # 3 tasks ended on processor 0, so the next group starts on processor 1.
        assert second.assignment == {1: [[0, 2, 4, 6]], 0: [[1, 3, 5, 7]]}

    def test_slot_layout(self):
        doc = small_plan_doc()
        doc["ProcessorGroups"][0]["ResourceGroups"][0]["SramRange"] = [0, 20000]
        p = single_plan(import_document(JsonNode(doc)))
        rg = p.processor_groups()[0].resource_groups()[0]
        assert plan.slot_layout(rg, p.tasks()[0]) == plan.SlotLayout(1, 4, 20000)

    def test_barriers_follow_ark(self):
        doc = small_plan_doc()
        doc["NumProcessors"] = 108
        ranges = [[0, 108], [0, 64], [64, 108], [0, 108]]
        doc["ProcessorGroups"] = [
            {"ProcessorRange": r, "ResourceGroups": []} for r in ranges]
        p = single_plan(import_document(JsonNode(doc)))
        got = [[str(r) for r in syncs] for syncs in plan.barriers(p.processor_groups())]
        # Split-K shape: [0,64] waits for all 108; [64,108] then runs concurrently with it;
        # the final group covers both halves, so one barrier over all of it suffices.
        assert got == [[], ["[0, 108]"], [], ["[0, 108]"]]


class TestTaskTiles:
    def plan_ops(self, doc):
        p = single_plan(import_document(JsonNode(doc)))
        return {op.label.data: op for ops in p.task_operators().values() for op in ops}

    def test_elementwise_tiles_are_row_major(self):
        doc = small_plan_doc()
        op = doc["TaskInfos"][1]["Ops"][0]
        op["Config"].update(Tile=[3, 6], NumTasks=6)  # output [4, 16]: 2 x 3 tiles, clipped
        doc["ProcessorGroups"][1]["ResourceGroups"][0]["TaskGroups"][0]["TaskRange"] = [0, 6]
        sigmoid = self.plan_ops(doc)["sigmoid"]
        verify_module(sigmoid.parent_op().parent_op())
        assert plan.task_tile(sigmoid, 0) == (slice(0, 3), slice(0, 6))
        assert plan.task_tile(sigmoid, 2) == (slice(0, 3), slice(12, 16))
        assert plan.task_tile(sigmoid, 5) == (slice(3, 4), slice(12, 16))
        with pytest.raises(ValueError):
            plan.task_tile(sigmoid, 6)

    def test_tiles_cover_the_output_exactly_once(self):
        import numpy as np

        ops = self.plan_ops(small_plan_doc())
        for op in ops.values():
            covered = np.zeros(op.outputs[0].shape_list, dtype=int)
            for index in range(op.config_value()["NumTasks"]):
                covered[plan.task_tile(op, index)] += 1
            assert (covered == 1).all(), op.label.data

    def test_matmul_tile_is_m_by_n(self):
        matmul = self.plan_ops(small_plan_doc())["matmul"]
        assert plan.unit_shape(matmul) == [1, 1, 4, 16]
        assert plan.task_tile(matmul, 0) == (slice(0, 4), slice(0, 16))


def test_buffer_layout_is_arks_back_to_back_layout():
    p = single_plan(import_document(JsonNode(small_plan_doc())))
    layout = plan.buffer_layout(p)
    # FP32 buffers: x[4,8], w[16,8], mm[4,16], sig[4,16], add[4,16].
    assert layout.sizes == {0: 128, 1: 512, 2: 256, 3: 256, 4: 256}
    assert layout.offsets == {0: 0, 1: 128, 2: 640, 3: 896, 4: 1152}
    assert layout.total_bytes == 1408


def test_task_rules_come_before_the_slots_that_divide_by_them():
    error = check_error(edit(lambda d: d["TaskInfos"][0].update(NumWarps=0)))
    assert (error.path, error.message) == ("$.TaskInfos[0]", "task 0: NumWarps must be >= 1, got 0")
