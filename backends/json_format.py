"""JSON text layouts the upstream tools write, so planc's output diffs cleanly against theirs.

`denser_json` is ARK's pretty printer (`ModelJson::dump_pretty`, Python `denser_json`):
2-space indentation down to a depth limit, compact below it, arrays of numbers always compact.
With limit 5 it reproduces ARK model files byte for byte, with limit 6 ARK plan files (a
tensor, an argument or a task group per line).
"""

from __future__ import annotations

import json
from typing import Any

MODEL_DEPTH = 5
PLAN_DEPTH = 6


_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
"""One encoder for every compact fragment: `json.dumps` builds a new one per call (a
plan file has a fragment per tensor, argument and task group)."""

quoted = _quoted = json.encoder.encode_basestring
"""A string's JSON text (what `ensure_ascii=False` writes)."""


def compact(value: Any) -> str:
    return _COMPACT(value)


def _is_number_array(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value)


def denser_json(value: Any, depth_limit: int = MODEL_DEPTH) -> str:
    """ARK's "denser JSON" text for `value`, ending with a newline.

    Containers that occur several times in `value` (a plan shares one object among the
    operators that read a tensor, and one Config among the operators of a tiling) are
    encoded once below the depth limit: their compact text is remembered by identity, which
    holds while `value` keeps them alive.
    """
    return DenseWriter(depth_limit).text(value, 0) + "\n"


_INDENTS = ["  " * depth for depth in range(32)]


def _indent(depth: int) -> str:
    return _INDENTS[depth] if depth < len(_INDENTS) else "  " * depth


_KEYS: dict[str, str] = {}


def _key(key: Any) -> str:
    """A member name's text (names repeat: they are remembered)."""
    if type(key) is not str:
        return _COMPACT(key)
    found = _KEYS.get(key)
    if found is None:
        found = _quoted(key)
        if len(_KEYS) < 4096:
            _KEYS[key] = found
    return found


def dense_object(items: dict[Any, str], depth: int) -> str:
    """The text of an object at `depth` (above the limit) whose members' texts are `items`
    (each made for depth + 1)."""
    if not items:
        return "{}"
    inner = _indent(depth + 1)
    return "{\n" + ",\n".join([f"{inner}{_key(k)}: {v}" for k, v in items.items()]) + \
        "\n" + _indent(depth) + "}"


def dense_array(texts: list[str], depth: int) -> str:
    """The text of an array at `depth` (above the limit) whose elements' texts are `texts`
    (each made for depth + 1); not for arrays of numbers, which are always compact."""
    if not texts:
        return "[]"
    inner = _indent(depth + 1)
    return "[\n" + ",\n".join([inner + t for t in texts]) + "\n" + _indent(depth) + "]"


class DenseWriter:
    """`denser_json`'s writer: `text(value, depth)` is the text of `value` at `depth`."""

    def __init__(self, limit: int):
        self.limit = limit
        self.memo: dict[int, str] = {}

    def compact(self, value: Any) -> str:
        if type(value) is dict or type(value) is list:
            found = self.memo.get(id(value))
            if found is None:
                found = self.memo[id(value)] = _COMPACT(value)
            return found
        return _COMPACT(value)

    def text(self, value: Any, depth: int) -> str:
        if depth >= self.limit or not value or not isinstance(value, dict | list) \
                or _is_number_array(value):
            return self.compact(value)
        if depth + 1 >= self.limit:
            child = self.compact
        else:
            def child(v: Any) -> str:
                return self.text(v, depth + 1)
        if isinstance(value, dict):
            return dense_object({k: child(v) for k, v in value.items()}, depth)
        return dense_array([child(v) for v in value], depth)


def indented_json(value: Any, indent: int = 2) -> str:
    """The common `json.dumps(indent=2)` layout, ending with a newline."""
    return json.dumps(value, indent=indent, ensure_ascii=False) + "\n"
