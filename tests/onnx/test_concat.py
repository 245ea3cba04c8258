"""Concat on Gemini: no copy layer; a consumer of a concatenation reads every concatenated
feature map at its channel offset (Gemini's IR generator, reference section 2.4).

Proved three ways on generated networks (onnx.helper): the imported layer graph computes what
ONNX's reference evaluator computes; the schedule, run tile by tile on exactly the blocks its
transfers deliver, computes what the graph computes (`check_tiles`); and, by brute force over
channels, every consumer workload's ifmaps cover exactly the channels of the right
predecessors that its receptive field needs, no more and no fewer.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend is the planc[onnx] extra")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from backends.gemini import schedule_pipeline  # noqa: E402
from compiler.pipeline import run_pipeline  # noqa: E402
from dialects import dnn  # noqa: E402
from dialects.locations import verify_module  # noqa: E402
from frontends.onnx_cnn import import_cnn  # noqa: E402
from targets.gemini import model  # noqa: E402
from targets.gemini.dnn_interpreter import run_graph  # noqa: E402
from targets.gemini.plan import group_of, layer_table  # noqa: E402
from targets.gemini.simulator import check_tiles  # noqa: E402

SIZE = 12


def concat_network(seed: int = 0, channels=(3, 5, 4, 6)) -> onnx.ModelProto:
    """Branches of different widths concatenated (Inception/SqueezeNet), a concatenation of a
    concatenation (DenseNet), the network input itself concatenated, a 3x3 conv, a pool, an
    element-wise op and a classifier reading concatenations, and a concatenated output."""
    rng = np.random.default_rng(seed)
    a, b, c, d = channels
    weights = []

    def w(name, k, cin, r):
        weights.append(numpy_helper.from_array(
            rng.uniform(-1, 1, (k, cin, r, r)).astype(np.float32) / np.sqrt(cin * r * r), name))
        return name

    def n(op, inputs, outputs, **attrs):
        return helper.make_node(op, inputs, outputs, name=f"{op}_{outputs[0]}", **attrs)

    pad1 = {"pads": [1, 1, 1, 1]}
    nodes = [
        n("Conv", ["x", w("w0", 8, 3, 3)], ["s"], **pad1),
        n("Relu", ["s"], ["r"]),
        n("Conv", ["r", w("w1", a, 8, 1)], ["b1"]),
        n("Conv", ["r", w("w2", b, 8, 3)], ["b2"], **pad1),
        n("MaxPool", ["r"], ["b3"], kernel_shape=[3, 3], strides=[1, 1], **pad1),
        n("Concat", ["b1", "b2", "b3"], ["cat1"], axis=1),                  # a + b + 8
        n("Conv", ["cat1", w("w3", c, a + b + 8, 3)], ["g"], **pad1),
        n("Relu", ["g"], ["gr"]),
        n("Concat", ["cat1", "gr"], ["cat2"], axis=1),                      # dense block
        n("Concat", ["cat2", "x"], ["cat3"], axis=-3),                      # the input too
        n("MaxPool", ["cat3"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p", w("w4", d, a + b + 8 + c + 3, 1)], ["q"]),
        n("Relu", ["cat2"], ["cr"]),
        n("GlobalAveragePool", ["cr"], ["gap"]),
        n("Conv", ["q", w("w5", a + b + 8 + c, d, 3)], ["q2"], strides=[2, 2], **pad1),
        n("GlobalAveragePool", ["q2"], ["gap2"]),
        n("Add", ["gap", "gap2"], ["sum"]),
        n("Concat", ["sum", "gap2"], ["y"], axis=1),
    ]
    out = 2 * (a + b + 8 + c)
    graph = helper.make_graph(
        nodes, "concats", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         [1, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, out, 1, 1])],
        initializer=weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def scheduled(onnx_model, mesh="1x1", batch=None, buffer_size=None):
    imp = import_cnn(onnx_model, "concats.onnx")
    run_pipeline(imp.module, schedule_pipeline(argparse.Namespace(
        mesh=mesh, batch=batch, buffer_size=buffer_size, dram_bw=None)))
    verify_module(imp.module)
    return imp


def the_schedule(module):
    return next(op for op in module.ops if op.name == "gemini.schedule")


# -- the import --------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_the_layer_graph_computes_what_onnx_computes(seed):
    onnx_model = concat_network(seed, channels=(2 + seed, 3, 5 - seed, 4))
    x = np.random.default_rng(seed).uniform(-1, 1, (1, 3, SIZE, SIZE)).astype(np.float32)
    want = ReferenceEvaluator(onnx_model).run(None, {"x": x})[0]
    imp = import_cnn(onnx_model, "concats.onnx")
    graph = dnn.find_graph(imp.module)
    given = dict(imp.values)
    given[imp.inputs["x"]] = x
    values = run_graph(graph, given=given)
    got = values[graph.outputs[0].value].reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    concats = [layer for layer in graph.layers if isinstance(layer, dnn.ConcatOp)]
    assert len(concats) == 4 and all(layer.LAYER_TYPE is None for layer in concats)


def test_a_concat_along_another_axis_is_refused_naming_the_node(planc, tmp_path):
    n = helper.make_node
    weight = numpy_helper.from_array(np.ones((4, 4, 1, 1), np.float32), "w")
    graph = helper.make_graph(
        [n("Conv", ["x", "w"], ["r"]), n("Concat", ["r", "x"], ["y"], axis=2, name="rows")],
        "rows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 12, 6])],
        initializer=[weight])
    path = tmp_path / "rows.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    result = planc(path, "-t", "gemini", "-o", tmp_path / "out.json")
    assert result.code == 1 and result.err.count("\n") == 1
    assert "$.graph.node[1]" in result.err and "'rows' (Concat)" in result.err
    assert "axis 2" in result.err and "Traceback" not in result.err


def test_the_dialect_refuses_inputs_that_do_not_line_up():
    from xdsl.dialects.builtin import IntegerAttr, i64
    from xdsl.utils.exceptions import VerifyException

    from dialects.dnn import ConcatOp, FmapType, InputOp

    a = InputOp.new("a", FmapType.get([1, 2, 4, 4], "int8"))
    b = InputOp.new("b", FmapType.get([1, 3, 4, 5], "int8"))
    op = ConcatOp.new("cat", "concat", [a.output, b.output], FmapType.get([1, 5, 4, 4], "int8"),
                      axis=IntegerAttr(1, i64))
    with pytest.raises(VerifyException, match="differ outside axis 1"):
        op.verify_()


# -- the schedule ------------------------------------------------------------------------------

CASES = [("1x1", None, None), ("2x2", None, None), ("2x1", 2, None),
         pytest.param("4x4", 4, None, marks=pytest.mark.slow),
         ("2x2", 2, 16000), ("1x1", None, 8000)]
"""Meshes, batches and buffer sizes; 4x4 with a batch of 4 (1.4 CPU s for the two tests, the
other five cases 0.1-0.45 s) is slow: 2x1 and 2x2 take batches in `-m "not slow"`."""


@pytest.mark.parametrize("mesh,batch,buffer_size", CASES)
def test_the_schedule_computes_what_the_graph_computes(mesh, batch, buffer_size):
    imp = scheduled(concat_network(), mesh, batch, buffer_size)
    check = check_tiles(imp.module)
    assert check.ok, check.problem


@pytest.mark.parametrize("mesh,batch,buffer_size", CASES)
def test_each_workload_reads_exactly_the_channels_of_the_right_predecessors(mesh, batch,
                                                                             buffer_size):
    imp = scheduled(concat_network(), mesh, batch, buffer_size)
    checked = channel_offsets_brute_force(imp.module)
    assert checked["pieces"] > checked["consumers"] > 0      # concatenations were read


def test_a_vector_layer_is_timed_on_all_pieces_of_its_input():
    """Relu over a concatenation streams every piece: its time counts the bytes of all its
    ifmaps (marked as pieces of operand 0), not those of the first one."""
    imp = scheduled(concat_network(), "1x1")
    layers = layer_table(dnn.find_graph(imp.module))
    relu = next(wl for wl in the_schedule(imp.module).workloads() if wl.layer == "Relu_cr")
    assert len(relu.ifmaps) == 4           # b1, b2, b3 through cat1, then g
    assert {f.attributes["gemini.operand"].value.data for f in relu.ifmaps} == {0}
    in_bytes = sum(f.value("size") for f in relu.ifmaps)
    out_bytes = model.fmap_bytes(relu.box, 8)
    assert relu.value("time") == int(model.vp_cycles(layers["Relu_cr"], in_bytes, out_bytes))


def test_small_buffers_reload_concatenated_maps_from_dram():
    imp = scheduled(concat_network(), "1x1", None, 8000)
    sched = the_schedule(imp.module)
    reloads = [ld for ld in sched.dram.loads if ld.value("kind") == "fmap"
               and ld.ints_of("related_ifmap")]
    assert reloads                                           # segments cut through concats
    assert check_tiles(imp.module).ok


def test_the_layer_description_carries_concatenations(planc, tmp_path):
    """`--target gemini-layers` writes a concat layer (its inputs as previous layers, the
    axis); read back, it schedules and the schedule passes the strict check."""
    import json

    src, layers = tmp_path / "concats.onnx", tmp_path / "layers.json"
    onnx.save(concat_network(), src)
    assert planc(src, "-t", "gemini-layers", "-o", layers).code == 0
    doc = json.loads(layers.read_text())
    cat1 = doc["Concat_cat1"]
    assert cat1["operation"] == "concat" and cat1["axis"] == 1
    assert cat1["previous_layer"] == ["Conv_b1", "Conv_b2", "MaxPool_b3"]
    mlir, again = tmp_path / "layers.mlir", tmp_path / "again.json"
    assert planc(layers, "-o", mlir).code == 0 and "dnn.concat" in mlir.read_text()
    assert planc(mlir, "-t", "gemini-layers", "-o", again).code == 0
    assert again.read_text() == layers.read_text()        # the custom form round-trips
    out = tmp_path / "schedule.json"
    result = planc(layers, "-t", "gemini", "--mesh", "2x2", "-o", out)
    assert result.code == 0, result.err
    assert planc("check", out, "--strict").code == 0


def test_a_network_input_concatenated_second_stays_an_input(planc, tmp_path):
    """In a layer description, inputs after a layer's first are constants (weights), except
    a concat's: a network input it reads second is still a network input."""
    from frontends.gemini_layers import import_document
    from ground.json_reader import parse_json

    n = helper.make_node
    weights = [numpy_helper.from_array(np.ones((k, c, 1, 1), np.float32), name)
               for name, k, c in (("w1", 4, 3), ("w2", 2, 7))]
    graph = helper.make_graph(
        [n("Conv", ["z", "w1"], ["a"], name="conv_a"),
         n("Concat", ["a", "x"], ["c"], axis=1, name="cat"),
         n("Conv", ["c", "w2"], ["y"], name="conv_y")],
        "two_inputs", [helper.make_tensor_value_info(v, TensorProto.FLOAT, [1, 3, 4, 4])
                       for v in ("z", "x")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
        initializer=weights)
    src, layers = tmp_path / "two.onnx", tmp_path / "layers.json"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), src)
    assert planc(src, "-t", "gemini-layers", "-o", layers).code == 0
    module = import_document(parse_json(layers.read_text()))
    inputs = {op.input_name.data: op for op in dnn.find_graph(module).inputs}
    assert not inputs["x"].is_constant and not inputs["z"].is_constant
    out = tmp_path / "schedule.json"
    assert planc(layers, "-t", "gemini", "--batch", "2", "-o", out).code == 0


