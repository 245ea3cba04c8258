"""The `gemini` dialect: Gemini's scheduler IR (`*_stschedule.json`), one op per JSON object.

The scheduler IR is what Gemini's scheduler, address allocator and intra-core compiler hand to
the assembler of a multi-core DNN accelerator: per core an ordered list of *workloads* (one
computation tile of a layer each) with their input/output blocks, and the DRAM traffic. Here:

* `gemini.schedule` is the document: `buffersize` (L2 bytes per core), `top_batch_cut`,
  `xlen`/`ylen` (the core mesh); its region holds one `gemini.dram` (key "-1") and one
  `gemini.core` per core key ("0", "1", ...), each holding that core's `gemini.workload`s.
* `gemini.dram` holds `gemini.dram_store` (its "in" list: ofmap blocks written to DRAM) and
  `gemini.dram_load` (its "out" list: weight and fmap blocks read from DRAM).
* a `gemini.workload` holds its `gemini.ifmap`s, `gemini.ofmap`s, optional `gemini.weight`,
  the L2 snapshot before it starts (`gemini.l2_tensor`, the "buffer" list), the WL0 weight
  buffer snapshot (`gemini.wl0_tensor`) and the intra-core tiles (`gemini.tile`, "tile_info").
* ofmap/DRAM-load destinations and L2-tensor sources are `#gemini.dest` / `#gemini.source`.

Every JSON object maps to one record op (or attribute) whose fields are described by a `FIELDS`
table of (JSON key, property, kind); the importer and the exporter are driven by those tables,
and keys the table does not name are kept in `extra`. Quirks of real files survive: the WL0 list
may be called `wl1_buffer` or be `null`, `newly_added` may be missing, `tensor_order` may be null.

Blocks are inclusive [lower, upper] boxes over (N, C|K, H, W). Transfer ids link everything: an
ifmap names the transfers whose union it is; each transfer has exactly one producer (an ofmap of a
workload, or a DRAM load), and the producer lists the consuming workloads as destinations. The
verifiers check those links, that L2 snapshots never overlap and fit the buffer (ring regions
respected), dense workload ids, boxes inside the layer's tensor, and that `tensor_order` is a
permutation of the DRAM transfers with the documented sentinels.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar, TypeVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    BytesAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    FloatData,
    IntegerAttr,
    NoneAttr,
    NoneType,
    StringAttr,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, ParametrizedAttribute, Region
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    region_def,
    traits_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException

from dialects.fast_verify import verify_custom, verify_generic
from dialects.utils import (
    VerifyAt,
    bare_op,
    body_block,
    built,
    i64_attr,
    verified_so_far,
    walk_ops,
    warn,
)

DIMS = 4
LAYER_TYPES = ("pe", "vp", "dt")
WL0_KEYS = ("wl0_buffer", "wl1_buffer")
"""The WL0 snapshot's key: the format says wl0_buffer, the ResNet-34 files say wl1_buffer."""

# ---------------------------------------------------------------------------------------------
# Field tables: how JSON members map to properties
# ---------------------------------------------------------------------------------------------


class Kind(Enum):
    """The JSON shape of a field and the attribute that holds it."""

    INT = "an integer"                      # IntegerAttr i64
    INTS = "an array of integers"           # DenseArrayBase i64
    ROWS = "an array of integer arrays"     # ArrayAttr[DenseArrayBase]
    STR = "a string"                        # StringAttr
    BOOL = "a boolean"                      # IntegerAttr i1
    NUMBER = "a number"                     # IntegerAttr i64 or FloatAttr f64, as written
    ORDER = "an integer or null"            # IntegerAttr i64 or NoneAttr
    DESTS = "an array of destinations"      # ArrayAttr[DestinationAttr]
    SOURCES = "an array of sources"         # ArrayAttr[SourceAttr]


@dataclass(frozen=True)
class Field:
    key: str
    """The JSON member name."""
    prop: str
    """The property (or attribute parameter) that holds it."""
    kind: Kind
    required: bool = False


def _constraint(kind: Kind):
    match kind:
        case Kind.INT | Kind.BOOL:
            return IntegerAttr
        case Kind.INTS:
            return DenseArrayBase
        case Kind.ROWS | Kind.DESTS | Kind.SOURCES:
            return ArrayAttr
        case Kind.STR:
            return StringAttr
        case Kind.NUMBER:
            return IntegerAttr | FloatAttr
        case Kind.ORDER:
            return IntegerAttr | NoneAttr | NoneType


# -- small attribute helpers used by the whole toolchain --------------------------------------


def _ops_of(block: Block, kind: type[_Op]) -> list[_Op]:
    """The ops of `kind` (or a subclass) in `block`, in order: a walk of the block's list
    without xDSL's iterator objects (the passes ask for them thousands of times)."""
    found = []
    op = block._first_op  # noqa: SLF001 -- `first_op`/`next_op` without their properties
    while op is not None:
        if isinstance(op, kind):
            found.append(op)
        op = op._next_op  # noqa: SLF001
    return found


def _body_block(op: Operation) -> Block:
    """`op.body.block` for a container op with one region: the region read directly (IRDL's
    accessor looks the op's definition up on each read). An empty region (`{}` in MLIR text)
    gets its empty block, as `body_block` gives it; a region of several blocks (MLIR text with
    `^bb1:`) is the input's error, found by whichever verifier asks first (xDSL's accessor
    raised a ValueError, an internal error)."""
    regions = op.regions
    if len(regions) == 1:
        block = regions[0]._first_block  # noqa: SLF001 -- what `Region.block` checks
        if block is not None and block is regions[0]._last_block:  # noqa: SLF001
            return block
        if block is not None:
            raise VerifyException(f"'{op.name}' holds one block, got "
                                  f"{len(regions[0].blocks)}")
        return body_block(regions[0])
    return op.body.block


@functools.cache
def _none_attr() -> NoneAttr:
    return NoneAttr()


@functools.cache
def _empty_dict() -> DictionaryAttr:
    return DictionaryAttr({})


@functools.lru_cache(maxsize=1 << 16)
def int_attr(value: int) -> IntegerAttr:
    # Attributes are immutable: one object per value spares xDSL's construction and checks.
    return i64_attr(value)


@functools.lru_cache(maxsize=4)
def bool_attr(value: bool) -> IntegerAttr:
    return IntegerAttr(int(value), i1)


def ints_attr(values: Iterable[int]) -> DenseArrayBase:
    return _ints_attr(tuple(values))


@functools.lru_cache(maxsize=1 << 16)
def _ints_attr(values: tuple[int, ...]) -> DenseArrayBase:
    if all(type(v) is int and _I64_MIN <= v <= _I64_MAX for v in values):
        # What `from_list` makes of plain i64 values (it normalizes nothing in that range),
        # without xDSL's generic parameter checks; the array's own `verify` still runs. The
        # values are kept on it as `_values` would keep them.
        attr = built(DenseArrayBase, i64, BytesAttr(struct.pack(f"<{len(values)}q", *values)))
        attr.__dict__["_planc_values"] = values
        return attr
    return DenseArrayBase.from_list(i64, list(values))


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


@functools.lru_cache(maxsize=256)
def _keys_attr(keys: tuple[str, ...]) -> ArrayAttr:
    """The `lists` attribute naming `keys`: one object per tuple of names (a few kinds are
    given to every workload)."""
    return ArrayAttr([StringAttr(k) for k in keys])


def _keys_of(attr: ArrayAttr) -> tuple[str, ...]:
    """The names in a `lists` attribute, kept on the (immutable) attribute as `_values` keeps
    an array's values: the passes and the verifier ask each workload several times."""
    keys = attr.__dict__.get("_planc_keys")
    if keys is None:
        keys = attr.__dict__["_planc_keys"] = tuple(a.data for a in attr.data)
    return keys


def rows_attr(rows: Iterable[Iterable[int]]) -> ArrayAttr:
    return ArrayAttr([ints_attr(r) for r in rows])


def number_attr(value: int | float) -> IntegerAttr | FloatAttr:
    if type(value) is float:
        # `FloatAttr(value, f64)` rounds the value to a double, which a Python float is:
        # without that round trip and xDSL's generic checks (the attribute's `verify` runs).
        return built(FloatAttr, FloatData(value), f64)
    return FloatAttr(value, f64) if isinstance(value, float) else i64_attr(value)


@functools.lru_cache(maxsize=1 << 12)
def str_attr(text: str) -> StringAttr:
    """`StringAttr(text)`, one object per text (attributes are immutable): layer names,
    kinds and sources are given to thousands of records."""
    return StringAttr(text)


def ints(attr: DenseArrayBase | None) -> list[int]:
    if attr is None:
        return []
    # `_values` inline (passes and the verifier ask ~170k times on a 4x4 ResNet-34).
    values = attr.__dict__.get("_planc_values")
    return list(_values(attr) if values is None else values)


def _values(attr: DenseArrayBase) -> tuple[int, ...]:
    # Passes read the same boxes again and again: the unpacked values are kept on the
    # (immutable) attribute itself. A cache keyed by the attribute would hash its bytes on
    # every lookup, which cost more than the unpacking (6M hash calls on a 4x4 ResNet-34).
    values = attr.__dict__.get("_planc_values")
    if values is None:
        values = tuple(attr.get_values())
        attr.__dict__["_planc_values"] = values
    return values


def rows(attr: ArrayAttr | None) -> list[list[int]]:
    if attr is None:
        return []
    # Kept on the (immutable) attribute as `_values` keeps an array's values: the passes
    # and the verifier read each workload's box ~20 times.
    found = attr.__dict__.get("_planc_rows")
    if found is None:
        found = attr.__dict__["_planc_rows"] = tuple(tuple(ints(r)) for r in attr.data)
    return [list(r) for r in found]


