"""`planc check PLAN --model MODEL`: a plan file proved against a model given apart.

(a) planc's own plans of the examples, of a split-K matmul and of ONNX models pass against
    their source model; (b) hand edits that leave a consistent plan of another model (an add
    of the split-K chain made a sub, swapped matmul, sub or div operands, a wrong K range, a
    renamed output, a model of another shape) are each an error at the plan's JSON path where
    it differs, and swapped add or mul operands (the same bits) pass; (c) on small instances, the verdict agrees with numpy: the source model run by
    the interpreter and the edited plan run tile by tile on the same inputs.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from backends.ark_model import emit_model
from frontends.model_builder import ModelBuilder
from tests.conftest import EXAMPLES, write_json


def split_k_model(k: int = 4096, m: int = 32, dtype: str = "FP16") -> str:
    """A lone matmul with a long K and few tiles: planc's a100 plan cuts it along K into 4
    parts summed by a chain of 3 adds."""
    b = ModelBuilder()
    b.matmul(b.tensor([1, m, k], dtype), b.tensor([64, k], dtype), transpose_other=True)
    return emit_model(b.finish())


def square_model() -> str:
    """x @ w then y = that @ v, all 64x64: swapping a matmul's operands keeps every shape."""
    b = ModelBuilder()
    x, w, v = b.tensor([64, 64], "FP32"), b.tensor([64, 64], "FP32"), b.tensor([64, 64], "FP32")
    b.matmul(b.relu(b.matmul(x, w)), v)
    return emit_model(b.finish())


def elementwise_model() -> str:
    """((x + y) * y - x) / exp(y) + bias, x and y 64x64, bias [1, 64] (broadcast): each
    binary operator of ARK, one of them broadcasting."""
    b = ModelBuilder()
    x, y = b.tensor([64, 64], "FP32"), b.tensor([64, 64], "FP32")
    bias = b.tensor([1, 64], "FP32")
    b.add(b.div(b.sub(b.mul(b.add(x, y), y), x), b.exp(y)), bias)
    return emit_model(b.finish())


def _plan(planc, tmp_path: Path, model_text: str, target: str = "ark",
          name: str = "m") -> tuple[Path, Path]:
    model = tmp_path / f"{name}.json"
    model.write_text(model_text)
    out = tmp_path / f"{name}.{target}.json"
    assert planc(model, "-t", target, "-o", out).code == 0
    return model, out


def _ops(doc: dict):
    """(TaskInfo index, op index, op) of an ARK plan document."""
    return [(i, j, op) for i, task in enumerate(doc["TaskInfos"])
            for j, op in enumerate(task["Ops"])]


def _named(doc: dict, name: str) -> tuple[int, int, dict]:
    return next(found for found in _ops(doc) if found[2]["Name"] == name)


# -- (a) planc's own plans pass ------------------------------------------------------------------


@pytest.mark.parametrize("example", ["ffn", "attention", "attention_nodes", "allreduce_rank0",
                                     "sendrecv_rank1"])
@pytest.mark.parametrize("target", ["ark", "tt"])
def test_planc_plans_of_the_examples_pass_against_their_model(planc, tmp_path, example,
                                                               target):
    model = EXAMPLES / f"{example}.json"
    out = tmp_path / "p.json"
    made = planc(model, "-t", target, "-o", out)
    if target == "tt" and example.startswith(("allreduce", "sendrecv")):
        assert made.code == 1      # (communication has no TT plan)
        return
    assert made.code == 0, made.err
    result = planc("check", out, "--model", model)
    assert result.code == 0, result.err
    assert ": ok: " in result.out


def test_a_split_k_plan_passes_and_the_model_itself_too(planc, tmp_path):
    model, plan = _plan(planc, tmp_path, split_k_model())
    doc = json.loads(plan.read_text())
    assert [op["Type"] for _, _, op in _ops(doc)].count("Add") == 3     # (it is split)
    assert planc("check", plan, "--model", model).code == 0
    assert planc("check", model, "--model", model).code == 0


