"""`planc plan.json -t ark-model`: the model an ARK plan computes, planned again."""

from __future__ import annotations

import json

import numpy as np
import pytest

from compiler.api import load
from dialects import ark
from targets.ark.model_interpreter import run_model
from tests.conftest import corpus_params


def _model(path) -> ark.ModelOp:
    return next(op for op in load(path).ops if isinstance(op, ark.ModelOp))


def test_the_lifted_model_computes_what_the_model_computes(planc, small_ffn, tmp_path):
    # A second way to the plan's meaning: the model it was planned from, run by the numpy
    # interpreter on the same inputs, gives the same outputs as the model lifted from the plan.
    plan, lifted = tmp_path / "p.json", tmp_path / "lifted.json"
    assert planc(small_ffn, "-t", "ark", "-o", plan).code == 0
    result = planc(plan, "-t", "ark-model", "-o", lifted)
    assert result.code == 0, result.err
    assert planc("check", "--strict", lifted).code == 0
    original = run_model(_model(small_ffn), seed=3)
    again = run_model(_model(lifted), {i: original.inputs[i] for i in original.inputs
                                       if i in {t.tensor_id for t in _tensors(lifted)}})
    for tensor_id in original.outputs:
        np.testing.assert_array_equal(again.tensors[tensor_id], original.tensors[tensor_id])
    doc = json.loads(lifted.read_text())
    ops = [node["Op"] for node in doc["Nodes"]]
    assert all("Config" not in op for op in ops)          # the schedule is stripped
    assert [node["Id"] for node in doc["Nodes"]] == list(range(len(ops)))


def _tensors(path) -> list[ark.TensorType]:
    return [v.type for op in _model(path).operators() for v in [*op.operands, *op.results]
            if isinstance(v.type, ark.TensorType)]


@pytest.mark.parametrize("path", corpus_params("ark", "*plan*.json"))
def test_arks_own_plans_lift_and_plan_again(planc, tmp_path, path, caplog):
    lifted, again = tmp_path / "m.json", tmp_path / "p.json"
    result = planc(path, "-t", "ark-model", "-o", lifted)
    if result.code == 1:
        # A plan planc refuses to read (planc check says why) has no model to lift.
        assert planc("check", path).code == 1, result.err
        return
    assert result.code == 0, result.err
    assert planc("check", "--strict", lifted).code == 0
    # The lift is the model the plan computes: the plan proves equal to it. ARK's allreduce-sm
    # plans hold seven TaskInfos no task group runs; the model leaves them out, and says so.
    proof = planc("check", path, "--model", lifted)
    assert proof.code == 0, proof.err
    never_run = "allreduce_sm" in path.name
    assert ("7 TaskInfos (10, 11, 12, 13, 14, 15, 16) are in no task group" in caplog.text
            ) == never_run, caplog.text
    assert planc(lifted, "-t", "ark", "--arch", "a100", "-o", again).code == 0
    assert planc("check", again).code == 0
