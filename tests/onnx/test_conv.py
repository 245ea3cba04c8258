"""Convolutional networks as ARK models (`frontends.onnx_conv`): Conv at every stride,
padding, dilation and group count, pooling, BatchNormalization, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend is the planc[onnx] extra")

from frontends.onnx import import_model  # noqa: E402
from ground.diagnostics import PlancError  # noqa: E402
from tests.onnx.oracle import assert_same, single_node_model  # noqa: E402

RNG = np.random.default_rng(3)


def floats(*shape):
    return RNG.uniform(-2, 2, shape).astype(np.float32)


CONVS = {
    "3x3": dict(x=(1, 3, 7, 7), w=(4, 3, 3, 3)),
    "1x1": dict(x=(1, 5, 4, 6), w=(3, 5, 1, 1)),
    "1x1 batch 2": dict(x=(2, 5, 4, 6), w=(3, 5, 1, 1)),
    "1x1 stride 2": dict(x=(1, 4, 7, 6), w=(6, 4, 1, 1), strides=[2, 2]),
    "stride 2 pad 1": dict(x=(2, 3, 8, 9), w=(4, 3, 3, 3), strides=[2, 2], pads=[1, 1, 1, 1]),
    "asymmetric": dict(x=(1, 2, 9, 7), w=(3, 2, 3, 2), strides=[2, 3], pads=[0, 1, 2, 0]),
    "dilated": dict(x=(1, 2, 9, 9), w=(2, 2, 3, 3), dilations=[2, 2], pads=[2, 2, 2, 2]),
    "7x7 stem": dict(x=(1, 3, 16, 16), w=(8, 3, 7, 7), strides=[2, 2], pads=[3, 3, 3, 3]),
    "same upper": dict(x=(1, 2, 7, 8), w=(3, 2, 3, 3), strides=[2, 2], auto_pad="SAME_UPPER"),
    "same lower": dict(x=(1, 2, 6, 5), w=(3, 2, 4, 4), auto_pad="SAME_LOWER"),
    "valid": dict(x=(1, 2, 6, 5), w=(3, 2, 2, 2), auto_pad="VALID"),
    "depthwise": dict(x=(1, 6, 7, 7), w=(6, 1, 3, 3), group=6, pads=[1, 1, 1, 1]),
    "depthwise x2": dict(x=(2, 3, 6, 6), w=(6, 1, 3, 3), group=3, strides=[2, 2],
                         pads=[1, 1, 1, 1]),
    "groups": dict(x=(1, 6, 5, 5), w=(4, 3, 3, 3), group=2, pads=[1, 1, 1, 1]),
    "1-D": dict(x=(2, 3, 11), w=(4, 3, 3), strides=[2], pads=[1, 2]),
}


@pytest.mark.parametrize("name", CONVS)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_is_an_im2col_gather_and_a_matmul(name, bias):
    attrs = dict(CONVS[name])
    x, w = floats(*attrs.pop("x")), floats(*attrs.pop("w"))
    initializers = {"w": w, **({"b": floats(w.shape[0])} if bias else {})}
    model = single_node_model("Conv", {"x": x}, ["y"], initializers=initializers, **attrs)
    assert_same(model, {"x": x}, rtol=1e-4, atol=1e-5)


POOLS = {
    "max 3x3 s2 p1": dict(op="MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    "max 2x2": dict(op="MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
    "max ceil": dict(op="MaxPool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    "max dilated": dict(op="MaxPool", kernel_shape=[2, 2], dilations=[2, 2]),
    "max same": dict(op="MaxPool", kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
    "avg without pad": dict(op="AveragePool", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    "avg with pad": dict(op="AveragePool", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         count_include_pad=1),
    "avg ceil": dict(op="AveragePool", kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
    "avg ceil with pad": dict(op="AveragePool", kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1),
    "avg 1-D": dict(op="AveragePool", kernel_shape=[3], strides=[2], pads=[1, 1], x=(2, 3, 9)),
}


@pytest.mark.parametrize("name", POOLS)
def test_pooling_gathers_windows_and_reduces(name):
    attrs = dict(POOLS[name])
    op, x = attrs.pop("op"), floats(*attrs.pop("x", (2, 3, 9, 8)))
    assert_same(single_node_model(op, {"x": x}, ["y"], **attrs), {"x": x})


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pooling(op):
    x = floats(2, 3, 5, 4)
    assert_same(single_node_model(op, {"x": x}, ["y"]), {"x": x})


def test_batch_normalization_is_a_scale_and_shift_per_channel():
    x = floats(2, 4, 3, 3)
    stats = {"s": floats(4), "b": floats(4), "m": floats(4),
             "v": RNG.uniform(0.5, 2, 4).astype(np.float32)}
    model = single_node_model("BatchNormalization", {"x": x}, ["y"], initializers=stats,
                              epsilon=1e-3)
    assert_same(model, {"x": x})


def test_maxpool_indices_are_refused_when_used():
    model = single_node_model("MaxPool", {"x": floats(1, 2, 4, 4)}, ["y", "i"],
                              kernel_shape=[2, 2])
    with pytest.raises(PlancError, match=r"\(MaxPool\): its output 1 \('i'\) is used"):
        import_model(model, wants=("ark-model",))


def test_a_cnn_is_a_gemini_layer_graph_unless_the_target_takes_only_ark_models():
    from dialects import ark, dnn

    x = floats(1, 3, 6, 6)
    model = single_node_model("Conv", {"x": x}, ["y"], initializers={"w": floats(2, 3, 3, 3)})
    assert dnn.find_graph(import_model(model).module) is not None
    assert dnn.find_graph(import_model(model, wants=("ark-model", "gemini-layers")).module)
    assert isinstance(import_model(model, wants=("ark-model", "ark-plan")).module.ops.first,
                      ark.ModelOp)


def test_the_api_compiles_a_cnn_for_ark_and_for_gemini(tmp_path):
    """`compile` imports an ONNX CNN as its target takes it (it loaded a Gemini layer graph
    for every target, which the ARK targets refused)."""
    import json

    from compiler.api import compile as planc_compile

    path = tmp_path / "conv.onnx"
    onnx.save(single_node_model("Conv", {"x": floats(1, 3, 6, 6)}, ["y"], pads=[1, 1, 1, 1],
                                initializers={"w": floats(2, 3, 3, 3)}), path)
    model = json.loads(planc_compile(path, "ark-model"))
    kinds = {node["Op"]["Type"] for node in model["Nodes"]}
    assert {"Embedding", "Matmul"} <= kinds, kinds
    assert "conv2d" in planc_compile(path, "gemini-layers")


def test_average_pooling_counting_same_padding_is_refused():
    """The divisor would count the `pads` attribute's padding, which SAME leaves empty."""
    model = single_node_model("AveragePool", {"x": floats(1, 2, 5, 5)}, ["y"],
                              kernel_shape=[3, 3], auto_pad="SAME_UPPER", count_include_pad=1)
    with pytest.raises(PlancError, match=r"count_include_pad with auto_pad SAME"):
        import_model(model, wants=("ark-model",))