def value_of(attr: Attribute | None):
    """The plain Python value of a field attribute (None when absent or null)."""
    if attr is None:
        return None
    kind = type(attr)
    if kind is IntegerAttr or kind is FloatAttr:
        return attr.value.data
    if kind is StringAttr:
        return attr.data
    if kind is NoneAttr or kind is NoneType:
        # A JSON null; xDSL prints NoneAttr as `none`, which parses back as the NoneType.
        return None
    if isinstance(attr, DenseArrayBase):
        return ints(attr)
    raise TypeError(f"no plain value for {attr}")


def box_size(lower: Sequence[int], upper: Sequence[int]) -> list[int]:
    return [hi - lo + 1 for lo, hi in zip(lower, upper, strict=False)]


def tensor_bytes(lower: Sequence[int], upper: Sequence[int], align: int, bitwidth: int) -> int:
    """Bytes of an NCHW box whose channels are padded to a multiple of `align`."""
    n, c, h, w = box_size(lower, upper)
    return n * -(-c // align) * align * h * w * bitwidth // 8


def _check_box(lower: Sequence[int], upper: Sequence[int], what: str = "") -> None:
    if len(lower) != DIMS or len(upper) != DIMS:
        prefix = f"{what}: " if what else ""
        raise VerifyException(f"{prefix}lower and upper must have {DIMS} coordinates (N, C, H, "
                              f"W), got {len(lower)} and {len(upper)}")
    # Unrolled for the 4 coordinates: a schedule checks tens of thousands of boxes.
    n0, c0, h0, w0 = lower
    n1, c1, h1, w1 = upper
    if n0 < 0 or c0 < 0 or h0 < 0 or w0 < 0:
        raise VerifyException(f"{what + ': ' if what else ''}lower {list(lower)} has a "
                              f"negative coordinate")
    if n0 > n1 or c0 > c1 or h0 > h1 or w0 > w1:
        raise VerifyException(f"{what + ': ' if what else ''}lower {list(lower)} is not <= "
                              f"upper {list(upper)}")


def _inside(lower: Sequence[int], upper: Sequence[int], outer_lo: Sequence[int],
            outer_hi: Sequence[int]) -> bool:
    if len(lower) == len(upper) == len(outer_lo) == len(outer_hi) == DIMS:
        # Unrolled for the usual 4 coordinates (the verifier tests ~24k boxes).
        a0, a1, a2, a3 = lower
        b0, b1, b2, b3 = upper
        c0, c1, c2, c3 = outer_lo
        d0, d1, d2, d3 = outer_hi
        return (c0 <= a0 and b0 <= d0 and c1 <= a1 and b1 <= d1 and c2 <= a2 and b2 <= d2
                and c3 <= a3 and b3 <= d3)
    return all(ol <= lo and hi <= ou
               for lo, hi, ol, ou in zip(lower, upper, outer_lo, outer_hi, strict=False))


# ---------------------------------------------------------------------------------------------
# Record attributes: destinations and sources
# ---------------------------------------------------------------------------------------------


class RecordAttr(ParametrizedAttribute):
    """An attribute for a small JSON object; absent optional members are `none` parameters.

    Syntax: `#gemini.dest<type = "core", core_id = 0, workload_id = 2>` (absent fields omitted).
    """

    FIELDS: ClassVar[tuple[Field, ...]]

    @classmethod
    def from_fields(cls, values: dict[str, Attribute], extra: DictionaryAttr | None = None):
        none = _none_attr()
        params = [values.get(f.prop, none) for f in cls.FIELDS]
        extra = extra or _empty_dict()
        if type(extra) is not DictionaryAttr:
            return cls(*params, extra)  # xDSL's generic check reports it
        # The fields' generic constraint is "any attribute", which checks nothing: `built`
        # skips it and runs the record's own `verify`.
        return built(cls, *params, extra)

    def field(self, prop: str) -> Attribute | None:
        value = getattr(self, prop)
        kind = type(value)
        if kind is IntegerAttr or kind is StringAttr:
            return value  # the usual cases, without `isinstance`'s ABC walk on a miss
        return None if isinstance(value, NoneAttr) else value

    def print_parameters(self, printer: Printer) -> None:
        items = [(f.prop, getattr(self, f.prop)) for f in self.FIELDS]
        if self.extra.data:
            items.append(("extra", self.extra))
        shown = [(k, v) for k, v in items if not isinstance(v, NoneAttr)]
        printer.print_string("<")
        for i, (key, value) in enumerate(shown):
            printer.print_string(f"{', ' if i else ''}{key} = ")
            if isinstance(value, IntegerAttr) and value.type == i64:
                printer.print_string(str(value.value.data))
            else:
                printer.print_attribute(value)
        printer.print_string(">")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        values: dict[str, Attribute] = {}

        def parse_item() -> None:
            key = parser.parse_identifier()
            parser.parse_punctuation("=")
            values[key] = parser.parse_attribute()

        parser.parse_comma_separated_list(parser.Delimiter.ANGLE, parse_item)
        known = {f.prop for f in cls.FIELDS} | {"extra"}
        for key in values:
            if key not in known:
                parser.raise_error(f"unknown field '{key}' of {cls.name}")
        extra = values.pop("extra", DictionaryAttr({}))
        return [values.get(f.prop, NoneAttr()) for f in cls.FIELDS] + [extra]

    def verify(self) -> None:
        for prop, key, required, wanted, what in _attr_fields(type(self)):
            value = getattr(self, prop)
            if type(value) is wanted:
                continue  # of the wanted class, so no NoneAttr: what the tests below decide
            if isinstance(value, NoneAttr):
                if required:
                    raise VerifyException(f"{self.name}: missing required field '{key}'")
            elif not isinstance(value, wanted):
                raise VerifyException(f"{self.name}: field '{key}' must be {what}")


@functools.cache
def _attr_fields(cls: type[RecordAttr]) -> tuple[tuple[str, str, bool, object, str], ...]:
    """A record attribute class's fields as (prop, key, required, attribute class, what),
    read once per class: thousands of sources and destinations are verified as they are made.
    """
    return tuple((f.prop, f.key, f.required, _constraint(f.kind), f.kind.value)
                 for f in cls.FIELDS)


@irdl_attr_definition
class DestinationAttr(RecordAttr):
    """Where a block goes: `type` "core" (a workload of a core) or "DRAM" (core_id -1)."""

    name = "gemini.dest"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("core_id", "core_id", Kind.INT, True),
        Field("layer_name", "layer_name", Kind.STR),
        Field("type", "kind", Kind.STR, True),
        Field("workload_id", "workload_id", Kind.INT),
    )
    core_id: Attribute
    layer_name: Attribute
    kind: Attribute
    workload_id: Attribute
    extra: DictionaryAttr

    @property
    def to_dram(self) -> bool:
        found = self.__dict__.get("_planc_dram")
        if found is None:
            found = self.__dict__["_planc_dram"] = value_of(self.kind) == "DRAM"
        return found

    @property
    def target(self) -> tuple[int, int | None]:
        """(core id, workload id) of a core destination."""
        # Kept on the (immutable) attribute, as `_values` does: the verifier asks each
        # destination for its target several times per consumer.
        found = self.__dict__.get("_planc_target")
        if found is None:
            found = value_of(self.core_id), value_of(self.field("workload_id"))
            self.__dict__["_planc_target"] = found
        return found

    @staticmethod
    @functools.lru_cache(maxsize=1 << 16)
    def core(core_id: int, workload_id: int, layer_name: str | None = None) -> DestinationAttr:
        values = {"core_id": int_attr(core_id), "kind": str_attr("core"),
                  "workload_id": int_attr(workload_id)}
        if layer_name is not None:
            values["layer_name"] = str_attr(layer_name)
        return DestinationAttr.from_fields(values)

    @staticmethod
    def dram() -> DestinationAttr:
        return DestinationAttr.from_fields({"core_id": int_attr(-1), "kind": StringAttr("DRAM")})

    def verify(self) -> None:
        super().verify()
        kind = value_of(self.kind)
        if kind not in ("core", "DRAM"):
            raise VerifyException(f"destination type must be \"core\" or \"DRAM\", got "
                                  f"\"{kind}\"")
        if kind == "core" and isinstance(self.workload_id, NoneAttr):
            raise VerifyException("a core destination needs a workload_id")


@irdl_attr_definition
class SourceAttr(RecordAttr):
    """One producer block of an L2 tensor: from DRAM (core_id -1) or from a core's ofmap."""

    name = "gemini.source"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("core_id", "core_id", Kind.INT, True),
        Field("layer_name", "layer_name", Kind.STR),
        Field("lower", "lower", Kind.INTS, True),
        Field("size", "size", Kind.INT, True),
        Field("transfer_id", "transfer_id", Kind.INT, True),
        Field("type", "kind", Kind.STR, True),
        Field("upper", "upper", Kind.INTS, True),
    )
    core_id: Attribute
    layer_name: Attribute
    lower: Attribute
    size: Attribute
    transfer_id: Attribute
    kind: Attribute
    upper: Attribute
    extra: DictionaryAttr

    @property
    def from_dram(self) -> bool:
        return value_of(self.kind) == "DRAM"

    def verify(self) -> None:
        super().verify()
        kind = value_of(self.kind)
        if kind not in ("core", "DRAM"):
            raise VerifyException(f"source type must be \"core\" or \"DRAM\", got \"{kind}\"")
        _check_box(ints(self.lower), ints(self.upper))