def rows_and_samples(tmp_path, planc) -> dict:
    """Two 3x3 convolutions of one input concatenated along channels and read by a third, as
    a layer description (which may say any axis)."""
    import json

    n = helper.make_node
    weights = [numpy_helper.from_array(np.ones((4, c, 3, 3), np.float32), name)
               for name, c in (("wa", 3), ("wb", 3), ("wy", 8))]
    pad = {"pads": [1, 1, 1, 1]}
    graph = helper.make_graph(
        [n("Conv", ["x", "wa"], ["a"], name="conv_a", **pad),
         n("Conv", ["x", "wb"], ["b"], name="conv_b", **pad),
         n("Concat", ["a", "b"], ["c"], axis=1, name="cat"),
         n("Conv", ["c", "wy"], ["y"], name="conv_y", **pad)],
        "pair", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 12, 12])],
        initializer=weights)
    src, layers = tmp_path / "pair.onnx", tmp_path / "pair.json"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), src)
    assert planc(src, "-t", "gemini-layers", "-o", layers).code == 0
    return json.loads(layers.read_text())


def along(doc: dict, axis: int) -> str:
    """The description with the concat along `axis` instead (and its reader reshaped)."""
    import json

    shape = [2, 4, 12, 12]
    shape[axis] *= 2
    doc["cat"]["axis"], doc["cat"]["output_shape"] = axis, [shape]
    reader = doc["conv_y"]
    reader["input_shape"] = [shape, [4, 4, 3, 3]]
    reader["output_shape"] = [[shape[0], 4, *shape[2:]]]
    return json.dumps(doc)


