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


def nudged(values: np.ndarray) -> np.ndarray:
    """Each element moved by 0.1% (about an FP16 ulp) in a random direction, as another
    summation order upstream moves it: the terms of x @ w move independently, so the result
    moves by about 0.1% of the root of their squares, which is more than 1% of a result that
    cancels, and within 1% of the root of the squares."""
    signs = np.random.default_rng(1).choice([-1.0, 1.0], size=values.shape)
    return (values * (1 + 1e-3 * signs)).astype(np.float32)


def reference_of_nudged_inputs(p, with_scales: bool):
    """The model run on nudged inputs, holding the plan's (unnudged) inputs: the plan then
    computes from inputs that differ from the model's within the tolerance, as it does
    when an upstream operator rounds an intermediate the other way."""
    model, originals, _ = derive_model(p)
    # Inputs 8 times the drawn ones: results of about 20, whose differences pass FP16's atol.
    plain = run_model(model, {tid: 8 * v for tid, v in run_model(model).inputs.items()})
    (w_id, w), = ((tid, v) for tid, v in plain.inputs.items() if v.shape == (K, 256))
    halves = {tid: v for tid, v in plain.inputs.items() if v.shape == (128, K)}
    assert len(halves) == 2
    inputs = {w_id: w} | {tid: nudged(v) for tid, v in halves.items()}
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


def test_the_error_scale_of_a_matmul_is_the_root_of_its_squared_terms():
    """Checked against a brute-force sqrt(2 sum a_ik^2 b_kj^2), and through a subtraction."""
    m = ModelBuilder()
    a, b = m.tensor([3, 5], "FP32"), m.tensor([5, 2], "FP32")
    c = m.matmul(a, b)
    m.sub(c, m.tensor([3, 2], "FP32"))
    run = run_model(m.finish(), error_scales=True)
    (ia, va), (ib, vb), (ic, vc) = sorted(run.inputs.items())
    product, difference = sorted(t for t in run.scales)
    brute = [[max(abs(vc_ij), (2 * sum(float(va[i, k] * vb[k, j]) ** 2 for k in range(5))) ** 0.5)
              for j, vc_ij in enumerate(row)] for i, row in enumerate(run.tensors[product])]
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


@pytest.mark.parametrize("k", [4096, 8192])
def test_a_matmul_that_leaves_out_one_k_block_differs(k):
    """x @ w without one K block of 64 (a tile's worth): the root of the squares bound reports
    it; the sum of the terms' magnitudes, |x| @ |w|, which grows as K rather than sqrt(K),
    accepted nearly every element at K = 4096 and every one at 8192."""
    from targets.ark.plan_simulator import _close_elements
    m = ModelBuilder()
    m.matmul(m.tensor([128, k], "FP16"), m.tensor([k, 256], "FP16"))
    run = run_model(m.finish(), error_scales=True)
    (_, x), (_, w) = sorted(run.inputs.items())
    (tid, scale), = run.scales.items()
    expected = run.tensors[tid]
    wrong = expected - x[:, 64:128].astype(np.float32) @ w[64:128].astype(np.float32)
    near = _close_elements(wrong, expected, "FP16", scale)
    assert (~near).mean() > 0.3
    loose = _close_elements(wrong, expected, "FP16", np.abs(x) @ np.abs(w))
    assert (~loose).sum() <= 10     # the magnitudes' bound: what the test guards against


def test_the_error_scale_of_a_sum_is_the_root_of_its_squared_terms():
    """A reduction's scale comes from its terms (it had fallen back to |result|: the rule was
    given the list of inputs and summed over the wrong axis)."""
    m = ModelBuilder()
    m.reduce_mean(m.reduce_sum(m.tensor([4, 64], "FP32"), axis=-1, keep_dim=False), axis=0)
    run = run_model(m.finish(), error_scales=True)
    (_, x), = run.inputs.items()
    total, mean = sorted(run.scales)
    brute = [max(abs(sum(row)), sum(float(v) ** 2 for v in row) ** 0.5) for row in x]
    assert np.allclose(run.scales[total], brute, rtol=1e-5)
    mean_of = abs(float(run.tensors[mean].ravel()[0]))
    assert np.allclose(run.scales[mean].ravel(),
                       max(mean_of, sum(v * v for v in brute) ** 0.5 / 4), rtol=1e-5)