# ---------------------------------------------------------------------------------------------
# Record ops
# ---------------------------------------------------------------------------------------------

_Op = TypeVar("_Op", bound=type)


def record(*fields: Field):
    """Declare a record op's JSON fields: one property each, plus `extra` for unknown keys."""

    def define(cls: _Op) -> _Op:
        annotations = dict(cls.__dict__.get("__annotations__", {}))
        annotations["FIELDS"] = ClassVar[tuple[Field, ...]]
        cls.__annotations__ = annotations
        cls.FIELDS = fields
        for f in fields:
            setattr(cls, f.prop, opt_prop_def(_constraint(f.kind)))
        cls.extra = opt_prop_def(DictionaryAttr)
        cls.irdl_options = (ParsePropInAttrDict(),)
        if "assembly_format" not in cls.__dict__:
            cls.assembly_format = "attr-dict"
        return irdl_op_definition(cls)

    return define


_XDSL_BUILD_ARGS = frozenset(("operands", "result_types", "attributes", "properties",
                              "successors", "regions"))


@functools.cache
def _field_tables(cls: type) -> tuple[tuple[tuple[str, str], ...],
                                       tuple[tuple[str, str, type], ...]]:
    """A record class's (prop, key) of required fields and (prop, key, attribute class) of
    destination/source lists, in `FIELDS` order: read once per class, not per op."""
    required = tuple((f.prop, f.key) for f in cls.FIELDS if f.required)
    lists = tuple((f.prop, f.key, DestinationAttr if f.kind is Kind.DESTS else SourceAttr)
                  for f in cls.FIELDS if f.kind in (Kind.DESTS, Kind.SOURCES))
    return required, lists


class RecordOp(IRDLOperation):
    """An op standing for one JSON object of the IR (see `FIELDS`)."""

    FIELDS: ClassVar[tuple[Field, ...]] = ()

    @classmethod
    def build(cls, extra: DictionaryAttr | None = None, **values: Attribute | None):
        """The op of one JSON object, from its members' attributes by property name."""
        if _XDSL_BUILD_ARGS.intersection(values):
            # xDSL's own `build` (the declarative assembly format's parser calls it).
            return super().build(**values)
        props = {k: v for k, v in values.items() if v is not None}
        if extra is not None and extra.data:
            props["extra"] = extra
        # What `create` makes of it (a record op has no operands, results or successors).
        return bare_op(cls, props)

    def value(self, prop: str):
        attr = self.properties.get(prop)
        # `value_of`'s two usual cases inline: the verifier reads ~85k fields of a schedule.
        kind = type(attr)
        if kind is IntegerAttr:
            return attr.value.data
        if kind is StringAttr:
            return attr.data
        return value_of(attr)

    def ints_of(self, prop: str) -> list[int]:
        return ints(self.properties.get(prop))

    def verify_(self) -> None:
        self.check()

    def check(self) -> None:
        """The record's own rules (without xDSL's generic property checks)."""
        properties = self.properties
        self.check_required()
        _, lists = _field_tables(type(self))
        if "lower" in properties or "upper" in properties:
            lower, upper = properties.get("lower"), properties.get("upper")
            _check_box(() if lower is None else _values(lower),
                       () if upper is None else _values(upper))
        for prop, key, wanted in lists:
            attr = properties.get(prop)
            # A list found to hold only `wanted` items says so on itself (attributes are
            # immutable): an L2 tensor's sources are shared by its snapshots.
            if attr is not None and attr.__dict__.get("_planc_items") is not wanted:
                for i, item in enumerate(attr.data):
                    if not isinstance(item, wanted):
                        raise VerifyAt(f"expected a {wanted.name} attribute", None, key, i)
                attr.__dict__["_planc_items"] = wanted

    def check_required(self) -> None:
        """Every required member is there (a container's rules read its records' members)."""
        properties = self.properties
        for prop, key in _field_tables(type(self))[0]:
            if prop not in properties:
                raise VerifyException(f"missing required key '{key}'")

    def check_choice(self, prop: str, key: str, choices: tuple[str, ...]) -> None:
        value = self.value(prop)
        if value is not None and value not in choices:
            options = ", ".join(f'"{c}"' for c in choices)
            raise VerifyAt(f"expected one of {options}, got \"{value}\"", None, key)

    @property
    def transfer_ids(self) -> list[int]:
        attr = self.properties.get("transfer_id")
        if isinstance(attr, DenseArrayBase):
            return ints(attr)
        return [] if attr is None else [attr.value.data]

    @property
    def destinations(self) -> list[DestinationAttr]:
        attr = self.properties.get("destination")
        return [] if attr is None else list(attr.data)

    def set(self, prop: str, attr: Attribute | None) -> None:
        if attr is None:
            self.properties.pop(prop, None)
        else:
            self.properties[prop] = attr


@record(
    Field("core_id", "core_id", Kind.INT, True),
    Field("layer_name", "layer_name", Kind.STR, True),
    Field("lower", "lower", Kind.INTS, True),
    Field("related_ofmap", "related_ofmap", Kind.INTS),
    Field("transfer_id", "transfer_id", Kind.INT, True),
    Field("upper", "upper", Kind.INTS, True),
    Field("workload_id", "workload_id", Kind.INT, True),
)
class DramStoreOp(RecordOp):
    """An entry of DRAM "in": ofmap block `transfer_id` of a workload is written to DRAM.

    `lower`/`upper` are absolute in the layer's ofmap; `related_ofmap` lists the DRAM loads
    that later read (part of) this block (missing in some real files when there is none).
    """

    name = "gemini.dram_store"


@record(
    Field("destination", "destination", Kind.DESTS, True),
    Field("lower", "lower", Kind.INTS, True),
    Field("related_ifmap", "related_ifmap", Kind.INTS),
    Field("size", "size", Kind.INT, True),
    Field("transfer_id", "transfer_id", Kind.INT, True),
    Field("type", "kind", Kind.STR, True),
    Field("upper", "upper", Kind.INTS, True),
)
class DramLoadOp(RecordOp):
    """An entry of DRAM "out": a weight or fmap block read from DRAM for the destinations.

    Fmap coordinates are absolute in the consuming layer's ifmap; weights are
    [0, K-1, C-1, R*S-1] (flattened kernel). `related_ifmap` lists the DRAM stores it reads.
    """

    name = "gemini.dram_load"

    def check(self) -> None:
        super().check()
        self.check_choice("kind", "type", ("weight", "fmap"))
        for i, dest in enumerate(self.destinations):
            if dest.to_dram:
                raise VerifyAt("a DRAM load must go to a core workload", None, "destination", i)


@record(
    Field("align", "align", Kind.INT),
    Field("bitwidth", "bitwidth", Kind.INT),
    Field("lower", "lower", Kind.INTS, True),
    Field("size", "size", Kind.INT, True),
    Field("transfer_id", "transfer_id", Kind.INTS, True),
    Field("upper", "upper", Kind.INTS, True),
)
class IfmapOp(RecordOp):
    """An input of the workload: the union of blocks `transfer_id`, held in one L2 tensor.

    Coordinates are relative to that L2 tensor; channels are padded to `align`, elements are
    `bitwidth` bits, `size` is in bytes.
    """

    name = "gemini.ifmap"

    def check(self) -> None:
        super().check()
        _check_layout(self)
        if not self.transfer_ids:
            raise VerifyAt("an ifmap needs at least one transfer id", None, "transfer_id")


@record(
    Field("destination", "destination", Kind.DESTS, True),
    Field("lower", "lower", Kind.INTS, True),
    Field("size", "size", Kind.INT, True),
    Field("transfer_id", "transfer_id", Kind.INT, True),
    Field("upper", "upper", Kind.INTS, True),
)
class OfmapOp(RecordOp):
    """An output block of the workload (coordinates relative to its output tile), sent to each
    destination: a core workload or DRAM."""

    name = "gemini.ofmap"

    def check(self) -> None:
        super().check()
        if not self.destinations:
            raise VerifyAt("an ofmap block needs at least one destination", None, "destination")


@record(
    Field("lower", "lower", Kind.INTS, True),
    Field("size", "size", Kind.INT, True),
    Field("transfer_id", "transfer_id", Kind.INTS, True),
    Field("upper", "upper", Kind.INTS, True),
)
class WeightOp(RecordOp):
    """The weights of a PE workload: K range x C x R*S, `size` bytes including 32 bytes of
    BatchNorm/quantisation parameters per output channel."""

    name = "gemini.weight"


