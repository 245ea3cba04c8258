"""The numpy reference interpreter: each operator against a direct numpy formula."""

from __future__ import annotations

import numpy as np
import pytest

from frontends.model_builder import ModelBuilder
from ground import dtypes
from ground.diagnostics import PlancError
from targets.ark import model_interpreter
from targets.ark.model_interpreter import run_model

RNG = np.random.default_rng(7)


def run(build, inputs_by_position=None, dtype="FP32"):
    """Build a model whose inputs are the first tensors created; return (run, out id)."""
    m = ModelBuilder()
    out = build(m)
    module = m.finish()
    return run_model(module, inputs_by_position or {}), out.type.tensor_id


def rand(*shape):
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


UNARY = {
    "exp": np.exp,
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
    "copy": lambda x: x,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    x = np.abs(rand(3, 5)) + 0.1
    result, out = run(lambda m: getattr(m, name)(m.tensor([3, 5], "FP32")), {0: x})
    np.testing.assert_allclose(result.tensors[out], UNARY[name](x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name, fn", [("add", np.add), ("sub", np.subtract),
                                      ("mul", np.multiply), ("div", np.divide)])
def test_binary_with_broadcasting(name, fn):
    a, b = rand(2, 3, 4), rand(3, 1) + 2
    result, out = run(lambda m: getattr(m, name)(m.tensor([2, 3, 4], "FP32"),
                                                 m.tensor([3, 1], "FP32")), {0: a, 1: b})
    np.testing.assert_allclose(result.tensors[out], fn(a, b), rtol=1e-6)


def test_scalars():
    x = rand(4)
    r1, o1 = run(lambda m: m.scalar_add(m.tensor([4], "FP32"), 2.5), {0: x})
    r2, o2 = run(lambda m: m.scalar_mul(m.tensor([4], "FP32"), -3.0), {0: x})
    r3, o3 = run(lambda m: m.scalar_assign([2, 2], 7.0, "FP32"))
    np.testing.assert_allclose(r1.tensors[o1], x + 2.5)
    np.testing.assert_allclose(r2.tensors[o2], x * -3.0)
    np.testing.assert_array_equal(r3.tensors[o3], np.full((2, 2), 7.0))


@pytest.mark.parametrize("ta, tb", [(False, False), (False, True), (True, False), (True, True)])
def test_matmul_transposes_and_batch(ta, tb):
    a = rand(2, 1, 6, 4) if ta else rand(2, 1, 4, 6)
    b = rand(3, 5, 6) if tb else rand(3, 6, 5)
    result, out = run(lambda m: m.matmul(m.tensor(list(a.shape), "FP32"),
                                         m.tensor(list(b.shape), "FP32"),
                                         transpose_input=ta, transpose_other=tb), {0: a, 1: b})
    expected = np.matmul(np.swapaxes(a, -1, -2) if ta else a, np.swapaxes(b, -1, -2) if tb else b)
    assert result.tensors[out].shape == (2, 3, 4, 5)
    np.testing.assert_allclose(result.tensors[out], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name, fn", [("reduce_sum", np.sum), ("reduce_max", np.max),
                                      ("reduce_mean", np.mean)])
@pytest.mark.parametrize("keep", [True, False])
def test_reductions(name, fn, keep):
    x = rand(2, 3, 4)
    result, out = run(lambda m: getattr(m, name)(m.tensor([2, 3, 4], "FP32"), 1, keep), {0: x})
    np.testing.assert_allclose(result.tensors[out], fn(x, axis=1, keepdims=keep), rtol=1e-6)


def test_transpose_and_embedding():
    x = rand(2, 3, 4)
    r1, o1 = run(lambda m: m.transpose(m.tensor([2, 3, 4], "FP32"), [1, 2, 0]), {0: x})
    np.testing.assert_array_equal(r1.tensors[o1], np.transpose(x, [1, 2, 0]))
    table = rand(10, 4)
    idx = np.array([[3, 0, 9]])
    r2, o2 = run(lambda m: m.embedding(m.tensor([1, 3], "INT32"), m.tensor([10, 4], "FP32")),
                 {0: idx, 1: table})
    np.testing.assert_array_equal(r2.tensors[o2], table[idx])


def test_random_embedding_indices_stay_in_the_table():
    result, out = run(lambda m: m.embedding(m.tensor([64], "INT32"), m.tensor([5, 2], "FP32")))
    assert result.inputs[0].min() >= 0 and result.inputs[0].max() < 5


def test_rope_rotates_pairs():
    x, r = rand(2, 8), rand(2, 8)
    result, out = run(lambda m: m.rope(m.tensor([2, 8], "FP32"), m.tensor([2, 8], "FP32")),
                      {0: x, 1: r})
    z = (x[:, 0::2] + 1j * x[:, 1::2]) * (r[:, 0::2] + 1j * r[:, 1::2])
    got = result.tensors[out]
    np.testing.assert_allclose(got[:, 0::2], z.real, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[:, 1::2], z.imag, rtol=1e-5, atol=1e-6)


