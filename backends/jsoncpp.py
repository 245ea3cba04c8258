"""JsonCpp's `StyledWriter` layout, the one Gemini's tools write their scheduler IR in.

Objects: one member per line, keys sorted (JsonCpp keeps members in a sorted map), `"key" : value`,
3-space indentation. Arrays of scalars stay on one line as `[ 1, 2, 3 ]` when fewer than 25 and
shorter than the 74-column right margin; other arrays put one element per line. Floats use the
shortest text that reads back as the same double, with `.0` added to whole numbers.
"""

from __future__ import annotations

import json
from typing import Any

INDENT = "   "
RIGHT_MARGIN = 74


def styled_json(value: Any) -> str:
    """`value` as JsonCpp's StyledWriter prints it, ending with a newline."""
    out: list[str] = []
    try:
        _write(value, "", out)
    finally:
        _SEEN.clear()
    return "".join(out) + "\n"


_SEEN: dict[tuple[int, str], tuple[int, int] | str] = {}
"""Objects the running `styled_json` has written, by identity and indentation: where their
text is in the output (then the text itself once met again). A Gemini schedule shares one
JSON object per destination or source among all the entries naming it (~28k of its ~38k
objects). Identity is safe here: every object stays alive inside `value` during the call,
and nothing changes them meanwhile."""


class Styled:
    """A value that writes its own text: `write(indent, out)` appends what `_write` would for
    the non-empty object it stands for (the Gemini backend writes IR records this way, without
    building their dicts first)."""

    __slots__ = ()

    def write(self, indent: str, out: list[str]) -> None:
        raise NotImplementedError


def write_value(value: Any, indent: str, out: list[str]) -> None:
    """Append `value`'s text at `indent` to `out` (for `Styled` values, within a running
    `styled_json`)."""
    _write(value, indent, out)


def object_heads(indent: str, keys: tuple[str, ...]) -> list[str]:
    """The text before each member's value of an object with these (sorted) keys at `indent`
    (`{` or `,`, the line break, the indentation and `"key" : `)."""
    heads = _HEADS.get((indent, keys))
    if heads is None:
        if len(_HEADS) > 1 << 12:
            _HEADS.clear()
        inner = indent + INDENT
        heads = _HEADS[(indent, keys)] = [("{\n" if i == 0 else ",\n") + inner + _key(key)
                                          for i, key in enumerate(keys)]
    return heads


def int_array_text(values: list[int], indent: str) -> str:
    """The text of an array of integers at `indent`."""
    out: list[str] = []
    _write_array(values, indent, out)    # no objects inside: nothing of `_SEEN` involved
    return "".join(out)


def string_text(value: str) -> str:
    """The JSON text of a string."""
    text = _STRINGS.get(value)
    if text is None:
        if len(_STRINGS) > 1 << 16:
            _STRINGS.clear()
        text = _STRINGS[value] = json.dumps(value)
    return text


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        text = repr(value)
        if text in ("inf", "-inf", "nan"):
            raise ValueError(f"{text} is not valid JSON")
        return text if any(c in text for c in ".e") else text + ".0"
    if isinstance(value, int):
        return str(value)
    return json.dumps(value)


_KEYS: dict[str, str] = {}
"""`"key" : ` per key: a schedule repeats a few dozen keys hundreds of thousands of times."""


def _key(key: str) -> str:
    text = _KEYS.get(key)
    if text is None:
        text = _KEYS[key] = f"{json.dumps(key)} : "
    return text


_HEADS: dict[tuple[str, tuple[str, ...]], list[str]] = {}
"""Per (indent, sorted keys) of an object, the text before each member's value (`{` or `,`, the
line break, the indentation and `"key" : `): a schedule has a handful of record shapes."""

_STRINGS: dict[str, str] = {}
"""JSON texts of strings (layer names repeat per tile, transfer and workload)."""


def _write(value: Any, indent: str, out: list[str]) -> None:
    kind = type(value)
    if kind is int:                    # the common case first (exact types: bool is not int)
        out.append(str(value))
    elif kind is dict or (kind is not list and isinstance(value, dict)):
        if not value:
            out.append("{}")
            return
        _write_object(value, indent, out)
    elif kind is list or isinstance(value, list):
        _write_array(value, indent, out)
    elif isinstance(value, Styled):
        value.write(indent, out)
    else:
        out.append(_scalar(value))


def _write_object(value: dict, indent: str, out: list[str]) -> None:
    """A non-empty object, members in key order; ints, strings and arrays written in line (the
    same texts `_write` gives them) to save a call per member."""
    seen = _SEEN.get((id(value), indent))
    if seen is not None:
        if type(seen) is tuple:
            seen = _SEEN[(id(value), indent)] = "".join(out[seen[0]:seen[1]])
        out.append(seen)
        return
    start = len(out)
    keys = tuple(sorted(value))
    heads = _HEADS.get((indent, keys))
    if heads is None:
        heads = object_heads(indent, keys)
    inner = indent + INDENT
    append = out.append
    for head, key in zip(heads, keys, strict=True):
        append(head)
        item = value[key]
        kind = type(item)
        if kind is int:
            append(str(item))
        elif kind is str:
            text = _STRINGS.get(item)
            append(string_text(item) if text is None else text)
        elif kind is list:
            if len(item) == 4 and type(item[0]) is int and type(item[1]) is int and \
                    type(item[2]) is int and type(item[3]) is int:
                # A box corner (the most common array): `_write_array`'s int-row text.
                text = _INT_ROWS.get((item[0], item[1], item[2], item[3]), _MISSING)
                if text is not _MISSING and text is not None:
                    append(text)
                    continue
            _write_array(item, inner, out)
        else:
            _write(item, inner, out)
    append("\n" + indent + "}")
    _SEEN[(id(value), indent)] = (start, len(out))


_MISSING = object()

_INT_ROWS: dict[tuple[int, ...], str | None] = {}
"""One-line texts of short integer arrays (boxes, transfer ids): a schedule repeats a few
thousand of them hundreds of thousands of times."""


def _write_array(values: list, indent: str, out: list[str]) -> None:
    if not values:
        out.append("[]")
        return
    if type(values[0]) is int and len(values) <= 8 and all(type(v) is int for v in values):
        key = tuple(values)
        if key not in _INT_ROWS:
            if len(_INT_ROWS) > 1 << 16:
                _INT_ROWS.clear()
            _INT_ROWS[key] = _one_line(values)
        one_line = _INT_ROWS[key]
    else:
        one_line = _one_line(values)
    if one_line is not None:
        out.append(one_line)
        return
    inner = indent + INDENT
    out.append("[\n")
    for i, item in enumerate(values):
        out.append(inner)
        if type(item) is dict and item:
            _write_object(item, inner, out)
        elif isinstance(item, Styled):
            item.write(inner, out)
        else:
            _write(item, inner, out)
        out.append(",\n" if i + 1 < len(values) else "\n")
    out.append(indent + "]")


def _one_line(values: list) -> str | None:
    if len(values) * 3 >= RIGHT_MARGIN:
        return None
    texts = []
    for v in values:
        if type(v) is int:
            texts.append(str(v))
        elif isinstance(v, Styled):
            return None
        elif isinstance(v, dict | list):
            if v:
                return None
            texts.append("[]" if isinstance(v, list) else "{}")
        else:
            texts.append(_scalar(v))
    if 4 + (len(values) - 1) * 2 + sum(map(len, texts)) >= RIGHT_MARGIN:
        return None
    return "[ " + ", ".join(texts) + " ]"