@record(
    Field("address", "address", Kind.INT, True),
    Field("align", "align", Kind.INT),
    Field("bitwidth", "bitwidth", Kind.INT),
    Field("cur_wl_ifmap", "cur_wl_ifmap", Kind.BOOL),
    Field("layer_name", "layer_name", Kind.STR),
    Field("lower", "lower", Kind.INTS),
    Field("newly_added", "newly_added", Kind.BOOL),
    Field("size", "size", Kind.INT, True),
    Field("source", "source", Kind.SOURCES),
    Field("start_send", "start_send", Kind.BOOL),
    Field("tensor_id", "tensor_id", Kind.INT, True),
    Field("tensor_order", "tensor_order", Kind.ORDER),
    Field("transfer_id", "transfer_id", Kind.INTS),
    Field("type", "kind", Kind.STR, True),
    Field("upper", "upper", Kind.INTS),
)
class L2TensorOp(RecordOp):
    """A tensor in the core's L2 buffer when the workload starts ("buffer" list entry).

    `type` "ifmap": a consumer-side input (from DRAM or assembled from core blocks listed in
    `source`); "weight": weights staged in L2; "ofmap": a staging copy of an output being
    stored to DRAM (`start_send`). `tensor_order` is the tensor's position in the DRAM queue
    (the sentinel M = number of DRAM transfers for tensors that never touch DRAM).
    """

    name = "gemini.l2_tensor"

    @property
    def end(self) -> int:
        return self.value("address") + self.value("size")

    @property
    def sources(self) -> list[SourceAttr]:
        attr = self.properties.get("source")
        return [] if attr is None else list(attr.data)

    @property
    def from_dram(self) -> bool:
        srcs = self.sources
        return bool(srcs) and all(s.from_dram for s in srcs)

    def check(self) -> None:
        super().check()
        self.check_choice("kind", "type", ("ifmap", "ofmap", "weight"))
        _check_layout(self)
        if self.value("address") < 0:
            raise VerifyAt("address must be >= 0", None, "address")
        srcs = self.sources
        if srcs:
            # The rules below read the sources, transfer ids and box alone: an L2 tensor
            # listed in several snapshots shares those attributes, which are immutable, so a
            # combination that passed is remembered on the sources (holding the others, so
            # that their ids stay theirs) and not checked again.
            properties = self.properties
            held = properties["source"].__dict__.get("_planc_fits")
            fits = (properties.get("transfer_id"), properties.get("lower"),
                    properties.get("upper"))
            if held is None or held[0] is not fits[0] or held[1] is not fits[1] \
                    or held[2] is not fits[2]:
                self._check_sources(srcs)
                properties["source"].__dict__["_planc_fits"] = fits

    def _check_sources(self, srcs: list[SourceAttr]) -> None:
        """The sources carry the tensor's transfer ids and lie inside its box."""
        ids = {s.transfer_id.value.data for s in srcs}
        if ids != set(self.transfer_ids):
            raise VerifyAt(f"the sources' transfer ids {sorted(ids)} must be the tensor's "
                           f"transfer ids {sorted(set(self.transfer_ids))}", None, "source")
        lower, upper = self.ints_of("lower"), self.ints_of("upper")
        for i, s in enumerate(srcs):
            if lower and not _inside(_values(s.lower), _values(s.upper), lower, upper):
                raise VerifyAt(f"source block {ints(s.lower)}..{ints(s.upper)} is outside "
                               f"the tensor {lower}..{upper}", None, "source", i)


@record(
    Field("address", "address", Kind.INT, True),
    Field("align", "align", Kind.INT),
    Field("bitwidth", "bitwidth", Kind.INT),
    Field("layer_name", "layer_name", Kind.STR),
    Field("lower", "lower", Kind.INTS),
    Field("size", "size", Kind.INT, True),
    Field("source", "source", Kind.STR, True),
    Field("tensor_order", "tensor_order", Kind.ORDER),
    Field("transfer_id", "transfer_id", Kind.INTS, True),
    Field("upper", "upper", Kind.INTS),
)
class Wl0TensorOp(RecordOp):
    """Weights in the PE's WL0 buffer: read straight from DRAM ("DDR", whole layer) or
    streamed from L2 per intra-core tile ("CORE", `tensor_order` null)."""

    name = "gemini.wl0_tensor"

    @property
    def end(self) -> int:
        return self.value("address") + self.value("size")

    def check(self) -> None:
        super().check()
        self.check_choice("source", "source", ("DDR", "CORE"))
        if self.value("source") == "CORE" and self.value("tensor_order") is not None:
            raise VerifyAt("a WL0 tensor fed from L2 (CORE) has tensor_order null", None,
                           "tensor_order")


@record(
    Field("act_mini_tile", "act_mini_tile", Kind.INTS),
    Field("ci_cut_num", "ci_cut_num", Kind.INT),
    Field("cut_mode", "cut_mode", Kind.STR),
    Field("ifmap_lower", "ifmap_lower", Kind.INTS),
    Field("ifmap_lower2", "ifmap_lower2", Kind.INTS),
    Field("ifmap_upper", "ifmap_upper", Kind.INTS),
    Field("ifmap_upper2", "ifmap_upper2", Kind.INTS),
    Field("layer_name", "layer_name", Kind.STR),
    Field("loop_order", "loop_order", Kind.STR),
    Field("mtc0_mtk0", "mtc0_mtk0", Kind.INTS),
    Field("ofmap_lower", "ofmap_lower", Kind.INTS),
    Field("ofmap_upper", "ofmap_upper", Kind.INTS),
    Field("out_mini_tile", "out_mini_tile", Kind.INTS),
    Field("single_tile_time_pred", "single_tile_time_pred", Kind.NUMBER),
    Field("tile_padding_tblr", "tile_padding_tblr", Kind.INTS),
)
class TileOp(RecordOp):
    """One intra-core tile of the workload ("tile_info" member `key`, e.g. tile_num_0) as the
    intra-core compiler chose it, with its predicted cycles `single_tile_time_pred`."""

    name = "gemini.tile"
    key = opt_prop_def(StringAttr)

    @property
    def pred(self) -> float:
        return float(self.value("single_tile_time_pred") or 0)

    def check(self) -> None:
        super().check()
        for lo, hi in (("ifmap_lower", "ifmap_upper"), ("ifmap_lower2", "ifmap_upper2"),
                       ("ofmap_lower", "ofmap_upper")):
            if lo in self.properties and hi in self.properties:
                try:
                    _check_box(self.ints_of(lo), self.ints_of(hi))
                except VerifyException as e:
                    raise VerifyAt(str(e), None, lo) from None
        pad = self.ints_of("tile_padding_tblr")
        if "tile_padding_tblr" in self.properties and (len(pad) != 4 or min(pad) < 0):
            raise VerifyAt("expected 4 non-negative paddings (top, bottom, left, right)", None,
                           "tile_padding_tblr")


def _check_layout(op: RecordOp) -> None:
    """`align` and `bitwidth` are sane and, when known, `size` is the box's padded bytes."""
    align, bitwidth = op.value("align"), op.value("bitwidth")
    if align is not None and align <= 0:
        raise VerifyAt("align must be > 0", None, "align")
    if bitwidth is not None and (bitwidth <= 0 or bitwidth % 8):
        raise VerifyAt("bitwidth must be a positive multiple of 8", None, "bitwidth")
    if op.value("size") < 0:
        raise VerifyAt("size must be >= 0", None, "size")


# ---------------------------------------------------------------------------------------------
# Containers
# ---------------------------------------------------------------------------------------------

WORKLOAD_LISTS = ("buffer", "ifmap", "ofmap", "tile_info")
"""List-valued workload members (besides the WL0 list) and the ops they hold."""


