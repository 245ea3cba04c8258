"""LRN, grouped / depthwise convolution, ShuffleNet's channel shuffle and average pooling that
leaves padding out, from ONNX to Gemini schedules, each checked a second way:

* the imported layer graph computes what ONNX's own reference evaluator computes;
* the receptive field planc gives each workload (the input box its ifmap records) equals the
  one found by brute force over the workload's output coordinates, from ONNX's definition of
  the operator (not from planc's formulas);
* the schedule runs tile by tile on only the data its transfers deliver (`check_tiles`).
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend is the planc[onnx] extra")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from backends.gemini import schedule_pipeline  # noqa: E402
from compiler.pipeline import run_pipeline  # noqa: E402
from dialects import dnn, gemini  # noqa: E402
from frontends.onnx import import_model  # noqa: E402
from targets.gemini import model  # noqa: E402
from targets.gemini.dnn_interpreter import run_graph  # noqa: E402
from targets.gemini.simulator import check_tiles  # noqa: E402

RNG = np.random.default_rng(7)


def network(nodes, shape, out_shape, weights=()) -> onnx.ModelProto:
    for index, node in enumerate(nodes):
        node.name = node.name or f"{node.op_type.lower()}{index}"
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        initializer=[numpy_helper.from_array(
            w if w.dtype == np.int64 else w.astype(np.float32), name) for name, w in weights])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def lrn_net(size: int, channels: int = 16, hw: int = 10) -> onnx.ModelProto:
    w = RNG.uniform(-1, 1, (channels, 3, 3, 3))
    return network([
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("LRN", ["c"], ["y"], size=size, alpha=0.5, beta=0.75, bias=2.0),
    ], [1, 3, hw, hw], [1, channels, hw, hw], [("w", w)])


def grouped_net(groups: int, channels: int = 16, k: int = 16, stride: int = 1,
                ) -> onnx.ModelProto:
    w = RNG.uniform(-1, 1, (k, channels // groups, 3, 3))
    out = (10 + 2 - 3) // stride + 1
    return network([
        helper.make_node("Conv", ["x", "w"], ["y"], group=groups, pads=[1, 1, 1, 1],
                         strides=[stride, stride]),
    ], [1, channels, 10, 10], [1, k, out, out], [("w", w)])


def avgpool_net(include_pad: int) -> onnx.ModelProto:
    return network([
        helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         strides=[1, 1], count_include_pad=include_pad),
    ], [1, 8, 9, 9], [1, 8, 9, 9])


def shuffle_unit() -> onnx.ModelProto:
    """A ShuffleNet unit without its Concat: grouped 1x1 conv, channel shuffle (5-D Reshape,
    Transpose, Reshape), depthwise 3x3 conv, 3x3/2 average pool leaving padding out."""
    return network([
        helper.make_node("Conv", ["x", "w1"], ["a"], group=4),
        helper.make_node("Reshape", ["a", "split"], ["b"]),
        helper.make_node("Transpose", ["b"], ["t"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Reshape", ["t", "back"], ["s"]),
        helper.make_node("Conv", ["s", "w2"], ["d"], group=16, pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["d"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
    ], [1, 16, 8, 8], [1, 16, 4, 4], [
        ("w1", RNG.uniform(-1, 1, (16, 4, 1, 1))), ("w2", RNG.uniform(-1, 1, (16, 1, 3, 3))),
        ("split", np.array([1, 4, 4, 8, 8])), ("back", np.array([1, 16, 8, 8]))])


NETWORKS = {
    "shuffle_unit": shuffle_unit,
    "lrn5": lambda: lrn_net(5), "lrn4": lambda: lrn_net(4), "lrn1": lambda: lrn_net(1),
    "grouped2": lambda: grouped_net(2), "grouped4_k8": lambda: grouped_net(4, k=8),
    "depthwise": lambda: grouped_net(16), "depthwise_x2_s2": lambda: grouped_net(8, 8, 16, 2),
    "avgpool_exclude_pad": lambda: avgpool_net(0), "avgpool_include_pad": lambda: avgpool_net(1),
}


def imported(net: onnx.ModelProto):
    imp = import_model(net)
    return imp, dnn.find_graph(imp.module)


def lrn_by_the_spec(net: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """Conv then LRN, element by element as the ONNX operator documentation defines LRN (the
    reference evaluator of onnx 1.23 loops over N instead of C, so it is not used here)."""
    node = onnx.NodeProto()
    node.CopyFrom(net.graph.node[0])
    node.output[0] = "y"
    conv = ReferenceEvaluator(network([node], list(x.shape), [1, 1, 1, 1],
                                      [(t.name, numpy_helper.to_array(t))
                                       for t in net.graph.initializer])).run(None, {"x": x})[0]
    attrs = {a.name: helper.get_attribute_value(a) for a in net.graph.node[1].attribute}
    size, channels = attrs["size"], conv.shape[1]
    out = np.empty_like(conv, dtype=np.float64)
    for n, c, h, w in np.ndindex(conv.shape):
        lo = max(0, c - int(np.floor((size - 1) / 2)))
        hi = min(channels - 1, c + int(np.ceil((size - 1) / 2)))
        square_sum = float(np.sum(conv[n, lo: hi + 1, h, w].astype(np.float64) ** 2))
        out[n, c, h, w] = conv[n, c, h, w] / (attrs["bias"] + attrs["alpha"] / size *
                                              square_sum) ** attrs["beta"]
    return out


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_the_layer_graph_computes_what_onnx_computes(name):
    net = NETWORKS[name]()
    x = RNG.uniform(-1, 1, [d.dim_value for d in
                            net.graph.input[0].type.tensor_type.shape.dim]).astype(np.float32)
    if name.startswith("lrn"):
        expected = lrn_by_the_spec(net, x)
    else:
        expected = ReferenceEvaluator(net).run(None, {"x": x})[0]
    imp, graph = imported(net)
    given = dict(imp.values)
    given[imp.inputs["x"]] = x
    values = run_graph(graph, given=given)
    out = graph.outputs[0].value
    np.testing.assert_allclose(values[out], expected, rtol=1e-4, atol=1e-5)


# -- receptive fields by brute force ---------------------------------------------------------


def brute_force_box(layer: dnn.LayerOp, out_box) -> tuple[list[int], list[int]]:
    """The bounding box of every input coordinate some output coordinate of `out_box` reads,
    by ONNX's definition of the operator (an LRN window is [c - floor((size-1)/2),
    c + ceil((size-1)/2)]; grouped output channel k reads the C/g channels of group
    k // (K/g)), padding cut off.

    What output (n, k, h, w) reads is a product of one set per axis (channels from k alone,
    rows from h alone, columns from w alone), so the union over the box is the product of the
    per-axis unions: each axis' coordinates are enumerated on their own, not their product."""
    n_in, c_in, h_in, w_in = dnn.fmap(layer.inputs[0]).nchw
    ranges = [range(lo, hi + 1) for lo, hi in zip(*out_box, strict=True)]

    def channels(k: int):
        if isinstance(layer, dnn.ChannelShuffleOp):    # ONNX's reshape-transpose-reshape
            g = layer.group_count
            source = np.arange(c_in).reshape(1, g, c_in // g, 1, 1).transpose(0, 2, 1, 3, 4)
            return [int(source.reshape(c_in)[k])]
        if isinstance(layer, dnn.LrnOp):
            size = layer.window_size
            return range(max(0, k - (size - 1) // 2),
                         min(c_in - 1, k + int(np.ceil((size - 1) / 2))) + 1)
        if isinstance(layer, dnn.Conv2dOp):
            g = layer.group_count
            k_per, c_per = layer.out_type.nchw[1] // g, c_in // g
            return range(k // k_per * c_per, (k // k_per + 1) * c_per)
        return [k]

    def window(axis: int, x: int, size: int):
        if isinstance(layer, dnn.ChannelShuffleOp | dnn.LrnOp):
            return [x]
        stride, before = layer.strides[axis], layer.pads[2 * axis]
        return [x * stride - before + i for i in range(layer.window[axis])
                if 0 <= x * stride - before + i < size]

    seen = [set(ranges[0]), set(), set(), set()]
    for k in ranges[1]:
        seen[1].update(channels(k))
    for axis, size in enumerate((h_in, w_in)):
        for x in ranges[2 + axis]:
            seen[2 + axis].update(window(axis, x, size))
    return [min(d) for d in seen], [max(d) for d in seen]


CHECKED = (dnn.LrnOp, dnn.Conv2dOp, dnn.PoolOp, dnn.ChannelShuffleOp)


@pytest.mark.parametrize("name", ["lrn5", "lrn4", "grouped2", "grouped4_k8", "depthwise",
                                  "depthwise_x2_s2", "avgpool_exclude_pad", "shuffle_unit"])
def test_input_boxes_match_brute_force_for_every_output_range(name):
    """planc's receptive field (`input_box`) of every channel range and a few spatial ones."""
    _, graph = imported(NETWORKS[name]())
    for layer in (op for op in graph.layers if isinstance(op, CHECKED)):
        _, k, h, w = layer.out_type.nchw
        for c0, c1 in itertools.combinations_with_replacement(range(k), 2):
            for h0, h1 in ((0, h - 1), (0, 0), (h - 1, h - 1), (1, h // 2)):
                box = ([0, c0, h0, 0], [0, c1, h1, w - 1])
                got, _ = model.input_box(layer, 0, box)
                assert (list(got[0]), list(got[1])) == brute_force_box(layer, box), (box, got)


def schedule(net: onnx.ModelProto, mesh: str, buffer_size: int | None = None):
    imp, graph = imported(net)
    options = argparse.Namespace(mesh=mesh, batch=None, buffer_size=buffer_size, dram_bw=None)
    run_pipeline(imp.module, schedule_pipeline(options))
    return imp.module, graph


def delivered_boxes(schedule_op: gemini.ScheduleOp, ifmap: gemini.IfmapOp) -> list:
    """The absolute boxes of the blocks and DRAM loads an ifmap lists."""
    loads = {ld.value("transfer_id"): ld for ld in schedule_op.dram.loads}
    blocks = {o.value("transfer_id"): (wl, o) for wl in schedule_op.workloads()
              for o in wl.ofmaps}
    boxes = []
    for tid in ifmap.transfer_ids:
        if tid in loads:
            boxes.append((loads[tid].ints_of("lower"), loads[tid].ints_of("upper")))
        else:
            wl, block = blocks[tid]
            boxes.append(([a + b for a, b in zip(wl.box[0], block.ints_of("lower"),
                                                 strict=True)],
                          [a + b for a, b in zip(wl.box[0], block.ints_of("upper"),
                                                 strict=True)]))
    return boxes


def covered(box, pieces) -> bool:
    """Is every coordinate of `box` in one of `pieces`? (Small boxes: checked point by point.)"""
    ranges = [range(lo, hi + 1) for lo, hi in zip(*box, strict=True)]
    return all(any(all(lo <= p <= hi for p, lo, hi in zip(point, *piece, strict=True))
                   for piece in pieces) for point in itertools.product(*ranges))


@pytest.mark.parametrize("mesh,buffer_size", [("1x1", None), ("2x2", None), ("1x1", 16384),
                                              ("2x2", 8192)])
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_schedules_deliver_the_brute_force_receptive_field(name, mesh, buffer_size):
    module, graph = schedule(NETWORKS[name](), mesh, buffer_size)
    schedule_op = next(op for op in module.ops if isinstance(op, gemini.ScheduleOp))
    layers = {layer.name_: layer for layer in graph.layers}
    checked = 0
    for wl in schedule_op.workloads():
        layer = layers[wl.layer]
        if not isinstance(layer, CHECKED):
            continue
        want = brute_force_box(layer, wl.box)
        ifmap = wl.ifmaps[0]
        extent = [hi - lo + 1 for lo, hi in zip(ifmap.ints_of("lower"), ifmap.ints_of("upper"),
                                                strict=True)]
        assert extent == [hi - lo + 1 for lo, hi in zip(*want, strict=True)], (wl.layer, wl.box)
        assert covered(want, delivered_boxes(schedule_op, ifmap)), (wl.layer, wl.box)
        checked += 1
    assert checked
    tiles = check_tiles(module)
    assert tiles.ok, tiles.problem


def test_a_lrn_split_over_channels_reads_the_neighbouring_channels():
    """On 1x1 maps cut over 4 cores by channels, LRN parts read channels beyond their own
    (the halo), and the schedule still computes the network."""
    module, graph = schedule(lrn_net(5, channels=64, hw=1), "2x2")
    schedule_op = next(op for op in module.ops if isinstance(op, gemini.ScheduleOp))
    lrn = next(layer for layer in graph.layers if isinstance(layer, dnn.LrnOp))
    parts = [wl for wl in schedule_op.workloads() if wl.layer == lrn.name_]
    halos = [wl for wl in parts if wl.ifmaps[0].ints_of("upper")[1] -
             wl.ifmaps[0].ints_of("lower")[1] > wl.box[1][1] - wl.box[0][1]]
    assert len(halos) == len(parts) == 4, [wl.box for wl in parts]
    assert check_tiles(module).ok


def test_a_dense_layer_too_wide_for_wl0_streams_input_channel_slices():
    """64 x 40000 weights: even 64 output channels exceed the WL0 slice (9344 units), so each
    tile is cut along its inputs (what ZFNet-512's and VGG-19's first dense layers need)."""
    w = RNG.uniform(-1, 1, (64, 40000))
    net = network([helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[1, 1]),
                   helper.make_node("Flatten", ["p"], ["f"]),
                   helper.make_node("Gemm", ["f", "w"], ["y"], transB=1)],
                  [1, 40000, 1, 1], [1, 64], [("w", w)])
    module, _ = schedule(net, "1x1")
    schedule_op = next(op for op in module.ops if isinstance(op, gemini.ScheduleOp))
    dense = [wl for wl in schedule_op.workloads() if wl.layer.startswith("gemm")]
    assert len(dense) == 1 and len(dense[0].tiles) == 9     # 64 x 40032 B / 32 / 9344 -> 9
    assert all(entry.value("size") <= 9344 for wl in dense for entry in wl.wl0)
    assert check_tiles(module).ok


# -- the layer description keeps them ---------------------------------------------------------


@pytest.mark.parametrize("name", ["lrn5", "grouped2", "depthwise", "avgpool_exclude_pad",
                                  "shuffle_unit"])
def test_the_layer_description_round_trips(planc, tmp_path, name):
    path = tmp_path / "net.onnx"
    onnx.save(NETWORKS[name](), path)
    first = planc(path, "-t", "gemini-layers", "-o", tmp_path / "layers.json")
    assert first.code == 0, first.err
    again = planc(tmp_path / "layers.json", "-t", "gemini-layers", "-o", tmp_path / "again.json")
    assert again.code == 0, again.err
    text = (tmp_path / "layers.json").read_text()
    assert text == (tmp_path / "again.json").read_text()
    key = {"lrn5": '"size": 5', "grouped2": '"groups": 2', "depthwise": '"groups": 16',
           "avgpool_exclude_pad": '"count_include_pad": false',
           "shuffle_unit": '"operation": "channel_shuffle"'}[name]
    assert key in text


@pytest.mark.parametrize("name", ["lrn5", "depthwise", "avgpool_exclude_pad", "shuffle_unit"])
def test_the_mlir_text_round_trips(planc, tmp_path, name):
    onnx.save(NETWORKS[name](), tmp_path / "net.onnx")
    assert planc(tmp_path / "net.onnx", "-t", "mlir", "-o", tmp_path / "a.mlir").code == 0
    assert planc(tmp_path / "a.mlir", "-t", "mlir", "-o", tmp_path / "b.mlir").code == 0
    assert (tmp_path / "a.mlir").read_text() == (tmp_path / "b.mlir").read_text()


def random_network(seed: int) -> onnx.ModelProto:
    """A random chain: grouped conv (random groups, kernel, stride, padding), LRN (random
    size), average pool leaving padding out (random window, stride, padding)."""
    rng = np.random.default_rng(seed)
    g = int(rng.choice([1, 2, 3, 6]))
    c, k = 6 * int(rng.integers(1, 3)), g * int(rng.integers(1, 4))
    r, stride, hw = int(rng.choice([1, 3, 5])), int(rng.integers(1, 3)), int(rng.integers(6, 12))
    pad = int(rng.integers(0, r // 2 + 1))
    conv_hw = (hw + 2 * pad - r) // stride + 1
    pool, pool_pad = int(rng.choice([2, 3])), int(rng.integers(0, 2))
    pool_stride = int(rng.integers(1, 3))
    out_hw = (conv_hw + 2 * pool_pad - pool) // pool_stride + 1
    return network([
        helper.make_node("Conv", ["x", "w"], ["a"], group=g, pads=[pad] * 4,
                         strides=[stride] * 2),
        helper.make_node("LRN", ["a"], ["b"], size=int(rng.integers(1, 7)), alpha=0.3,
                         beta=0.6, bias=1.5),
        helper.make_node("AveragePool", ["b"], ["y"], kernel_shape=[pool] * 2,
                         pads=[pool_pad] * 4, strides=[pool_stride] * 2),
    ], [1, c, hw, hw], [1, k, out_hw, out_hw], [("w", rng.uniform(-1, 1, (k, c // g, r, r)))])


@pytest.mark.parametrize("seed", range(6))
def test_random_networks_schedule_with_brute_force_receptive_fields(seed):
    net = random_network(seed)
    _, graph = imported(net)
    for layer in (op for op in graph.layers if isinstance(op, CHECKED)):
        _, k, h, w = layer.out_type.nchw
        for c0, c1 in itertools.combinations_with_replacement(range(k), 2):
            box = ([0, c0, 0, 0], [0, c1, h // 2, w - 1])
            got, _ = model.input_box(layer, 0, box)
            assert (list(got[0]), list(got[1])) == brute_force_box(layer, box), (box, got)
    for mesh, buffer_size in (("2x2", None), ("1x1", 4096)):
        module, _ = schedule(net, mesh, buffer_size)
        tiles = check_tiles(module)
        assert tiles.ok, tiles.problem


def test_lrn_coefficients_survive_the_round_trip(planc, tmp_path):
    onnx.save(lrn_net(5), tmp_path / "net.onnx")
    assert planc(tmp_path / "net.onnx", "-t", "gemini-layers", "-o",
                 tmp_path / "a.json").code == 0
    import json

    layer = next(v for v in json.loads((tmp_path / "a.json").read_text()).values()
                 if v["operation"] == "lrn")
    assert (layer["size"], layer["alpha"], layer["beta"], layer["bias"]) == (5, 0.5, 0.75, 2.0)


# -- what still cannot be expressed -------------------------------------------------------------


def test_a_grouped_convolution_whose_groups_do_not_divide_is_named(planc, tmp_path):
    net = grouped_net(2)
    net.graph.node[0].attribute[0].i = 3      # group=3 over 16 channels
    onnx.save(net, tmp_path / "bad.onnx")
    result = planc(tmp_path / "bad.onnx", "-t", "gemini", "-o", tmp_path / "x.json")
    assert result.code == 1 and result.err.count("\n") == 1
    assert "(Conv)" in result.err and "$.graph.node[0]" in result.err


def shuffle_variant(perm=(0, 2, 1, 3, 4), split=(1, 4, 4, 8, 8)) -> onnx.ModelProto:
    net = shuffle_unit()
    for tensor in net.graph.initializer:
        if tensor.name == "split":
            tensor.CopyFrom(numpy_helper.from_array(np.array(split), "split"))
    net.graph.node[2].attribute[0].ints[:] = list(perm)
    return net


@pytest.mark.parametrize("net,operator", [
    (lambda: shuffle_variant(perm=(0, 1, 2, 4, 3)), "(Transpose)"),
    (lambda: shuffle_variant(split=(1, 2, 8, 4, 16)), "(Reshape)"),
])
def test_other_5d_views_are_named(planc, tmp_path, net, operator):
    onnx.save(net(), tmp_path / "bad.onnx")
    result = planc(tmp_path / "bad.onnx", "-t", "gemini", "-o", tmp_path / "x.json")
    assert result.code == 1 and result.err.count("\n") == 1, result.err
    assert operator in result.err and "channel shuffle" in result.err


def test_max_pooling_cannot_carry_count_include_pad():
    from dialects.dnn import PoolOp

    x = dnn.InputOp.new("x", dnn.FmapType.get([1, 8, 4, 4], "int8"))
    op = PoolOp.new("p", "max_pool2d", [x.output], dnn.FmapType.get([1, 8, 4, 4], "int8"),
                    pool_size=dnn._ints([1, 1]), count_include_pad=dnn.IntegerAttr(0, 1))
    with pytest.raises(Exception, match="average pooling only"):
        op.verify_()
