"""The Gemini verifier's shortcuts (one walk per workload, list walks, unrolled box tests,
the DRAM store index) against the plain ways they replace, on hand-built and generated data."""

from __future__ import annotations

import json
import random

from compiler.json_reader import parse_json
from dialects import gemini
from frontends.gemini_ir import import_document
from tests.gemini.fixtures import small_schedule


def _module():
    return import_document(parse_json(json.dumps(small_schedule())))


def test_walk_lists_the_ops_of_xdsl_walk_in_order():
    module = _module()
    assert gemini._walk(module) == list(module.walk())
    schedule = next(op for op in module.walk() if isinstance(op, gemini.ScheduleOp))
    assert gemini._walk(schedule) == list(schedule.walk())


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