@pytest.mark.parametrize("mesh,buffer_size", [("1x1", None), ("2x2", None), ("1x1", 6000)])
def test_a_layer_description_may_concatenate_rows(planc, tmp_path, mesh, buffer_size):
    """Gemini's passes cut a reader's box at any axis's offsets: rows concatenated (only
    layer descriptions can say so) schedule and compute right, tile by tile."""
    from frontends.gemini_layers import import_document
    from ground.json_reader import parse_json

    module = import_document(parse_json(along(rows_and_samples(tmp_path, planc), 2)))
    run_pipeline(module, schedule_pipeline(argparse.Namespace(
        mesh=mesh, batch=None, buffer_size=buffer_size, dram_bw=None)))
    check = check_tiles(module)
    assert check.ok, check.problem


def test_a_concat_of_samples_is_refused_in_one_line(planc, tmp_path):
    src = tmp_path / "samples.json"
    src.write_text(along(rows_and_samples(tmp_path, planc), 0))
    result = planc(src, "-t", "gemini", "--mesh", "2x1", "--buffer-size", "4000",
                   "-o", tmp_path / "out.json")
    assert result.code == 1 and result.err.count("\n") == 1
    assert "$.cat" in result.err and "along N (axis 0)" in result.err


def concat_reader(module):
    sched = the_schedule(module)
    layers = layer_table(dnn.find_graph(module))
    return next(wl for wl in sched.workloads()
                if isinstance(layers[wl.layer].inputs[0].owner, dnn.ConcatOp)
                and len(wl.ifmaps) > 2)


