"""Source locations of imported IR: the JSON path each op came from.

Importers stamp every op with `loc("$.Nodes[3].Op")`, the MLIR way of remembering where IR came
from. When a verifier later rejects an op, the driver reports that path, so a verification
error points into the user's file just like an import error does.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Collection
from typing import Any

from xdsl.dialects.builtin import ModuleOp, NameLoc, NoneAttr, StringAttr
from xdsl.ir import Operation
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException

from dialects.fast_verify import verify_op
from dialects.utils import VerifyAt, built, verifying_once, walk_ops
from ground.diagnostics import PlancError, extend_path


def json_location(path: str) -> NameLoc:
    """`NameLoc(StringAttr(path), NoneAttr())`, put together directly: a string parameter
    and no child location break no rule, and a large import makes one per op."""
    if type(path) is not str:
        return built(NameLoc, StringAttr(path), _NONE)
    name = StringAttr.__new__(StringAttr)
    name.__dict__["data"] = path
    loc = NameLoc.__new__(NameLoc)
    fields = loc.__dict__
    fields["desc"] = name
    fields["location"] = _NONE
    return loc


_NONE = NoneAttr()


def source_path(op: Operation) -> str | None:
    """The JSON path `op` was imported from: its own, or its closest located ancestor's."""
    current: Operation | None = op
    while current is not None:
        loc = current.location
        if isinstance(loc, NameLoc) and loc.desc.data.startswith("$"):
            return loc.desc.data
        current = current.parent_op()
    return None


def verify_module(module: ModuleOp) -> None:
    """Verify every op; the first failure becomes a `PlancError` at the op's JSON path.

    Ops are verified one by one rather than through `module.verify()`, whose diagnostics print
    the whole module: for a user, the op's path and the verifier's sentence are the message.
    Parents come before their children: a document's header (a grid, a rank) is checked before
    the parts that depend on it. A container whose document-wide rules rely on its children's
    own rules checks those first (see `plan.plan`).
    """
    with verifying_once() as done:
        for op in walk_ops(module):
            if id(op) in done:
                continue  # verified by its parent, which checks it first
            try:
                quick = _QUICK.get(type(op), _QUICK)
                if quick is _QUICK:
                    quick = _QUICK[type(op)] = getattr(type(op), "verify_quickly", None)
                if quick is None or not quick(op):
                    verify_op(op)
            except (VerifyException, DiagnosticException) as e:
                raise verifier_error(op, e) from None


_QUICK: dict[type, Any] = {}
"""Per op class, its `verify_quickly(op)` (True when it verified the op itself, False when
the generic verification must; see `dialects.plan`), or None."""


def verify_all(module: ModuleOp, limit: int = 100) -> list[PlancError]:
    """Every verifier failure of `module` (at most `limit`), for `planc check`.

    As `verify_module`, but a failing op's descendants are skipped (their own rules usually
    assume the parent's hold, so they would only echo the first failure) and the walk goes on
    with the next op.
    """
    errors: list[PlancError] = []
    skipped: set[Operation] = set()
    with verifying_once() as done:
        for op in walk_ops(module):
            parent = op.parent_op()
            if parent is not None and parent in skipped:
                skipped.add(op)
                continue
            if id(op) in done:
                continue  # verified, and found right, by its parent (see `verify_module`)
            try:
                # The direct tests of `verify_quickly` first, as `verify_module` does: True
                # means the op is right; False means the generic verification decides.
                quick = _QUICK.get(type(op), _QUICK)
                if quick is _QUICK:
                    quick = _QUICK[type(op)] = getattr(type(op), "verify_quickly", None)
                if quick is None or not quick(op):
                    op.verify_()
            except (VerifyException, DiagnosticException) as e:
                errors.append(verifier_error(op, e))
                skipped.add(op)
                if len(errors) >= limit:
                    break
    return errors


