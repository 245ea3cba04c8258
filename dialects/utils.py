"""Helpers shared by planc's dialects."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from xdsl.dialects.builtin import IntAttr, IntegerAttr, ModuleOp, i64
from xdsl.ir import (
    Attribute,
    Block,
    ErasedSSAValue,
    Operation,
    OpResult,
    ParametrizedAttribute,
    Region,
)
from xdsl.irdl import IRDLOperation
from xdsl.irdl.operations import AttrSizedSegments
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException

from dialects.fast_verify import verify_op
from ground.diagnostics import PlancError

if TYPE_CHECKING:   # the parser's modules load only when MLIR text is read
    from xdsl.parser import BaseParser

RootT = TypeVar("RootT", bound=Operation)
AttrT = TypeVar("AttrT", bound=ParametrizedAttribute)


def build_with_properties(op: IRDLOperation, properties: dict[str, Attribute | None]) -> None:
    """`IRDLOperation.__init__(op, properties=properties)` for an op class that declares no
    operands, results, regions or successors: the generic builder's bookkeeping for those
    is skipped (passes build thousands of such ops: kernels, launches, task infos)."""
    if not _only_properties(type(op)):
        IRDLOperation.__init__(op, properties=properties)
        return
    init_bare(op, {k: v for k, v in properties.items() if v is not None})


@functools.cache
def _only_properties(cls: type) -> bool:
    op_def = cls.get_irdl_definition()
    return not (op_def.operands or op_def.results or op_def.regions or op_def.successors) \
        and not any(isinstance(o, AttrSizedSegments) for o in op_def.options)


# Ops built by the thousand (kernels, task infos, Gemini records) from a prototype rather
# than by xDSL's generic builder. `Operation.create` sets operands, results and successors
# through their setters (which make use lists), adds regions one by one and fills default
# properties and attributes: about as much work per op as the lowering around it. An op of a
# class that has none of those besides its properties (and the regions given here) is the
# state `create` leaves it in with its own properties: `bare_op` copies the fields of a
# prototype made once by `create` (so they are xDSL's own) and sets the properties, the
# default ones filled in as `create` fills them. `tests/sched/test_plan_tables.py` and
# `tests/gemini/test_building.py` check that ops built so are the generic ones.

_PROTOTYPES: dict[type, tuple[dict, dict, dict]] = {}
"""By op class: (the fields `create()` gives an op, the default properties and the default
attributes it fills in)."""


def _prototype(cls: type[IRDLOperation]) -> tuple[dict, dict, dict]:
    """`cls`'s entry of `_PROTOTYPES`, made on first use."""
    found = _PROTOTYPES.get(cls)
    if found is None:
        definition = cls.get_irdl_definition()
        if definition.operands or definition.results or definition.successors:
            raise TypeError(f"{cls.__name__} is not built bare: it has operands, results or "
                            "successors")
        fields = dict(cls.create().__dict__)
        found = _PROTOTYPES[cls] = (fields, fields.pop("properties"), fields.pop("attributes"))
    return found


def bare_op(cls: type[IRDLOperation], properties: dict[str, Attribute],
            regions: Sequence[Region] = ()) -> Operation:
    """`cls.create(properties=properties, regions=regions)` for an op class without operands,
    results or successors."""
    fields, default_properties, default_attributes = _prototype(cls)
    op = cls.__new__(cls)
    state = op.__dict__
    state.update(fields)
    if default_properties:
        properties = {**properties, **{k: v for k, v in default_properties.items()
                                       if k not in properties}}
    else:
        properties = dict(properties)
    state["properties"] = properties
    state["attributes"] = dict(default_attributes)
    for region in regions:
        op.add_region(region)
    return op


def init_bare(op: IRDLOperation, properties: dict[str, Attribute],
              regions: Sequence[Region] = ()) -> None:
    """`IRDLOperation.__init__(op, properties=..., regions=...)` for an op class without
    operands, results or successors, as `bare_op` builds one: used by the constructors of ops
    an import makes by the hundred thousand (processor and resource groups of an ARK plan)."""
    fields, default_properties, default_attributes = _prototype(type(op))
    state = op.__dict__
    state.update(fields)
    if default_properties:
        properties = {**properties, **{k: v for k, v in default_properties.items()
                                       if k not in properties}}
    state["properties"] = properties
    state["attributes"] = dict(default_attributes)
    for region in regions:
        op.add_region(region)


def i64_attr(value: int) -> IntegerAttr:
    """`IntegerAttr(value, i64)`; in the signed range (where that constructor changes
    nothing) without its normalization and generic checks (the range check still runs)."""
    if type(value) is int and -(1 << 63) <= value < (1 << 63):
        return _shared_i64(value)
    return IntegerAttr(value, i64)