def test_plans_lowered_from_onnx_pass_against_the_onnx_model(planc, tmp_path):
    """An ONNX model imports to the same tensor and buffer ids as when the plan was lowered
    from it; the plan file links its tensors by id, so a copy the model leaves unused is read
    by a later operator of the plan: its output is what the output's bytes hold at the end."""
    pytest.importorskip("onnx")
    onnx_model = Path(__file__).parent.parent / "onnx" / "exports" / "gpt2_dynamo.onnx"
    for target in ("ark", "tt"):
        out = tmp_path / f"gpt2.{target}.json"
        assert planc(onnx_model, "-t", target, "-o", out).code == 0
        result = planc("check", out, "--model", onnx_model)
        assert result.code == 0, result.err


# -- (b) hand edits are caught where they are ----------------------------------------------------


def _check(planc, tmp_path, doc, model, *extra):
    path = write_json(tmp_path / "edited.json", doc)
    plain = planc("check", path)
    result = planc("check", path, "--model", model, *extra)
    return plain, result


def test_an_add_of_the_split_k_chain_made_a_sub_is_caught_at_the_sub(planc, tmp_path):
    """The edit a plan file cannot show: the plan is consistent (plain check passes), and
    computes the matmul's first parts minus the next."""
    model, plan = _plan(planc, tmp_path, split_k_model())
    doc = json.loads(plan.read_text())
    i, j, op = _named(doc, "matmul_sum2")
    op["Type"] = "Sub"
    plain, result = _check(planc, tmp_path, doc, model)
    assert plain.code == 0, plain.err
    assert result.code == 1
    assert f"$.TaskInfos[{i}].Ops[{j}]: output tensor" in result.err, result.err
    assert "breaks at a Sub where its parts are added: Sub 'matmul_sum2'" in result.err
    assert "[ark-plan.against-model]" in result.err
    assert len(result.err.splitlines()) == 1


def test_a_swapped_matmul_operand_is_caught_at_the_matmul(planc, tmp_path):
    model, plan = _plan(planc, tmp_path, square_model())
    doc = json.loads(plan.read_text())
    i, j, op = next(found for found in _ops(doc) if found[2]["Type"] == "Matmul")
    op["ReadTensors"].reverse()
    plain, result = _check(planc, tmp_path, doc, model)
    assert plain.code == 0, plain.err
    assert result.code == 1
    assert f"$.TaskInfos[{i}].Ops[{j}]: " in result.err, result.err
    assert f"the plan Matmul '{op['Name']}'" in result.err


@pytest.mark.parametrize("name", ["add", "mul", "add_1"])
def test_swapped_operands_of_an_add_or_mul_pass(planc, tmp_path, name):
    """A producer may write `add(b, a)` for the model's `add(a, b)` (a sum or product is
    the same bits either way), also where one operand broadcasts (`add_1`)."""
    model, plan = _plan(planc, tmp_path, elementwise_model())
    doc = json.loads(plan.read_text())
    _named(doc, name)[2]["ReadTensors"].reverse()
    plain, result = _check(planc, tmp_path, doc, model)
    assert plain.code == 0, plain.err
    assert result.code == 0, result.err


@pytest.mark.parametrize("name", ["sub", "div"])
def test_swapped_operands_of_a_sub_or_div_are_caught_there(planc, tmp_path, name):
    model, plan = _plan(planc, tmp_path, elementwise_model())
    doc = json.loads(plan.read_text())
    i, j, op = _named(doc, name)
    op["ReadTensors"].reverse()
    plain, result = _check(planc, tmp_path, doc, model)
    assert plain.code == 0, plain.err
    assert result.code == 1
    assert f"$.TaskInfos[{i}].Ops[{j}]: output tensor" in result.err, result.err
    assert f"the plan {op['Type']} '{name}' (" in result.err


def test_a_change_below_a_swapped_add_is_named_where_it_is(planc, tmp_path):
    """The comparison descends through an add whose operands the plan writes in the other
    order to the operator that differs below it."""
    model, plan = _plan(planc, tmp_path, elementwise_model())
    doc = json.loads(plan.read_text())
    _named(doc, "add_1")[2]["ReadTensors"].reverse()
    i, j, op = _named(doc, "exp")
    op["Type"] = "Sigmoid"
    _, result = _check(planc, tmp_path, doc, model)
    assert result.code == 1
    assert (f"$.TaskInfos[{i}].Ops[{j}]: output tensor 14 (FP32 [64, 64] on buffer 8): the "
            "model computes Exp 'exp' (input buffer 1 FP32 [64, 64] at [0, 0]), the plan "
            "Sigmoid 'exp' (input buffer 1 FP32 [64, 64] at [0, 0])") in result.err, result.err