def verifier_error(op: Operation, error: Exception) -> PlancError:
    """A verifier failure as a user error at the op's JSON path, naming the rule it breaks
    (the verifier's own name for it, or the op that enforces it)."""
    message = str(error).split("\n", 1)[0]
    rule = op.name
    if isinstance(error, VerifyAt):
        rule = error.rule or (error.op or op).name
    return PlancError(message, path=error_path(op, error), rule=rule)


def error_path(op: Operation, error: Exception) -> str | None:
    """The JSON path a verifier failure of `op` points at."""
    if not isinstance(error, VerifyAt):
        return source_path(op)
    path = source_path(error.op or op)
    return extend_path(path, *error.steps) if path is not None else None


def parse_error_message(error: ParseError) -> str:
    """`FILE:LINE:COL: message` for an error in MLIR text, on one line."""
    return f"{error.span.get_location()}: {' '.join(error.msg.split())}"


_LONG_DIGITS = re.compile(r"\d{4301,}")
"""A digit run longer than Python converts to an integer (`sys.get_int_max_str_digits`)."""


def parse_ir(context: Any, data: bytes | str, name: str, *, implicit_module: bool = True,
             xdsl_errors: bool = False, make_parser: Any = None,
             own_dialects: Collection[str] = ()) -> ModuleOp:
    """MLIR text (`data`, read from `name`) as a module. Every failure is a `PlancError`
    `NAME:LINE:COL: message` on one line, what the text did wrong, as xDSL's own parse errors
    are: bytes that are not UTF-8 (or a byte order mark, which MLIR text has none of), an
    integer literal longer than Python converts, nesting deeper than the parser recurses, an
    attribute that refuses its parameters (a Gemini destination with a number for its layer
    name) and a dense array of an element type xDSL cannot pack (`array<i128: 1>`). With
    `xdsl_errors` (planc-opt, whose --parsing-diagnostics and --verify-diagnostics print them),
    xDSL's ParseError and VerifyException are raised as they are. `make_parser(context, text,
    name)` gives the parser when xDSL's own is not enough (planc-opt notes where ops start).
    `own_dialects` names the dialects whose regions hold one block (planc's: the caller, above
    the dialects' registry, passes `dialects.dialect_names()`)."""
    from xdsl.parser import Parser

    text = decode_ir(data, name)
    long = _LONG_DIGITS.search(text)
    if long is not None:
        raise PlancError(f"{_position(text, long.start(), name)}: an integer literal of "
                         f"{long.end() - long.start():,} digits (planc reads at most 4,300)")
    _refuse_bad_strings(text, name)
    parser = None
    try:
        # The parser lexes its first token when made: a bad one is a parse error too.
        parser = (make_parser or Parser)(context, text, name=name)
        module = parser.parse_module(implicit_module)
    except ParseError as e:
        if xdsl_errors:
            raise
        raise PlancError(parse_error_message(e)) from None
    except VerifyException as e:
        if xdsl_errors:
            raise
        raise PlancError(f"{_position(text, _at(parser), name)}: "
                         f"{' '.join(str(e).split())}") from None
    except RecursionError:
        raise PlancError(f"{name}: nested too deep for planc's parser (regions, attributes "
                         "or types inside one another a few hundred levels deep)") from None
    except struct.error:
        # A dense array whose literal does not fit its element type (the declarative format
        # of ops such as tt.work_list packs it with struct, unchecked).
        raise PlancError(f"{_position(text, _at(parser), name)}: an integer too large for its "
                         "array's element type") from None
    except NotImplementedError as e:
        # xDSL packs dense arrays of i1 to i64 and f16 to f64 only.
        raise PlancError(f"{_position(text, _at(parser), name)}: an array of an element type "
                         f"planc cannot hold ({' '.join(str(e).split())[:200]})") from None
    except ZeroDivisionError:
        # xDSL's dense array checks its byte length modulo the element size: 0 for i0.
        raise PlancError(f"{_position(text, _at(parser), name)}: an array of zero-width "
                         "elements (such as array<i0: ...>); planc holds i1 to i64 and f16 "
                         "to f64") from None
    _refuse_block_lists(module, name, own_dialects)
    if _WIDE_FLOAT.search(text):
        _refuse_wide_floats(module, name)
    return module


