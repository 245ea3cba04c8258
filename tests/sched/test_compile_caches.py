"""The tables and caches that make large compiles fast give the answers of the straightforward
computations they replace: operand groups, dense-array values, byte regions and their derived
figures, tile layouts, ranges, tensors built on a remembered layout, op lists and walks, the
plan text with shared objects. Checked on generated models (planned, so every pass has used
the caches) and on hand-made cases where a cache must notice a change."""

from __future__ import annotations

import itertools
import json
import random

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import VerifyException

from backends.ark_plan import emit_plan, single_plan
from backends.json_format import PLAN_DEPTH, denser_json
from backends.plan_json import plan_json
from compiler.pipeline import run_pipeline
from devices.hardware import gpu_device
from dialects import ark, plan, sched
from dialects.locations import verify_module
from dialects.utils import op_list, walk_ops
from frontends.model_zoo import generated
from passes.ark_to_sched import refuse_oversized, schedules_and_operators
from passes.sched_allocate import _on_buffer
from passes.sched_graph import operand_table, shape4
from passes.sched_tile import _layout as tile_layout
from passes.sched_tile import signature
from targets.ark.byte_regions import ByteRegion, covers, overlaps
from targets.ark.tensor_layouts import layout_of


def planned(ops: int, arch: str = "a100") -> ModuleOp:
    module = generated(ops)
    verify_module(module)
    run_pipeline(module, f"ark-plan{{device={arch}}}")
    return module


@pytest.fixture(scope="module")
def modules() -> list[ModuleOp]:
    return [generated(60), planned(60), planned(40, "mi300x")]


def arks(module: ModuleOp) -> list[ark.ArkOp]:
    return [op for op in module.walk() if isinstance(op, ark.ArkOp)]


def tensors(module: ModuleOp) -> list[ark.TensorType]:
    return [v.type for op in module.walk() for v in (*op.operands, *op.results)
            if isinstance(v.type, ark.TensorType)]


def test_operand_groups_are_the_segments(modules):
    for module in modules:
        for op in arks(module):
            assert op.operand_groups() == (tuple(op.read_tensors), tuple(op.write_tensors))
            assert op.operand_groups() == (tuple(op.read_tensors), tuple(op.write_tensors))


def test_operand_groups_follow_a_replaced_operand():
    module = generated(20)
    ops = arks(module)
    op = next(o for o in ops if len(o.operand_groups()[0]) >= 1)
    before = op.operand_groups()
    other = next(v for o in ops for v in o.results if v not in before[0])
    op.operands[0] = other
    assert op.operand_groups() == (tuple(op.read_tensors), tuple(op.write_tensors))
    assert op.operand_groups()[0][0] is other


def test_int_values_are_the_array_values(modules):
    for module in modules:
        for t in tensors(module):
            assert ark.int_values(t.shape) == tuple(t.shape.get_values())
            assert ark.int_values(t.strides) == tuple(t.strides.get_values())
            assert ark.int_values(t.offsets) == tuple(t.offsets.get_values())


def fresh_region(t: ark.TensorType) -> ByteRegion:
    return ByteRegion.make(t.buffer_id, t.element_bytes, list(t.strides.get_values()),
                           list(t.offsets.get_values()), list(t.shape.get_values()))


FIGURES = ("empty", "steps", "in_grid", "hull", "size_bytes", "dense")


def test_byte_regions_and_their_figures_are_computed_afresh_alike(modules):
    for module in modules:
        for t in tensors(module):
            cached, fresh = ByteRegion.of(t), fresh_region(t)
            assert cached == fresh
            assert ByteRegion.of(t) is cached
            for name in FIGURES:
                assert getattr(cached, name) == getattr(fresh, name), name
            assert cached.intervals() == fresh.intervals()


def test_overlaps_and_covers_with_cached_figures_match_brute_force():
    """Random small views of one buffer: the cached figures decide as enumeration does."""
    from targets.ark.byte_regions import byte_set

    rng = random.Random(13)
    regions = []
    for _ in range(60):
        extents = [rng.randint(1, 4) for _ in range(4)]
        shape = [rng.randint(1, e) for e in extents]
        offsets = [rng.randint(0, e - s) for e, s in zip(extents, shape, strict=True)]
        regions.append(ByteRegion.make(1, rng.choice((1, 2)), extents, offsets, shape))
    for a, b in itertools.product(regions, repeat=2):
        for region in (a, b):
            for name in FIGURES:
                getattr(region, name)  # fill the caches before deciding
        sa, sb = byte_set(a), byte_set(b)
        if overlaps(a, b) is False:
            assert not sa & sb
        if covers(a, b):
            assert sb <= sa