def test_a_changed_factor_below_a_reshape_is_named_where_it_is(planc, tmp_path):
    """The attention example reads the softmax's result and the heads' output through
    reshapes (reads of what operators wrote, not their values): the comparison descends
    through them, and through an operator whose operands all differ (the softmax's div reads
    the exp and its sum), to the ScalarMul whose factor the edit changed."""
    model = EXAMPLES / "attention.json"
    plan = tmp_path / "p.json"
    assert planc(model, "-t", "ark", "-o", plan).code == 0
    doc = json.loads(plan.read_text())
    i, j, op = _named(doc, "scalar_mul")
    op["Args"]["Factor"]["FLOAT"] = 0.1
    plain, result = _check(planc, tmp_path, doc, model)
    assert plain.code == 0, plain.err
    assert result.code == 1
    assert len(result.err.splitlines()) == 1, result.err
    assert f"$.TaskInfos[{i}].Ops[{j}]: output tensor" in result.err, result.err
    assert "the model computes ScalarMul 'scalar_mul' Factor=0.08838834764831845 (" \
        in result.err, result.err
    assert "the plan ScalarMul 'scalar_mul' Factor=0.1 (" in result.err, result.err


def _split_transpose(doc: dict, edit) -> dict:
    """The attention plan with 'transpose_2' split by task ranges over two TaskInfos, each
    half in a processor group of its own after its producers', the first copy edited
    by `edit` (its own result id: a copy that differs is imported as an operator)."""
    doc = copy.deepcopy(doc)
    index = next(i for i, t in enumerate(doc["TaskInfos"]) if t["Ops"][0]["Name"]
                 == "transpose_2")
    right = doc["TaskInfos"][index]
    wrong = copy.deepcopy(right)
    wrong["Id"] = 1000
    wrong["Ops"][0]["ResultTensors"][0]["Id"] = 1000
    edit(wrong["Ops"][0], doc)
    doc["TaskInfos"].insert(index, wrong)
    groups = doc["ProcessorGroups"]
    at, group = next((g, rg) for g, pg in enumerate(groups) for rg in pg["ResourceGroups"]
                     if rg["TaskGroups"][0]["TaskId"] == right["Id"])
    half = right["Ops"][0]["Config"]["NumTasks"] // 2
    groups[at]["ResourceGroups"].remove(group)
    for task, start in ((right["Id"], half), (1000, 0)):
        groups.insert(at + 1, {"ProcessorRange": groups[at]["ProcessorRange"],
                               "ResourceGroups": [{**group, "TaskGroups": [
                                   {"TaskId": task, "TaskRange": [start, start + half],
                                    "Granularity": 1}]}]})
    return doc


def _permuted(op: dict, doc: dict) -> None:
    op["Args"]["Permutation"]["DIMS"] = [0, 2, 3, 1]    # (the same output shape)


def _reading_rope_1(op: dict, doc: dict) -> None:
    op["ReadTensors"][0] = copy.deepcopy(_named(doc, "transpose_1")[2]["ReadTensors"][0])


@pytest.mark.parametrize("edit", [_permuted, _reading_rope_1])
def test_half_a_split_operator_computing_otherwise_is_caught(planc, tmp_path, edit):
    """A copy of an operator is the same computation: half of 'transpose_2' run with another
    permutation (or over another tensor) before the other half is a plan whose output is
    wrong (the tile simulator says so), not a split of 'transpose_2' whose later copy
    decides its value; each copy covers half its tiles."""
    model = EXAMPLES / "attention.json"
    plan = tmp_path / "p.json"
    assert planc(model, "-t", "ark", "-o", plan).code == 0
    doc = _split_transpose(json.loads(plan.read_text()), edit)
    path = write_json(tmp_path / "edited.json", doc)
    assert "ok no" in planc("simulate", path).out
    plain, result = _check(planc, tmp_path, doc, model)
    for found in (plain, result):
        assert found.code == 1, found.out
        assert "('transpose_2') has NumTasks 32, but its task groups run: 16 tasks never run" \
            in found.err, found.err


