"""Import Tenstorrent runtime plans (`tt.plan.json`, TileLang-TT's format) into the `tt` dialect.

A document is one plan object, or an array of plans (planc's file for a model of several
kernels). Members are type-checked here with their JSON paths; the format's rules (grid bounds,
overlaps, coverage, shard values, ...) are the verifiers of `dialects.tt`, so they hold for IR
from any source. Unknown members anywhere are kept, as is an unusual key order.

A missing `schema_version` is read as version 1 (the upstream example plans predate the key)
and stays missing on export.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation

from dialects import tt
from dialects.json_value import dict_attr
from dialects.locations import json_location
from frontends.ark_model import TensorTable, read_operator
from ground.json_reader import JsonNode

PLAN_KEYS = ("core_grid", "core_ranges", "work_partition", "layouts", "schema_version",
             "backend_version", "kernel")
"""A plan's members in the order planc writes them (TileLang-TT's emit order, then planc's
`kernel`)."""
RANGE_KEYS = ("start", "extent", "replicated")
WORK_KEYS = ("io", "jo", "len_k", "tile_order")
LAYOUT_KEYS = ("shard", "interleave", "stride", "tile_id_order")
KERNEL_KEYS = ("grid_tiles", "len_k", "operator")


def unusual_key_order(node: JsonNode, canonical: Sequence[str],
                      nulls: Sequence[str] = ()) -> list[str] | None:
    """The object's keys when an exporter writing `canonical` keys first (then the others,
    explicit nulls of `nulls` among them, in file order) would order them differently."""
    keys = list(node.as_dict())
    typed = [k for k in canonical if k in keys and k not in nulls]
    expected = typed + [k for k in keys if k not in typed]
    return None if keys == expected else keys


def _located(op: Operation, node: JsonNode) -> Operation:
    op.location = json_location(node.path)
    return op


def _extra(node: JsonNode, known: Sequence[str], nulls: Sequence[str] = ()):
    """Unknown members, plus explicit nulls of optional known members (kept verbatim)."""
    members = node.unknown_members(frozenset(known))
    members.update({k: None for k in nulls if node.has(k) and node.value[k] is None})
    return dict_attr({k: members[k] for k in node.as_dict() if k in members})


def _optional(node: JsonNode, key: str) -> JsonNode | None:
    member = node.get(key)
    return None if member is None or member.value is None else member


def read_pair(node: JsonNode) -> list[int]:
    return node.as_int_list(2, 2)


def read_core_range(node: JsonNode) -> tt.CoreRangeOp:
    replicated = node.get("replicated")
    return _located(tt.CoreRangeOp(
        read_pair(node["start"]), read_pair(node["extent"]),
        replicated=None if replicated is None else replicated.as_bool(),
        extra=_extra(node, RANGE_KEYS), key_order=unusual_key_order(node, RANGE_KEYS)), node)


def read_work_item(node: JsonNode) -> tt.WorkOp:
    nulls = ("len_k", "tile_order")
    len_k, tile_order = _optional(node, "len_k"), _optional(node, "tile_order")
    return _located(tt.WorkOp(
        node["io"].as_int(), node["jo"].as_int(),
        None if len_k is None else len_k.as_int(),
        None if tile_order is None else tile_order.as_str(),
        extra=_extra(node, WORK_KEYS, nulls),
        key_order=unusual_key_order(node, WORK_KEYS, nulls)), node)


def read_work_partition(node: JsonNode) -> tt.WorkPartitionOp:
    cores = []
    for key, items in node.items():
        plain = _plain_work_list(items.value)
        work = ([_located(plain, items)] if plain is not None else
                [read_work_item(item) for item in items.elements()])
        cores.append(_located(tt.CoreOp(key, work), items))
    return _located(tt.WorkPartitionOp(cores), node)


_PLAIN_WORK_KEYS = frozenset({("io", "jo"), ("io", "jo", "len_k"), ("io", "jo", "tile_order"),
                              ("io", "jo", "len_k", "tile_order")})
_I64_END = 1 << 63
_DICTS, _INTS = frozenset({dict}), frozenset({int})
_IO, _JO = itemgetter("io"), itemgetter("jo")


def _plain_work_list(value) -> tt.WorkListOp | None:
    """A core's items as one `tt.work_list` when they are what planc writes (and the list
    stands for exactly): the same members in the canonical order, non-negative 64-bit tiles,
    one valid len_k and tile_order; None otherwise (each item becomes a `tt.work`, read with
    its checks). A planned Llama layer lists two million items. The verifier names an item of
    a list by its index, so messages keep their JSON paths."""
    if type(value) is not list or not value or type(value[0]) is not dict:
        return None
    first = value[0]
    keys = tuple(first)
    if keys not in _PLAIN_WORK_KEYS:
        return None
    len_k, order = first.get("len_k"), first.get("tile_order")
    if "len_k" in first and (type(len_k) is not int or not 0 <= len_k <= tt.MAX_LEN_K):
        return None
    if "tile_order" in first and (type(order) is not str or order not in tt.TILE_ORDERS):
        return None
    # Member by member over the whole list (C-speed maps, not a Python loop per item): every
    # item an object with the first's members in its order, the shared len_k and tile_order
    # the same value and type in every item, io and jo non-negative 64-bit integers.
    if not _DICTS.issuperset(map(type, value)) or set(map(tuple, value)) != {keys}:
        return None
    io, jo = list(map(_IO, value)), list(map(_JO, value))
    for column in (io, jo):
        if not _INTS.issuperset(map(type, column)) or min(column) < 0 \
                or max(column) >= _I64_END:
            return None
    for key, shared in (("len_k", len_k), ("tile_order", order)):
        if key in first:
            column = list(map(itemgetter(key), value))
            if column.count(shared) != len(column) or len(set(map(type, column))) != 1:
                return None
    return tt.WorkListOp(io, jo, len_k, order)


def read_layout(name: str, node: JsonNode) -> tt.LayoutOp:
    interleave, stride = node.get("interleave"), node.get("stride")
    tile_id_order = node.get("tile_id_order")
    return _located(tt.LayoutOp(
        name, node["shard"].as_str(),
        interleave=None if interleave is None else interleave.as_bool(),
        stride=None if stride is None else read_pair(stride),
        tile_id_order=None if tile_id_order is None else tile_id_order.as_str(),
        extra=_extra(node, LAYOUT_KEYS), key_order=unusual_key_order(node, LAYOUT_KEYS)), node)


def read_layouts(node: JsonNode) -> tt.LayoutsOp:
    return _located(tt.LayoutsOp([read_layout(name, layout) for name, layout in node.items()]),
                    node)


def read_kernel(node: JsonNode) -> tt.KernelOp:
    """planc's `kernel` member: the ARK operator the plan computes, with its tile counts."""
    grid_tiles = node["grid_tiles"].as_int_list(2, 2)
    len_k = _optional(node, "len_k")
    block = Block()
    read_operator(node["operator"], TensorTable(block), lambda tensor: None)
    return _located(tt.KernelOp(
        grid_tiles, None if len_k is None else len_k.as_int(), block,
        extra=_extra(node, KERNEL_KEYS, ("len_k",)),
        key_order=unusual_key_order(node, KERNEL_KEYS, ("len_k",))), node)