@record(
    Field("layer_name", "layer_name", Kind.STR, True),
    Field("layer_type", "layer_type", Kind.STR, True),
    Field("ofmap_size", "ofmap_size", Kind.INT),
    Field("ring_buffer_info", "ring_buffer_info", Kind.ROWS),
    Field("tile_padding_tblr", "tile_padding_tblr", Kind.INTS),
    Field("time", "time", Kind.NUMBER),
    Field("workload", "workload", Kind.ROWS, True),
    Field("workload_id", "workload_id", Kind.INT, True),
)
class WorkloadOp(RecordOp):
    """One computation tile of a layer on a core: ofmap box `workload` [[lower], [upper]]
    (absolute in the layer's ofmap), `time` in cycles, and in its region the ifmaps, ofmap
    blocks, weight, L2 and WL0 snapshots and intra-core tiles.

    `lists` names the list members the JSON object has (so empty and absent lists both
    survive), `wl0_key` the WL0 list's key (`wl0_buffer` or `wl1_buffer`) and `wl0_null` marks
    a WL0 list written as null.
    """

    name = "gemini.workload"
    lists = opt_prop_def(ArrayAttr)
    wl0_key = opt_prop_def(StringAttr)
    wl0_null = opt_prop_def(IntegerAttr)
    body = region_def()
    traits = traits_def(NoTerminator())
    assembly_format = "attr-dict-with-keyword $body"

    @staticmethod
    def new(workload_id: int, layer_name: str, layer_type: str, lower: Sequence[int],
            upper: Sequence[int], ops: Iterable[Operation] = ()) -> WorkloadOp:
        # What `create` makes of it (see `bare_op`).
        return bare_op(
            WorkloadOp,
            {"workload_id": int_attr(workload_id), "layer_name": str_attr(layer_name),
             "layer_type": str_attr(layer_type), "workload": rows_attr([lower, upper]),
             "lists": _keys_attr(("ifmap", "ofmap"))},
            [Region(Block(list(ops)))])

    # -- accessors ------------------------------------------------------------------------

    @property
    def id(self) -> int:
        attr = self.properties.get("workload_id")
        # `value`'s usual case inline: passes and the verifier ask ~50k times.
        return attr.value.data if type(attr) is IntegerAttr else self.value("workload_id")

    @property
    def layer(self) -> str:
        attr = self.properties.get("layer_name")
        return attr.data if type(attr) is StringAttr else self.value("layer_name")

    @property
    def box(self) -> tuple[list[int], list[int]]:
        lower, upper = rows(self.workload)
        return lower, upper

    def grouped(self) -> dict[type, list[Operation]]:
        """The workload's entries by exact op class, in order (`children` of every kind in
        one walk of the block, for the verifier, which reads most kinds several times)."""
        found: dict[type, list[Operation]] = {}
        op = _body_block(self)._first_op  # noqa: SLF001 -- as in `_ops_of`
        while op is not None:
            kind = type(op)
            same = found.get(kind)
            if same is None:
                found[kind] = [op]
            else:
                same.append(op)
            op = op._next_op  # noqa: SLF001
        return found

    def children(self, kind: type[_Op]) -> list[_Op]:
        # A walk of the block's list without xDSL's iterator objects: the passes, the
        # verifier and the emitter ask a workload for its entries of one kind ~50 times each.
        found = []
        op = _body_block(self)._first_op  # noqa: SLF001 -- as in `_ops_of`
        while op is not None:
            if type(op) is kind:
                found.append(op)
            op = op._next_op  # noqa: SLF001
        return found

    @property
    def ifmaps(self) -> list[IfmapOp]:
        return self.children(IfmapOp)

    @property
    def ofmaps(self) -> list[OfmapOp]:
        return self.children(OfmapOp)

    @property
    def weight(self) -> WeightOp | None:
        found = self.children(WeightOp)
        return found[0] if found else None

    @property
    def buffer(self) -> list[L2TensorOp]:
        return self.children(L2TensorOp)

    @property
    def wl0(self) -> list[Wl0TensorOp]:
        return self.children(Wl0TensorOp)

    @property
    def tiles(self) -> list[TileOp]:
        return self.children(TileOp)

    def list_keys(self) -> list[str]:
        return list(_keys_of(self.lists)) if self.lists is not None else []

    def has_list(self, key: str) -> bool:
        return self.lists is not None and key in _keys_of(self.lists)

    def add_list(self, key: str) -> None:
        if not self.has_list(key):
            self.lists = _keys_attr((*self.list_keys(), key))

    def append(self, op: Operation) -> None:
        """`self.body.block.add_op(op)`: the passes add ~10k entries to workloads."""
        block = _body_block(self)
        last = block._last_op  # noqa: SLF001
        if op.regions or op.parent is not None or (last is not None and last.parent is not block):
            block.add_op(op)  # xDSL's checks, and its words when one fails
            return
        # An op without regions is no ancestor of the block, and is not attached: what
        # `add_op` does once its checks pass.
        op.parent = block
        if last is None:
            block._first_op = op  # noqa: SLF001
        else:
            last._insert_next_op(op)  # noqa: SLF001
        block._last_op = op  # noqa: SLF001

    @property
    def core(self) -> CoreOp | None:
        parent = self.parent_op()
        return parent if isinstance(parent, CoreOp) else None

    @property
    def ring_regions(self) -> list[tuple[int, int]]:
        return [(r[0], r[1]) for r in rows(self.ring_buffer_info)]

    # -- verification ---------------------------------------------------------------------

    def check(self) -> None:
        super().check()
        self.check_choice("layer_type", "layer_type", LAYER_TYPES)
        box = rows(self.workload)
        if len(box) != 2:
            raise VerifyAt("expected [[lower], [upper]]", None, "workload")
        try:
            _check_box(*box)
        except VerifyException as e:
            raise VerifyAt(str(e), None, "workload") from None
        time = self.value("time")
        if time is not None and not time >= 0:
            # Gemini's simulator adds workload times along each core's timeline: a negative
            # (or NaN) time would make later workloads start before earlier ones end.
            raise VerifyAt(f"a workload's time is cycles, >= 0; got {time}", None, "time")
        if self.wl0_key is not None and self.wl0_key.data not in WL0_KEYS:
            raise VerifyException(f"wl0_key must be wl0_buffer or wl1_buffer, got "
                                  f"{self.wl0_key.data}")
        kids = self.grouped()
        if len(kids.get(WeightOp, ())) > 1:
            raise VerifyException("a workload has at most one weight")
        for region in rows(self.ring_buffer_info):
            if len(region) != 2 or region[0] < 0 or region[1] <= 0:
                raise VerifyAt("ring buffer regions are [start, size] with start >= 0 and size "
                               "> 0", None, "ring_buffer_info")
        self._verify_blocks(kids)
        self._verify_snapshot(kids)

    def _verify_blocks(self, kids: dict[type, list[Operation]]) -> None:
        lower, upper = self.box
        extent = box_size(lower, upper)
        for ofmap in kids.get(OfmapOp, ()):
            if not _inside(ofmap.ints_of("lower"), ofmap.ints_of("upper"), [0] * DIMS,
                           [e - 1 for e in extent]):
                raise VerifyAt(f"block {ofmap.ints_of('lower')}..{ofmap.ints_of('upper')} is "
                               f"outside the workload's output tile of size {extent}", ofmap,
                               "upper")
        for tile in kids.get(TileOp, ()):
            lo, hi = tile.ints_of("ofmap_lower"), tile.ints_of("ofmap_upper")
            if lo and hi and not _inside(lo, hi, lower, upper):
                raise VerifyAt(f"tile ofmap {lo}..{hi} is outside the workload {lower}..{upper}",
                               tile, "ofmap_upper")

    def _verify_snapshot(self, kids: dict[type, list[Operation]]) -> None:
        """The L2 snapshot: inside the buffer and its ring regions, no two tensors overlap, and
        every ifmap of the workload is (a box of) one of its tensors."""
        schedule = self.parent_op() and self.parent_op().parent_op()
        buffersize = schedule.value("buffersize") if isinstance(schedule, ScheduleOp) else None
        regions = self.ring_regions or ([(0, buffersize)] if buffersize else [])
        for start, size in regions:
            if buffersize is not None and start + size > buffersize:
                raise VerifyAt(f"ring buffer region [{start}, {start + size}) exceeds the "
                               f"buffersize {buffersize}", None, "ring_buffer_info")
        for (s1, z1), (s2, _) in zip(sorted(regions), sorted(regions)[1:], strict=False):
            if s2 < s1 + z1:
                raise VerifyAt(f"ring buffer regions at {s1} and {s2} overlap", None,
                               "ring_buffer_info")
        buffer = kids.get(L2TensorOp, [])
        occupied: list[tuple[int, int, L2TensorOp]] = []
        for tensor in buffer:
            spans = _ring_spans(tensor.value("address"), tensor.value("size"), regions)
            if spans is None:
                where = f"buffersize {buffersize}" if not self.ring_regions else \
                    "ring buffer regions " + ", ".join(f"[{s}, {s + z})" for s, z in regions)
                raise VerifyAt(f"tensor {tensor.value('tensor_id')} at [{tensor.value('address')}"
                               f", {tensor.end}) does not fit the {where}", tensor, "address")
            for start, end in spans:
                for other_start, other_end, other in occupied:
                    if start < other_end and other_start < end:
                        raise VerifyAt(
                            f"tensor {tensor.value('tensor_id')} at [{tensor.value('address')}, "
                            f"{tensor.end}) overlaps tensor {other.value('tensor_id')} at "
                            f"[{other.value('address')}, {other.end}) in the same L2 snapshot",
                            tensor, "address")
                occupied.append((start, end, tensor))
        wl0 = sorted(kids.get(Wl0TensorOp, ()), key=lambda t: t.value("address"))
        for first, second in zip(wl0, wl0[1:], strict=False):
            if second.value("address") < first.end:
                raise VerifyAt(f"WL0 tensor at [{second.value('address')}, {second.end}) overlaps "
                               f"the one at [{first.value('address')}, {first.end})", second,
                               "address")
        if self.has_list("buffer"):
            held_by = [(_id_set(t), t) for t in buffer if t.value("kind") != "ofmap"]
            for ifmap in kids.get(IfmapOp, ()):
                wanted = _id_set(ifmap)
                held = next((t for ids, t in held_by if wanted <= ids), None)
                if held is None:
                    raise VerifyAt(f"no tensor of the L2 snapshot holds transfers "
                                   f"{ifmap.transfer_ids}", ifmap, "transfer_id")
                lo, hi = held.ints_of("lower"), held.ints_of("upper")
                if lo and not _inside(ifmap.ints_of("lower"), ifmap.ints_of("upper"), [0] * DIMS,
                                      [e - 1 for e in box_size(lo, hi)]):
                    raise VerifyAt(f"box {ifmap.ints_of('lower')}..{ifmap.ints_of('upper')} is "
                                   f"outside L2 tensor {held.value('tensor_id')} of size "
                                   f"{box_size(lo, hi)}", ifmap, "upper")


def _verify_form(op: Operation) -> None:
    """The checks every record of a schedule passes before any record's own rules run: its
    definition's (the kinds of its fields) and its required members."""
    verify_generic(op)
    if isinstance(op, RecordOp):
        op.check_required()


def _id_set(op: RecordOp) -> frozenset[int]:
    """`frozenset(op.transfer_ids)`, kept on the (immutable) `transfer_id` attribute: the
    verifier compares the id sets of each workload's ifmaps and L2 tensors."""
    attr = op.properties.get("transfer_id")
    if attr is None:
        return frozenset()
    found = attr.__dict__.get("_planc_id_set")
    if found is None:
        found = attr.__dict__["_planc_id_set"] = frozenset(op.transfer_ids)
    return found


def _ring_spans(address: int, size: int, regions: Sequence[tuple[int, int]],
                ) -> list[tuple[int, int]] | None:
    """The byte ranges a tensor occupies: it starts in one region and wraps around inside it."""
    for start, length in regions:
        if start <= address < start + length:
            if size > length:
                return None
            end = address + size
            if end <= start + length:
                return [(address, end)]
            return [(address, start + length), (start, start + end - (start + length))]
    return None if size or not regions else [(address, address)]


