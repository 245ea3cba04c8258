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

from xdsl.dialects.builtin import ArrayAttr, ArrayOfConstraint, DenseArrayBase, i32
from xdsl.ir import BlockArgument, Operation, OpResult
from xdsl.irdl import IRDLOperation
from xdsl.irdl.constraints import (
    AllOf,
    AnyAttr,
    AnyOf,
    BaseAttr,
    EqAttrConstraint,
    ParamAttrConstraint,
    RangeLengthConstraint,
    RangeOf,
    VerificationContext,
)
from xdsl.irdl.operations import (
    AttrSizedSegments,
    OpDef,
    OptAttributeDef,
    OptionalDef,
    OptPropertyDef,
    RegionDef,
    SingleBlockRegionDef,
    VariadicDef,
    VarIRConstruct,
    get_attr_size_option,
    irdl_op_verify_regions,
    verify_variadic_same_size,
    verify_variadic_size,
)
from xdsl.traits import IsolatedFromAbove
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

    common_base: type | None = field(init=False)
    """X when every definition's constraint is "each value an X" (the values are then
    checked as one range, whatever the segment sizes)."""

    def __post_init__(self) -> None:
        self.bases = [_range_base(d.constr, single=not isinstance(d, VariadicDef))
                      for _, d in self.defs]
        distinct = set(self.bases)
        self.common_base = self.bases[0] if len(distinct) == 1 and None not in distinct \
            else None

    def sizes(self, op: Operation, length: int) -> tuple[int, ...] | None:
        """How many values each definition has, or None when the counts are wrong."""
        if self.option is None:
            if length not in self.sizes_by_length:
                self.sizes_by_length[length] = self._same_size(length)
            return self.sizes_by_length[length]
        option = self.option
        attribute = (op.properties if option.as_property else op.attributes).get(
            option.attribute_name)
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
        if not values and not self.defs and self.option is None:
            return True  # none declared, none given (most of planc's ops have no results)
        sizes = self.sizes(op, len(values))
        if sizes is None:
            return False
        base = self.common_base
        if base is not None:
            for v in values:
                kind = v.type
                if type(kind) is not base and not isinstance(kind, base):
                    return False
            return True
        start = 0
        values = tuple(values)  # plain slices (`SSAValues` rebuilds itself on each)
        for size, base, (_, d) in zip(sizes, self.bases, self.defs, strict=True):
            if base is None:
                d.constr.verify(tuple(v.type for v in values[start:start + size]), context)
            else:
                for v in values[start:start + size]:
                    if not isinstance(v.type, base):
                        return False
            start += size
        return True


def _range_base(constraint, *, single: bool = False) -> type | None:
    """X when `constraint` is `RangeOf(BaseAttr(X))` (each value an X), else None. For a
    `single` definition (one value: `sizes` made sure of it), a range of fixed length 1 of
    such values is one too."""
    if single and type(constraint) is RangeLengthConstraint \
            and not constraint.length.variables():
        try:
            constraint.verify_length(1, VerificationContext())
        except VerifyException:
            return None
        constraint = constraint.constraint
    if type(constraint) is RangeOf and type(constraint.constr) is BaseAttr:
        return constraint.constr.attr
    return None


@dataclass
class _Checks:
    """The property (or attribute) definitions of an op class, read once: the required
    names, and per name X when the constraint is "an attribute of class X" (`BaseAttr`, an
    `isinstance` test), else the constraint; per name whose constraint is "one of the
    classes X, Y, ..." (`AnyOf` plain `BaseAttr`s), the set of those classes."""

    required: tuple[str, ...]
    bases: dict[str, type | None]
    constraints: dict[str, object]
    classes: dict[str, frozenset[type]] = field(default_factory=dict)
    """By name: the classes an `AnyOf` of plain classes accepts, as xDSL's `AnyOf.verify`
    looks them up (the exact class of the value); a value of another class goes to xDSL."""
    arrays: dict[str, type] = field(default_factory=dict)
    """By name: X for a constraint "an `ArrayAttr` of X's" (`_array_test`)."""
    params: dict[str, tuple] = field(default_factory=dict)
    """By name: (class X, per parameter a class or an attribute) for a constraint "an X whose
    parameters are of these classes, or equal these attributes" (`ParamAttrConstraint` of
    `BaseAttr`s and `EqAttrConstraint`s: `IntegerAttr[I64]`, `DenseArrayBase[I64]`)."""

    @staticmethod
    def of(defs: dict) -> _Checks:
        return _Checks(
            tuple(name for name, d in defs.items()
                  if not isinstance(d, OptPropertyDef | OptAttributeDef)),
            {name: d.constr.attr if type(d.constr) is BaseAttr else None
             for name, d in defs.items()},
            {name: d.constr for name, d in defs.items()},
            {name: classes for name, d in defs.items()
             if (classes := _any_of_classes(d.constr)) is not None},
            {name: base for name, d in defs.items()
             if (base := _array_test(d.constr)) is not None},
            {name: _TESTS.setdefault(test, test) for name, d in defs.items()
             if (test := _parameter_test(d.constr)) is not None})

    def needs_context(self) -> bool:
        """Whether some constraint is checked by xDSL (with a `VerificationContext`)."""
        return any(base is None and name not in self.classes and name not in self.params
                   for name, base in self.bases.items())

    def met_by(self, values: dict, context: VerificationContext) -> bool:
        """Do `values` meet the definitions (missing optional ones aside)? Members no
        definition names are not looked at. Constraints other than `BaseAttr` run xDSL's
        check, which raises when it fails."""
        for name in self.required:
            if values.get(name) is None:
                return False
        bases = self.bases
        for name, value in values.items():
            if name not in bases:
                continue
            base = bases[name]
            if value is None:
                return False   # unusual: xDSL decides
            if base is not None:
                if type(value) is not base and not isinstance(value, base):
                    return False
            elif name in self.classes:
                if type(value) not in self.classes[name]:
                    return False   # xDSL decides (and words the failure)
            elif name in self.params:
                if not _meets_parameters(value, self.params[name]):
                    return False   # xDSL decides (and words the failure)
            else:
                self.constraints[name].verify(value, context)
        return True


