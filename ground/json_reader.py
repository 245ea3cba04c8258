"""Reading JSON documents with their paths, so every complaint can say where it is.

`JsonNode` wraps a parsed JSON value together with its JSONPath (`$.Nodes[3].Op`). Frontends
walk documents through it; each typed accessor either returns a plain Python value or raises a
`PlancError` that names the path and what was expected. This keeps the importers free of
hand-written `isinstance` checks and makes every error message uniform.
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from ground.diagnostics import PlancError, extend_path, one_of


def describe(value: Any) -> str:
    """A short, user-facing description of a JSON value ('a string ("x")', 'null', ...)."""
    match value:
        case None:
            return "null"
        case bool():
            return f"a boolean ({'true' if value else 'false'})"
        case int():
            return f"an integer ({value})"
        case float():
            return f"a number ({value!r})"
        case str():
            text = value if len(value) <= 30 else value[:27] + "..."
            return f"a string ({json.dumps(text)})"
        case list():
            return f"an array of {len(value)}"
        case dict():
            return "an object"
    return type(value).__name__


class JsonNode:
    """A JSON value and the path at which it sits in its document."""

    __slots__ = ("value", "path")

    def __init__(self, value: Any, path: str = "$"):
        self.value = value
        self.path = path

    def __repr__(self) -> str:
        return f"JsonNode({self.path})"

    def error(self, message: str) -> PlancError:
        return PlancError(message, path=self.path)

    def expected(self, what: str) -> PlancError:
        return self.error(f"expected {what}, got {describe(self.value)}")

    # -- objects -------------------------------------------------------------------------

    def as_dict(self) -> dict[str, Any]:
        if not isinstance(self.value, dict):
            raise self.expected("an object")
        return self.value

    def has(self, key: str) -> bool:
        return key in self.as_dict()

    def __getitem__(self, key: str) -> JsonNode:
        """The member `key`; its absence is an error."""
        members = self.as_dict()
        if key not in members:
            raise self.error(f"missing required key '{key}'")
        return JsonNode(members[key], extend_path(self.path, key))

    def get(self, key: str) -> JsonNode | None:
        members = self.as_dict()
        if key not in members:
            return None
        return JsonNode(members[key], extend_path(self.path, key))

    def items(self) -> Iterator[tuple[str, JsonNode]]:
        for key, value in self.as_dict().items():
            yield key, JsonNode(value, extend_path(self.path, key))

    def unknown_members(self, known: frozenset[str] | set[str]) -> dict[str, Any]:
        """Members whose keys are not in `known`, kept so that newer fields survive."""
        return {k: v for k, v in self.as_dict().items() if k not in known}

    def one_key(self) -> tuple[str, JsonNode]:
        """The single member of an object like `{"INT": 3}`."""
        members = self.as_dict()
        if len(members) != 1:
            raise self.error(f"expected an object with exactly one key, got {len(members)}")
        return next(self.items())

    # -- arrays --------------------------------------------------------------------------

    def as_list(self, min_len: int = 0, max_len: int | None = None) -> list[Any]:
        if not isinstance(self.value, list):
            raise self.expected("an array")
        n = len(self.value)
        if n < min_len or (max_len is not None and n > max_len):
            raise self.error(f"expected {_count_phrase(min_len, max_len, 'element')}, got {n}")
        return self.value

    def elements(self) -> list[JsonNode]:
        return [JsonNode(v, f"{self.path}[{i}]") for i, v in enumerate(self.as_list())]

    def as_int_list(
        self, min_len: int = 0, max_len: int | None = None, *, min_value: int | None = None
    ) -> list[int]:
        """An array of integers, e.g. a shape. One message covers both length and type."""
        what = _count_phrase(min_len, max_len, "integer")
        value = self.value
        if not isinstance(value, list):
            raise self.expected(what)
        for i, v in enumerate(value):
            if not _is_int(v):   # name the element: "got an array of 2" hides a boolean
                raise JsonNode(v, f"{self.path}[{i}]").expected(f"an integer ({what} here)")
        if len(value) < min_len or (max_len is not None and len(value) > max_len):
            raise self.error(f"expected {what}, got {len(value)}")
        if min_value is not None:
            for i, v in enumerate(value):
                if v < min_value:
                    raise JsonNode(v, f"{self.path}[{i}]").error(
                        f"expected an integer >= {min_value}, got {v}"
                    )
        return value

    # -- scalars -------------------------------------------------------------------------

    def as_int(self, lo: int | None = None, hi: int | None = None) -> int:
        """An integer in [lo, hi] (both inclusive when given)."""
        if not _is_int(self.value):
            raise self.expected("an integer")
        too_low = lo is not None and self.value < lo
        too_high = hi is not None and self.value > hi
        if too_low or too_high:
            raise self.error(f"expected {_range_phrase(lo, hi)}, got {self.value}")
        return self.value

    def as_bool(self) -> bool:
        if not isinstance(self.value, bool):
            raise self.expected("a boolean")
        return self.value

    def as_str(self, choices: tuple[str, ...] | None = None) -> str:
        if not isinstance(self.value, str):
            raise self.expected("a string")
        if choices is not None and self.value not in choices:
            raise self.error(f"expected {one_of(choices)}, got {json.dumps(self.value)}")
        return self.value

    def as_number(self) -> float | int:
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise self.expected("a number")
        return self.value


def _is_int(value: Any) -> bool:
    # JSON booleans arrive as Python bools, which are ints; they are not integers here.
    return isinstance(value, int) and not isinstance(value, bool)


def _range_phrase(lo: int | None, hi: int | None) -> str:
    if lo is not None and hi is not None:
        return f"an integer in [{lo}, {hi}]"
    return f"an integer >= {lo}" if lo is not None else f"an integer <= {hi}"


def _count_phrase(min_len: int, max_len: int | None, noun: str) -> str:
    if max_len is None:
        return f"an array of at least {min_len} {noun}s" if min_len else f"an array of {noun}s"
    if min_len == max_len:
        return f"{min_len} {noun}{'s' if min_len != 1 else ''}"
    return f"{min_len} to {max_len} {noun}s"


# -- loading -----------------------------------------------------------------------------


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # A silent "last one wins" would hide real mistakes in hand-written plans. The dict is
    # built in C; only an object that lost members to a repeated key is searched for it.
    members = dict(pairs)
    if len(members) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return members


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


MAX_DEPTH = 200
"""Deepest nesting of arrays and objects planc reads (real documents nest fewer than 10)."""

# Integers of 19 or more digits, checked against the 64-bit range before parsing (a regex runs
# at C speed over big files). A string that is only digits is no integer (the lookarounds
# exclude quotes); one holding a long digit run after other text would be refused too.
_LONG_INTEGER = re.compile(r'(?<![\w."\\.])-?\d{19,}(?![\w."\\.eE])')
_DIGITS_AS_ZERO = str.maketrans("123456789", "000000000")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
                             r"|(?<![0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def parse_json(text: str) -> JsonNode:
    """Parse JSON text strictly (no NaN/Infinity, no duplicate keys, no text that cannot be
    written back, nesting at most `MAX_DEPTH` deep)."""
    # Both scans run only where a cheap C-speed test finds a candidate: on a 270 MB file the
    # regular expressions alone take 30 s, the tests a second.
    long_digit_runs = "0" * 19 in text.translate(_DIGITS_AS_ZERO)
    for number in _LONG_INTEGER.finditer(text) if long_digit_runs else ():
        # More than 21 characters is outside the range whatever the digits; `int` of them
        # would also hit Python's 4,300-digit conversion limit (a ValueError, not a refusal).
        if len(number.group()) > 21 or not -(1 << 63) <= int(number.group()) < 1 << 64:
            line = text.count("\n", 0, number.start()) + 1
            raise PlancError(f"invalid JSON at line {line}: the integer {number.group()[:30]} "
                             "is outside the 64-bit range every format's fields use "
                             "([-2^63, 2^64): MSCCL++ writes 2^64-1 as an unlimited size)")
    surrogate = _LONE_SURROGATE.search(text) if _SURROGATE_ESCAPE.search(text) else None
    if surrogate is not None:
        line = text.count("\n", 0, surrogate.start()) + 1
        raise PlancError(f"invalid JSON at line {line}: {surrogate.group()} is half of a "
                         "UTF-16 surrogate pair, a character no UTF-8 file can hold")
    try:
        value, shallow = _loads(text)
    except RecursionError:
        raise PlancError(f"invalid JSON: nested deeper than {MAX_DEPTH} levels (planc's "
                         "limit)", path="$") from None
    except _DuplicateKey as e:
        raise PlancError(f"invalid JSON: duplicate key '{e.key}'",
                         path=_duplicate_path(text)) from None
    except json.JSONDecodeError as e:
        raise PlancError(f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except ValueError as e:
        raise PlancError(f"invalid JSON: {e}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise PlancError("invalid JSON: non-finite number")
    deep = None if shallow else _too_deep(value)
    if deep is not None:
        raise PlancError(f"nested deeper than {MAX_DEPTH} levels (planc's limit)", path=deep)
    return JsonNode(value)


_CONTAINERS = frozenset((dict, list))

_SHALLOW = MAX_DEPTH // 2
"""Nesting that a parse under a lowered recursion limit proves not exceeded (see `_loads`)."""


def _loads(text: str) -> tuple[Any, bool]:
    """The parsed value, and whether it is known to nest at most `MAX_DEPTH` deep.

    The C parser counts each array or object it enters against the interpreter's recursion
    limit. Lowered to `_SHALLOW` levels above the current depth, a parse that succeeds has
    nested fewer than `_SHALLOW` containers, well within `MAX_DEPTH`, and the walk over every
    container that `_too_deep` makes (a third of reading a large file) is not needed. A parse
    that hits the lowered limit is made again under the usual one and walked, so deep
    documents get the same error as before. The limit is interpreter-wide: it is lowered only
    while no other thread runs, and only where the parser is seen to obey it (`_bounded`)."""
    threading = sys.modules.get("threading")
    if not _bounded() or (threading is not None and threading.active_count() > 1):
        return _parse(text), False
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_frame_depth() + _SHALLOW)
    try:
        return _parse(text), True
    except RecursionError:
        pass
    finally:
        sys.setrecursionlimit(limit)
    return _parse(text), False


def _parse(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_reject_duplicates,
                      parse_constant=_reject_constant, parse_float=_finite_float)


def _frame_depth() -> int:
    frame, depth = sys._getframe(), 0  # noqa: SLF001 -- the interpreter's own count
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


@functools.cache
def _bounded() -> bool:
    """Whether json's parser stops at a lowered recursion limit (CPython 3.11 counts C and
    Python levels together; later versions may count the parser's levels apart)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_frame_depth() + _SHALLOW)
    try:
        json.loads("[" * (2 * _SHALLOW) + "]" * (2 * _SHALLOW))
    except RecursionError:
        return True
    finally:
        sys.setrecursionlimit(limit)
    return False