@irdl_op_definition
class CoreOp(IRDLOperation):
    """The ordered workloads of one core (top-level key `core_id`)."""

    name = "gemini.core"
    core_id = opt_prop_def(IntegerAttr)
    body = region_def()
    traits = traits_def(NoTerminator())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict-with-keyword $body"

    @staticmethod
    def new(core_id: int, workloads: Iterable[WorkloadOp] = ()) -> CoreOp:
        return CoreOp.create(properties={"core_id": int_attr(core_id)},
                             regions=[Region(Block(list(workloads)))])

    @property
    def id(self) -> int:
        return self.core_id.value.data

    @property
    def workloads(self) -> list[WorkloadOp]:
        return _ops_of(_body_block(self), WorkloadOp)

    def verify_(self) -> None:
        for i, wl in enumerate(self.workloads):
            if wl.id != i:
                raise VerifyAt(f"workload ids must be dense per core: the workload at position "
                               f"{i} of core {self.id} has id {wl.id}", wl, "workload_id")


@irdl_op_definition
class DramOp(IRDLOperation):
    """The DRAM traffic (top-level key "-1"): stores ("in") and loads ("out"). `lists` names
    the lists present in the file."""

    name = "gemini.dram"
    lists = opt_prop_def(ArrayAttr)
    extra = opt_prop_def(DictionaryAttr)
    body = region_def()
    traits = traits_def(NoTerminator())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict-with-keyword $body"

    @staticmethod
    def new(ops: Iterable[Operation] = ()) -> DramOp:
        return DramOp.create(properties={"lists": ArrayAttr([StringAttr("in"),
                                                             StringAttr("out")])},
                             regions=[Region(Block(list(ops)))])

    @property
    def stores(self) -> list[DramStoreOp]:
        return _ops_of(_body_block(self), DramStoreOp)

    @property
    def loads(self) -> list[DramLoadOp]:
        return _ops_of(_body_block(self), DramLoadOp)

    def list_keys(self) -> list[str]:
        return [a.data for a in self.lists.data] if self.lists is not None else []


@record(
    Field("buffersize", "buffersize", Kind.INT, True),
    Field("top_batch_cut", "top_batch_cut", Kind.INT),
    Field("xlen", "xlen", Kind.INT, True),
    Field("ylen", "ylen", Kind.INT, True),
)
class ScheduleOp(RecordOp):
    """A Gemini scheduler IR document: L2 `buffersize` in bytes per core, `top_batch_cut`
    (batch groups of the root cut), an `xlen` x `ylen` mesh of cores; its region holds the
    `gemini.dram` traffic and one `gemini.core` per core.

    Its verifier checks everything that spans workloads (see `verify_`).
    """

    name = "gemini.schedule"
    body = region_def()
    traits = traits_def(NoTerminator())
    assembly_format = "attr-dict-with-keyword $body"

    @staticmethod
    def new(buffersize: int, xlen: int, ylen: int, top_batch_cut: int = 1,
            ops: Iterable[Operation] = ()) -> ScheduleOp:
        return ScheduleOp.create(
            properties={"buffersize": int_attr(buffersize), "xlen": int_attr(xlen),
                        "ylen": int_attr(ylen), "top_batch_cut": int_attr(top_batch_cut)},
            regions=[Region(Block(list(ops)))])

    @property
    def dram(self) -> DramOp | None:
        return next((op for op in self.body.ops if isinstance(op, DramOp)), None)

    @property
    def cores(self) -> list[CoreOp]:
        return _ops_of(_body_block(self), CoreOp)

    def workloads(self) -> Iterator[WorkloadOp]:
        for core in self.cores:
            yield from core.workloads

    def verify_(self) -> None:
        super().check()
        # top_batch_cut: Gemini splits the batch into that many groups (num_bgrp) and sizes
        # each group's sub-batch by dividing by it, so 0 has no meaning.
        for prop in ("buffersize", "xlen", "ylen", "top_batch_cut"):
            value = self.value(prop)
            if value is not None and value <= 0:
                raise VerifyAt(f"{prop} must be > 0", None, prop)
        # Each record's own rules first, so that the cross checks below can trust them; and
        # every record's generic checks (its fields of the kinds declared) before any record's
        # own rules, which read their children's fields too (a workload its blocks' boxes):
        # MLIR text can hold any attribute there. When the whole module is being verified
        # (`verifying_once`), each op is verified here in full and remembered, so that the
        # module walk does not check it a second time.
        done = verified_so_far()
        others: list[Operation] = []
        """The walk's ops but the records and cores (this op first), in order."""
        records: list[Operation] = []
        for op in walk_ops(self):
            if op is not self and isinstance(op, (RecordOp, CoreOp)):  # noqa: UP038 (faster)
                if done is None or id(op) not in done:
                    records.append(op)
            else:
                others.append(op)
        for verify in (_verify_form, verify_custom):
            for op in records:
                try:
                    verify(op)
                except VerifyAt as e:
                    raise VerifyAt(str(e), e.op or op, *e.steps) from None
                except VerifyException as e:
                    raise VerifyAt(str(e), op) from None
        if done is not None:
            done.update(map(id, records))
        if len([op for op in self.body.ops if isinstance(op, DramOp)]) > 1:
            raise VerifyException("a schedule has one DRAM section")
        cores = [c.id for c in self.cores]
        if len(set(cores)) != len(cores):
            raise VerifyException(f"core ids must be unique, got {cores}")
        mesh = self.value("xlen") * self.value("ylen")
        for core in self.cores:
            if not 0 <= core.id < mesh:
                raise VerifyAt(f"core {core.id} is not on the {self.value('xlen')}x"
                               f"{self.value('ylen')} mesh", core)
        TransferIndex(self, others).verify()


# ---------------------------------------------------------------------------------------------
# Cross-workload checks
# ---------------------------------------------------------------------------------------------


def _walk_replacing(root: Operation, skipped: Operation, instead: list[Operation],
                    found: list[Operation] | None = None) -> list[Operation]:
    """`walk_ops(root)` with the ops of `skipped`'s walk replaced by `instead` (at its place)."""
    if found is None:
        found = []
    found.append(root)
    for region in root.regions:
        for block in region.blocks:
            op = block._first_op  # noqa: SLF001 -- as in `_ops_of`
            while op is not None:
                if op is skipped:
                    found += instead
                elif op.regions:
                    _walk_replacing(op, skipped, instead, found)
                else:
                    found.append(op)
                op = op._next_op  # noqa: SLF001
    return found


