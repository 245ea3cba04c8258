"""ONNX's exact semantics, operator by operator and opset by opset, against onnxruntime (or
onnx's reference evaluator): each case here was silently wrong or an internal error."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend is the planc[onnx] extra")

from frontends.onnx import import_model  # noqa: E402
from ground.diagnostics import PlancError  # noqa: E402
from tests.onnx.oracle import assert_same, single_node_model  # noqa: E402

RNG = np.random.default_rng(0)


def floats(*shape):
    return RNG.uniform(-2, 2, shape).astype(np.float32)


@pytest.mark.parametrize("opset,axis", [(11, 1), (11, None), (11, 2), (11, -2), (13, 1),
                                        (1, 0)])
def test_softmax_before_opset_13_normalises_the_input_coerced_to_2d(opset, axis):
    """Before 13, axis 1 of [2, 3, 4] normalises each of the 2 rows of 12 (planc normalised
    each column of 3: max error 0.69)."""
    attrs = {} if axis is None else {"axis": axis}
    model = single_node_model("Softmax", {"x": floats(2, 3, 4)}, ["y"], opset=opset, **attrs)
    assert_same(model, {"x": floats(2, 3, 4)})


@pytest.mark.parametrize("axis", [-1, -2, 0, 2, 1])
def test_flatten_with_a_negative_axis(axis):
    """Flatten of [24, 5] at -1 is [24, 5] (planc made [120, 1])."""
    x = floats(4, 6, 5)
    assert_same(single_node_model("Flatten", {"x": x}, ["y"], axis=axis), {"x": x})


def test_dropout_in_training_mode_is_refused_naming_the_node():
    model = single_node_model("Dropout", {"x": floats(3, 4)}, ["y"], opset=13,
                              initializers={"r": np.array(0.3, np.float32),
                                            "t": np.array(True)})
    with pytest.raises(PlancError, match=r"'y' \(Dropout\): training mode drops a random 0.3"):
        import_model(model)


@pytest.mark.parametrize("opset", [10, 13])
def test_dropout_at_ratio_0_or_in_inference_is_the_identity_with_a_true_mask(opset):
    x = floats(3, 4)
    initializers = {"r": np.array(0.0, np.float32), "t": np.array(True)} if opset >= 12 \
        else {}
    model = single_node_model("Dropout", {"x": x}, ["y", "mask"], opset=opset,
                              initializers=initializers)
    # Before 12 the spec leaves the inference mask open: onnxruntime gives all false, onnx's
    # reference evaluator all true, which planc follows (12 defines it: all true).
    assert_same(model, {"x": x}, reference=opset < 12)


def test_dropout_before_opset_7_in_training_mode_is_refused():
    model = single_node_model("Dropout", {"x": floats(3, 4)}, ["y"], opset=6, is_test=0)
    with pytest.raises(PlancError, match=r"training mode drops a random 0.5"):
        import_model(model)


def test_slice_before_opset_10_reads_its_ranges_from_attributes():
    """It was an internal error (the starts input is absent)."""
    x = floats(5, 6)
    model = single_node_model("Slice", {"x": x}, ["y"], opset=9, starts=[1, -4], ends=[4, 100],
                              axes=[0, 1])
    assert_same(model, {"x": x})


def test_integer_div_of_constants_truncates_toward_zero():
    """Div of int64 constants rounds toward zero: -7 / 2 is -3 (planc gave -4, and a reshape
    computed that way became [2, -2], an internal error)."""
    a, b = np.array([-7, 7, -7, 6, -1], np.int64), np.array([2, -2, -2, 4, 3], np.int64)
    model = single_node_model("Div", {"x": floats(1)}, ["q"], opset=14,
                              initializers={"a": a, "b": b})
    model.graph.node[0].input[:] = ["a", "b"]
    model.graph.input.pop()
    assert_same(model, {})


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_of_constants_follows_fmod(fmod):
    a, b = np.array([-7, 7, -7, 6, -1], np.int64), np.array([2, -3, -2, 4, 3], np.int64)
    model = single_node_model("Mod", {}, ["r"], opset=13, initializers={"a": a, "b": b},
                              fmod=fmod)
    assert_same(model, {})


@pytest.mark.parametrize("shape,allowzero", [([0, -1], 0), ([3, 0, -1], 0), ([-1], 0),
                                             ([3, 2, 2], 1), ([4, -1, 1], 0)])
def test_reshape_zero_minus_one_and_allowzero(shape, allowzero):
    x = floats(3, 2, 2)
    model = single_node_model("Reshape", {"x": x}, ["y"], opset=14, allowzero=allowzero,
                              initializers={"s": np.array(shape, np.int64)})
    assert_same(model, {"x": x})


@pytest.mark.parametrize("shape", [[5, -1], [-1, -1], [2, -3, 2], [7]])
def test_a_reshape_that_cannot_hold_the_input_is_refused_naming_the_node(shape):
    model = single_node_model("Reshape", {"x": floats(3, 2, 2)}, ["y"], opset=14,
                              initializers={"s": np.array(shape, np.int64)})
    with pytest.raises(PlancError, match=r"\(Reshape\): new shape"):
        import_model(model)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("a,b", [((3,), (1, 1)), ((2, 1, 3), (4, 1)), ((1,), (2, 3)),
                                 ((4, 3), ())])
def test_broadcasting_gives_the_broadcast_shape(op, a, b):
    """A [3] tensor and a [1, 1] constant give [1, 3] (planc kept [3])."""
    x = floats(*a)
    model = single_node_model(op, {"x": x}, ["y"], initializers={
        "c": (np.full(b, 1.5, np.float32))})
    assert_same(model, {"x": x})


def _lrn_by_hand(x: np.ndarray, size: int, alpha: float, beta: float, bias: float):
    """ONNX's LRN formula, one channel at a time (a second way beside the oracle)."""
    channels = x.shape[1]
    out = np.empty_like(x, dtype=np.float64)
    for c in range(channels):
        low, high = max(0, c - (size - 1) // 2), min(channels - 1, c + (size - 1) - (size - 1) // 2)
        square_sum = (x[:, low:high + 1].astype(np.float64) ** 2).sum(axis=1)
        out[:, c] = x[:, c] / (bias + alpha / size * square_sum) ** beta
    return out


@pytest.mark.parametrize("size,beta,shape", [(5, 0.75, (2, 7, 3, 4)), (4, 0.75, (1, 6, 5, 1)),
                                             (3, 1.0, (1, 3, 2, 2)), (1, 0.5, (1, 4, 3, 2)),
                                             (9, 2.25, (2, 5, 2, 3))])
def test_lrn_sums_squares_over_the_channel_window(size, beta, shape):
    """AlexNet's and GoogLeNet's LRN (once refused for `-t ark`): an even size puts the extra
    channel after, the window is cut at the edges, beta in quarters."""
    x = RNG.uniform(-3, 3, shape).astype(np.float32)
    attrs = {"size": size, "alpha": 0.5, "beta": beta, "bias": 1.5}
    model = single_node_model("LRN", {"x": x}, ["y"], opset=13, **attrs)
    if size % 2:    # onnxruntime takes odd sizes only, and onnx's reference evaluator's LRN
        assert_same(model, {"x": x})    # loops over the batch, not the channels (onnx 1.x)
    from tests.onnx.oracle import planc_outputs

    np.testing.assert_allclose(planc_outputs(model, {"x": x})["y"],
                               _lrn_by_hand(x, size, 0.5, beta, 1.5), rtol=1e-5, atol=1e-6)


def test_lrn_without_a_size_is_refused_naming_the_attribute():
    model = single_node_model("LRN", {"x": floats(1, 3, 2, 2)}, ["y"], opset=13, beta=0.75)
    with pytest.raises(PlancError, match=r"'y' \(LRN\): its size attribute is missing"):
        import_model(model, wants=("ark-model",))


def test_lrn_with_a_beta_arks_operators_cannot_make_is_refused():
    model = single_node_model("LRN", {"x": floats(1, 3, 2)}, ["y"], opset=13, size=3, beta=0.6)
    with pytest.raises(PlancError, match=r"LRN's beta in multiples of 1/4 up to 64, not 0.6"):
        import_model(model, wants=("ark-model",))