@functools.lru_cache(maxsize=4096)
def _shared_i64(value: int) -> IntegerAttr:
    """One attribute per recent value (attributes are immutable): an import of a million
    task groups repeats a few ids and granularities. Built bare: `i64_attr` checked the one
    thing the two attributes' verifiers check (a signed 64-bit int), and a plan of 30k
    TaskInfos makes a new one for every task id."""
    number = IntAttr.__new__(IntAttr)
    object.__setattr__(number, "data", value)
    attr = IntegerAttr.__new__(IntegerAttr)
    object.__setattr__(attr, "value", number)
    object.__setattr__(attr, "type", i64)
    return attr


INT_RANGE = (-(1 << 63), 1 << 64)
"""The integers MLIR text may hold where planc's dialects read one: the 64-bit range of every
format's JSON fields (signed, or unsigned as MSCCL++'s 2^64-1 sizes)."""


def parse_int(parser: BaseParser) -> int:
    """An integer of custom assembly (a shape, an id, a rank), refused with its location when
    outside `INT_RANGE`: the attribute built from it would otherwise fail with a ValueError
    (an internal error), or an unbounded `IntAttr` would carry it into every computation."""
    start = parser.pos
    value = parser.parse_integer()
    if not INT_RANGE[0] <= value < INT_RANGE[1]:
        parser.raise_error(f"integer {str(value)[:30]} is outside the 64-bit range "
                           "[-2^63, 2^64)", start, parser.pos)
    return value


def built(cls: type[AttrT], *parameters: Attribute) -> AttrT:
    """`cls(*parameters)` for callers that pass parameters of the declared kinds: xDSL's
    generic check of each parameter's kind (a third of an attribute's construction, done for
    hundreds of thousands of shapes and locations on a large import) is skipped; the
    attribute's own rules (`verify`) still run."""
    attr = cls.__new__(cls)
    for name, value in zip(_parameter_names(cls), parameters, strict=True):
        object.__setattr__(attr, name, value)
    attr.verify()
    return attr


@functools.cache
def _parameter_names(cls: type[ParametrizedAttribute]) -> tuple[str, ...]:
    """The names of `cls`'s parameters, in order, read once per class."""
    return tuple(name for name, _ in cls.get_irdl_definition().parameters)


class VerifyAt(VerifyException):
    """A verifier failure that belongs to a member of the op's JSON object, or to another op.

    `steps` extend the path of `op` (the failing op itself when None): a layout's verifier
    raising `VerifyAt("...", None, "shard")` is reported at `$.layouts.A.shard`, and a
    container op checking document-wide rules blames a child by passing that child op.
    """

    def __init__(self, message: str, op: Operation | None = None, *steps: str | int,
                 rule: str | None = None):
        super().__init__(message)
        self.op = op
        self.steps = steps
        self.rule = rule
        """The named rule this failure breaks (`planc check` reports it), when known."""


@dataclass(frozen=True)
class VerifierWarning:
    """Something legal but suspicious a verifier noticed: reported by `planc check` as a
    warning (an error under `--strict`), never a reason to refuse a document on import."""

    rule: str
    message: str
    op: Operation
    steps: tuple[str | int, ...] = ()


_WARNINGS: ContextVar[list[VerifierWarning] | None] = ContextVar("planc_warnings", default=None)


def warn(rule: str, message: str, op: Operation, *steps: str | int) -> None:
    """Report a warning from a verifier; dropped unless someone is `collecting_warnings()`
    (verifiers run on every import and after every pass, where warnings are not wanted)."""
    sink = _WARNINGS.get()
    if sink is not None:
        sink.append(VerifierWarning(rule, message, op, steps))


@contextmanager
def collecting_warnings() -> Iterator[list[VerifierWarning]]:
    """Collect the `warn()` calls of the verifiers run inside the block."""
    sink: list[VerifierWarning] = []
    token = _WARNINGS.set(sink)
    try:
        yield sink
    finally:
        _WARNINGS.reset(token)


def verify_first(ops: Iterable[Operation]) -> None:
    """Run the verifiers of `ops` now, blaming each failure on its own op.

    For a container whose document-wide rules only make sense once some children's own rules
    hold (the container's verifier runs before theirs).
    """
    done = _VERIFIED.get()
    for child in ops:
        if done is not None and id(child) in done:
            continue
        try:
            verify_op(child)
        except VerifyAt:
            raise
        except VerifyException as e:
            raise VerifyAt(str(e), child) from None
        if done is not None:
            done.add(id(child))


def verify_operation(op: Operation) -> tuple | None:
    """`op.verify()` (xDSL's checks of the op's place in its block, then its verifiers, a
    failure reported through `emit_error`), with the verifiers run by `verify_op`. Ops with
    regions or successors take `op.verify()` itself. Within `verifying_once`, the op is
    remembered as verified. Returns the verdict key of an operator verified the quick way
    (`ArkOp.verify_quickly`), else None."""
    if op.regions or op._successors:  # noqa: SLF001 -- `successors`, without its view object
        op.verify()
        return
    for operand in op._operands:  # noqa: SLF001 -- `operands`, a tuple
        if type(operand) is not OpResult and isinstance(operand, ErasedSSAValue):
            raise ValueError("Erased SSA value is used by the operation")
    block = op.parent
    region = None if block is None else block.parent
    if block is not None and region is not None and block._last_op is op:  # noqa: SLF001
        parent = region.parent
        if len(region.blocks) > 1 or (parent is not None and not parent.has_trait(NoTerminator)):
            op.verify()  # the terminator rules: xDSL's own words
            return
    verdict = None
    try:
        quick = getattr(type(op), "verify_quickly", None)  # see `ArkOp.verify_quickly`
        verdict = None if quick is None else quick(op)
        if not verdict:
            verify_op(op)
    except VerifyException as err:
        op.emit_error(f"Operation does not verify: {err}", err)
    done = _VERIFIED.get()
    if done is not None:
        done.add(id(op))
    return verdict if type(verdict) is tuple else None


