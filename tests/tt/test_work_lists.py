"""`tt.work_list`: the partitioner's arrays against the plain partitions, and the plan text,
verdicts and cost model they give against the same plan written with one `tt.work` per tile."""

from __future__ import annotations

import json
import random

import pytest
from xdsl.dialects.builtin import ModuleOp

from backends.tt_plan import document_json, emit_plans
from devices.tt import device_named
from dialects import tt
from dialects.locations import verify_module
from dialects.tt_kernels import TileList, kernel_buffers, kernel_geometry
from frontends.model_builder import ModelBuilder
from ground.diagnostics import PlancError
from passes.tt_partition import (
    STRATEGIES,
    _block_extent,
    _chunks,
    banded,
    block_height,
    partition_arrays,
    partition_tiles,
    split_counts,
)
from targets.tt.schedule import kernel_cost
from tests.tt.fixtures import lower, matmul_model

CASES = ([(mt, nt, g) for mt in range(1, 8) for nt in range(1, 8)
          for g in [(1, 1), (2, 2), (2, 3), (8, 8), (1, 5)]]
         + [(random.Random(i).randint(1, 60), random.Random(i + 99).randint(1, 60),
             (random.Random(i).randint(1, 9), random.Random(i + 7).randint(1, 9)))
            for i in range(150)])


def plain_block_height(tiles, counts) -> int:
    """`tile_sequence`'s choice, listing every tile of every candidate height."""
    return min(range(1, tiles[0] + 1),
               key=lambda h: (_block_extent(_chunks(banded(tiles, h), counts)), h))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_arrays_are_the_plain_partition(strategy):
    for mt, nt, grid in CASES:
        plain = partition_tiles((mt, nt), grid, strategy)
        arrays = partition_arrays((mt, nt), grid, strategy)
        assert list(arrays) == list(plain), (mt, nt, grid)
        for core, tiles in plain.items():
            assert list(arrays[core]) == tiles, (mt, nt, grid, core)


def test_block_height_from_first_and_last_tiles():
    for mt, nt, grid in CASES + [(1100, 3, (3, 5)), (1030, 2, (8, 8))]:
        counts = split_counts(mt * nt, grid[0] * grid[1])
        assert block_height((mt, nt), counts) == plain_block_height((mt, nt), counts), \
            (mt, nt, grid)


def elementwise_model(shape):
    b = ModelBuilder()
    b.exp(b.tensor(shape, "FP32"))
    return b.finish()


def tile_by_tile(module: ModuleOp) -> ModuleOp:
    """The same plans with every `tt.work_list` replaced by one `tt.work` per tile."""
    copy = module.clone()
    for op in list(copy.walk()):
        if isinstance(op, tt.WorkListOp):
            block = op.parent_block()
            for io, jo in op.tiles():
                block.insert_op_before(tt.WorkOp(io, jo, op.len_k_value,
                                                 None if op.tile_order is None
                                                 else op.tile_order.data), op)
            op.detach()
            op.erase()
    return copy


@pytest.mark.parametrize("model,grid,strategy", [
    (lambda: matmul_model(160, 96, 224), "3x2", "block"),
    (lambda: matmul_model(64, 64, 64), "2x2", "auto"),
    (lambda: elementwise_model([3, 70, 100]), "4x3", "z_order"),
    (lambda: elementwise_model([3, 70, 100]), "5x5", "column_major"),
])
def test_text_and_verdict_as_with_one_op_per_tile(model, grid, strategy):
    planned = lower(model(), f"tt-tile,tt-partition{{grid={grid} strategy={strategy}}},tt-place")
    assert any(isinstance(op, tt.WorkListOp) for op in planned.walk())
    plain = tile_by_tile(planned)
    verify_module(plain)
    text = emit_plans(planned)
    assert text == json.dumps(document_json(plain), indent=2, ensure_ascii=False)
    assert json.loads(text) == document_json(planned)