def test_a_wrong_k_range_is_caught(planc, tmp_path):
    """A part's K slice moved onto its neighbour's (both operands) sums that range twice, which
    the plan's own split-K rule sees; moving one operand's slice only pairs A's K with
    another K of B, a consistent plan of another product, which only the model shows."""
    model, plan = _plan(planc, tmp_path, split_k_model())
    doc = json.loads(plan.read_text())
    i, j, part = _named(doc, "matmul_k2")
    both = copy.deepcopy(doc)
    a, b = both["TaskInfos"][i]["Ops"][j]["ReadTensors"]
    a["Offsets"][2], b["Offsets"][1] = 1024, 1024
    _, result = _check(planc, tmp_path, both, model)
    assert result.code == 1
    assert f"$.TaskInfos[{i}].Ops[{j}]: 'matmul_k2' sums K [1024, 2048)" in result.err
    part["ReadTensors"][0]["Offsets"][2] = 1024
    plain, result = _check(planc, tmp_path, doc, model)
    assert plain.code == 0, plain.err
    assert result.code == 1
    at = _named(doc, "matmul_sum2")
    assert f"$.TaskInfos[{at[0]}].Ops[{at[1]}]: " in result.err, result.err
    assert "an add of parts whose K slices do not join" in result.err
    assert "[1, 32, 1024] at [0, 0, 1024]" in result.err     # (the moved slice is shown)


def test_a_renamed_output_is_caught_naming_what_stands_in_its_place(planc, tmp_path):
    model, plan = _plan(planc, tmp_path, split_k_model())
    doc = json.loads(plan.read_text())
    for _, _, op in _ops(doc):
        for key in ("ReadTensors", "WriteTensors", "ResultTensors"):
            for tensor in op[key]:
                if tensor["Buffer"]["Id"] == 2:
                    tensor["Buffer"]["Id"] = 77
    plain, result = _check(planc, tmp_path, doc, model)
    assert plain.code == 0, plain.err
    i, j, _ = _named(doc, "matmul_sum3")
    assert result.code == 1
    assert (f"$.TaskInfos[{i}].Ops[{j}]: the plan does not compute the model's output tensor "
            "3 (FP16 [1, 32, 64] at [0, 0, 0] on buffer 2, the result of Matmul 'matmul'): it "
            "writes none of its bytes, and computes tensor 3 (FP16 [1, 32, 64] at [0, 0, 0] on "
            "buffer 77, the result of Add 'matmul_sum3') instead [ark-plan.against-model]"
            ) in result.err, result.err


def two_outputs_model(second: str = "sigmoid", skip: int = 0) -> str:
    """relu(x) and `second`(x): a model of two outputs (on buffers `skip` + 1 and 2: a
    plan's buffers are numbered from 0 too)."""
    b = ModelBuilder()
    for _ in range(skip):
        b.tensor([1], "FP32")
    x = b.tensor([64, 64], "FP32")
    b.relu(x)
    getattr(b, second)(x if second == "sigmoid" else b.tensor([64, 64], "FP32"))
    return emit_model(b.finish())


def test_a_plan_of_another_model_says_so_in_one_line(planc, tmp_path):
    """The model's output, what computes it, and what the plan computes instead: one line,
    also when the plan computes none of several outputs."""
    _, plan = _plan(planc, tmp_path, split_k_model())
    result = planc("check", plan, "--model", EXAMPLES / "attention_nodes.json")
    assert result.code == 1
    assert result.err == (
        f"planc: error: {plan}: $.TaskInfos[4].Ops[2]: the plan does not compute the model's "
        "output tensor 60 (FP16 [1, 128, 512] at [0, 0, 0] on buffer 31, the result of Add "
        "'add'): it writes none of its bytes, and computes tensor 3 (FP16 [1, 32, 64] at [0, "
        "0, 0] on buffer 2, the result of Add 'matmul_sum3') instead [ark-plan.against-model]\n")
    two = tmp_path / "two.json"
    two.write_text(two_outputs_model(skip=10))
    result = planc("check", plan, "--model", two)
    assert result.code == 1
    assert len(result.err.splitlines()) == 1
    assert ("the plan computes none of the model's 2 outputs (tensor 12 (FP32 [64, 64] at [0, "
            "0] on buffer 11, the result of Relu 'relu'), tensor 14 (FP32 [64, 64] at [0, 0] on "
            "buffer 12, the result of Sigmoid 'sigmoid')): it writes none of their bytes, and "
            "computes tensor 3 (FP16") in result.err, result.err