def test_cast_rounds_to_the_output_type():
    x = np.array([1.4, 2.6, -1.5], dtype=np.float32)
    r1, o1 = run(lambda m: m.cast(m.tensor([3], "FP32"), "FP16"), {0: x})
    assert r1.tensors[o1].tolist() == np.float16(x).astype(np.float32).tolist()
    r2, o2 = run(lambda m: m.cast(m.tensor([3], "FP32"), "INT32"), {0: x})
    assert r2.tensors[o2].tolist() == [1, 2, -1]  # a C cast from float truncates


def test_fp16_results_are_rounded_like_the_device():
    x = rand(16)
    result, out = run(lambda m: m.exp(m.tensor([16], "FP16")), {0: x})
    expected = np.exp(np.float16(x).astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(result.tensors[out], expected.astype(np.float32))


def test_bf16_rounding_is_nearest_even():
    values = np.array([1.0, 1.00390625, 1.01171875, -3.0e38, np.inf], dtype=np.float32)
    # 1 + 2^-8 is a tie between 1.0 and 1.0078125: it goes to the even mantissa (1.0).
    rounded = dtypes.round_to(values, "BF16")
    assert rounded[0] == 1.0 and rounded[1] == 1.0 and rounded[2] == 1.015625
    assert rounded[3] < -2.9e38 and np.isinf(rounded[4])


def test_writes_through_views_are_seen_by_later_readers():
    # Two ops write the halves of one buffer through slices; a third reads the whole buffer.
    m = ModelBuilder()
    a = m.tensor([2, 4], "FP32")
    whole = m.tensor([2, 8], "FP32")
    m.copy(a, output=m.slice(whole, [0, 0], [2, 4]))
    m.scalar_mul(a, 10.0, output=m.slice(whole, [0, 4], [2, 4]))
    total = m.reduce_sum(whole, 1)
    x = rand(2, 4)
    result = run_model(m.finish(), {0: x})
    np.testing.assert_allclose(result.tensors[total.type.tensor_id][:, 0],
                               x.sum(1) * 11, rtol=1e-5)


def test_inputs_and_outputs_are_identified():
    result, out = run(lambda m: m.add(m.tensor([2], "FP32"), m.tensor([2], "FP32")))
    assert sorted(result.inputs) == [0, 1]
    assert result.outputs == [out]


def test_seed_makes_runs_reproducible():
    def build(m):
        return m.exp(m.tensor([8], "FP32"))
    a, out = run(build)
    b, _ = run(build)
    np.testing.assert_array_equal(a.tensors[out], b.tensors[out])


def test_communication_is_reported_not_simulated():
    m = ModelBuilder(0, 2)
    m.send(m.tensor([4], "FP32"), remote_rank=1)
    with pytest.raises(PlancError, match="communication operators are not simulated"):
        run_model(m.finish())


def test_a_tensor_read_again_after_an_in_place_write_has_its_new_values():
    """The run converts a tensor's stored elements once and reuses them for later reads only
    while nothing writes its buffer: a read after an in-place update sees the update (numpy
    on the same inputs says what each result must be)."""
    m = ModelBuilder()
    x = m.tensor([4, 8], "FP32")
    y = m.exp(x)
    before = m.relu(y)                          # reads y: its values are now converted
    after_add = m.scalar_add(y, 1.0, output=y)  # y += 1 in place
    after = m.copy(y)
    run = run_model(m.finish())
    xs = run.inputs[x.type.tensor_id]
    np.testing.assert_allclose(run.tensors[before.type.tensor_id], np.exp(xs), rtol=1e-6)
    np.testing.assert_allclose(run.tensors[after_add.type.tensor_id], np.exp(xs) + 1,
                               rtol=1e-6)
    np.testing.assert_allclose(run.tensors[after.type.tensor_id], np.exp(xs) + 1, rtol=1e-6)


def test_inputs_drawn_in_chunks_are_one_draw_of_the_seed(monkeypatch):
    """Random inputs are drawn a chunk at a time; the values (and so every printed error of
    `planc simulate`) are those of drawing each whole input at once from the seed, scaled in
    float64 and rounded once to float32."""
    monkeypatch.setattr(model_interpreter, "DRAW_CHUNK", 7)     # chunks end mid-row
    result, _ = run(lambda m: m.matmul(m.tensor([5, 10], "FP32"), m.tensor([10, 3], "FP32")))
    rng = np.random.default_rng(0)
    for tensor_id, shape in ((0, (5, 10)), (1, (10, 3))):
        expected = (rng.uniform(-1.0, 1.0, size=shape) * 10 ** -0.25).astype(np.float32)
        np.testing.assert_array_equal(result.inputs[tensor_id], expected)


@pytest.mark.parametrize("element_bytes", [1, 2, 4])
def test_every_byte_is_numpys_all_over_the_element(element_bytes):
    mask = RNG.random((6, 10, element_bytes)) < 0.8
    view = mask[1:5, 2:9:3]         # a strided window, as `byte_view` gives
    np.testing.assert_array_equal(model_interpreter._every_byte(view), view.all(axis=-1))