def test_a_piece_from_the_wrong_predecessor_is_caught():
    """Both checks fail when one ifmap of a concatenation gets another input's blocks."""
    imp = scheduled(concat_network(), "1x1")
    target = concat_reader(imp.module)
    target.ifmaps[1].properties["transfer_id"] = target.ifmaps[0].properties["transfer_id"]
    with pytest.raises(AssertionError):
        channel_offsets_brute_force(imp.module)
    assert not check_tiles(imp.module).ok


@pytest.mark.parametrize("shift", [1, -1])
def test_a_piece_at_the_wrong_channel_offset_is_caught(shift):
    from dialects import gemini

    imp = scheduled(concat_network(), "2x2")
    ifmap = concat_reader(imp.module).ifmaps[1]
    for end in ("lower", "upper"):
        box = ifmap.ints_of(end)
        box[1] += shift
        ifmap.properties[end] = gemini.ints_attr(box)
    with pytest.raises(AssertionError):
        channel_offsets_brute_force(imp.module)


# -- the brute force -----------------------------------------------------------------------


def channel_list(value) -> list[tuple[object, int]]:
    """For every channel of `value`, (the layer or input value that holds it, its channel
    there): concatenations unrolled channel by channel (no boxes, no offsets)."""
    owner = value.owner
    if isinstance(owner, dnn.ConcatOp):
        assert owner.axis_index == 1
        return [entry for operand in owner.inputs for entry in channel_list(operand)]
    return [(value, ch) for ch in range(dnn.fmap(value).nchw[1])]