def test_an_output_the_plan_leaves_out_is_named_beside_those_it_computes(planc, tmp_path):
    """One output of two computed, the other's buffer only read: that output is named."""
    _, plan = _plan(planc, tmp_path, two_outputs_model("exp"), name="other")
    model = tmp_path / "two.json"
    model.write_text(two_outputs_model())
    result = planc("check", plan, "--model", model)
    assert result.code == 1
    assert result.err.endswith(
        ": the plan does not compute the model's output tensor 4 (FP32 [64, 64] at [0, 0] on "
        "buffer 2, the result of Sigmoid 'sigmoid'): it writes none of its bytes, and computes "
        "tensor 5 (FP32 [64, 64] at [0, 0] on buffer 3, the result of Exp 'exp') instead "
        "[ark-plan.against-model]\n"), result.err
    assert len(result.err.splitlines()) == 1


def test_the_ok_line_says_the_comparison_ran(planc, tmp_path):
    """`... ; equal to MODEL: N outputs` in text and in `--json`'s summary, with the model's
    counts under "model"; without `--model`, the ok line and the JSON are as they were."""
    model, plan = _plan(planc, tmp_path, split_k_model())
    plain = planc("check", plan)
    compared = planc("check", plan, "--model", model)
    assert compared.code == 0, compared.err
    assert compared.out == plain.out.replace(
        ")\n", f"; equal to {model}: 1 output)\n"), compared.out
    assert plain.out == (f"{plan}: ok: ark-plan (rank 0 of 1, 108 processors x 8 warps, 5 "
                         "tasks, 7 operators, 2 processor groups)\n")
    report, alone = (planc("check", plan, *extra, "--json").json()
                     for extra in (("--model", str(model)), ()))
    assert report["summary"] == f"{alone['summary']}; equal to {model}: 1 output"
    assert report["model"] == {"file": str(model), "outputs": 1, "communication": 0}
    assert "model" not in alone
    ranks = planc("check", EXAMPLES / "allreduce_rank0.json", "--model",
                  EXAMPLES / "allreduce_rank0.json")
    assert ranks.out.endswith(
        f"; equal to {EXAMPLES / 'allreduce_rank0.json'}: 1 output, 3 communication "
        "operators)\n"), ranks.out


def test_a_missing_output_is_caught(planc, tmp_path):
    """The last add of the chain gone (the plan stays valid): the output's bytes hold the
    first three parts' sum, the matmul over K [0, 3072) only."""
    model, plan = _plan(planc, tmp_path, split_k_model())
    doc = json.loads(plan.read_text())
    i, j, _ = _named(doc, "matmul_sum3")
    del doc["TaskInfos"][i]["Ops"][j]
    plain, result = _check(planc, tmp_path, doc, model)
    assert plain.code == 0, plain.err
    assert result.code == 1
    assert "output tensor 3 (FP16 [1, 32, 64] on buffer 2): the model computes Matmul" \
        in result.err, result.err
    assert "the plan Matmul 'matmul_sum2' TransposeInput=False TransposeOther=True (input " \
        "buffer 0 FP16 [1, 32, 3072] at [0, 0, 0]" in result.err, result.err


@pytest.mark.parametrize(("other", "expected"), [
    (dict(k=2048), "the model computes Matmul 'matmul' TransposeInput=False TransposeOther=True"
                   " (input buffer 0 FP16 [1, 32, 2048] at [0, 0, 0]"),
    (dict(m=64), "output tensor 3 (FP16 [1, 64, 64] on buffer 2): the model computes Matmul "
                 "'matmul' TransposeInput=False TransposeOther=True (input buffer 0 FP16 [1, 64, "
                 "4096] at [0, 0, 0], input buffer 1 FP16 [64, 4096] at [0, 0]), the plan FP16 "
                 "[1, 64, 64] at [0, 0, 0] of the writes of (Matmul 'matmul_sum3'"),
], ids=["other-k", "other-m"])
def test_a_model_of_another_shape_is_caught(planc, tmp_path, other, expected):
    _, plan = _plan(planc, tmp_path, split_k_model())
    model = tmp_path / "other.json"
    model.write_text(split_k_model(**other))
    result = planc("check", plan, "--model", model)
    assert result.code == 1
    assert expected in result.err, result.err
    assert "$.TaskInfos[" in result.err