def _parameter_test(constraint) -> tuple | None:
    """(X, per parameter the tests it must meet) when `constraint` is an X whose every
    parameter has a plain class (`BaseAttr`), is one attribute (`EqAttrConstraint`), or
    meets several such (`AllOf`, as `BoolAttr`'s i1); else None. A test is (True, class)
    or (False, attribute)."""
    if type(constraint) is not ParamAttrConstraint:
        return None
    wanted = []
    for param in constraint.param_constrs:
        parts = param.attr_constrs if type(param) is AllOf else (param,)
        tests = []
        for part in parts:
            if type(part) is BaseAttr:
                tests.append((True, part.attr))
            elif type(part) is EqAttrConstraint:
                tests.append((False, part.attr))
            else:
                return None
        wanted.append(tuple(tests))
    return constraint.base_attr, tuple(wanted)


def _array_test(constraint) -> type | None:
    """X when `constraint` is "an `ArrayAttr` of X's" (`ArrayOfConstraint` of a plain
    class, as `ArrayAttr[StringAttr]`); else None."""
    if type(constraint) is not ArrayOfConstraint:
        return None
    return _range_base(constraint.elem_range_constraint)


_TESTS: dict[tuple, tuple] = {}
"""One object per distinct `_parameter_test` (`IntegerAttr[I64]` of every op class is one),
which the attributes that met it remember (`_meets_parameters`)."""


def _meets_parameters(value, test: tuple) -> bool:
    """What `ParamAttrConstraint.verify` accepts (see `_parameter_test`); False when unsure.
    An attribute remembers the last test it met: attributes are immutable, and planc shares
    one per value where it builds many (`dialects.utils.i64_attr`, a partition's lists)."""
    state = getattr(value, "__dict__", None)
    if state is not None and state.get("_planc_meets") is test:
        return True
    base, wanted = test
    if not isinstance(value, base):
        return False
    parameters = value.parameters
    if len(parameters) != len(wanted):
        return False
    for param, tests in zip(parameters, wanted, strict=True):
        for is_class, want in tests:
            if is_class:
                if type(param) is not want and not isinstance(param, want):
                    return False
            elif param is not want and param != want:
                return False
    if state is not None:
        state["_planc_meets"] = test
    return True


def _any_of_classes(constraint) -> frozenset[type] | None:
    """The classes an `AnyOf` accepts when each of its members is a plain `BaseAttr` of a
    final class (xDSL then accepts a value iff its exact class is one of them); else None."""
    if type(constraint) is not AnyOf or constraint._abstr_constr is not None:  # noqa: SLF001
        return None
    based = constraint._based_constrs  # noqa: SLF001 -- the table `AnyOf.verify` reads
    if not all(type(c) is BaseAttr and c.attr is cls for cls, c in based.items()):
        return None
    return frozenset(based)