def test_tile_layouts_are_the_tensor_layouts(modules):
    for module in modules:
        for t in tensors(module):
            assert tile_layout(t) == (t.shape_tuple, t.strides_tuple, t.data_type)


def test_layouts_are_the_tensor_figures(modules):
    """A tensor's `Layout` holds what the tensor's own accessors compute; tensors of the same
    layout attributes share one; a byte region made from a tensor knows the tensor's."""
    for module in modules:
        for t in tensors(module):
            layout = layout_of(t)
            assert layout is layout_of(t)
            assert (layout.shape, layout.strides, layout.offsets) == (
                t.shape_tuple, t.strides_tuple, t.offsets_tuple)
            assert layout.shape4 == shape4(t.shape_list)
            assert (layout.data_type, layout.element_bytes) == (t.data_type, t.element_bytes)
            assert layout.span_bytes == t.span_bytes
            assert layout.size_bytes == t.num_elements * t.element_bytes
            assert layout.alloc_key == (t.shape_tuple, t.strides_tuple, t.offsets_tuple,
                                        t.element_bytes)
            assert ByteRegion.of(t).layout is layout
    buffer = ark.BufferAttr.get(9)
    a = ark.TensorType.get(1, "FP16", [2, 8], buffer)
    b = ark.TensorType.get(2, "FP16", [2, 8], ark.BufferAttr.get(10))
    assert layout_of(a) is layout_of(b)  # (one shape array, shared)
    assert layout_of(a) is not layout_of(ark.TensorType.get(3, "FP32", [2, 8], buffer))


def test_operand_tables_are_the_operands():
    module = generated(40)
    verify_module(module)
    run_pipeline(module, "ark-to-sched{device=a100}")
    (schedule,) = sched.schedules(module)
    ops = schedule.operators()
    for op, (reads, writes, read_regions, write_regions, owners) in zip(
            ops, operand_table(ops), strict=True):
        assert (reads, writes) == (tuple(op.read_tensors), tuple(op.write_tensors))
        assert read_regions == tuple(fresh_region(v.type) for v in reads)
        assert write_regions == tuple(fresh_region(v.type) for v in writes)
        assert owners == tuple(ops.index(v.owner) if v.owner in ops else None
                               for v in (*reads, *writes))
    assert sched.schedules(module) == [schedule]


def test_signatures_from_operand_tables_are_the_plain_ones(modules):
    """A kernel's signature read from its operators' `Operands` (with arguments skipped for
    classes that have none) is the signature read from the IR."""
    for module in modules[1:]:
        ops = arks(module)
        for op in ops:
            if not type(op).ARGS and op.extra_args is None:
                assert op.arg_attrs() == {}
        for size in (1, 2, 3):
            for start in range(0, len(ops) - size, 7):
                group = ops[start:start + size]
                plain = signature("elementwise", group)
                assert plain == signature("elementwise", group, operand_table(group))
                assert plain[1][0][3] == tuple(group[0].arg_attrs().items())


def test_schedules_are_found_in_walk_order():
    outer = ModuleOp([])
    for _ in range(2):
        module = generated(6)
        run_pipeline(module, "ark-to-sched{device=a100}")
        inner = module.detach_region(module.body)
        outer.body.block.add_op(ModuleOp(inner))
    walked = [op for op in outer.walk() if isinstance(op, sched.ScheduleOp)]
    assert sched.schedules(outer) == walked
    assert len(walked) == 2


def test_oversize_refusal_finds_the_operators():
    module = generated(30)
    (model,) = [op for op in module.ops if isinstance(op, ark.ModelOp)]
    assert refuse_oversized(model, gpu_device("a100")) == model.operators()


def test_planned_schedules_have_no_virtual_operators():
    """`ark-plan`'s fusion takes every operator of a schedule it made (no virtual-operator
    filter): ark-to-sched replaced the virtual ones, as on the example with `Tensor` nodes."""
    from tests.sched.test_pipeline import example

    module = example("attention_nodes.json")()
    verify_module(module)
    models = [op for op in module.ops if isinstance(op, ark.ModelOp)]
    assert any(op.is_virtual for model in models for op in model.operators())
    made = schedules_and_operators(module, "a100", kernels=False)
    for schedule, operators in made:
        assert operators == schedule.operators()
        assert not any(op.is_virtual for op in operators)