def read_plan(node: JsonNode) -> tt.PlanOp:
    node.as_dict()
    body: list[Operation] = [read_core_range(r) for r in node["core_ranges"].elements()]
    kernel = node.get("kernel")
    if kernel is not None:
        body.append(read_kernel(kernel))
    body.append(read_work_partition(node["work_partition"]))
    body.append(read_layouts(node["layouts"]))
    version, backend = node.get("schema_version"), node.get("backend_version")
    plan = tt.PlanOp(
        body, grid=read_pair(node["core_grid"]),
        schema_version=None if version is None else version.as_int(),
        backend_version=None if backend is None else backend.as_str(),
        extra=_extra(node, PLAN_KEYS), key_order=unusual_key_order(node, PLAN_KEYS))
    return _located(plan, node)


def import_document(doc: JsonNode) -> ModuleOp:
    if isinstance(doc.value, list):
        plans = doc.elements()
        if not plans:
            raise doc.error("expected at least one plan in the array")
        return ModuleOp([_located(tt.PlansOp([read_plan(p) for p in plans], listed=True), doc)])
    if not isinstance(doc.value, dict):
        raise doc.expected("a plan object or an array of plans")
    return ModuleOp([_located(tt.PlansOp([read_plan(doc)]), doc)])


def describe(module: ModuleOp) -> str:
    plans = [p for op in module.ops if isinstance(op, tt.PlansOp) for p in op.plans()]
    parts = []
    for plan in plans:
        partition = plan.work_partition
        counts = [c.item_count() for c in partition.cores()] if partition else []
        grid = plan.grid or (0, 0)
        cores = f"{len(counts)} core{'s' if len(counts) != 1 else ''}"
        parts.append(f"{plan.label()} on {grid[0]}x{grid[1]} cores: {sum(counts)} tiles over "
                     f"{cores}, at most {max(counts, default=0)} per core")
    if len(parts) > 3:
        parts = parts[:3] + [f"... ({len(plans)} plans)"]
    return "; ".join(parts)