def _at(parser: Any) -> int:
    """Where the parser stopped (the start when it failed while being made)."""
    return parser.pos if parser is not None else 0


_STRING_OR_COMMENT = re.compile(r'//[^\n]*|"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*(")?')
"""A comment, or a string literal as MLIR has it (escapes \\n, \\t, \\", \\\\ and two hex
digits), closed or not: each character is matched one way, so the scan is linear."""


def _refuse_bad_strings(text: str, name: str) -> None:
    """A string literal left open on its line, or holding an escape MLIR does not have: xDSL's
    lexer matches strings with a regular expression that backtracks exponentially on those
    (a stray `"` in a 200-character line ran for minutes)."""
    for match in _STRING_OR_COMMENT.finditer(text):
        if match.group().startswith('"') and match.group(1) is None:
            raise PlancError(f"{_position(text, match.end(), name)}: a string literal not "
                             "closed on its line, or an escape MLIR does not have (\\n, \\t, "
                             '\\", \\\\ or two hex digits)')


_WIDE_FLOAT = re.compile(r"\bf(?:80|128)\b")


def _refuse_wide_floats(module: ModuleOp, name: str) -> None:
    """A float attribute of type f80 or f128 parses, but xDSL cannot print it (it packs
    floats of at most 64 bits): refused here rather than where the result is printed."""
    from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FloatAttr
    from xdsl.ir import ParametrizedAttribute

    ops: list[Operation] = [module]
    while ops:
        op = ops.pop()
        attrs = [*op.attributes.values(), *op.properties.values()]
        while attrs:
            attr = attrs.pop()
            if isinstance(attr, FloatAttr) and attr.type.name in ("f80", "f128"):
                raise PlancError(f"{name}: '{op.name}' has a float of type {attr.type.name}; "
                                 "planc holds floats of at most 64 bits")
            if isinstance(attr, ArrayAttr):
                attrs.extend(attr.data)
            elif isinstance(attr, DictionaryAttr):
                attrs.extend(attr.data.values())
            elif isinstance(attr, ParametrizedAttribute):
                attrs.extend(attr.parameters)
        for region in op.regions:
            for block in region.blocks:
                ops.extend(block.ops)


def _refuse_block_lists(module: ModuleOp, name: str, own_dialects: Collection[str]) -> None:
    """Every region of planc's ops holds one block (or none: `{}`); MLIR text may give one
    several (`^bb1:`), which the ops' accessors (`region.block`, `region.ops`) answer with
    a ValueError wherever they are first read, before any verifier could object."""
    planc = {*own_dialects, "builtin"}
    stack: list[Operation] = [module]
    while stack:
        op = stack.pop()
        for region in op.regions:
            blocks = region.blocks
            if len(blocks) > 1 and op.name.split(".", 1)[0] in planc:
                raise PlancError(f"{name}: '{op.name}' has a region of {len(blocks)} blocks; "
                                 "planc's operations hold one block in each region")
            for block in blocks:
                stack.extend(block.ops)


def decode_ir(data: bytes | str, name: str) -> str:
    """`data` as text: UTF-8, without a byte order mark (as `mlir-opt` reads it)."""
    if isinstance(data, str):
        text = data
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            where = _position(data[: e.start].decode("utf-8"), e.start, name)
            raise PlancError(f"{where}: not UTF-8 text (byte 0x{data[e.start]:02x}); MLIR text "
                             "is UTF-8") from None
    if text.startswith("\ufeff"):
        raise PlancError(f"{name}:1:1: the file starts with a byte order mark (U+FEFF), "
                         "which MLIR text does not have; save it as UTF-8 without one")
    return text


def _position(text: str, offset: int, name: str) -> str:
    """`NAME:LINE:COL` of character `offset` of `text`."""
    line = text.count("\n", 0, offset) + 1
    return f"{name}:{line}:{offset - text.rfind(chr(10), 0, offset)}"