def test_cost_model_reads_arrays_as_tuples():
    device = device_named("wormhole_b0")
    planned = lower(matmul_model(2560, 64, 1920),      # 4800 tiles: arrays, not tuples
                    "tt-tile,tt-partition{grid=3x3 strategy=block}")
    plan = next(op for op in planned.walk() if isinstance(op, tt.PlanOp))
    op = plan.kernel.operator
    arrays = {c.coordinates: c.tiles() for c in plan.work_partition.cores()}
    assert all(isinstance(tiles, TileList) for tiles in arrays.values())
    tuples = {core: list(tiles) for core, tiles in arrays.items()}
    geometry, buffers = kernel_geometry(op), kernel_buffers(op)
    assert (kernel_cost(geometry, op, arrays, buffers, device)
            == kernel_cost(geometry, op, tuples, buffers, device))


def _lists(module: ModuleOp) -> list[tt.WorkListOp]:
    return [op for op in module.walk() if isinstance(op, tt.WorkListOp)]


def _replace(old: tt.WorkListOp, io, jo) -> None:
    new = tt.WorkListOp(io, jo, old.len_k_value, old.tile_order.data)
    old.parent_block().insert_op_before(new, old)
    old.detach()
    old.erase()


def _io(op) -> list[int]:
    return [t[0] for t in op.pairs()]


def _jo(op) -> list[int]:
    return [t[1] for t in op.pairs()]


@pytest.mark.parametrize("break_it,message", [
    (lambda ls: _replace(ls[1], _io(ls[0])[:1] + _io(ls[1])[1:], _jo(ls[0])[:1] + _jo(ls[1])[1:]),
     "is assigned twice"),
    (lambda ls: _replace(ls[0], _io(ls[0])[1:], _jo(ls[0])[1:]),
     "is assigned to no core"),
    (lambda ls: _replace(ls[0], [*_io(ls[0]), 99], [*_jo(ls[0]), 0]),
     "is outside the"),
])
def test_a_broken_list_is_refused_as_tile_by_tile(break_it, message):
    """The arrays' quick verdict only accepts; every error comes from the rules run item by
    item, so the same break made to the one-op-per-tile plan says the same thing."""
    planned = lower(elementwise_model([2, 64, 96]), "tt-tile,tt-partition{grid=2x2}")
    break_it(_lists(planned))
    with pytest.raises(PlancError, match=message) as listed:
        verify_module(planned)
    with pytest.raises(PlancError) as plain:
        verify_module(tile_by_tile(planned))
    assert str(listed.value) == str(plain.value)


def _import_outcome(doc) -> str:
    """The verdict on a plan document: its text written again, or the error with its path."""
    from frontends.tt_plan import import_document
    from ground.json_reader import parse_json

    try:
        module = import_document(parse_json(json.dumps(doc)))
        verify_module(module)
        return emit_plans(module)
    except PlancError as e:
        return f"{e.path}: {e}"


def _mutants(doc: dict, rng: random.Random) -> list:
    """The plan with one work item changed: tiles moved, repeated, dropped, retyped."""
    out = []
    cores = list(doc["work_partition"])
    for _ in range(60):
        mutant = json.loads(json.dumps(doc))
        items = mutant["work_partition"][rng.choice(cores)]
        index = rng.randrange(len(items))
        action = rng.randrange(7)
        if action == 0:
            items[index]["io"] += rng.choice([1, 5, 100])
        elif action == 1:
            items.append(dict(items[index]))
        elif action == 2:
            del items[index]
        elif action == 3:
            items[index]["len_k"] = rng.choice([0, 1, 3, None, -1, "2", True])
        elif action == 4:
            items[index]["tile_order"] = rng.choice(["spiral", None, 1, "z_order"])
        elif action == 5:
            items[index] = {"jo": items[index]["jo"], "io": items[index]["io"]}
        else:
            items[index]["jo"] = rng.choice([-1, 2**63, 1.0, False, 7])
        out.append(mutant)
    return out


