"""`verify_op(op)`: what `op.verify_()` checks, at a third of the cost for planc's ops.

xDSL's generic verification of an IRDL op (operand, result, region and successor counts
against the op's definition, each argument's constraint, properties, attributes, traits) is
written for generality: every check re-reads the op's definition and unpacks its segment sizes
again, and it is half of the time planc spends verifying a large module. Here, per op class,
the definition is read once, segment sizes are unpacked once per attribute, and the count
rules are decided once per distinct segment sizes. Any doubt goes to xDSL: when a fast check
fails, xDSL's own `OpDef.verify` runs, so a failure is reported exactly as before; only ops
that pass both ways take the fast path. The op's own `verify_` runs unchanged after it.

The commonest constraints, "an attribute of class X" (`BaseAttr`) and "each of a range is"
one (`RangeOf(BaseAttr)`), are checked as the `isinstance` tests they are; a failure goes to
xDSL as above.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.dialects.builtin import DenseArrayBase, i32
from xdsl.ir import Operation
from xdsl.irdl import IRDLOperation
from xdsl.irdl.constraints import BaseAttr, RangeOf, VerificationContext
from xdsl.irdl.operations import (
    AttrSizedSegments,
    OpDef,
    OptAttributeDef,
    OptionalDef,
    OptPropertyDef,
    VariadicDef,
    VarIRConstruct,
    get_attr_size_option,
    irdl_op_verify_regions,
    verify_variadic_same_size,
    verify_variadic_size,
)
from xdsl.utils.exceptions import VerifyException


@dataclass
class _Arguments:
    """The operand (or result) definitions of an op class, read once."""

    op_def: OpDef
    construct: VarIRConstruct
    defs: list
    option: AttrSizedSegments | None
    sizes_by_length: dict[int, tuple[int, ...] | None] = field(default_factory=dict)
    valid_segments: dict[tuple[int, ...], bool] = field(default_factory=dict)
    bases: list = field(init=False)
    """Per definition, X when its constraint is "each value an X", else None."""

    def __post_init__(self) -> None:
        self.bases = [_range_base(d.constr) for _, d in self.defs]

    def sizes(self, op: Operation, length: int) -> tuple[int, ...] | None:
        """How many values each definition has, or None when the counts are wrong."""
        if self.option is None:
            if length not in self.sizes_by_length:
                self.sizes_by_length[length] = self._same_size(length)
            return self.sizes_by_length[length]
        attribute = self.option.container(op).get(self.option.attribute_name)
        if type(attribute) is not DenseArrayBase or attribute.elt_type is not i32:
            # Subclasses and other spellings of i32 are rare: the general tests decide.
            if not isinstance(attribute, DenseArrayBase) or attribute.elt_type != i32:
                return None
        sizes = attribute.__dict__.get("_planc_counts")
        if sizes is None:
            # Attributes are immutable: the unpacked values can stay with the attribute.
            sizes = attribute.__dict__["_planc_counts"] = tuple(attribute.get_values())
        valid = self.valid_segments.get(sizes)
        if valid is None:
            valid = self.valid_segments[sizes] = self._valid(sizes)
        return sizes if valid and sum(sizes) == length else None

    def _valid(self, sizes: tuple[int, ...]) -> bool:
        if len(sizes) != len(self.defs):
            return False
        for size, (_, d) in zip(sizes, self.defs, strict=True):
            if size < 0 or (isinstance(d, OptionalDef) and size not in (0, 1)):
                return False
            if not isinstance(d, VariadicDef) and size != 1:
                return False
        return True

    def _same_size(self, length: int) -> tuple[int, ...] | None:
        try:
            verify_variadic_same_size(length, self.op_def, self.construct, "")
        except VerifyException:
            return None
        variadic = [isinstance(d, VariadicDef) for _, d in self.defs]
        if not any(variadic):
            return tuple(1 for _ in self.defs)
        each = (length - len(self.defs) + sum(variadic)) // sum(variadic)
        return tuple(each if v else 1 for v in variadic)

    def ok(self, op: Operation, values, context: VerificationContext) -> bool:
        sizes = self.sizes(op, len(values))
        if sizes is None:
            return False
        start = 0
        for size, base, (_, d) in zip(sizes, self.bases, self.defs, strict=True):
            if base is None:
                d.constr.verify(tuple(v.type for v in values[start:start + size]), context)
            else:
                for v in values[start:start + size]:
                    if not isinstance(v.type, base):
                        return False
            start += size
        return True


def _range_base(constraint) -> type | None:
    """X when `constraint` is `RangeOf(BaseAttr(X))` (each value an X), else None."""
    if type(constraint) is RangeOf and type(constraint.constr) is BaseAttr:
        return constraint.constr.attr
    return None


def _checks(defs: dict) -> list[tuple[str, bool, type | None, object]]:
    """(name, optional, X or None, constraint) per property or attribute definition: X
    when the constraint is "an attribute of class X" (`BaseAttr`), an `isinstance` test."""
    return [(name, isinstance(d, OptPropertyDef | OptAttributeDef),
             d.constr.attr if type(d.constr) is BaseAttr else None, d.constr)
            for name, d in defs.items()]


def _meets(checks: list, values: dict, context: VerificationContext) -> bool:
    """Do `values` meet `checks` (missing optional ones aside)? Constraints other than
    `BaseAttr` run xDSL's check, which raises when it fails."""
    for name, optional, base, constraint in checks:
        value = values.get(name)
        if value is None:
            if optional:
                continue
            return False
        if base is not None:
            if not isinstance(value, base):
                return False
        else:
            constraint.verify(value, context)
    return True