def test_an_edited_tt_plan_is_caught_at_its_kernel(planc, tmp_path):
    model = EXAMPLES / "ffn.json"
    out = tmp_path / "ffn.tt.json"
    assert planc(model, "-t", "tt", "-o", out).code == 0
    doc = json.loads(out.read_text())
    assert doc[1]["kernel"]["operator"]["Type"] == "Sigmoid"
    doc[1]["kernel"]["operator"]["Type"] = "Relu"
    plain, result = _check(planc, tmp_path, doc, model)
    assert plain.code == 0, plain.err
    assert result.code == 1
    assert "$[1].kernel.operator: output tensor 15" in result.err, result.err
    assert "the model computes Sigmoid 'sigmoid'" in result.err
    assert "the plan Relu 'sigmoid'" in result.err
    assert "[tt.against-model]" in result.err


def test_the_findings_are_check_findings(planc, tmp_path):
    """`--json` lists them with the others; a document with errors has no summary."""
    model, plan = _plan(planc, tmp_path, split_k_model())
    doc = json.loads(plan.read_text())
    _named(doc, "matmul_sum")[2]["Type"] = "Sub"
    _, result = _check(planc, tmp_path, doc, model, "--json")
    report = result.json()
    assert (report["ok"], report["errors"], report["summary"]) == (False, 1, "")
    assert report["findings"][0]["rule"] == "ark-plan.against-model"
    assert report["findings"][0]["path"] == "$.TaskInfos[4].Ops[0]"


def test_what_cannot_be_compared_is_one_line(planc, tmp_path):
    model, plan = _plan(planc, tmp_path, split_k_model())
    layers = Path(__file__).parent.parent / "gemini" / "data" / "vgg16_excerpt.json"
    refused = planc("check", layers, "--model", model)
    assert refused.code == 1
    assert refused.err == ("planc: error: --model does not apply to gemini-layers documents: "
                           "planc check reads it for ark-plan, tt or ark-model documents only\n")
    not_a_model = planc("check", plan, "--model", plan)
    assert not_a_model.code == 1
    assert not_a_model.err == (f"planc: error: {plan}: --model takes an ARK model (an ARK "
                               "model file or an ONNX model), and this is an ark-plan "
                               "document\n")
    missing = planc("check", plan, "--model", tmp_path / "none.json")
    assert missing.code == 1 and len(missing.err.splitlines()) == 1
    assert "none.json" in missing.err


# -- (c) a second way: numpy on random inputs ----------------------------------------------------


def _numeric_verdict(model_path: Path, plan_path: Path, seed: int) -> bool:
    """Does the plan, run tile by tile on the model's random inputs, leave in every output of
    the model (by buffer and layout) what the model interpreter computes? A plan the
    simulator refuses to run computes nothing: False."""
    from compiler.pipeline import load_input
    from dialects import ark, plan
    from ground.diagnostics import PlancError
    from targets.ark.model_interpreter import Memory, buffer_sizes, run_model
    from targets.ark.plan_simulator import run_plan
    from targets.ark.tensor_layouts import layout_of

    _, model_module = load_input(str(model_path))
    _, plan_module = load_input(str(plan_path))
    model = next(op for op in model_module.ops if isinstance(op, ark.ModelOp))
    root = next(op for op in plan_module.ops if isinstance(op, plan.PlanOp))
    expected = run_model(model, seed=seed)
    inputs = Memory(buffer_sizes(list(expected.types.values())))
    for tid, value in expected.inputs.items():
        inputs.write(expected.types[tid], value)
    input_buffers = {expected.types[t].buffer.id.data for t in expected.inputs}
    given = {}
    for op in root.walk():
        for value in op.results:
            t = value.type
            if isinstance(t, ark.TensorType) and t.buffer.id.data in input_buffers:
                given[t.tensor_id] = inputs.read(t)
    try:
        run, outputs = run_plan(root, given)
    except PlancError:
        return False

    def key(t):
        layout = layout_of(t)
        return (t.buffer.id.data, layout.shape, layout.strides, layout.offsets)

    computed = {key(run.types[tid]): v for tid, v in outputs.items()}
    for tid in expected.outputs:
        got = computed.get(key(expected.types[tid]))
        want = np.asarray(expected.tensors[tid], dtype=np.float64)
        if got is None or not np.allclose(np.asarray(got, dtype=np.float64), want,
                                          rtol=1e-3, atol=1e-3 * np.abs(want).max()):
            return False
    return True


