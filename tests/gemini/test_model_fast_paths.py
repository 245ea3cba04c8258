"""The Gemini model's and passes' fast paths against the plain code they replace.

`input_box` on facts read once per layer (`input_facts`), the unrolled box arithmetic, weight
facts kept on the weight type, the first part of a split, the shared attributes of
gemini-cycles and the flat op list and in-place checks of gemini-transfer-ids: each is compared
with a copy of the code it replaced, on the layers of real networks (the Gemini corpus, ARK
examples lowered to layers, ONNX layers) and on random and degenerate boxes.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, StringAttr

from compiler.pipeline import load_input, run_pipeline
from dialects import dnn, gemini
from passes import gemini_cycles, gemini_partition, gemini_transfer_ids
from targets.gemini import model
from targets.gemini.plan import cut
from tests.conftest import corpus_root

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


# -- the code the fast paths replace (as it was) ----------------------------------------------


def reference_input_box(layer: dnn.LayerOp, index: int, out):
    shape = dnn.fmap(layer.inputs[index]).nchw
    (n0, c0, h0, w0), (n1, c1, h1, w1) = out
    no_pad = [0, 0, 0, 0]
    if not model.is_local(layer):
        return model.whole(shape), no_pad
    if isinstance(layer, dnn.WindowOp):
        (r, s), (sh, sw), (pt, _, pl, _) = layer.window, layer.strides, layer.pads
        ha, hb, top, bottom = model._window_range(h0, h1, r, sh, pt, shape[2])
        wa, wb, left, right = model._window_range(w0, w1, s, sw, pl, shape[3])
        cs = reference_conv_channels(layer, c0, c1) if isinstance(layer, dnn.Conv2dOp) \
            else (c0, c1)
        return ([n0, cs[0], ha, wa], [n1, cs[1], hb, wb]), [top, bottom, left, right]
    if isinstance(layer, dnn.ChannelShuffleOp):
        first, last = reference_shuffled_channels(layer, c0, c1)
        return ([n0, first, h0, w0], [n1, last, h1, w1]), no_pad
    if isinstance(layer, dnn.LrnOp):
        before, after = layer.channel_reach
        channels = dnn.fmap(layer.inputs[0]).nchw[1]
        return ([n0, max(0, c0 - before), h0, w0],
                [n1, min(channels - 1, c1 + after), h1, w1]), no_pad
    if isinstance(layer, dnn.DenseOp):
        return ([n0, 0, 0, 0], [n1, shape[1] - 1, shape[2] - 1, shape[3] - 1]), no_pad
    if isinstance(layer, dnn.MatmulOp):
        if index == 0:
            return ([n0, 0, h0, 0], [n1, shape[1] - 1, h1, 0]), no_pad
        nb = (n0, n1) if shape[0] > 1 else (0, 0)
        if layer.trans_b:
            return ([nb[0], 0, c0, 0], [nb[1], shape[1] - 1, c1, 0]), no_pad
        return ([nb[0], c0, 0, 0], [nb[1], c1, shape[2] - 1, 0]), no_pad
    lower, upper = list(out[0]), list(out[1])
    if isinstance(layer, dnn.ReduceOp):
        lower[layer.axis_index], upper[layer.axis_index] = 0, shape[layer.axis_index] - 1
    for d in range(4):
        if shape[d] == 1:
            lower[d] = upper[d] = 0
    return (lower, upper), no_pad


def reference_conv_channels(layer, k0, k1):
    c = dnn.fmap(layer.inputs[0]).nchw[1]
    g = layer.group_count
    k_per, c_per = layer.out_type.nchw[1] // g, c // g
    return (k0 // k_per) * c_per, (k1 // k_per + 1) * c_per - 1


def reference_shuffled_channels(layer, c0, c1):
    g = layer.group_count
    per = dnn.fmap(layer.inputs[0]).nchw[1] // g
    first, last = None, None
    for c in range(c0, min(c1, c0 + g - 1) + 1):
        i = c % g
        top = c1 - (c1 - i) % g
        low, high = i * per + c // g, i * per + top // g
        first = low if first is None else min(first, low)
        last = high if last is None else max(last, high)
    return first, last


def reference_intersect(a, b):
    lower = [max(x, y) for x, y in zip(a[0], b[0], strict=False)]
    upper = [min(x, y) for x, y in zip(a[1], b[1], strict=False)]
    return None if any(lo > hi for lo, hi in zip(lower, upper, strict=False)) else (lower, upper)


def reference_union(a, b):
    return ([min(x, y) for x, y in zip(a[0], b[0], strict=True)],
            [max(x, y) for x, y in zip(a[1], b[1], strict=True)])


def reference_fmap_bytes(box, bits):
    n, c, h, w = model.box_size(box)
    align = model.channel_align(bits)
    return n * -(-c // align) * align * h * w * bits // 8


def reference_weight_type(layer):
    inputs = layer.inputs
    if len(inputs) <= layer.ACTIVATIONS or layer.LAYER_TYPE != "pe" or \
            isinstance(layer, dnn.MatmulOp):
        return None
    return inputs[layer.ACTIVATIONS].type


def reference_conv_reduction(layer):
    _, c, rs = model.weight_geometry(layer)
    groups = layer.group_count if isinstance(layer, dnn.Conv2dOp) else 1
    align = model.channel_align(dnn.fmap(layer.weights[0]).bits)
    return -(-(-(-c * groups // align) * align * rs) // groups)


def reference_streams_weights(layer, k_range, hw):
    if reference_weight_type(layer) is None:
        return False
    per_channel = -(-model.weight_channel_bytes(layer) // 32) * 32
    return -(-k_range // 64) * 64 * per_channel // 64 > hw.wl0_direct_max_units


# -- layers of real networks ------------------------------------------------------------------


def _corpus_layers() -> list[dnn.LayerOp]:
    folder = corpus_root() / "gemini"
    layers = []
    for name in ("int8_resnet34.sim_quantized_b1.json", "int8_resnet50.sim_quantized_b1.json"):
        if (folder / name).is_file():
            _, module = load_input(str(folder / name))
            layers += list(dnn.find_graph(module).layers)
    return layers


def _ark_layers() -> list[dnn.LayerOp]:
    layers = []
    for name in ("attention.json", "ffn.json"):
        _, module = load_input(str(EXAMPLES / name))
        run_pipeline(module, "dnn-from-ark")
        layers += list(dnn.find_graph(module).layers)
    return layers


def _onnx_layers() -> list[dnn.LayerOp]:
    pytest.importorskip("onnx", reason="the ONNX frontend is the planc[onnx] extra")
    from tests.onnx import test_gemini_layers as nets

    built = [nets.lrn_net(5), nets.grouped_net(4), nets.grouped_net(16, k=32, stride=2),
             nets.avgpool_net(0), nets.shuffle_unit(), nets.shuffle_variant(),
             *(nets.random_network(seed) for seed in range(6))]
    return [layer for net in built for layer in nets.imported(net)[1].layers]


def _scheduled(layers: list) -> list[dnn.LayerOp]:
    return [layer for layer in layers if isinstance(layer, dnn.LayerOp) and
            not isinstance(layer, dnn.VIEW_CLASSES) and layer.LAYER_TYPE is not None]


def _boxes(shape, rng: random.Random, count: int) -> list:
    """Random output boxes of `shape`, whole ones, single points, and boxes partly or wholly
    outside it (empty ranges too: `input_box` takes any box its caller gives)."""
    boxes = [([0] * 4, [d - 1 for d in shape])]
    for _ in range(count):
        lower, upper = [], []
        for d in shape:
            a, b = sorted((rng.randrange(d), rng.randrange(d)))
            lower.append(a)
            upper.append(b)
        boxes.append((lower, upper))
        boxes.append((lower, list(lower)))
    boxes.append(([0, 0, 5, 5], [0, 0, 2, 2]))
    boxes.append(([0, 0, shape[2] + 3, shape[3] + 3], [0, 0, shape[2] + 9, shape[3] + 9]))
    return boxes


def _check_input_boxes(layers: list[dnn.LayerOp]) -> int:
    rng = random.Random(13)
    checked = 0
    for layer in _scheduled(layers):
        facts = model.input_facts(layer)
        for box in _boxes(layer.out_type.nchw, rng, 12):
            for index in range(len(layer.activations)):
                want = reference_input_box(layer, index, box)
                assert model.input_box(layer, index, box, facts) == want, (layer.name_, box)
                assert model.input_box(layer, index, box) == want, (layer.name_, box)
                checked += 1
    return checked


def test_input_box_on_facts_equals_the_plain_receptive_field_on_corpus_layers():
    layers = _corpus_layers()
    if not layers:
        pytest.skip(f"upstream corpus not found at {corpus_root()}")
    assert _check_input_boxes(layers) > 1000


def test_input_box_on_facts_equals_the_plain_receptive_field_on_ark_layers():
    layers = _ark_layers()
    kinds = {type(layer) for layer in _scheduled(layers)}
    assert dnn.MatmulOp in kinds
    assert _check_input_boxes(layers) > 100


def test_input_box_on_facts_equals_the_plain_receptive_field_on_onnx_layers():
    layers = _onnx_layers()
    kinds = {type(layer) for layer in _scheduled(layers)}
    assert {dnn.LrnOp, dnn.ChannelShuffleOp, dnn.Conv2dOp, dnn.PoolOp} <= kinds
    assert _check_input_boxes(layers) > 100


def test_weight_facts_on_the_type_equal_the_plain_formulas():
    layers = _corpus_layers() + _ark_layers()
    try:
        layers += _onnx_layers()
    except pytest.skip.Exception:
        pass
    layers = _scheduled(layers)
    hw = model.GeminiHardware()
    checked = 0
    for layer in layers:
        wtype = reference_weight_type(layer)
        assert model._weight_type(layer) is wtype
        if wtype is None:
            assert model.weight_geometry(layer) is None
            for k in (1, 64, 4096):
                assert model.streams_weights(layer, k, hw) is False
            continue
        if layer.LAYER_TYPE == "pe":
            assert model.conv_reduction(layer) == reference_conv_reduction(layer)
            assert model.conv_reduction(layer) == reference_conv_reduction(layer)  # cached
        for k in (1, 7, 64, 65, 256, 512, 1000, 2048, 4096):
            assert model.streams_weights(layer, k, hw) == \
                reference_streams_weights(layer, k, hw), (layer.name_, k)
            small = model.GeminiHardware(wl0_direct_max_units=100)
            assert model.streams_weights(layer, k, small) == \
                reference_streams_weights(layer, k, small)
            checked += 1
    assert checked > 100


def test_the_reduction_kept_on_a_weight_type_is_per_group_count():
    """One weight type object read by convolutions of different group counts (types are
    immutable and may be shared): each count gets its own reduction."""
    weights = dnn.FmapType.get([16, 4, 3, 3], "int8")
    w = dnn.InputOp.new("w", weights, constant=True)
    for groups, channels in ((1, 4), (2, 8), (4, 16), (2, 8), (1, 4)):
        x = dnn.InputOp.new(f"x{groups}", dnn.FmapType.get([1, channels, 10, 10], "int8"))
        conv = dnn.Conv2dOp.new(f"conv{groups}", "conv2d", [x.results[0], w.results[0]],
                                dnn.FmapType.get([1, 16, 10, 10], "int8"),
                                groups=IntegerAttr(groups, 64) if groups > 1 else None)
        assert model._weight_type(conv) is weights
        assert model.conv_reduction(conv) == reference_conv_reduction(conv), groups
    assert len(weights.__dict__["_planc_reductions"]) == 3


def test_box_arithmetic_equals_the_plain_loops():
    rng = random.Random(5)
    for _ in range(20000):
        dims = 4 if rng.random() < 0.9 else rng.choice((3, 5))
        a = ([rng.randint(-2, 9) for _ in range(dims)], [rng.randint(-2, 9) for _ in range(dims)])
        b = ([rng.randint(-2, 9) for _ in range(dims)], [rng.randint(-2, 9) for _ in range(dims)])
        want = reference_intersect(a, b)
        assert model.intersect(a, b) == want, (a, b)
        assert model.meets(a, b) is (want is not None), (a, b)
        assert model.union(a, b) == reference_union(a, b)
        if dims == 4:
            for bits in (8, 16, 32, 4):
                assert model.fmap_bytes(a, bits) == reference_fmap_bytes(a, bits)
    with pytest.raises(ValueError):
        model.union(([0] * 4, [1] * 4), ([0] * 3, [1] * 3))


def test_the_first_part_of_a_split_is_the_first_range_of_every_cut():
    for sizes in [(1, 64, 56, 56), (4, 1000, 1, 1), (2, 7, 13, 5), (8, 3, 224, 224)]:
        for split in [(1, 1, 1, 1), (1, 2, 2, 4), (2, 4, 1, 2), (1, 16, 1, 1), (4, 1, 7, 1)]:
            first = [cut(size, parts)[0] for size, parts in zip(sizes, split, strict=False)]
            want = ([r[0] for r in first], [r[1] for r in first])
            assert gemini_partition.first_part(sizes, split) == want


def test_shared_tile_attributes_equal_new_ones():
    for value in (0.0, -0.0, 1.5, 200.0, 1e-3, 123456.789):
        made = gemini_cycles._time_attr(value)
        assert made == gemini.number_attr(value)
        assert str(made) == str(gemini.number_attr(value))
    # 0.0 == -0.0, but they print apart: each keeps its own attribute.
    assert str(gemini_cycles._time_attr(-0.0)) != str(gemini_cycles._time_attr(0.0))
    # `add_list` (one attribute per tuple of names) says what a new array of the names says.
    for keys in (None, [], ["ifmap", "ofmap"], ["tile_info"], ["ofmap", "tile_info"],
                 ["ifmap", "ofmap"]):
        plain = gemini.WorkloadOp.new(0, "a", "pe", [0] * 4, [0] * 4)
        plain.properties.pop("lists")
        if keys is not None:
            plain.lists = ArrayAttr([StringAttr(k) for k in keys])
        plain.add_list("tile_info")
        wanted = [*(keys or []), *([] if "tile_info" in (keys or []) else ["tile_info"])]
        assert plain.lists == ArrayAttr([StringAttr(k) for k in wanted]), keys


# -- gemini-transfer-ids ----------------------------------------------------------------------


def reference_renumber(schedule, mapping):
    id_fields = ("transfer_id", "related_ifmap", "related_ofmap")

    def renumbered(attr):
        if isinstance(attr, IntegerAttr):
            return gemini.int_attr(mapping.get(attr.value.data, attr.value.data))
        if isinstance(attr, DenseArrayBase):
            return gemini.ints_attr(mapping.get(v, v) for v in gemini.ints(attr))
        return attr

    for op in schedule.walk():
        if not isinstance(op, gemini.RecordOp):
            continue
        for name in id_fields:
            if name in op.properties:
                op.properties[name] = renumbered(op.properties[name])
    dram = schedule.dram
    for kind in (gemini.DramStoreOp, gemini.DramLoadOp):
        ops = sorted((o for o in dram.body.ops if isinstance(o, kind)),
                     key=lambda o: o.value("transfer_id"))
        for o in ops:
            o.detach()
            dram.body.block.add_op(o)
    for wl in schedule.workloads():
        ofmaps = sorted(wl.ofmaps, key=lambda o: o.value("transfer_id"))
        anchor = wl.ifmaps[-1] if wl.ifmaps else None
        for o in ofmaps:
            o.detach()
            if anchor is None:
                wl.body.block.insert_op_before(o, wl.body.block.first_op) \
                    if wl.body.block.first_op else wl.append(o)
            else:
                wl.body.block.insert_op_after(o, anchor)
            anchor = o


def _wired_module():
    _, module = load_input(str(EXAMPLES / "ffn.json"))
    run_pipeline(module, "dnn-from-ark,gemini-group-layers{mesh=2x2},gemini-batch-cut,"
                         "gemini-partition,gemini-workloads{buffer-size=65536},"
                         "gemini-receptive-field")
    return module


def _schedule(module) -> gemini.ScheduleOp:
    return next(op for op in module.ops if isinstance(op, gemini.ScheduleOp))


@pytest.mark.parametrize("mapping", ["canonical", "shuffled", "reversed"])
def test_renumbering_equals_the_plain_walk_and_moves(mapping):
    module = _wired_module()
    schedule = _schedule(module)
    order = list(dict.fromkeys(gemini_transfer_ids.canonical_order(schedule)))
    assert len(order) > 10
    if mapping == "shuffled":
        random.Random(3).shuffle(order)
    elif mapping == "reversed":
        order.reverse()
    ids = {old: new for new, old in enumerate(order)}
    fast, slow = module.clone(), module.clone()
    gemini_transfer_ids.renumber(_schedule(fast), ids)
    reference_renumber(_schedule(slow), ids)
    assert str(fast) == str(slow)
    # The pass again on its own result: nothing moves, and nothing changes.
    again = fast.clone()
    gemini_transfer_ids.renumber(_schedule(again), {i: i for i in range(len(order))})
    assert str(again) == str(fast)


# -- gemini-cycles ----------------------------------------------------------------------------


def test_planning_a_workload_reads_the_entries_the_accessors_give():
    """`plan_workload`'s plan from one walk of the entries (`grouped()`) against its plan from
    `wl.ifmaps`/`wl.weight`, on planned workloads (tiles, L2 and WL0 entries around them)."""
    from backends.gemini import schedule_pipeline
    from targets.gemini.plan import layer_table

    _, module = load_input(str(EXAMPLES / "ffn.json"))
    run_pipeline(module, "dnn-from-ark," + schedule_pipeline(
        argparse.Namespace(mesh="2x2"), rebatch=False))
    layers = layer_table(dnn.find_graph(module))
    hw = model.GeminiHardware()
    planned = 0
    for wl in _schedule(module).workloads():
        weight = wl.weight
        accessed = {gemini.IfmapOp: wl.ifmaps, gemini.WeightOp: [weight] if weight else []}
        layer = layers[wl.layer]
        assert gemini_cycles.plan_workload(layer, wl, hw) == \
            gemini_cycles.plan_workload(layer, wl, hw, accessed)
        planned += len(wl.tiles) > 0 and weight is not None
    assert planned