@dataclass
class _Plan:
    op_def: OpDef
    operands: _Arguments
    results: _Arguments
    custom: Callable[[Operation], None] | None
    property_checks: list = field(init=False)
    attribute_checks: list = field(init=False)

    def __post_init__(self) -> None:
        self.property_checks = _checks(self.op_def.properties)
        self.attribute_checks = _checks(self.op_def.attributes)

    def generic_ok(self, op: Operation) -> bool:
        """Whether `op` meets its definition; False also when unsure (xDSL then decides)."""
        op_def = self.op_def
        context = VerificationContext()
        try:
            if not (self.operands.ok(op, op._operands, context)  # noqa: SLF001 (a tuple)
                    and self.results.ok(op, op.results, context)):
                return False
            if op.regions or op_def.regions:
                irdl_op_verify_regions(op, op_def, context)
            if op.successors or op_def.successors:
                verify_variadic_size(op, op_def, VarIRConstruct.SUCCESSOR)
            properties = op.properties
            if not (_meets(self.property_checks, properties, context)
                    and properties.keys() <= op_def.properties.keys()
                    and _meets(self.attribute_checks, op.attributes, context)):
                return False
        except VerifyException:
            return False
        return True


_PLANS: dict[type, _Plan | None] = {}


def _plan_of(cls: type) -> _Plan | None:
    if cls in _PLANS:
        return _PLANS[cls]
    plan = None
    verify = cls.__dict__.get("verify_")
    closure = dict(zip(getattr(getattr(verify, "__code__", None), "co_freevars", ()),
                       (c.cell_contents for c in getattr(verify, "__closure__", None) or ()),
                       strict=True))
    op_def = closure.get("op_def")
    if issubclass(cls, IRDLOperation) and isinstance(op_def, OpDef):
        def arguments(construct: VarIRConstruct, defs: list) -> _Arguments:
            option_type = get_attr_size_option(construct)
            option = next((o for o in op_def.options if isinstance(o, option_type)), None)
            return _Arguments(op_def, construct, list(defs), option)

        plan = _Plan(op_def, arguments(VarIRConstruct.OPERAND, op_def.operands),
                     arguments(VarIRConstruct.RESULT, op_def.results),
                     closure.get("custom_verify"))
    _PLANS[cls] = plan
    return plan


def verify_op(op: Operation) -> None:
    """`op.verify_()`, faster (see the module docstring)."""
    plan = _plan_of(type(op))
    if plan is None:
        op.verify_()
        return
    if plan.generic_ok(op):
        for trait in plan.op_def.traits:
            trait.verify(op)
    else:
        plan.op_def.verify(op)
    if plan.custom is not None:
        plan.custom(op)