class TransferIndex:
    """Producers and consumers of every transfer id of a schedule, and the checks on them."""

    def __init__(self, schedule: ScheduleOp, others: list[Operation] | None = None):
        self.schedule = schedule
        self.others = others
        """The ops of `walk_ops(schedule)` that are neither records nor cores, when the caller
        has them (the schedule's verifier): the search for a network's layers (`dnn.*` ops)
        reads those instead of walking the schedule's ~13k ops again."""
        self.workloads: dict[tuple[int, int], WorkloadOp] = {
            (core.id, wl.id): wl for core in schedule.cores for wl in core.workloads}
        dram = schedule.dram
        self.stores = dram.stores if dram else []
        self.loads = dram.loads if dram else []
        self.producer: dict[int, RecordOp] = {}
        """transfer id -> the ofmap or DRAM load that produces it."""
        self.store_of: dict[int, DramStoreOp] = {}
        self.kids: dict[int, dict[type, list[Operation]]] = {
            id(wl): wl.grouped() for wl in self.workloads.values()}
        """id(workload) -> its entries by op class, read once (nothing changes meanwhile)."""

    def of(self, wl: WorkloadOp, kind: type[_Op]) -> list[_Op]:
        """`wl.children(kind)` from the table."""
        found = self.kids.get(id(wl))
        return wl.children(kind) if found is None else found.get(kind, [])

    def weight_of(self, wl: WorkloadOp) -> WeightOp | None:
        found = self.of(wl, WeightOp)
        return found[0] if found else None

    def _produce(self, tid: int, op: RecordOp) -> None:
        if tid in self.producer:
            raise VerifyAt(f"transfer {tid} is produced twice (also at "
                           f"{_describe(self.producer[tid])})", op, "transfer_id")
        self.producer[tid] = op

    def verify(self) -> None:
        for load in self.loads:
            self._produce(load.value("transfer_id"), load)
        for wl in self.workloads.values():
            for ofmap in self.of(wl, OfmapOp):
                self._produce(ofmap.value("transfer_id"), ofmap)
        for store in self.stores:
            tid = store.value("transfer_id")
            if tid in self.store_of:
                raise VerifyAt(f"transfer {tid} is stored to DRAM twice", store, "transfer_id")
            self.store_of[tid] = store
        self._verify_named_places()
        self._verify_consumers()
        self._verify_destinations()
        self._verify_dram()
        self._verify_l2_tensors()
        TensorOrderCheck(self).verify()
        self._verify_layer_boxes()

    def workload_of(self, op: Operation) -> tuple[int, WorkloadOp] | None:
        wl = op.parent_op()
        if isinstance(wl, WorkloadOp) and wl.core is not None:
            return wl.core.id, wl
        return None

    def _verify_named_places(self) -> None:
        """Every core and workload an entry names exists: a destination, a DRAM store's
        producer, an L2 tensor's core source (which must be the core of the ofmap that makes
        the transfer). Checked before the transfers' consumers and producers, so a wrong name
        is reported where it is written, not at the ifmap or store that then finds nothing."""
        cores = {core.id for core in self.schedule.cores}
        producer_core = {tid: where[0] for tid, op in self.producer.items()
                         if isinstance(op, OfmapOp) and (where := self.workload_of(op))}
        for producer in self.producer.values():
            for i, dest in enumerate(producer.destinations):
                if not dest.to_dram:
                    self._verify_place(dest.target, cores, producer, "destination", i)
        for store in self.stores:
            self._verify_place((store.value("core_id"), store.value("workload_id")), cores,
                               store)
        for core in self.schedule.cores:
            for wl in core.workloads:
                for tensor in self.of(wl, L2TensorOp):
                    for i, src in enumerate(tensor.sources):
                        if src.from_dram:
                            continue
                        named, tid = value_of(src.core_id), value_of(src.transfer_id)
                        made = producer_core.get(tid)
                        if named not in cores or (made is not None and made != named):
                            where = (f"transfer {tid} comes from core {made}" if made is not None
                                     else f"the schedule has cores {sorted(cores)}")
                            raise VerifyAt(f"source core {named} does not exist or does not "
                                           f"produce transfer {tid} ({where})", tensor,
                                           "source", i, "core_id")

    def _verify_place(self, target: tuple[int, int | None], cores: set[int], op: Operation,
                      *steps: str | int) -> None:
        core, wid = target
        if core not in cores:
            mesh = f"{self.schedule.value('xlen')}x{self.schedule.value('ylen')}"
            raise VerifyAt(f"core {core} is not a core of the schedule (cores {sorted(cores)} "
                           f"on a {mesh} mesh)", op, *steps, "core_id")
        if (core, wid) not in self.workloads:
            raise VerifyAt(f"workload {wid} of core {core} does not exist", op, *steps,
                           "workload_id")

    def _verify_consumers(self) -> None:
        """Every ifmap/weight transfer resolves to a producer that lists the workload."""
        targets: dict[int, set[tuple[int, int | None]]] = {}
        """transfer id -> the (core, workload) targets of its producer's core destinations."""
        for (core, wid), wl in self.workloads.items():
            needs = [(ifmap, tid) for ifmap in self.of(wl, IfmapOp)
                     for tid in ifmap.transfer_ids]
            weight = self.weight_of(wl)
            if weight is not None:
                needs += [(weight, tid) for tid in weight.transfer_ids]
            for op, tid in needs:
                producer = self.producer.get(tid)
                if producer is None:
                    raise VerifyAt(f"transfer {tid} has no producer (no ofmap or DRAM load has "
                                   f"this id)", op, "transfer_id")
                if isinstance(op, WeightOp) and not (isinstance(producer, DramLoadOp)
                                                     and producer.value("kind") == "weight"):
                    raise VerifyAt(f"weight transfer {tid} must be a DRAM weight load, it is "
                                   f"{_describe(producer)}", op, "transfer_id")
                listed = targets.get(tid)
                if listed is None:
                    listed = targets[tid] = {d.target for d in producer.destinations
                                             if not d.to_dram}
                if (core, wid) not in listed and \
                        not self._shared_weight(op, producer, tid, core, wl):
                    raise VerifyAt(f"transfer {tid} is consumed by workload {wid} of core {core} "
                                   f"but its producer ({_describe(producer)}) does not list it "
                                   f"as a destination", op, "transfer_id")

    def _shared_weight(self, op: Operation, producer: RecordOp, tid: int, core: int,
                       wl: WorkloadOp) -> bool:
        """Gemini splits one layer into several workloads of a core that share one weight
        load, and lists only the layer's first workload as the load's destination (ResNet-50's
        Conv_109: seven workloads, one destination). The assembler keeps a layer's weights for
        all of its workloads, so a later workload of the same layer on the same core may read
        them; a weight read by any other workload that is not a destination has no data."""
        if not isinstance(op, WeightOp):
            return False
        order = {w.id: i for i, w in enumerate(self.schedule_core(core).workloads)}
        mine = order.get(wl.id, -1)
        return any(not d.to_dram and d.target[0] == core and d.target in self.workloads
                   and order.get(d.target[1], mine) < mine
                   and self.workloads[d.target].layer == wl.layer
                   for d in producer.destinations)

    def schedule_core(self, core_id: int) -> CoreOp:
        return next(c for c in self.schedule.cores if c.id == core_id)

    def _verify_destinations(self) -> None:
        """Every core destination holds the block; every DRAM destination is stored.

        A destination lists a consumer of the whole on-chip tensor the block belongs to, not
        only of the block: Gemini's ResNet-50 sends each block of Add_110_1's output to
        Conv_112, whose input L2 tensor (`cur_wl_ifmap`) holds all eight blocks while its
        ifmap reads four. So a destination is used when the workload reads the block or holds
        it in an L2 tensor it takes as input; one whose workload does neither is a transfer to
        nowhere (a warning)."""
        reads: dict[tuple[int, int], set[int]] = {}
        for key, consumer in self.workloads.items():
            used = set()
            for ifmap in self.of(consumer, IfmapOp):
                used |= _id_set(ifmap)
            for tensor in self.of(consumer, L2TensorOp):
                if value_of(tensor.properties.get("cur_wl_ifmap")):
                    used |= _id_set(tensor)
            weight = self.weight_of(consumer)
            if weight is not None:
                used |= _id_set(weight)
            reads[key] = used
        for tid, producer in self.producer.items():
            for i, dest in enumerate(producer.destinations):
                if dest.to_dram:
                    if tid not in self.store_of:
                        raise VerifyAt(f"block {tid} goes to DRAM but no DRAM \"in\" entry "
                                       f"stores it", producer, "destination", i)
                    continue
                consumer = self.workloads.get(dest.target)
                if consumer is None:
                    raise VerifyAt(f"destination workload {dest.target[1]} of core "
                                   f"{dest.target[0]} does not exist", producer, "destination", i)
                if tid not in reads[dest.target]:
                    # Nothing reads missing data, so this is a warning.
                    warn("gemini.unread-destination",
                         f"destination workload {dest.target[1]} of core {dest.target[0]} "
                         f"neither reads transfer {tid} nor holds it in an input L2 tensor "
                         "(a transfer to nowhere)", producer, "destination", i)
                    continue
                layer = value_of(dest.field("layer_name"))
                if layer is not None and layer != consumer.layer:
                    raise VerifyAt(f"destination names layer {layer} but workload "
                                   f"{dest.target[1]} computes {consumer.layer}", producer,
                                   "destination", i)

    def _verify_dram(self) -> None:
        load_ids = {load.value("transfer_id") for load in self.loads}
        for store in self.stores:
            tid = store.value("transfer_id")
            producer = self.producer.get(tid)
            where = (store.value("core_id"), store.value("workload_id"))
            owner = self.workload_of(producer) if isinstance(producer, OfmapOp) else None
            if owner is None or (owner[0], owner[1].id) != where:
                raise VerifyAt(f"stored block {tid} is not an ofmap of workload {where[1]} of "
                               f"core {where[0]}", store, "transfer_id")
            if not any(d.to_dram for d in producer.destinations):
                raise VerifyAt(f"stored block {tid} has no DRAM destination in its ofmap",
                               store, "transfer_id")
            if owner[1].layer != store.value("layer_name"):
                raise VerifyAt(f"layer_name {store.value('layer_name')} differs from the "
                               f"producing workload's layer {owner[1].layer}", store, "layer_name")
            for i, related in enumerate(store.ints_of("related_ofmap")):
                if related not in load_ids:
                    raise VerifyAt(f"related_ofmap {related} is not a DRAM load", store,
                                   "related_ofmap", i)
        store_ids = set(self.store_of)
        related_of = {s.value("transfer_id"): set(s.ints_of("related_ofmap"))
                      for s in self.stores}
        for load in self.loads:
            tid = load.value("transfer_id")
            for i, related in enumerate(load.ints_of("related_ifmap")):
                if related not in store_ids:
                    raise VerifyAt(f"related_ifmap {related} is not a DRAM store", load,
                                   "related_ifmap", i)
                if "related_ofmap" in self.store_of[related].properties and \
                        tid not in related_of[related]:
                    raise VerifyAt(f"store {related} does not list load {tid} in its "
                                   f"related_ofmap", load, "related_ifmap", i)

    def _verify_l2_tensors(self) -> None:
        """L2 tensors: sources exist, one identity per tensor id, contiguous lifetimes."""
        resolved: dict[int, Attribute] = {}
        """id -> a list of sources whose transfers resolve (kept, so the id stays its)."""
        for core in self.schedule.cores:
            seen: dict[int, tuple[L2TensorOp, int]] = {}
            for position, wl in enumerate(core.workloads):
                for tensor in self.of(wl, L2TensorOp):
                    # Sources found to resolve stay so for this index (its producers are
                    # fixed): a tensor's later snapshots share its list of sources.
                    listed = tensor.properties.get("source")
                    if listed is not None and id(listed) in resolved:
                        srcs = ()
                    else:
                        srcs = tensor.sources
                    for i, src in enumerate(srcs):
                        tid = value_of(src.transfer_id)
                        producer = self.producer.get(tid)
                        if producer is None:
                            raise VerifyAt(f"source transfer {tid} has no producer", tensor,
                                           "source", i)
                        if src.from_dram != isinstance(producer, DramLoadOp):
                            raise VerifyAt(f"source transfer {tid} is {_describe(producer)}, "
                                           f"not of type {value_of(src.kind)}", tensor,
                                           "source", i)
                    if listed is not None:
                        resolved[id(listed)] = listed
                    key = tensor.value("tensor_id")
                    if key in seen:
                        first, last = seen[key]
                        if last != position - 1:
                            raise VerifyAt(f"tensor {key} leaves L2 after workload "
                                           f"{core.workloads[last].id} and is listed again",
                                           tensor, "tensor_id")
                        properties, before = tensor.properties, first.properties
                        for prop in ("address", "size", "kind"):
                            if properties.get(prop) is not before.get(prop) and \
                                    tensor.value(prop) != first.value(prop):
                                raise VerifyAt(f"tensor {key} changes its {prop} from "
                                               f"{first.value(prop)} to {tensor.value(prop)}",
                                               tensor, "address" if prop == "address" else
                                               "size" if prop == "size" else "type")
                        if tensor.value("newly_added"):
                            raise VerifyAt(f"tensor {key} is newly_added but was already in L2",
                                           tensor, "newly_added")
                        seen[key] = (first, position)
                    else:
                        if tensor.value("newly_added") is False:
                            raise VerifyAt(f"tensor {key} first appears here but is not "
                                           f"newly_added", tensor, "newly_added")
                        seen[key] = (tensor, position)

    def _verify_layer_boxes(self) -> None:
        """Workloads lie inside their layer's ofmap when the network is in the same module;
        DRAM stores lie inside their layer's ofmap (else: the union of its workloads)."""
        shapes = self._layer_shapes()
        extent: dict[str, list[int]] = {}
        for wl in self.workloads.values():
            upper = wl.box[1]
            shape = shapes.get(wl.layer)
            if shape is not None and not _inside(wl.box[0], upper, [0] * DIMS,
                                                 [d - 1 for d in shape]):
                raise VerifyAt(f"box {wl.box[0]}..{upper} is outside layer {wl.layer}'s ofmap "
                               f"of shape {shape}", wl, "workload")
            known = extent.setdefault(wl.layer, upper)
            extent[wl.layer] = [max(a, b) for a, b in zip(known, upper, strict=False)]
        for name, shape in shapes.items():
            extent[name] = [d - 1 for d in shape]
        for store in self.stores:
            layer = extent.get(store.value("layer_name"))
            if layer and not _inside(store.ints_of("lower"), store.ints_of("upper"),
                                     [0] * DIMS, layer):
                raise VerifyAt(f"block {store.ints_of('lower')}..{store.ints_of('upper')} is "
                               f"outside layer {store.value('layer_name')}'s ofmap "
                               f"[0, 0, 0, 0]..{layer}", store, "upper")


    def _layer_shapes(self) -> dict[str, list[int]]:
        """NCHW output shapes of the layers of a `dnn.graph` next to the schedule, if any."""
        module = self.schedule.parent_op()
        if module is None:
            return {}
        shapes = {}
        if self.others is None:
            ops = walk_ops(module)
        else:
            ops = _walk_replacing(module, self.schedule, self.others)
        for op in ops:
            if not op.name.startswith("dnn."):
                continue
            name, result = op.properties.get("layer_name"), op.results[:1]
            if name is not None and result:
                shapes[name.data] = result[0].type.nchw
        return shapes


