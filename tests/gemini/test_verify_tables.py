"""The Gemini verifier's shortcuts (one walk per workload, list walks, unrolled box tests,
the DRAM store index) against the plain ways they replace, on hand-built and generated data."""

from __future__ import annotations

import json
import random

import pytest

from dialects import gemini
from dialects.utils import walk_ops
from frontends.gemini_ir import import_document
from ground.json_reader import parse_json
from tests.gemini.fixtures import small_schedule


def _module():
    return import_document(parse_json(json.dumps(small_schedule())))


def test_walk_lists_the_ops_of_xdsl_walk_in_order():
    module = _module()
    assert walk_ops(module) == list(module.walk())
    schedule = next(op for op in module.walk() if isinstance(op, gemini.ScheduleOp))
    assert walk_ops(schedule) == list(schedule.walk())


def test_grouped_matches_children_of_each_kind():
    module = _module()
    for wl in (op for op in module.walk() if isinstance(op, gemini.WorkloadOp)):
        groups = wl.grouped()
        for kind in (gemini.IfmapOp, gemini.OfmapOp, gemini.WeightOp, gemini.L2TensorOp,
                     gemini.Wl0TensorOp, gemini.TileOp):
            assert groups.get(kind, []) == wl.children(kind)
        assert sum(len(v) for v in groups.values()) == len(list(wl.body.block.ops))


def test_unrolled_inside_agrees_with_the_coordinate_loop():
    rng = random.Random(13)
    for _ in range(3000):
        dims = rng.choice((4, 4, 4, 3, 5))
        boxes = [[rng.randint(-2, 4) for _ in range(dims if i < 2 else rng.choice((dims, 4)))]
                 for i in range(4)]
        plain = all(ol <= lo and hi <= ou
                    for lo, hi, ol, ou in zip(*boxes, strict=False))
        assert gemini._inside(*boxes) == plain


def test_store_index_gives_the_first_matching_store():
    module = _module()
    schedule = next(op for op in module.walk() if isinstance(op, gemini.ScheduleOp))
    index = gemini.TransferIndex(schedule)
    check = gemini.TensorOrderCheck(index)
    first, layers = check._stores_by_place()
    assert index.stores  # the fixture has DRAM stores: the test is not vacuous
    for store in index.stores:
        key = (store.value("core_id"), store.value("workload_id"), store.value("layer_name"))
        plain = [s for s in index.stores if (s.value("core_id"), s.value("workload_id"),
                                             s.value("layer_name")) == key]
        assert first[key] == plain[0].value("transfer_id")
        assert (key[0], key[2]) in layers
    assert len(layers) == len({(s.value("core_id"), s.value("layer_name"))
                               for s in index.stores})


def _error(module) -> str | None:
    from dialects.locations import verify_module
    from ground.diagnostics import PlancError

    try:
        verify_module(module)
    except PlancError as e:
        return str(e)
    return None


def _tensor_1(module) -> tuple[gemini.L2TensorOp, gemini.L2TensorOp]:
    """Tensor 1 of the small schedule in both snapshots (quant's and conv's)."""
    found = [op for op in walk_ops(module) if isinstance(op, gemini.L2TensorOp)
             and op.value("tensor_id") == 1]
    assert len(found) == 2
    return found[0], found[1]


def _ifmap_of_conv(module) -> gemini.IfmapOp:
    return [op for op in walk_ops(module) if isinstance(op, gemini.IfmapOp)][1]


def _shared_and_verified():
    """The small schedule with tensor 1's two snapshots sharing one list of sources (as the
    passes build them), verified once: the verifier has remembered what passed."""
    module = _module()
    first, second = _tensor_1(module)
    second.properties["source"] = first.properties["source"]
    assert _error(module) is None
    return module


def _box_of_conv_shrunk(doc_or_module):
    """Tensor 1 and conv's ifmap one column narrower: its source no longer fits it."""
    narrower = [0, 7, 7, 6]
    if isinstance(doc_or_module, dict):
        doc_or_module["0"][1]["buffer"][0]["upper"] = narrower
        doc_or_module["0"][1]["ifmap"][0]["upper"] = narrower
    else:
        _tensor_1(doc_or_module)[1].properties["upper"] = gemini.ints_attr(narrower)
        _ifmap_of_conv(doc_or_module).properties["upper"] = gemini.ints_attr(narrower)