def _sub_in_chain(doc):
    _named(doc, "matmul_sum2")[2]["Type"] = "Sub"


def _parts_in_other_order(doc):
    """An equal look-alike: the first add's two parts swapped (addition of parts commutes)."""
    _named(doc, "matmul_sum")[2]["ReadTensors"].reverse()


def _a_slice_moved(doc):
    _named(doc, "matmul_k2")[2]["ReadTensors"][0]["Offsets"][2] = 128


def _partial_sums_elsewhere(doc):
    """An equal look-alike: a part's result moved to a buffer of its own (memory planning)."""
    for _, _, op in _ops(doc):
        for key in ("ReadTensors", "WriteTensors", "ResultTensors"):
            for tensor in op[key]:
                if tensor["Buffer"]["Id"] == 3:
                    tensor["Buffer"]["Id"] = 99


def _last_add_dropped(doc):
    i, j, _ = _named(doc, "matmul_sum3")
    del doc["TaskInfos"][i]["Ops"][j]


def _first_matmul_swapped(doc):
    next(op for _, _, op in _ops(doc) if op["Type"] == "Matmul")["ReadTensors"].reverse()


def _swapped(name):
    def edit(doc):
        _named(doc, name)[2]["ReadTensors"].reverse()
    edit.__name__ = f"_{name}_swapped"
    return edit


def _relu_made_sigmoid(doc):
    next(op for _, _, op in _ops(doc) if op["Type"] == "Relu")["Type"] = "Sigmoid"


def _unchanged(doc):
    pass


@pytest.mark.parametrize(("model_text", "edit"), [
    (lambda: split_k_model(k=2048, dtype="FP32"), _unchanged),
    (lambda: split_k_model(k=2048, dtype="FP32"), _sub_in_chain),
    (lambda: split_k_model(k=2048, dtype="FP32"), _parts_in_other_order),
    (lambda: split_k_model(k=2048, dtype="FP32"), _a_slice_moved),
    (lambda: split_k_model(k=2048, dtype="FP32"), _partial_sums_elsewhere),
    (lambda: split_k_model(k=2048, dtype="FP32"), _last_add_dropped),
    (square_model, _unchanged),
    (square_model, _first_matmul_swapped),
    (square_model, _relu_made_sigmoid),
    *((elementwise_model, _swapped(name)) for name in ("add", "mul", "sub", "div", "add_1")),
], ids=lambda x: getattr(x, "__name__", "")[1:])
def test_the_verdict_agrees_with_numpy(planc, tmp_path, model_text, edit):
    """Both ways on the same edited plan: `planc check --model` (symbolic) and the numpy model
    interpreter against the plan simulator on random inputs (two seeds)."""
    model, plan = _plan(planc, tmp_path, model_text())
    doc = json.loads(plan.read_text())
    edit(doc)
    path = write_json(tmp_path / "edited.json", doc)
    symbolic = planc("check", path, "--model", model).code == 0
    numeric = [_numeric_verdict(model, path, seed) for seed in (0, 1)]
    assert numeric == [symbolic, symbolic], planc("check", path, "--model", model).err


def test_the_api_takes_the_model_too(planc, tmp_path):
    """`planc.check(document, model=...)`: a file or a module, the same findings."""
    import compiler as api
    from ground.diagnostics import ArgumentError

    model, plan = _plan(planc, tmp_path, split_k_model())
    assert api.check(plan, model=model).ok
    doc = json.loads(plan.read_text())
    _named(doc, "matmul_sum3")[2]["Type"] = "Sub"
    edited = write_json(tmp_path / "edited.json", doc)
    for source in (edited, api.load(edited)):
        report = api.check(source, model=model)
        assert not report.ok
        assert [(f.rule, f.path) for f in report.findings] == [
            ("ark-plan.against-model", "$.TaskInfos[4].Ops[2]")]
    layers = Path(__file__).parent.parent / "gemini" / "data" / "vgg16_excerpt.json"
    with pytest.raises(ArgumentError, match="--model does not apply to gemini-layers"):
        api.check(layers, model=model)