def wanted_boxes(layer, box) -> list[tuple[object, tuple]]:
    """(source, box of it) for every activation of `layer` that output `box` needs: the
    channel range of the receptive field cut channel by channel at the concatenations."""
    found = []
    for index, value in enumerate(layer.activations):
        (n0, c0, h0, w0), (n1, c1, h1, w1) = model.input_box(layer, index, box)[0]
        channels = defaultdict(list)
        listed = channel_list(value)
        for ch in range(c0, c1 + 1):
            src, at = listed[ch]
            channels[src].append(at)
        for src, ats in channels.items():
            assert ats == list(range(ats[0], ats[-1] + 1))
            found.append((src, ((n0, ats[0], h0, w0), (n1, ats[-1], h1, w1))))
    return found


def channel_offsets_brute_force(module) -> dict[str, int]:
    """Every workload's ifmaps, each from one feature map, placed in the L2 tensor its core
    gathers from that map (the union of what its workloads need, as Gemini builds it), are
    exactly the boxes of the right predecessors its receptive field needs."""
    graph = dnn.find_graph(module)
    layers = layer_table(graph)
    sched = the_schedule(module)
    by_name = {layer.name_: layer.output for layer in graph.layers}
    by_name.update({op.input_name.data: op.output for op in graph.inputs})
    loads = {ld.value("transfer_id"): ld for ld in sched.dram.loads}
    blocks = {o.value("transfer_id"): layers[wl.layer].output
              for wl in sched.workloads() for o in wl.ofmaps}
    wanted, tensors = {}, {}
    for wl in sched.workloads():
        layer = layers[wl.layer]
        key = (wl.core.id, layer.attributes["gemini.segment"].value.data,
               group_of(layer, wl.box))
        wanted[wl] = wanted_boxes(layer, wl.box)
        for src, box in wanted[wl]:
            known = tensors.get((src, *key))
            tensors[(src, *key)] = box if known is None else model.union(known, box)
    consumers = pieces = 0
    for wl in sched.workloads():
        layer = layers[wl.layer]
        key = (wl.core.id, layer.attributes["gemini.segment"].value.data,
               group_of(layer, wl.box))
        got = []
        for ifmap in wl.ifmaps:
            origins = {by_name[loads[t].attributes["gemini.from"].data] if t in loads
                       else blocks[t] for t in ifmap.transfer_ids}
            assert len(origins) == 1, "an ifmap mixes feature maps"
            origin = origins.pop()
            from_dram = [loads[t] for t in ifmap.transfer_ids if t in loads]
            # A DRAM load is the L2 tensor itself: a layer cut into tiles on one core reloads
            # one tile's box at a time, so its corner is the load's, not the union's.
            corner = from_dram[0].ints_of("lower") if from_dram else \
                tensors[(origin, *key)][0]
            lower, upper = (tuple(a + b for a, b in zip(corner, ifmap.ints_of(end), strict=True))
                            for end in ("lower", "upper"))
            got.append((origin, (lower, upper)))
        want = [(src, (tuple(lo), tuple(hi))) for src, (lo, hi) in wanted[wl]]
        assert got == want, f"workload {wl.id} of core {wl.core.id} ({wl.layer})"
        if any(isinstance(v.owner, dnn.ConcatOp) for v in layer.activations):
            consumers += 1
            pieces += len(got)
    return {"consumers": consumers, "pieces": pieces}


# -- a real network ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("mesh", ["1x1", "2x2"])
def test_light_squeezenet_is_proven_tile_by_tile(mesh):
    """SqueezeNet's fire modules concatenate two expand convolutions: its schedule computes
    what its layer graph computes and every ifmap is the right channels of the right map."""
    from pathlib import Path

    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / \
        "light_squeezenet.onnx"
    imp = scheduled(onnx.load(str(path)), mesh)
    checked = channel_offsets_brute_force(imp.module)
    assert checked["consumers"] >= 8 and checked["pieces"] >= 2 * checked["consumers"]
    check = check_tiles(imp.module)
    assert check.ok, check.problem