def _too_deep(value: Any) -> str | None:
    """The path of a value nested deeper than `MAX_DEPTH`, found without recursion. Paths are
    built only for the offending value (building one per container costs seconds on big
    files)."""
    return _deep_path(value) if _depth_over(value, MAX_DEPTH) else None


def _deep_path(value: Any) -> str:
    """The path to the first container deeper than `MAX_DEPTH` (known to exist)."""
    steps: list[Any] = []
    node = value
    while len(steps) <= MAX_DEPTH:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        key, node = next((k, v) for k, v in items if type(v) in _CONTAINERS and
                         _depth_over(v, MAX_DEPTH - len(steps) - 1))
        steps.append(key)
    return extend_path("$", *steps[:8]) + ("..." if len(steps) > 8 else "")


def _depth_over(value: Any, limit: int) -> bool:
    """Whether containers nest below `value` deeper than `limit`; only containers are
    visited, and a list of scalars is dismissed at C speed."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            children = node.values()
        elif not isinstance(node, list) or _CONTAINERS.isdisjoint(map(type, node)):
            continue
        else:
            children = node
        stack.extend((child, depth + 1) for child in children if type(child) in _CONTAINERS)
    return False


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:30]} is too large for a 64-bit float")
    return value


class _Duplicates(dict):
    duplicate: str | None = None


def _keep_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = _Duplicates()
    for key, value in pairs:
        if key in members and members.duplicate is None:
            members.duplicate = key
        members[key] = value
    return members


def _duplicate_path(text: str) -> str | None:
    """Where the first duplicate key is: parsed again keeping duplicates, then searched."""
    try:
        value = json.loads(text, object_pairs_hook=_keep_duplicates)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[Any, tuple]] = [(value, ())]
    while stack:
        node, steps = stack.pop()
        if isinstance(node, _Duplicates) and node.duplicate is not None:
            return extend_path("$", *steps, node.duplicate)
        children = node.items() if isinstance(node, dict) else \
            enumerate(node) if isinstance(node, list) else ()
        stack.extend((v, (*steps, k)) for k, v in children if isinstance(v, dict | list))
    return None


MAX_INPUT_BYTES = 512 << 20
"""The largest JSON document planc reads (2.5 times the 200 MB files it reads in seconds).
Without a bound, an endless input (`planc check /dev/zero`, `/dev/full`, a pipe that never
closes) was read until memory ran out."""


def read_at_most(f: BinaryIO, limit: int) -> bytes:
    """Up to `limit` + 1 bytes of `f` (one more than the limit tells a larger input), never
    reserving more memory than the input holds: `read(n)` allocates n bytes before reading,
    so reading every input as `read(limit + 1)` took 512 MB of address space (2 GiB for an
    ONNX model), and under `ulimit -v` even a small document ran out of memory."""
    try:
        info = os.fstat(f.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        info = None
    if info is not None and stat.S_ISREG(info.st_mode):
        return f.read(min(info.st_size, limit) + 1)
    chunks, total = [], 0                  # a pipe or device: its size is not known
    while total <= limit:
        chunk = f.read(min(1 << 20, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _read_text(path: str | Path) -> str:
    with open(path, "rb") as f:
        data = read_at_most(f, MAX_INPUT_BYTES)
    if len(data) > MAX_INPUT_BYTES:
        raise PlancError(f"larger than the {MAX_INPUT_BYTES:,} bytes planc reads as one JSON "
                         "document", file=str(path))
    return data.decode("utf-8")


def load_json_file(path: str | Path) -> JsonNode:
    """Read and parse a JSON file; every failure is a `PlancError` naming the file."""
    try:
        text = _read_text(path)
    except FileNotFoundError:
        raise PlancError("no such file", file=str(path)) from None
    except IsADirectoryError:
        raise PlancError("is a directory, expected a JSON file", file=str(path)) from None
    except UnicodeDecodeError:
        raise PlancError("not a UTF-8 text file", file=str(path)) from None
    except OSError as e:
        raise PlancError(f"cannot read: {e.strerror}", file=str(path)) from None
    try:
        return parse_json(text)
    except PlancError as e:
        raise e.in_file(str(path)) from None