def test_imported_items_read_as_lists_keep_their_verdicts(monkeypatch):
    """The importer reads a core's usual items as one `tt.work_list`; every verdict and
    message (JSON path included) is the one of reading them item by item."""
    import frontends.tt_plan

    planned = lower(elementwise_model([2, 96, 160]), "tt-tile,tt-partition{grid=3x2},tt-place")
    doc = json.loads(emit_plans(planned))[0] if planned.ops.first.is_listed else \
        json.loads(emit_plans(planned))
    rng = random.Random(26)
    cases = [doc, *_mutants(doc, rng)]
    listed = [_import_outcome(d) for d in cases]
    monkeypatch.setattr(frontends.tt_plan, "_plain_work_list", lambda value: None)
    plain = [_import_outcome(d) for d in cases]
    assert listed == plain
    assert listed[0] == json.dumps(doc, indent=2)
    assert sum(1 for outcome in listed if ": " in outcome and outcome.startswith("$")) > 10


def _plain_items_one_by_one(value):
    """The reference of `_plain_work_list`'s test, item by item: (io, jo, len_k, tile_order)
    of a list of planc's usual items, None for anything else."""
    if type(value) is not list or not value or type(value[0]) is not dict:
        return None
    keys = tuple(value[0])
    if keys not in {("io", "jo"), ("io", "jo", "len_k"), ("io", "jo", "tile_order"),
                    ("io", "jo", "len_k", "tile_order")}:
        return None
    len_k, order = value[0].get("len_k"), value[0].get("tile_order")
    if "len_k" in keys and (type(len_k) is not int or not 0 <= len_k <= tt.MAX_LEN_K):
        return None
    if "tile_order" in keys and order not in tt.TILE_ORDERS:
        return None
    for item in value:
        if type(item) is not dict or tuple(item) != keys:
            return None
        for key in ("io", "jo"):
            if type(item[key]) is not int or not 0 <= item[key] < 2 ** 63:
                return None
        for key, shared in (("len_k", len_k), ("tile_order", order)):
            if key in item and (type(item[key]) is not type(shared) or item[key] != shared):
                return None
    return ([item["io"] for item in value], [item["jo"] for item in value], len_k, order)


def test_plain_lists_are_found_as_item_by_item():
    """The importer's test for planc's usual items runs a member at a time over the whole list;
    it takes exactly the lists an item-by-item test takes, type confusions included (True for
    1, 1.0 for 1, a member out of order, an object among the items)."""
    from frontends.tt_plan import _plain_work_list

    base = [{"io": i // 3, "jo": i % 3, "len_k": 1, "tile_order": "row_major"}
            for i in range(9)]
    rng = random.Random("plain")
    edits = [("io", True), ("io", 1.0), ("io", -1), ("io", 2 ** 63), ("jo", False),
             ("jo", "1"), ("len_k", True), ("len_k", 1.0), ("len_k", 2), ("len_k", None),
             ("tile_order", "z_order"), ("tile_order", None), ("tile_order", 1)]
    cases = [base, [dict(base[0], io=2 ** 63 - 1)], [base[0], [1, 2]], [base[0], 7]]
    for drop in ("len_k", "tile_order", None):
        shaped = [{k: v for k, v in item.items() if k != drop} for item in base]
        cases.append(shaped)
        for key, value in edits:
            for index in (0, rng.randrange(1, 9), 8):
                mutant = json.loads(json.dumps(shaped))
                if key in mutant[index]:
                    mutant[index][key] = value
                cases.append(mutant)
        reordered = json.loads(json.dumps(shaped))
        reordered[4] = {"jo": reordered[4]["jo"], **reordered[4]}
        cases.append(reordered)
    found = 0
    for case in cases:
        op = _plain_work_list(case)
        expected = _plain_items_one_by_one(case)
        pairs = [] if op is None else list(op.pairs())
        got = None if op is None else ([i for i, _ in pairs], [j for _, j in pairs],
                                       op.len_k_value,
                                       None if op.tile_order is None else op.tile_order.data)
        assert got == expected, case
        found += got is not None
    assert 0 < found < len(cases)
