"""`planc simulate` compares a plan with its model within the tolerance scaled by each
element's error scale (`model_interpreter.error_scale`): a plan computes from its own values of
its inputs, which may differ from the model's within the tolerance, and a matmul whose terms
cancel amplifies that difference beyond a tolerance relative to the result alone. A plan that
reads the wrong K range is still reported."""

from __future__ import annotations

import json

import numpy as np
import pytest

from backends.plan_json import plan_json
from frontends.model_builder import ModelBuilder
from targets.ark.model_interpreter import run_model
from targets.ark.plan_simulator import PlanRunner, derive_model
from tests.plan.test_batched_run import from_doc, planned

K = 1024


def halves_plan():
    """y0 = x[:, :K] @ w and y1 = x[:, K:] @ w, planned for an A100."""
    m = ModelBuilder()
    x = m.tensor([128, 2 * K], "FP16")
    w = m.tensor([K, 256], "FP16")
    m.matmul(m.slice(x, [0, 0], [128, K]), w)
    m.matmul(m.slice(x, [0, K], [128, K]), w)
    return planned(m.finish())


def nudged(values: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Each row of a K-wide half of x moved by 0.4% (under FP16's 1% tolerance), away from
    zero in the direction of w's first column: every term of column 0 of x @ w grows, so the
    result moves by 0.4% of |x| @ |w|, which is far more than 1% of the result."""
    direction = np.sign(values) * np.sign(w[:, 0])
    return (values * (1 + 4e-3 * direction)).astype(np.float32)


def reference_of_nudged_inputs(p, with_scales: bool):
    """The model run on nudged inputs, holding the plan's (unnudged) inputs: the plan then
    computes from inputs that differ from the model's within the tolerance, as it does
    when an upstream operator rounds an intermediate the other way."""
    model, originals, _ = derive_model(p)
    plain = run_model(model)
    (w_id, w), = ((tid, v) for tid, v in plain.inputs.items() if v.shape == (K, 256))
    halves = {tid: v for tid, v in plain.inputs.items() if v.shape == (128, K)}
    assert len(halves) == 2
    inputs = {w_id: w} | {tid: nudged(v, w) for tid, v in halves.items()}
    reference = run_model(model, inputs, error_scales=with_scales)
    reference.inputs = plain.inputs
    return reference, originals


def test_cancellation_is_within_the_tolerance():
    p = halves_plan()
    reference, originals = reference_of_nudged_inputs(p, with_scales=True)
    runner = PlanRunner(p, reference, originals)
    runner.run()
    assert runner.counts == {}, runner.problems


def test_the_old_rule_called_it_a_wrong_plan():
    """Relative to |expected| alone (no error scales), the same plan is reported."""
    p = halves_plan()
    reference, originals = reference_of_nudged_inputs(p, with_scales=False)
    runner = PlanRunner(p, reference, originals)
    runner.run()
    assert runner.counts.get("mismatch", 0) >= 1
    assert "differently from the model" in str(runner.problems[0])


@pytest.mark.parametrize("offset", [0, 64, K - 64])
def test_a_wrong_k_range_is_reported(offset):
    """The second matmul reading x[:, offset:offset + K] instead of x[:, K:]: compared with
    the right model's values (with its error scales), every tile differs."""
    p = halves_plan()
    model, _, _ = derive_model(p)
    reference = run_model(model, error_scales=True)
    doc = json.loads(json.dumps(plan_json(p)))
    ops = [op for info in doc["TaskInfos"] for op in info["Ops"] if op["Type"] == "Matmul"]
    reads = [op["ReadTensors"][0] for op in ops if op["ReadTensors"][0]["Offsets"] == [0, K]]
    assert reads
    for tensor in reads:
        tensor["Offsets"] = [0, offset]
    bad = from_doc(doc)
    _, originals, _ = derive_model(bad)
    runner = PlanRunner(bad, reference, originals)
    runner.run()
    assert runner.counts.get("mismatch", 0) >= 1, runner.problems
    assert "differently from the model" in str(runner.problems[0])


def test_the_error_scale_of_a_matmul_is_its_absolute_value_evaluation():
    """Checked against a brute-force sum of |a_ik| |b_kj|, and through a subtraction."""
    m = ModelBuilder()
    a, b = m.tensor([3, 5], "FP32"), m.tensor([5, 2], "FP32")
    c = m.matmul(a, b)
    m.sub(c, m.tensor([3, 2], "FP32"))
    run = run_model(m.finish(), error_scales=True)
    (ia, va), (ib, vb), (ic, vc) = sorted(run.inputs.items())
    product, difference = sorted(t for t in run.scales)
    brute = [[sum(abs(va[i, k]) * abs(vb[k, j]) for k in range(5)) for j in range(2)]
             for i in range(3)]
    assert np.allclose(run.scales[product], brute, rtol=1e-6)
    assert np.allclose(run.scales[difference], np.array(brute) + np.abs(vc), rtol=1e-6)


def test_other_operators_start_from_their_magnitude():
    m = ModelBuilder()
    m.exp(m.sub(m.tensor([4, 4], "FP32"), m.tensor([4, 4], "FP32")))
    run = run_model(m.finish(), error_scales=True)
    difference, exp = sorted(run.scales)
    assert not np.array_equal(run.scales[difference], np.abs(run.tensors[difference]))
    assert np.array_equal(run.scales[exp], np.abs(run.tensors[exp]))


def test_an_overflowed_scale_accepts_no_more_than_the_plain_rule():
    """A scale of inf (a sum of magnitudes past fp32) must not accept every value there."""
    from targets.ark.plan_simulator import _close
    expected = np.array([1.0, 2.0])
    wrong = np.array([1.0, 7.0])
    assert not _close(wrong, expected, "FP16", scale=np.array([1.0, np.inf]))
    assert _close(wrong, expected, "FP16", scale=np.array([1.0, 1000.0]))