@dataclass
class _Plan:
    op_def: OpDef
    operands: _Arguments
    results: _Arguments
    custom: Callable[[Operation], None] | None
    property_checks: _Checks = field(init=False)
    attribute_checks: _Checks = field(init=False)

    needs_context: bool = field(init=False)
    """Whether some check is xDSL's own, which takes a `VerificationContext`."""
    property_names: frozenset[str] = field(init=False)
    has_regions: bool = field(init=False)
    has_successors: bool = field(init=False)
    classes: dict[str, type | frozenset[type]] | None = field(init=False)
    """For an op class declaring nothing but optional properties, each decided by class,
    and regions that take anything (see `_plain_regions`): per property, its class X (an
    `isinstance` test) or the set of classes it may be of (the exact class tested); else
    None."""
    region_count: int = field(init=False)
    """How many regions such an op has (one per definition)."""
    single_blocks: tuple[bool, ...] | None = field(init=False)
    """Per region definition, whether it is single-block, when each is one region taking any
    entry arguments and nothing sizes them (`_plain_regions`); else None (xDSL checks)."""
    direct: dict[str, tuple[int, object]] | None = field(init=False)
    """For an op class declaring no operands, results, successors or attributes, regions
    as `single_blocks` describes, and properties each decided by a direct test: per
    property (0, X) for "an X", (1, classes) for an `AnyOf` of classes, (2, test) for a
    `_parameter_test`, (3, X) for an array of X's; else None (the tt ops:
    `IntegerAttr[I64]`s, key orders and single blocks)."""

    def __post_init__(self) -> None:
        op_def = self.op_def
        self.property_checks = _Checks.of(op_def.properties)
        self.attribute_checks = _Checks.of(op_def.attributes)
        self.property_names = frozenset(op_def.properties)
        self.has_regions, self.has_successors = bool(op_def.regions), bool(op_def.successors)
        self.needs_context = self.has_regions or None in self.operands.bases \
            or None in self.results.bases or self.property_checks.needs_context() \
            or self.attribute_checks.needs_context()
        checks = self.property_checks
        self.classes = None
        self.region_count = len(op_def.regions)
        self.single_blocks = tuple(type(d) is SingleBlockRegionDef for _, d in op_def.regions) \
            if _plain_regions(op_def, single_block=True) else None
        if not (op_def.operands or op_def.results or op_def.successors
                or op_def.attributes or checks.required) and _plain_regions(op_def) \
                and all(base is not None or name in checks.classes
                        for name, base in checks.bases.items()):
            self.classes = {name: checks.classes.get(name, base)
                            for name, base in checks.bases.items()}
        self.direct = None
        if not (op_def.operands or op_def.results or op_def.successors or op_def.attributes) \
                and self.single_blocks is not None \
                and all(base is not None or name in checks.classes or name in checks.params
                        or name in checks.arrays for name, base in checks.bases.items()):
            self.direct = {name: (0, base) if base is not None else
                           (1, checks.classes[name]) if name in checks.classes else
                           (2, checks.params[name]) if name in checks.params else
                           (3, checks.arrays[name]) for name, base in checks.bases.items()}

    def generic_ok(self, op: Operation) -> bool:
        """Whether `op` meets its definition; False also when unsure (xDSL then decides)."""
        classes = self.classes
        if classes is not None and not (op._operands or op.results  # noqa: SLF001
                                        or op._successors) \
                and len(op.regions) == self.region_count:  # noqa: SLF001 (the line above)
            # What the general path below decides for such an op, in one loop: each
            # property is declared and of its class (the Gemini records and containers).
            for name, value in op.properties.items():
                wanted = classes.get(name)
                if wanted is None:
                    return False
                if type(wanted) is frozenset:
                    if type(value) not in wanted:
                        return False
                elif type(value) is not wanted and not isinstance(value, wanted):
                    return False
            return True
        if self.direct is not None and not (op._operands or op.results  # noqa: SLF001
                                            or op._successors):  # noqa: SLF001
            return self._direct_ok(op)
        op_def = self.op_def
        # Only xDSL's own checks use a context (they all run for an op that has regions).
        context = VerificationContext() if self.needs_context or op.regions else None
        try:
            if not (self.operands.ok(op, op._operands, context)  # noqa: SLF001 (a tuple)
                    and self.results.ok(op, op.results, context)):
                return False
            if op.regions or self.has_regions:
                if self.single_blocks is None:
                    irdl_op_verify_regions(op, op_def, context)
                elif not _regions_ok(op.regions, self.single_blocks):
                    return False
            if op._successors or self.has_successors:  # noqa: SLF001 (`successors`, a tuple)
                verify_variadic_size(op, op_def, VarIRConstruct.SUCCESSOR)
            properties = op.properties
            if not (self.property_checks.met_by(properties, context)
                    and properties.keys() <= self.property_names
                    and self.attribute_checks.met_by(op.attributes, context)):
                return False
        except VerifyException:
            return False
        return True


    def _direct_ok(self, op: Operation) -> bool:
        """What the general path of `generic_ok` decides for an op of a class with `direct`
        tests and no operands, results or successors, by those tests alone."""
        if not _regions_ok(op.regions, self.single_blocks):
            return False
        properties = op.properties
        for name in self.property_checks.required:
            if properties.get(name) is None:
                return False
        direct = self.direct
        for name, value in properties.items():
            test = direct.get(name)
            if test is None:
                return False            # not declared
            kind, wanted = test
            if kind == 0:
                if type(value) is not wanted and not isinstance(value, wanted):
                    return False
            elif kind == 1:
                if type(value) not in wanted:
                    return False
            elif kind == 2:
                if not _meets_parameters(value, wanted):
                    return False
            elif not isinstance(value, ArrayAttr) \
                    or not all(isinstance(item, wanted) for item in value.data):
                return False
        return True


