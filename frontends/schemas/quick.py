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


def _tag_lists(buffer: dict) -> bool:
    for key in ("SendTags", "RecvTags"):
        tags = buffer.get(key)
        if type(tags) is not list:
            return False
        for tag in tags:
            if type(tag) is not list or len(tag) != 2 or not _int64s(tag):
                return False
    return True


def _buffer(buffer: Any) -> bool:
    return type(buffer) is dict and _int64(buffer.get("Id")) and _int64(buffer.get("Rank")) \
        and _tag_lists(buffer) \
        and ("IsExternal" not in buffer or type(buffer["IsExternal"]) is bool)


def _tensor(tensor: Any) -> bool:
    if type(tensor) is not dict:
        return False
    get = tensor.get
    dtype = get("DataType")
    return _int64(get("Id")) and type(dtype) is str and dtype in _DATA_TYPES \
        and _dims(get("Shape"), 1) and _dims(get("Strides"), 1) and _dims(get("Offsets"), 0) \
        and ("PaddedShape" not in tensor or _dims(tensor["PaddedShape"], 1)) \
        and ("Pads" not in tensor or _dims(tensor["Pads"], 0)) \
        and _buffer(get("Buffer"))


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


ACCEPTS: dict[str, Callable[[Any], bool]] = {"ark-model": ark_model}
"""Quick acceptance per schema name (schemas without one always take the validator)."""
