"""Quick acceptance of well-formed documents, before the compiled schema validator runs.

`ACCEPTS[name](value)` is True only when `value` certainly meets schema `name`: it checks the
schema's rules in plain Python with C-speed tests over whole integer lists, and says False at
the first thing it does not expect, including everything the schema allows but real files do
not have (an integer written as 1.0, members of other JSON types). False decides nothing:
`validate` then runs the compiled validator, whose verdict and first violation are the
answer. So a document is refused exactly as before; a well-formed one is accepted three
times faster (the ARK model schema checks 40,000 tensor objects at 10,000 operators).

Each function here follows its schema file member by member; `tests/test_schemas.py` checks
on mutants of real documents that it never accepts what the schema refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any

INT64 = (-(1 << 63), (1 << 63) - 1)
_INTS = frozenset({int})
_DATA_TYPES = frozenset({"FP32", "FP16", "BF16", "INT32", "UINT32", "INT8", "UINT8", "BYTE"})
_ARG_RANGES = {"INT": (-(1 << 31), (1 << 31) - 1), "UINT32": (0, (1 << 32) - 1),
               "INT64": INT64, "UINT64": (0, (1 << 64) - 1)}
_OPERATOR_LISTS = ("ReadTensors", "WriteTensors", "ResultTensors")


def _int64(value: Any) -> bool:
    return type(value) is int and INT64[0] <= value <= INT64[1]


def _int64s(values: Any) -> bool:
    """An array of int64 integers (`ints`)."""
    return type(values) is list and (not values or (
        _INTS.issuperset(map(type, values)) and min(values) >= INT64[0]
        and max(values) <= INT64[1]))


def _dims(values: Any, least: int) -> bool:
    """1 to 4 integers, each in [least, 2^63 - 1] (`sizes`: least 1; `indices`: least 0)."""
    return type(values) is list and 1 <= len(values) <= 4 and \
        _INTS.issuperset(map(type, values)) and min(values) >= least and \
        max(values) <= INT64[1]


def _tag(tag: Any) -> bool:
    return type(tag) is list and len(tag) == 2 and _int64s(tag)


def _buffer(buffer: Any) -> bool:
    if type(buffer) is not dict:
        return False
    get = buffer.get
    buffer_id, rank, send, recv = get("Id"), get("Rank"), get("SendTags"), get("RecvTags")
    if type(buffer_id) is not int or type(rank) is not int or type(send) is not list \
            or type(recv) is not list or not INT64[0] <= buffer_id <= INT64[1] \
            or not INT64[0] <= rank <= INT64[1]:
        return False
    if (send or recv) and not all(map(_tag, send + recv)):
        return False
    return "IsExternal" not in buffer or type(buffer["IsExternal"]) is bool


def _tensor(tensor: Any) -> bool:
    """`_dims` of each integer list, with the lists of one bound checked together: one call
    per tensor instead of seven (40,000 tensors at 10,000 operators)."""
    if type(tensor) is not dict:
        return False
    get = tensor.get
    tensor_id, dtype, shape, strides, offsets = (
        get("Id"), get("DataType"), get("Shape"), get("Strides"), get("Offsets"))
    if type(tensor_id) is not int or type(dtype) is not str or type(shape) is not list \
            or type(strides) is not list or type(offsets) is not list \
            or dtype not in _DATA_TYPES or not INT64[0] <= tensor_id <= INT64[1] \
            or not 1 <= len(shape) <= 4 or not 1 <= len(strides) <= 4 \
            or not 1 <= len(offsets) <= 4:
        return False
    sizes = shape + strides  # each element in [1, 2^63 - 1]
    if "PaddedShape" in tensor:
        padded = tensor["PaddedShape"]
        if type(padded) is not list or not 1 <= len(padded) <= 4:
            return False
        sizes += padded
    indices = offsets  # each element in [0, 2^63 - 1]
    if "Pads" in tensor:
        pads = tensor["Pads"]
        if type(pads) is not list or not 1 <= len(pads) <= 4:
            return False
        indices = offsets + pads
    return _INTS.issuperset(map(type, sizes)) and _INTS.issuperset(map(type, indices)) \
        and min(sizes) >= 1 and min(indices) >= 0 and max(sizes) <= INT64[1] \
        and max(indices) <= INT64[1] and _buffer(get("Buffer"))


def _arg(arg: Any) -> bool:
    if type(arg) is not dict or len(arg) != 1:
        return False
    (kind, value), = arg.items()
    if kind in _ARG_RANGES:
        lo, hi = _ARG_RANGES[kind]
        return type(value) is int and lo <= value <= hi
    if kind == "BOOL":
        return type(value) is bool
    if kind == "FLOAT":
        return type(value) is float or type(value) is int
    if kind == "DIMS":
        return _int64s(value) and len(value) <= 4
    if kind == "TENSOR":
        return _tensor(value)
    if kind == "OFFSET":
        return type(value) is dict and _int64(value.get("BufferId")) \
            and _int64(value.get("Value"))
    return False


def _operator(op: Any) -> bool:
    if type(op) is not dict:
        return False
    get = op.get
    if type(get("Type")) is not str or type(get("Name")) is not str \
            or type(get("IsVirtual")) is not bool:
        return False
    for key in _OPERATOR_LISTS:
        tensors = get(key)
        if type(tensors) is not list or not all(map(_tensor, tensors)):
            return False
    args = get("Args")
    return type(args) is dict and all(map(_arg, args.values()))


def _node(node: Any) -> bool:
    if type(node) is not dict:
        return False
    if not (_int64(node.get("Id")) and _int64s(node.get("ProducerNodeIds"))
            and _int64s(node.get("ConsumerNodeIds"))):
        return False
    if "Op" in node:
        return "Ops" not in node and _operator(node["Op"])
    ops = node.get("Ops")
    return type(ops) is list and len(ops) >= 1 and all(map(_operator, ops))


def ark_model(doc: Any) -> bool:
    """Certainly meets `ark-model.schema.json`."""
    if type(doc) is not dict:
        return False
    world_size, nodes = doc.get("WorldSize"), doc.get("Nodes")
    return _int64(doc.get("Rank")) and _int64(world_size) and world_size >= 1 \
        and type(nodes) is list and all(map(_node, nodes))


_DICTS = frozenset({dict})
_INT_OR_NULL = frozenset({int, type(None)})
_STR_OR_NULL = frozenset({str, type(None)})
_WORK_MEMBERS = {"io": None, "jo": None, "len_k": _INT_OR_NULL, "tile_order": _STR_OR_NULL}
"""`workItem`'s members: io and jo are required int64s (None: `_int64s`); the others' types."""


def _pair(value: Any) -> bool:
    return type(value) is list and len(value) == 2 and _int64s(value)


def _work_items(items: Any) -> bool:
    """An array of `workItem`s, checked a member at a time over the whole array (a planned
    Llama layer lists two million): every item an object with the first item's members, all
    of them known ones, io and jo among them. Anything else (an unknown member, items of
    different members) is left to the validator."""
    if type(items) is not list:
        return False
    if not items:
        return True
    first = items[0]
    if not _DICTS.issuperset(map(type, items)) or not first.keys() <= _WORK_MEMBERS.keys() \
            or "io" not in first or "jo" not in first \
            or set(map(len, items)) != {len(first)}:
        return False
    for key in first:  # same size and each of the first's members: the same members
        try:
            column = list(map(itemgetter(key), items))
        except KeyError:
            return False
        types = _WORK_MEMBERS[key]
        if types is None:
            if not _int64s(column):
                return False
        elif not types.issuperset(map(type, column)):
            return False
        elif types is _INT_OR_NULL:
            ints = [v for v in column if v is not None]
            if ints and (min(ints) < INT64[0] or max(ints) > INT64[1]):
                return False
    return True


def _core_range(value: Any) -> bool:
    return type(value) is dict and _pair(value.get("start")) and _pair(value.get("extent")) \
        and ("replicated" not in value or type(value["replicated"]) is bool)


def _layout(value: Any) -> bool:
    if type(value) is not dict or type(value.get("shard")) is not str:
        return False
    get = value.get
    return ("interleave" not in value or type(get("interleave")) is bool) \
        and ("stride" not in value or _pair(get("stride"))) \
        and ("tile_id_order" not in value or type(get("tile_id_order")) is str)


def _kernel(value: Any) -> bool:
    if type(value) is not dict or not _pair(value.get("grid_tiles")):
        return False
    len_k = value.get("len_k")
    return (len_k is None or _int64(len_k)) and _operator(value.get("operator"))


def _plan(plan: Any) -> bool:
    if type(plan) is not dict:
        return False
    get = plan.get
    ranges, partition, layouts = get("core_ranges"), get("work_partition"), get("layouts")
    if not _pair(get("core_grid")) or type(ranges) is not list \
            or not all(map(_core_range, ranges)) or type(partition) is not dict \
            or not all(map(_work_items, partition.values())) or type(layouts) is not dict \
            or not all(map(_layout, layouts.values())):
        return False
    return ("schema_version" not in plan or _int64(get("schema_version"))) \
        and ("backend_version" not in plan or type(get("backend_version")) is str) \
        and ("kernel" not in plan or _kernel(get("kernel")))


def tt_plans(doc: Any) -> bool:
    """Certainly meets `tt.schema.json`: a plan, or a non-empty array of plans."""
    if type(doc) is list:
        return bool(doc) and all(map(_plan, doc))
    return _plan(doc)


ACCEPTS: dict[str, Callable[[Any], bool]] = {"ark-model": ark_model, "tt": tt_plans}
"""Quick acceptance per schema name (schemas without one always take the validator)."""