def _plain_regions(op_def: OpDef, *, single_block: bool = False) -> bool:
    """Whether each region `op_def` declares is one region (neither optional, variadic nor,
    unless `single_block`, single-block) taking any entry arguments, and nothing sizes them:
    xDSL then asks of an op's regions that there be as many as declared, and one block in
    each single-block one (`irdl_op_verify_regions`)."""
    if any(isinstance(o, get_attr_size_option(VarIRConstruct.REGION)) for o in op_def.options):
        return False
    kinds = (RegionDef, SingleBlockRegionDef) if single_block else (RegionDef,)
    return all(type(d) in kinds and type(d.entry_args) is RangeOf
               and type(d.entry_args.constr) is AnyAttr for _, d in op_def.regions)


def _regions_ok(regions, single_blocks: tuple[bool, ...]) -> bool:
    """What `irdl_op_verify_regions` accepts of the regions of an op whose definitions are
    `single_blocks` (see `_Plan.single_blocks`); False when unsure."""
    if len(regions) != len(single_blocks):
        return False
    for region, single in zip(regions, single_blocks, strict=True):
        first = region._first_block  # noqa: SLF001 -- `len(region.blocks)` == 1, directly
        if single and (first is None or first is not region._last_block):  # noqa: SLF001
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


def _isolated(op: Operation) -> bool:
    """Whether `op` meets `IsolatedFromAbove` as xDSL checks it (every operand of the ops
    in its regions, down to nested isolated ops, which check themselves, is defined inside
    `op`); False also when unsure (xDSL's check then decides, with its message). The set of
    the blocks inside stands for xDSL's walk up the parents of each operand: a value is
    defined inside when the block holding its defining op (or owning it, for a block
    argument) is one of them."""
    blocks: set[int] = set()
    checked: list[Operation] = []
    regions = list(op.regions)
    while regions:
        for block in regions.pop().blocks:
            blocks.add(id(block))
            child = block._first_op  # noqa: SLF001 -- `block.ops`, followed directly
            while child is not None:
                checked.append(child)
                if child.regions and not child.has_trait(IsolatedFromAbove):
                    regions.extend(child.regions)
                child = child._next_op  # noqa: SLF001
    for child in checked:
        own = child.parent
        for operand in child._operands:  # noqa: SLF001 -- `operands`, a tuple
            if type(operand) is OpResult:
                block = operand.op.parent
                if block is own:  # the usual case: defined in the same block
                    continue
            elif type(operand) is BlockArgument:
                block = operand.block
            else:
                return False
            if block is None or id(block) not in blocks:
                return False
    return True


def plain_class_properties(cls: type) -> frozenset[str]:
    """The properties of op class `cls` whose generic check is "an attribute of class X"
    (it reads the attribute's class alone); none for a class this module does not plan."""
    plan = _plan_of(cls)
    if plan is None:
        return frozenset()
    return frozenset(name for name, base in plan.property_checks.bases.items()
                     if base is not None)


def verify_op(op: Operation) -> None:
    """`op.verify_()`, faster (see the module docstring)."""
    plan = _plan_of(type(op))
    if plan is None:
        op.verify_()
        return
    _verify_generic(plan, op)
    if plan.custom is not None:
        plan.custom(op)


def verify_generic(op: Operation) -> None:
    """The first half of `verify_op`: the op against its definition and traits, not its own
    `verify_` (for containers whose children's rules read each other's fields: all of them
    pass this half before any of them runs `verify_custom`)."""
    plan = _plan_of(type(op))
    if plan is not None:
        _verify_generic(plan, op)


def verify_custom(op: Operation) -> None:
    """The second half of `verify_op`: the op's own `verify_` (after `verify_generic`)."""
    plan = _plan_of(type(op))
    if plan is None:
        op.verify_()
    elif plan.custom is not None:
        plan.custom(op)


def _verify_generic(plan: _Plan, op: Operation) -> None:
    if plan.generic_ok(op):
        for trait in plan.op_def.traits:
            if type(trait) is IsolatedFromAbove and _isolated(op):
                continue
            trait.verify(op)
    else:
        plan.op_def.verify(op)