def test_moved_tensors_keep_their_layout_not_their_region():
    t = ark.TensorType.get(1, "FP16", [4, 8], ark.BufferAttr.get(2))
    region, layout = ByteRegion.of(t), layout_of(t)
    target = ark.BufferAttr.get(5)
    moved = _on_buffer(t, target)
    assert moved == t.with_buffer(target)
    assert layout_of(moved) is layout and ByteRegion.of(moved).buffer == 5
    assert region.buffer == 2
    t.__dict__["_planc_other"] = 1  # a cached value the copy does not know: not copied
    assert "_planc_other" not in _on_buffer(t, target).__dict__


@pytest.mark.parametrize("outer", [(0, 12, 1), (2, 11, 3), (1, 9, 2), (0, 0, 1), (4, 3, 1)])
def test_range_within_matches_enumeration(outer):
    other = plan.Range(*outer)
    for begin, end, step in itertools.product(range(-1, 13), range(-1, 14), (1, 2, 3, 4, 6)):
        inner = plan.Range(begin, end, step)
        assert inner.within(other) == all(v in other for v in inner), (inner, other)


def test_range_attributes_keep_their_range():
    for values in ((0, 108), (3, 17, 2), (5, 5)):
        attr = plan.range_attr(*values)
        assert attr.range == plan.Range(*attr.values.get_values())
        assert attr.as_list() == list(values)
        assert plan.range_attr(*values) is attr  # shared


def test_tensors_on_a_remembered_layout_equal_checked_ones():
    buffer = ark.BufferAttr.get(4)
    first = ark.TensorType.get(1, "FP16", [2, 8], buffer, strides=[4, 16], offsets=[1, 8])
    again = ark.TensorType.get(2, "FP16", [2, 8], buffer, strides=[4, 16], offsets=[1, 8])
    assert again.parameters[1:] == first.parameters[1:]
    assert again == ark.TensorType(*((again.id,) + first.parameters[1:]))
    again.verify()
    # A layout is remembered only after it passed: a bad one keeps failing.
    for _ in range(2):
        with pytest.raises(VerifyException, match="offsets"):
            ark.TensorType.get(3, "FP16", [2, 8], buffer, strides=[4, 16], offsets=[3, 8])


def test_op_lists_and_walks_are_xdsls(modules):
    for module in modules:
        assert walk_ops(module) == list(module.walk())
        for op in module.walk():
            for region in op.regions:
                for block in region.blocks:
                    assert op_list(block) == list(block.ops)


def reference_dense(value, depth: int, limit: int) -> str:
    """ARK's denser layout written the plain way (each value encoded where it occurs)."""
    compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    numbers = isinstance(value, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    if depth >= limit or not value or not isinstance(value, dict | list) or numbers:
        return compact(value)
    inner = "  " * (depth + 1)
    if isinstance(value, dict):
        items = [f"{inner}{compact(k)}: {reference_dense(v, depth + 1, limit)}"
                 for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * depth + "}"
    items = [inner + reference_dense(v, depth + 1, limit) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + "  " * depth + "]"


def test_plan_text_with_shared_objects_is_the_plain_encoding(modules):
    for module in modules[1:]:
        p = single_plan(module)
        shared = plan_json(p, shared=True)
        assert shared == plan_json(p)
        text = emit_plan(module)
        assert text == reference_dense(plan_json(p), 0, PLAN_DEPTH) + "\n"
        assert json.loads(text) == plan_json(p)


def test_denser_json_encodes_repeated_objects_where_they_occur():
    tensor = {"Id": 1, "Shape": [1, 2], "Buffer": {"Id": 0}}
    config = {"NumWarps": 4, "Tile": [1, 64]}
    doc = {"A": [[{"T": [tensor, tensor], "C": config}, {"T": [tensor], "C": config}]],
           "B": [tensor, [tensor, {"x": tensor}]], "E": [], "F": {}}
    for limit in range(0, 7):
        assert denser_json(doc, limit) == reference_dense(doc, 0, limit) + "\n"