class TensorOrderCheck:
    """`tensor_order` is the position of each DRAM transfer in the one DRAM queue: the DRAM
    tensors' orders are a permutation of 0..M-1 (M = loads + stores), tensors that never touch
    DRAM carry M, WL0 tensors fed from L2 carry null."""

    def __init__(self, index: TransferIndex):
        self.index = index
        self.total = len(index.loads) + len(index.stores)

    @classmethod
    def positions(cls, schedule: ScheduleOp) -> dict[tuple[str, int], int]:
        """("load" | "store", transfer id) -> its position in the DRAM queue, for every DRAM
        transfer some snapshot lists, as `verify` reads (and checks) them: the one reader of
        `tensor_order` that `planc check`'s rules and the simulators share."""
        check = cls(TransferIndex(schedule))
        check.verify()
        return {transfer: order for transfer, (order, _) in check.order_of.items()}

    def verify(self) -> None:
        order_of: dict[tuple[str, int], tuple[int, Operation]] = {}
        self.order_of = order_of
        """("load" | "store", transfer id) -> (its tensor_order, the entry that gives it),
        for every DRAM transfer some snapshot lists (`positions`)."""
        self.holder: dict[int, tuple[str, int]] = {}
        complete = True
        for (core, _), wl in self.index.workloads.items():
            complete &= wl.has_list("buffer") and wl.wl0_key is not None
            for tensor in self.index.of(wl, L2TensorOp):
                self._check(order_of, tensor, self.transfers_of(core, wl, tensor))
            for tensor in self.index.of(wl, Wl0TensorOp):
                if tensor.value("source") == "DDR":
                    self._check(order_of, tensor, [("load", t) for t in tensor.transfer_ids])
        if not order_of or not complete:
            return
        expected = {("load", load.value("transfer_id")) for load in self.index.loads}
        expected |= {("store", store.value("transfer_id")) for store in self.index.stores}
        missing = sorted(expected - set(order_of))
        if missing:
            kind, tid = missing[0]
            op = next(o for o in (self.index.loads if kind == "load" else self.index.stores)
                      if o.value("transfer_id") == tid)
            raise VerifyAt(f"DRAM transfer {tid} has no tensor_order: it never appears in an "
                           f"L2 or WL0 snapshot", op, "transfer_id")

    def transfers_of(self, core: int, wl: WorkloadOp, tensor: L2TensorOp,
                     ) -> list[tuple[str, int]] | None:
        """The DRAM transfers an L2 tensor stands for: ("load", id) for tensors read from
        DRAM, ("store", id) for the staging copy of a stored output, None for on-chip data."""
        if tensor.value("kind") == "ofmap":
            first, layers = self._stores_by_place()
            layer = tensor.value("layer_name")
            # The staging copy belongs to the store of the workload whose snapshot lists it
            # first (its producer): Gemini's ResNet-34 batch-16 IR lists Gemm_125's staged
            # output of workload 140 (store 189) again in workload 141, which stores 190.
            born = self._first_listing(core, tensor.value("tensor_id"), wl.id)
            tid = first.get((core, born, layer))
            if tid is not None:
                return [("store", tid)]
            # An output kept in L2 after its own workload (ResNet-50: Add_103_1 in Conv_105's
            # snapshot) is stored by another workload of its layer: it touches DRAM, through
            # a store that the snapshot does not name.
            if (core, layer) in layers:
                return []
            raise VerifyAt(f"an ofmap L2 entry is the staging copy of a DRAM store, but layer "
                           f"{layer} stores nothing from core {core}; an output kept on chip "
                           f"is an ifmap entry with a core source", tensor, "type")
        if tensor.from_dram:
            return [("load", t) for t in tensor.transfer_ids]
        return None

    def _first_listing(self, core: int, tensor_id: int, here: int) -> int:
        """The id of the workload of `core` whose snapshot lists L2 tensor `tensor_id`
        first (`here` when unknown): one pass over the core's snapshots, kept."""
        found = self.__dict__.setdefault("_born", {})
        if core not in found:
            born: dict[int, int] = {}
            for wl in self.index.schedule_core(core).workloads:
                for t in self.index.of(wl, L2TensorOp):
                    born.setdefault(t.value("tensor_id"), wl.id)
            found[core] = born
        return found[core].get(tensor_id, here)

    def _stores_by_place(self) -> tuple[dict[tuple, int], set[tuple]]:
        """The transfer id of the first DRAM store per (core, workload, layer), and the
        (core, layer) pairs that have a store: one pass over the stores instead of one per
        staged output tensor."""
        found = self.__dict__.get("_by_place")
        if found is None:
            first: dict[tuple, int] = {}
            layers: set[tuple] = set()
            for s in self.index.stores:
                core, layer = s.value("core_id"), s.value("layer_name")
                first.setdefault((core, s.value("workload_id"), layer), s.value("transfer_id"))
                layers.add((core, layer))
            found = self._by_place = (first, layers)
        return found

    def _check(self, order_of: dict, tensor: RecordOp, transfers) -> None:
        if "tensor_order" not in tensor.properties:
            return
        order = tensor.value("tensor_order")
        if transfers is None:
            if isinstance(tensor, Wl0TensorOp):
                return
            if order != self.total:
                raise VerifyAt(f"a tensor that does not touch DRAM must have tensor_order "
                               f"{self.total} (the number of DRAM transfers), got {order}",
                               tensor, "tensor_order")
            return
        if order is None or not 0 <= order < self.total:
            raise VerifyAt(f"a DRAM tensor's tensor_order must be in [0, {self.total}), got "
                           f"{order}", tensor, "tensor_order")
        for transfer in transfers:
            known = order_of.get(transfer)
            if known is not None and known[0] != order:
                raise VerifyAt(f"DRAM transfer {transfer[1]} has tensor_order {order} here but "
                               f"{known[0]} elsewhere", tensor, "tensor_order")
            other = self.holder.setdefault(order, transfer)
            if other != transfer:
                raise VerifyAt(f"tensor_order {order} is given to DRAM transfers {other[1]} and "
                               f"{transfer[1]}", tensor, "tensor_order")
            order_of[transfer] = (order, tensor)


def _describe(op: Operation) -> str:
    if isinstance(op, DramLoadOp):
        return f"a DRAM {op.value('kind')} load"
    wl = op.parent_op()
    if isinstance(wl, WorkloadOp):
        core = wl.core.id if wl.core is not None else "?"
        return f"an ofmap of workload {wl.id} of core {core}"
    return op.name


Gemini = Dialect(
    "gemini",
    [ScheduleOp, DramOp, DramStoreOp, DramLoadOp, CoreOp, WorkloadOp, IfmapOp, OfmapOp,
     WeightOp, L2TensorOp, Wl0TensorOp, TileOp],
    [DestinationAttr, SourceAttr],
)
