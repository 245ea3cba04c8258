"""Arbitrary JSON values as xDSL attributes, and back.

Every planc dialect keeps the fields it does not model (newer or vendor-specific keys) so that
import followed by export gives back the original document. Those fields live in an `extra`
dictionary property as builtin attributes; this module is the one lossless mapping between the
two worlds:

    null -> none          true/false -> true/false (i1)    17 -> 17 : i64
    1.5  -> 1.5 : f64     "s" -> "s"                       [..] -> [..]    {..} -> {..}

Integers outside the 64-bit range fall back to `#builtin.int<...>`, which is unbounded.
Long arrays of only integers or only floats (a vendor's lookup table, a weight dump: a 28M-element
member must not become 28M attribute objects) are dense arrays, packed at C speed:

    [0, 1, ..., 99] -> array<i64: 0, 1, ..., 99>      [0.5, ...] -> array<f64: 0.5, ...>
"""

from __future__ import annotations

import sys
from array import array
from typing import Any

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    BytesAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    NoneAttr,
    StringAttr,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute

from dialects.utils import i64_attr

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def to_attr(value: Any) -> Attribute:
    match value:
        case None:
            return NoneAttr()
        case bool():
            return IntegerAttr(int(value), i1)
        case int() if _I64_MIN <= value <= _I64_MAX:
            return i64_attr(value)      # shared: a plan's Configs repeat a few numbers
        case int():
            return IntAttr(value)
        case float():
            return FloatAttr(value, f64)
        case str():
            return StringAttr(value)
        case list():
            return _dense(value) or ArrayAttr([to_attr(v) for v in value])
        case dict():
            return DictionaryAttr({k: to_attr(v) for k, v in value.items()})
    raise TypeError(f"not a JSON value: {value!r}")


def from_attr(attr: Attribute) -> Any:
    # The common exact types first (emission converts every Config and extra member); the
    # patterns below decide everything else, subclasses included.
    kind = type(attr)
    if kind is StringAttr or kind is IntAttr:
        return attr.data
    if kind is DictionaryAttr:
        return {k: from_attr(v) for k, v in attr.data.items()}
    if kind is ArrayAttr:
        return [from_attr(a) for a in attr.data]
    if kind is IntegerAttr and type(attr.type) is IntegerType:
        value = attr.value.data
        return bool(value) if attr.type.width.data == 1 else value
    return _from_attr_matched(attr)


def _from_attr_matched(attr: Attribute) -> Any:
    match attr:
        case NoneAttr():
            return None
        case IntegerAttr(type=IntegerType(width=IntAttr(data=1))):
            return bool(attr.value.data)
        case IntegerAttr():
            return attr.value.data
        case IntAttr():
            return attr.data
        case FloatAttr():
            return attr.value.data
        case StringAttr():
            return attr.data
        case ArrayAttr():
            return [from_attr(a) for a in attr.data]
        case DenseArrayBase():
            return list(attr.get_values())
        case DictionaryAttr():
            return {k: from_attr(v) for k, v in attr.data.items()}
    raise TypeError(f"attribute {attr} does not represent a JSON value")


DENSE_FROM = 64
"""Arrays of at least this many numbers of one kind are stored as dense arrays."""


def _dense(values: list) -> DenseArrayBase | None:
    if len(values) < DENSE_FROM:
        return None
    kinds = set(map(type, values))         # C speed; bool is its own type, so never packed
    code, element = ("q", i64) if kinds == {int} else ("d", f64) if kinds == {float} else \
        (None, None)
    if code is None:
        return None
    try:
        packed = array(code, values)
    except OverflowError:                  # an integer beyond int64 keeps its exact value
        return None
    if sys.byteorder == "big":             # xDSL's dense arrays are little-endian
        packed.byteswap()
    return DenseArrayBase(element, BytesAttr(packed.tobytes()))


def dict_attr(members: dict[str, Any]) -> DictionaryAttr | None:
    """`members` as a dictionary attribute, or None when there is nothing to keep. Equal
    members (the same Config on thousands of operators of a plan) share one attribute:
    attributes are immutable, and building one is most of what importing a Config costs."""
    if not members:
        return None
    # repr keeps key order and tells 1, 1.0, true and "1" apart, as `to_attr` does; it is
    # several times faster than json.dumps (a key per operator of a plan).
    key = repr(members)
    found = _DICTS.get(key)
    if found is None:
        found = DictionaryAttr({k: to_attr(v) for k, v in members.items()})
        if len(_DICTS) >= MAX_SHARED_DICTS:
            _DICTS.clear()
        _DICTS[key] = found
    return found


MAX_SHARED_DICTS = 4096
"""The most distinct dictionaries `dict_attr` remembers (it starts over beyond)."""

_DICTS: dict[str, DictionaryAttr] = {}
"""Dictionary attributes by the repr of their members (which keeps key order and tells `1`,
`1.0`, `True` and `'1'` apart, as `to_attr` does)."""


def dict_value(attr: DictionaryAttr | None) -> dict[str, Any]:
    if attr is None or not attr.data:
        return {}
    return {k: from_attr(v) for k, v in attr.data.items()}


def bool_attr(value: bool) -> BoolAttr:
    return IntegerAttr(int(value), i1)