def _ids_of_conv_grown(doc_or_module):
    """Tensor 1 in conv's snapshot claims a transfer its sources do not carry."""
    if isinstance(doc_or_module, dict):
        doc_or_module["0"][1]["buffer"][0]["transfer_id"] = [2, 3]
    else:
        _tensor_1(doc_or_module)[1].properties["transfer_id"] = gemini.ints_attr([2, 3])


def _kind_of_source_changed(doc_or_module):
    """Tensor 1's source says DRAM (in both snapshots): an ofmap produces it."""
    if isinstance(doc_or_module, dict):
        for wl, i in ((0, 1), (1, 0)):
            doc_or_module["0"][wl]["buffer"][i]["source"][0]["type"] = "DRAM"
    else:
        first, second = _tensor_1(doc_or_module)
        src = first.sources[0]
        values = {f.prop: getattr(src, f.prop) for f in gemini.SourceAttr.FIELDS}
        values["kind"] = gemini.StringAttr("DRAM")
        shared = gemini.ArrayAttr([gemini.SourceAttr.from_fields(values)])
        first.properties["source"] = second.properties["source"] = shared


def _destinations_as_sources(doc_or_module):
    """Conv's tensor 1 lists an ofmap's destinations (checked before as destinations) as
    its sources."""
    if isinstance(doc_or_module, dict):
        return False  # the JSON reader refuses it itself
    else:
        ofmap = [op for op in walk_ops(doc_or_module) if isinstance(op, gemini.OfmapOp)][0]
        _tensor_1(doc_or_module)[1].properties["source"] = ofmap.properties["destination"]


@pytest.mark.parametrize("mutate", [_box_of_conv_shrunk, _ids_of_conv_grown,
                                    _kind_of_source_changed, _destinations_as_sources])
def test_remembered_sources_are_checked_again_when_the_tensor_changes(mutate):
    """A list of sources the verifier found good for one tensor (and remembered) is checked
    again for a tensor with other ids or another box: the failure is reported with the
    message and path of a schedule that shares nothing (and of the same JSON document)."""
    fresh = _module()
    mutate(fresh)
    expected = _error(fresh)
    assert expected is not None and "$['0']" in expected
    module = _shared_and_verified()
    mutate(module)
    assert _error(module) == expected
    doc = small_schedule()
    if mutate(doc) is not False:
        assert _error(import_document(parse_json(json.dumps(doc)))) == expected


def test_layer_shapes_from_the_verifiers_walk_are_the_whole_walks():
    """The schedule's verifier hands `TransferIndex` the ops of its walk that are neither
    records nor cores; the layers found with them are those a walk of the whole module finds,
    a layer op misplaced inside the schedule included."""
    from tests.gemini.fixtures import small_network
    from tests.gemini.test_pipeline import schedule, the_schedule

    def others(s):
        return [op for op in walk_ops(s)
                if op is s or not isinstance(op, (gemini.RecordOp, gemini.CoreOp))]

    module = schedule(small_network())
    s = the_schedule(module)
    shapes = gemini.TransferIndex(s)._layer_shapes()
    assert shapes and gemini.TransferIndex(s, others(s))._layer_shapes() == shapes
    layer = next(op for op in walk_ops(module) if op.name.startswith("dnn.")
                 and "layer_name" in op.properties and op.results)
    inside = layer.clone()
    inside.properties["layer_name"] = gemini.str_attr("zz_inside")
    gemini._body_block(s).add_op(inside)
    shapes = gemini.TransferIndex(s)._layer_shapes()
    assert "zz_inside" in shapes
    assert gemini.TransferIndex(s, others(s))._layer_shapes() == shapes


def test_id_sets_kept_on_the_attribute_are_the_transfer_ids():
    module = _module()
    records = [op for op in walk_ops(module) if isinstance(op, gemini.RecordOp)]
    for op in records * 2:
        assert gemini._id_set(op) == frozenset(op.transfer_ids)