_VERIFIED: ContextVar[set[int] | None] = ContextVar("planc_verified", default=None)
"""Ids of the ops verified so far by the running `verifying_once` walk."""


def verified_so_far() -> set[int] | None:
    """The ids of the ops the running `verifying_once` walk has verified (None outside one);
    a container that verifies its children itself adds them so the walk skips them."""
    return _VERIFIED.get()


@contextmanager
def verifying_once() -> Iterator[set[int]]:
    """While a module is verified op by op (nothing changes it meanwhile), the ops a parent
    verified early (`verify_first`) are collected in the yielded set, for the walk to skip."""
    done: set[int] = set()
    token = _VERIFIED.set(done)
    try:
        yield done
    finally:
        _VERIFIED.reset(token)


def op_list(block: Block) -> list[Operation]:
    """The ops of `block` in order, as a list: the linked list followed directly (`block.ops`
    steps through an iterator object and two properties per op, which is most of the cost
    when passes scan blocks of tens of thousands of ops)."""
    found: list[Operation] = []
    append = found.append
    op = block._first_op  # noqa: SLF001 -- the same walk `BlockOps` makes
    while op is not None:
        append(op)
        op = op._next_op  # noqa: SLF001
    return found


def walk_ops(root: Operation) -> list[Operation]:
    """`root` and every op nested in it, in pre-order (`Operation.walk`'s order), as a list:
    one generator per op, as `walk` makes, costs more than the visit on large modules."""
    found: list[Operation] = [root]
    if root.regions:
        _walk_regions(root, found, 0)
    return found


def _walk_regions(op: Operation, found: list[Operation], depth: int) -> None:
    """Append the ops nested in `op`, in pre-order, following the blocks' linked lists (a
    stack of ops past a nesting depth no document of planc's reaches, not recursion)."""
    if depth > 32:
        found += _walk_with_stack(op)[1:]
        return
    append = found.append
    for region in op.regions:
        block = region._first_block  # noqa: SLF001 -- `region.blocks`, followed directly
        while block is not None:
            child = block._first_op  # noqa: SLF001
            while child is not None:
                append(child)
                if child.regions:
                    _walk_regions(child, found, depth + 1)
                child = child._next_op  # noqa: SLF001
            block = block._next_block  # noqa: SLF001


def _walk_with_stack(root: Operation) -> list[Operation]:
    """`walk_ops` with a stack of ops, for any depth."""
    found: list[Operation] = []
    stack = [root]
    while stack:
        op = stack.pop()
        found.append(op)
        if op.regions:
            for region in reversed(op.regions):
                for block in reversed(region.blocks):
                    stack.extend(reversed(op_list(block)))
    return found


def body_block(region: Region) -> Block:
    """The single block of a container op's body.

    Container bodies are declared with `region_def()` rather than "single_block" because an
    empty `{}` in MLIR text parses to a region without blocks (a plan or model with nothing in
    it is legal); such a region gets its empty block here.
    """
    if not region.blocks:
        region.add_block(Block())
    return region.block


def single_root(module: ModuleOp, cls: type[RootT]) -> RootT:
    """The one top-level `cls` op of `module` (a document), or a PlancError."""
    roots = [op for op in module.ops if isinstance(op, cls)]
    if len(roots) != 1:
        raise PlancError(f"expected one {cls.name} in the module, found {len(roots)}")
    return roots[0]


OpT = TypeVar("OpT", bound=IRDLOperation)


def format_on_first_use(cls: type[OpT]) -> type[OpT]:
    """Class decorator, written under `@irdl_op_definition` (so applied before it): the op's
    `assembly_format` becomes parse and print methods that read the format when MLIR text is
    first parsed or printed, as IRDL's own methods do. IRDL reads formats when the class is
    defined, which loaded xDSL's format, text parser and printer modules (about 0.05 CPU s)
    into every planc run; compiling JSON prints no MLIR."""
    text = cls.__dict__["assembly_format"]
    cls.assembly_format = None
    program = None

    def load():
        nonlocal program
        if program is None:
            from xdsl.irdl.declarative_assembly_format import FormatProgram

            program = FormatProgram.from_str(text, cls.get_irdl_definition())
        return program

    def parse(op_cls, parser):
        return load().parse(parser, op_cls)

    def print_(self, printer) -> None:
        load().print(printer, self)

    cls.parse = classmethod(parse)
    cls.print = print_
    return cls
