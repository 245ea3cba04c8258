"""The `ark` dialect: ARK model graphs (microsoft/ark model files) in SSA form.

An ARK model is a list of nodes, each holding operators that read tensors, write tensors and
return *result tensors*, which are new tensor objects aliasing what was written. Here:

* a tensor object is an SSA value; its `!ark.tensor<...>` type carries everything the file says
  about it (Id, DataType, Shape, Strides, Offsets, PaddedShape/Pads and its Buffer);
* an operator is an op of this dialect: `read_tensors` and `write_tensors` are operands and
  `result_tensors` are results, so a consumer uses the very value its producer returned and no
  pass ever re-derives dependencies from ids;
* a tensor that no node of the graph produces (a model input, a weight, the fresh tensor an
  operator writes into, the remains of a removed virtual node) is defined by `ark.view`, whose
  optional operand is the value it aliases;
* the graph is the single block of `ark.model`; each operator carries the `node` id it belongs
  to (models) or none (plans, which group operators into tasks instead).

Fields a file has that this dialect does not model are kept in `extra` dictionaries, so import
followed by export reproduces the document. Op arguments are typed properties whose attribute
type encodes the ARK argument type tag (see `ArgKind`).
"""

from __future__ import annotations

import functools
import math
import operator
from abc import ABC
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, ClassVar, Literal

from xdsl.dialects.builtin import (
    I64,
    UNKNOWN_LOC,
    AnyFloat,
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    NoneAttr,
    Signedness,
    StringAttr,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    ParametrizedAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.ir.core import BlockArgument, OpResult, SSAValues, Use
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    OptOperandDef,
    ParsePropInAttrDict,
    VarResultDef,
    irdl_attr_definition,
    irdl_op_definition,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import IsolatedFromAbove, NoTerminator
from xdsl.utils.exceptions import VerifyException

from dialects.fast_verify import verify_op
from dialects.utils import (
    body_block,
    built,
    format_on_first_use,
    i64_attr,
    op_list,
    parse_int,
    walk_ops,
)

if TYPE_CHECKING:  # annotations only: compiling JSON loads neither xDSL's parser nor printer
    from xdsl.parser import AttrParser
    from xdsl.printer import Printer

# ---------------------------------------------------------------------------------------------
# Data types
# ---------------------------------------------------------------------------------------------

DATA_TYPE_BYTES: dict[str, int] = {
    "FP32": 4, "FP16": 2, "BF16": 2, "INT32": 4, "UINT32": 4, "INT8": 1, "UINT8": 1, "BYTE": 1,
}
"""The element types of ARK tensors and their sizes in bytes."""

INTEGER_DATA_TYPES = frozenset({"INT32", "UINT32", "INT8", "UINT8"})
FLOAT_DATA_TYPES = frozenset({"FP32", "FP16", "BF16"})
MAX_DIMS = 4


_NONE = NoneAttr()
_EMPTY = DictionaryAttr({})
"""Shared immutable parameters: building a new one for every tensor costs 5-6 us."""


def _ints(values: Sequence[int]) -> DenseArrayBase:
    return _cached_ints(tuple(values))


@functools.lru_cache(maxsize=4096)
def _cached_ints(values: tuple[int, ...]) -> DenseArrayBase:
    # Attributes are immutable, so equal shapes can share one (building one costs ~40 us).
    return DenseArrayBase.from_list(i64, list(values))


_NO_INTS = _cached_ints(())


def int_values(array: DenseArrayBase) -> tuple[int, ...]:
    """The integers of a dense array, unpacked once and kept with the (immutable) array:
    unpacking bytes on every shape query adds up. The cache lives in the attribute's own
    `__dict__` (not a parameter: equality and hashing ignore it)."""
    try:
        return array.__dict__["_planc_values"]
    except KeyError:
        values = array.__dict__["_planc_values"] = tuple(array.get_values())
        return values


@functools.lru_cache(maxsize=64)
def _dtype_attr(dtype: str) -> StringAttr:
    return StringAttr(dtype)


def _int_attr(value: int) -> IntAttr:
    """`IntAttr(value)` for an int, without the generic parameter checks."""
    attr = _new_object(IntAttr)
    _set_field(attr, "data", value)
    return attr


_new_object = object.__new__
_set_field = object.__setattr__
"""Bound once: `_int_attr` makes some 50,000 attributes per 10,000 imported operators."""


_LOCAL_RANK = _int_attr(-1)
"""The rank of local buffers (nearly all), shared: attributes are immutable."""

_VALID_LAYOUTS: dict[tuple, bool] = {}
"""(data type, shape, strides, offsets, padded shape, pads) of tensors that passed
`TensorType.verify`, as tuples (None: absent)."""


def _print_ints(printer: Printer, values: Sequence[int]) -> None:
    printer.print_string("[" + ", ".join(str(v) for v in values) + "]")


def _parse_ints(parser: AttrParser) -> list[int]:
    return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, lambda: parse_int(parser))


def _parse_tag_pairs(parser: AttrParser) -> list[int]:
    pairs = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, lambda: _parse_ints(parser))
    return [v for pair in pairs for v in pair]


def _print_tag_pairs(printer: Printer, flat: Sequence[int]) -> None:
    pairs = ", ".join(f"[{flat[i]}, {flat[i + 1]}]" for i in range(0, len(flat), 2))
    printer.print_string(f"[{pairs}]")


# ---------------------------------------------------------------------------------------------
# Buffers, offsets and tensors
# ---------------------------------------------------------------------------------------------


@irdl_attr_definition
class BufferAttr(ParametrizedAttribute):
    """An ARK buffer: an exclusive, sequential memory region that tensors view.

    `rank` is the rank that allocates it (-1: the local rank). `send_tags`/`recv_tags` are the
    (remote rank, tag) pairs that connect it to buffers of other ranks, stored flat.
    `is_external` is present only when the file states it. Syntax:

        #ark.buffer<4>                       (local, untagged)
        #ark.buffer<4, rank 1, send [[0, -2147483648]], recv [], external false, extra {...}>
    """

    name = "ark.buffer"

    id: IntAttr
    rank: IntAttr
    send_tags: DenseArrayBase
    recv_tags: DenseArrayBase
    is_external: BoolAttr | NoneAttr
    extra: DictionaryAttr

    @staticmethod
    def get(
        buffer_id: int,
        rank: int = -1,
        send_tags: Sequence[tuple[int, int]] = (),
        recv_tags: Sequence[tuple[int, int]] = (),
        is_external: bool | None = None,
        extra: DictionaryAttr | None = None,
    ) -> BufferAttr:
        # Every parameter is made here with its declared kind: `built` skips re-checking.
        if not send_tags and not recv_tags and type(buffer_id) is int and type(rank) is int:
            # No tags, the buffer's only rule (`verify`): nothing to check at all.
            buffer = BufferAttr.__new__(BufferAttr)
            buffer.__dict__.update(
                id=_int_attr(buffer_id),
                rank=_LOCAL_RANK if rank == -1 else _int_attr(rank), send_tags=_NO_INTS,
                recv_tags=_NO_INTS,
                is_external=_NONE if is_external is None else IntegerAttr(int(is_external), i1),
                extra=extra or _EMPTY)
            return buffer
        return built(
            BufferAttr,
            _int_attr(buffer_id) if type(buffer_id) is int else IntAttr(buffer_id),
            _int_attr(rank) if type(rank) is int else IntAttr(rank),
            _ints([v for pair in send_tags for v in pair]),
            _ints([v for pair in recv_tags for v in pair]),
            _NONE if is_external is None else IntegerAttr(int(is_external), i1),
            extra or _EMPTY,
        )

    @staticmethod
    def untagged(buffer_id: int, rank: int, is_external: bool | None) -> BufferAttr:
        """`get(buffer_id, rank, is_external=is_external)` of an int id and rank: without
        tags the buffer's only rule (`verify`) holds, and the parameters are put in place."""
        buffer = BufferAttr.__new__(BufferAttr)
        fields = buffer.__dict__
        fields["id"] = _int_attr(buffer_id)
        fields["rank"] = _LOCAL_RANK if rank == -1 else _int_attr(rank)
        fields["send_tags"] = fields["recv_tags"] = _NO_INTS
        fields["is_external"] = _NONE if is_external is None else \
            IntegerAttr(int(is_external), i1)
        fields["extra"] = _EMPTY
        return buffer

    @property
    def send_tag_pairs(self) -> list[tuple[int, int]]:
        return _pairs(int_values(self.send_tags))

    @property
    def recv_tag_pairs(self) -> list[tuple[int, int]]:
        return _pairs(int_values(self.recv_tags))

    @property
    def is_local(self) -> bool:
        return self.rank.data == -1

    def is_plain(self) -> bool:
        """Local, untagged, nothing else: printed as just its id."""
        return (self.rank.data == -1 and not self.send_tags.get_values()
                and not self.recv_tags.get_values() and isinstance(self.is_external, NoneAttr)
                and not self.extra.data)

    def verify(self) -> None:
        for tags in (self.send_tags, self.recv_tags):
            if len(int_values(tags)) % 2:
                raise VerifyException("buffer tags must be (remote rank, tag) pairs")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return _parse_buffer_body(parser)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        _print_buffer_body(printer, self)
        printer.print_string(">")


def _pairs(flat: Sequence[int]) -> list[tuple[int, int]]:
    return [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]


def _parse_buffer_body(parser: AttrParser) -> tuple[Attribute, ...]:
    buffer_id = parse_int(parser)
    rank, send, recv = -1, [], []
    external: Attribute = NoneAttr()
    extra = DictionaryAttr({})
    while parser.parse_optional_punctuation(","):
        key = parser.parse_identifier()
        if key == "rank":
            rank = parse_int(parser)
        elif key == "send":
            send = _parse_tag_pairs(parser)
        elif key == "recv":
            recv = _parse_tag_pairs(parser)
        elif key == "external":
            external = IntegerAttr(int(parser.parse_boolean()), i1)
        elif key == "extra":
            extra = parser.parse_attribute()
        else:
            parser.raise_error(f"unexpected buffer field '{key}'")
    return IntAttr(buffer_id), IntAttr(rank), _ints(send), _ints(recv), external, extra


def _print_buffer_body(printer: Printer, buffer: BufferAttr) -> None:
    printer.print_string(str(buffer.id.data))
    if buffer.rank.data != -1:
        printer.print_string(f", rank {buffer.rank.data}")
    if buffer.send_tags.get_values() or not buffer.is_plain():
        printer.print_string(", send ")
        _print_tag_pairs(printer, buffer.send_tags.get_values())
        printer.print_string(", recv ")
        _print_tag_pairs(printer, buffer.recv_tags.get_values())
    if not isinstance(buffer.is_external, NoneAttr):
        printer.print_string(f", external {'true' if buffer.is_external.value.data else 'false'}")
    if buffer.extra.data:
        printer.print_string(", extra ")
        printer.print_attribute(buffer.extra)


@irdl_attr_definition
class OffsetAttr(ParametrizedAttribute):
    """An ARK `OFFSET` argument: a byte offset inside a buffer. `#ark.offset<3, 8192>`."""

    name = "ark.offset"

    buffer_id: IntAttr
    value: IntAttr

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            buffer_id = parse_int(parser)
            parser.parse_punctuation(",")
            return IntAttr(buffer_id), IntAttr(parse_int(parser))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.buffer_id.data}, {self.value.data}>")


@irdl_attr_definition
class TensorType(ParametrizedAttribute, TypeAttribute):
    """An ARK tensor object: a strided window of up to 4 dims over a buffer.

    `strides` are the full extents of each dimension of the underlying array and `offsets`
    where the window starts, so `offsets[i] + padded_shape[i] <= strides[i]`. `padded_shape`
    (current ARK) and `pads` (older files) are kept only when the file has them. Syntax:

        !ark.tensor<5, FP16, [1, 512, 11008], padded, buffer 4>
        !ark.tensor<9, FP16, [512, 64], strides [512, 128], offsets [0, 64], buffer <3, rank 1, ...>>

    `strides` and `offsets` are printed only when they differ from the defaults (the padded
    shape, zeros); a bare `padded` means a PaddedShape equal to the shape.
    """

    name = "ark.tensor"

    id: IntAttr
    dtype: StringAttr
    shape: DenseArrayBase
    strides: DenseArrayBase
    offsets: DenseArrayBase
    padded_shape: DenseArrayBase | NoneAttr
    pads: DenseArrayBase | NoneAttr
    buffer: BufferAttr
    extra: DictionaryAttr

    @staticmethod
    def get(
        tensor_id: int,
        dtype: str,
        shape: Sequence[int],
        buffer: BufferAttr,
        *,
        strides: Sequence[int] | None = None,
        offsets: Sequence[int] | None = None,
        padded_shape: Sequence[int] | None | Literal["shape"] = "shape",
        pads: Sequence[int] | None = None,
        extra: DictionaryAttr | None = None,
    ) -> TensorType:
        """A tensor. Its PaddedShape is recorded equal to its shape unless `padded_shape`
        gives one, or is None (the file has no PaddedShape key)."""
        padded = shape if padded_shape == "shape" else padded_shape
        if not isinstance(buffer, BufferAttr):
            raise VerifyException(f"tensor {tensor_id}: expected a buffer, got {buffer}")
        # Every other parameter is made here with its declared kind: `built` skips
        # re-checking them. The tensor's own rules involve only its data type and the five
        # integer lists (the id appears in their messages only), so a layout that passed
        # them once passes them again: the arrays are shared, and so is the verdict.
        layout = (dtype, tuple(shape),
                  tuple(strides if strides is not None else (padded or shape)),
                  tuple(offsets if offsets is not None else [0] * len(shape)),
                  None if padded is None else tuple(padded),
                  None if pads is None else tuple(pads))
        arrays = tuple(_NONE if values is None else _cached_ints(values)
                       for values in layout[1:])
        if type(tensor_id) is not int or layout not in _VALID_LAYOUTS:  # see _VALID_LAYOUTS
            tensor = built(TensorType, IntAttr(tensor_id), _dtype_attr(dtype), *arrays,
                           buffer, extra or _EMPTY)
            if len(_VALID_LAYOUTS) >= 4096:
                _VALID_LAYOUTS.clear()
            _VALID_LAYOUTS[layout] = True
            return tensor
        tensor = TensorType.__new__(TensorType)
        for (name, _), value in zip(TensorType.get_irdl_definition().parameters, (
                _int_attr(tensor_id), _dtype_attr(dtype), *arrays, buffer, extra or _EMPTY),
                strict=True):
            object.__setattr__(tensor, name, value)
        return tensor

    @staticmethod
    def assemble(tensor_id: int, layout: tuple[Attribute, ...], buffer: BufferAttr) -> TensorType:
        """A tensor of an int `tensor_id`, with the data type and the five arrays `layout`
        of a tensor built (and so verified) before: its rules involve only those, so the
        tensor passes them too and is put together without running them again."""
        tensor = TensorType.__new__(TensorType)
        fields = tensor.__dict__
        fields["id"] = _int_attr(tensor_id)
        fields["dtype"], fields["shape"], fields["strides"], fields["offsets"], \
            fields["padded_shape"], fields["pads"] = layout
        fields["buffer"] = buffer
        fields["extra"] = _EMPTY
        return tensor

    # -- convenient views of the parameters ------------------------------------------------

    @property
    def tensor_id(self) -> int:
        return self.id.data

    @property
    def data_type(self) -> str:
        return self.dtype.data

    @property
    def shape_list(self) -> list[int]:
        return list(int_values(self.shape))

    @property
    def shape_tuple(self) -> tuple[int, ...]:
        """The shape as an (unpacked once, shared) tuple: for keys and comparisons."""
        return int_values(self.shape)

    @property
    def strides_tuple(self) -> tuple[int, ...]:
        return int_values(self.strides)

    @property
    def offsets_tuple(self) -> tuple[int, ...]:
        return int_values(self.offsets)

    @property
    def strides_list(self) -> list[int]:
        return list(int_values(self.strides))

    @property
    def offsets_list(self) -> list[int]:
        return list(int_values(self.offsets))

    @property
    def padded_list(self) -> list[int]:
        """The padded shape, which is the shape itself when the file did not give one."""
        if isinstance(self.padded_shape, NoneAttr):
            return self.shape_list
        return list(int_values(self.padded_shape))

    @property
    def buffer_id(self) -> int:
        return self.buffer.id.data

    @property
    def element_bytes(self) -> int:
        return DATA_TYPE_BYTES[self.data_type]

    @property
    def num_elements(self) -> int:
        return math.prod(self.shape_list)

    @property
    def span_bytes(self) -> int:
        """Bytes of buffer this tensor's layout covers (how ARK sizes buffers)."""
        return math.prod(self.strides_list) * self.element_bytes

    @property
    def byte_offset(self) -> int:
        """Byte offset of the first element inside the buffer (ARK's OFFSET value)."""
        strides = self.strides_list
        elems = sum(o * math.prod(strides[i + 1:]) for i, o in enumerate(self.offsets_list))
        return elems * self.element_bytes

    def with_id(self, tensor_id: int) -> TensorType:
        return TensorType(IntAttr(tensor_id), *self.parameters[1:])

    def with_buffer(self, buffer: BufferAttr) -> TensorType:
        """The same tensor on another buffer (memory planning moves tensors between buffers).

        No rule of a tensor involves its buffer, so the copy is not verified again: this is the
        hot path of moving tens of thousands of tensors.
        """
        moved = TensorType.__new__(TensorType)
        for (name, _), value in zip(TensorType.get_irdl_definition().parameters,
                                    (*self.parameters[:7], buffer, self.extra), strict=True):
            object.__setattr__(moved, name, value)
        return moved

    def same_layout(self, other: TensorType) -> bool:
        """Same buffer, shape, strides and offsets: the two ids name the same data."""
        return self.parameters[1:8] == other.parameters[1:8]

    # -- verification ------------------------------------------------------------------------

    def verify(self) -> None:
        if self.data_type not in DATA_TYPE_BYTES:
            raise VerifyException(
                f"tensor {self.tensor_id}: unknown data type '{self.data_type}' "
                f"(expected one of {', '.join(DATA_TYPE_BYTES)})")
        shape = self.shape_list
        if not 1 <= len(shape) <= MAX_DIMS:
            raise VerifyException(
                f"tensor {self.tensor_id}: expected 1 to {MAX_DIMS} dims, got {len(shape)}")
        for label, values in (("strides", self.strides_list), ("offsets", self.offsets_list),
                              ("padded shape", self.padded_list)):
            if len(values) != len(shape):
                raise VerifyException(f"tensor {self.tensor_id}: {label} {values} has "
                                      f"{len(values)} dims but shape {shape} has {len(shape)}")
        if not isinstance(self.pads, NoneAttr) and len(self.pads.get_values()) != len(shape):
            raise VerifyException(f"tensor {self.tensor_id}: pads must have {len(shape)} dims")
        padded = self.padded_list
        for i, (s, p, st, o) in enumerate(zip(shape, padded, self.strides_list,
                                              self.offsets_list, strict=True)):
            if s < 1 or st < 1 or o < 0:
                raise VerifyException(
                    f"tensor {self.tensor_id}: dim {i} has shape {s}, stride {st}, offset {o}; "
                    "shapes and strides must be >= 1 and offsets >= 0")
            if p < s:
                raise VerifyException(
                    f"tensor {self.tensor_id}: padded shape {padded} is smaller than shape "
                    f"{shape} in dim {i}")
            if o + p > st:
                raise VerifyException(
                    f"tensor {self.tensor_id}: offsets + shape exceed strides in dim {i} "
                    f"({o} + {p} > {st})")

    # -- syntax ------------------------------------------------------------------------------

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        # Errors found once the type is whole are placed on it, not on the token after it
        # (for the last op of a block that was the block's `}`).
        start = parser.pos
        with parser.in_angle_brackets():
            tensor_id = parse_int(parser)
            parser.parse_punctuation(",")
            at = parser.pos
            dtype = parser.parse_identifier()
            if dtype not in DATA_TYPE_BYTES:
                from ground.diagnostics import did_you_mean

                parser.raise_error(f"tensor {tensor_id}: unknown data type '{dtype}'"
                                   f"{did_you_mean(dtype, DATA_TYPE_BYTES)} (expected one of "
                                   f"{', '.join(DATA_TYPE_BYTES)})", at, at + len(dtype))
            parser.parse_punctuation(",")
            shape = _parse_ints(parser)
            strides = offsets = None
            padded: Attribute = NoneAttr()
            pads: Attribute = NoneAttr()
            buffer = extra = None
            while parser.parse_optional_punctuation(","):
                key = parser.parse_identifier()
                if key == "strides":
                    strides = _parse_ints(parser)
                elif key == "offsets":
                    offsets = _parse_ints(parser)
                elif key == "padded":
                    padded = _ints(_parse_optional_ints(parser, shape))
                elif key == "pads":
                    pads = _ints(_parse_ints(parser))
                elif key == "buffer":
                    if parser.parse_optional_punctuation("<"):
                        buffer = BufferAttr(*_parse_buffer_body(parser))
                        parser.parse_punctuation(">")
                    else:
                        buffer = BufferAttr.get(parse_int(parser))
                elif key == "extra":
                    extra = parser.parse_attribute()
                else:
                    parser.raise_error(f"unexpected tensor field '{key}'")
            if buffer is None:
                parser.raise_error("tensor type needs a buffer")
            end = parser.pos + 1        # after the closing `>`
        default_strides = (shape if isinstance(padded, NoneAttr)
                           else list(padded.get_values()))
        params = (IntAttr(tensor_id), StringAttr(dtype), _ints(shape),
                  _ints(strides if strides is not None else default_strides),
                  _ints(offsets if offsets is not None else [0] * len(shape)),
                  padded, pads, buffer, extra or DictionaryAttr({}))
        try:
            TensorType(*params)  # report layout errors as parse errors, at the type
        except VerifyException as e:
            parser.raise_error(str(e), start, end)
        return params

    def print_parameters(self, printer: Printer) -> None:
        shape = self.shape_list
        printer.print_string(f"<{self.tensor_id}, {self.data_type}, ")
        _print_ints(printer, shape)
        default_strides = self.padded_list
        if self.strides_list != default_strides:
            printer.print_string(", strides ")
            _print_ints(printer, self.strides_list)
        if any(self.offsets_list):
            printer.print_string(", offsets ")
            _print_ints(printer, self.offsets_list)
        if not isinstance(self.padded_shape, NoneAttr):
            printer.print_string(", padded")
            if self.padded_list != shape:
                printer.print_string(" ")
                _print_ints(printer, self.padded_list)
        if not isinstance(self.pads, NoneAttr):
            printer.print_string(", pads ")
            _print_ints(printer, self.pads.get_values())
        printer.print_string(", buffer ")
        if self.buffer.is_plain():
            printer.print_string(str(self.buffer_id))
        else:
            printer.print_string("<")
            _print_buffer_body(printer, self.buffer)
            printer.print_string(">")
        if self.extra.data:
            printer.print_string(", extra ")
            printer.print_attribute(self.extra)
        printer.print_string(">")


def _parse_optional_ints(parser: AttrParser, default: list[int]) -> list[int]:
    """`[1, 2]`, or nothing at all, meaning `default`."""
    values = parser.parse_optional_comma_separated_list(
        parser.Delimiter.SQUARE, lambda: parse_int(parser))
    return list(default) if values is None else values


# ---------------------------------------------------------------------------------------------
# Op arguments
# ---------------------------------------------------------------------------------------------

si32 = IntegerType(32, Signedness.SIGNED)
ui32 = IntegerType(32, Signedness.UNSIGNED)
si64 = IntegerType(64, Signedness.SIGNED)
ui64 = IntegerType(64, Signedness.UNSIGNED)


class ArgKind(Enum):
    """The ARK argument type tags and the attribute each one is stored as.

    The attribute type identifies the tag, so an argument's tag survives a round trip without
    being stored separately: INT is `si32`, UINT32 `ui32`, INT64 `si64`, UINT64 `ui64`, BOOL
    `i1`, FLOAT an `f64` float (ARK stores float32; f64 keeps the file's decimal exactly),
    DIMS a dense i64 array, TENSOR a tensor type, OFFSET an `#ark.offset`.
    """

    INT = "INT"
    UINT32 = "UINT32"
    INT64 = "INT64"
    UINT64 = "UINT64"
    BOOL = "BOOL"
    FLOAT = "FLOAT"
    DIMS = "DIMS"
    TENSOR = "TENSOR"
    OFFSET = "OFFSET"

    @staticmethod
    def of(attr: Attribute) -> ArgKind:
        match attr:
            case IntegerAttr(type=IntegerType() as t):
                kind = _INTEGER_KINDS.get((t.width.data, t.signedness.data))
                if kind is not None:
                    return kind
            case FloatAttr():
                return ArgKind.FLOAT
            case DenseArrayBase():
                return ArgKind.DIMS
            case TensorType():
                return ArgKind.TENSOR
            case OffsetAttr():
                return ArgKind.OFFSET
        raise ValueError(f"{attr} is not an ARK argument")


_INTEGER_KINDS = {
    (32, Signedness.SIGNED): ArgKind.INT,
    (32, Signedness.UNSIGNED): ArgKind.UINT32,
    (64, Signedness.SIGNED): ArgKind.INT64,
    (64, Signedness.UNSIGNED): ArgKind.UINT64,
    (1, Signedness.SIGNLESS): ArgKind.BOOL,
}
_INTEGER_TYPES = {kind: IntegerType(w, s) for (w, s), kind in _INTEGER_KINDS.items()}


def int_arg(kind: ArgKind, value: int) -> IntegerAttr:
    """An integer-valued argument of `kind` (range-checked by the attribute verifier;
    shared, as attributes are immutable: models repeat the same few flags and axes)."""
    return _int_arg(kind, int(value))


@functools.lru_cache(maxsize=1024)
def _int_arg(kind: ArgKind, value: int) -> IntegerAttr:
    return IntegerAttr(value, _INTEGER_TYPES[kind])


def float_arg(value: float) -> FloatAttr:
    return FloatAttr(float(value), f64)


def dims_arg(values: Sequence[int]) -> DenseArrayBase:
    return _ints(values)


def arg_value(attr: Attribute) -> int | bool | float | list[int] | Attribute:
    """The Python value of an argument attribute (bools as bool, DIMS as a list)."""
    match ArgKind.of(attr):
        case ArgKind.BOOL:
            return bool(attr.value.data)
        case ArgKind.INT | ArgKind.UINT32 | ArgKind.INT64 | ArgKind.UINT64:
            return attr.value.data
        case ArgKind.FLOAT:
            return attr.value.data
        case ArgKind.DIMS:
            return list(attr.get_values())
        case _:
            return attr


@dataclass(frozen=True)
class ArgSpec:
    """One argument an op type takes: its JSON key, property name and type tag."""

    key: str
    prop: str
    kind: ArgKind


# ---------------------------------------------------------------------------------------------
# Operators
# ---------------------------------------------------------------------------------------------

UNBOUNDED = 1 << 30


@dataclass(frozen=True)
class Arity:
    """How many read, write and result tensors an op type takes: (min, max) each."""

    reads: tuple[int, int]
    writes: tuple[int, int]
    results: tuple[int, int]

    @staticmethod
    def exactly(reads: int, writes: int, results: int) -> Arity:
        return Arity((reads, reads), (writes, writes), (results, results))


def _count(n: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= n <= bounds[1]


def _phrase(bounds: tuple[int, int], noun: str) -> str:
    lo, hi = bounds
    if lo == hi:
        return f"{lo} {noun}{'s' if lo != 1 else ''}"
    if hi >= UNBOUNDED:
        return f"at least {lo} {noun}s"
    return f"{lo} to {hi} {noun}s"


@functools.lru_cache(maxsize=256)
def _segment_sizes(sizes: tuple[int, ...]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i32, list(sizes))


def build_fast(op: IRDLOperation, groups: list[list[SSAValue]], result_types: list[Attribute],
               properties: dict[str, Attribute], location: Attribute | None = None) -> None:
    """What `IRDLOperation.__init__(operands=groups, result_types=..., properties=...)`
    builds for an op whose operand segments are sized by a property and whose results are
    `result_types` (one variadic or single definition), at a third of the cost: the segment
    sizes attribute is shared by all ops of equal sizes (attributes are immutable) and the
    generic builder's per-definition bookkeeping is skipped (`assemble`). Anything but plain
    SSA values, or a count its definitions do not allow, takes the generic builder (and its
    errors). `location`, when given, is the op's location."""
    operands = [v for group in groups for v in group]
    single_result, optional_first = _definition_shape(type(op))
    if (single_result and len(result_types) != 1) or not (
            _PLAIN_VALUES.issuperset(map(type, operands))
            or all(isinstance(v, SSAValue) for v in operands)) or len(groups) != 2 or \
            (optional_first and len(groups[0]) > 1):
        IRDLOperation.__init__(op, operands=groups, properties=properties,
                               result_types=result_types if single_result else [result_types])
        if location is not None:
            op.location = location
        return
    properties = {k: v for k, v in properties.items() if v is not None}
    properties["operandSegmentSizes"] = _segment_sizes(tuple(len(g) for g in groups))
    assemble(op, operands, result_types, properties, location)


@functools.cache
def _string_attr(text: str) -> StringAttr:
    """`StringAttr(text)` of a str, put together directly (a str is all it checks)."""
    attr = StringAttr.__new__(StringAttr)
    attr.__dict__["data"] = text
    return attr


def _i64(value: int) -> IntegerAttr:
    """`i64_attr(value)`; an int in the signed range (which it checks) put together directly."""
    if type(value) is not int or not -(1 << 63) <= value < (1 << 63):
        return i64_attr(value)
    attr = IntegerAttr.__new__(IntegerAttr)
    fields = attr.__dict__
    fields["value"] = _int_attr(value)
    fields["type"] = i64
    return attr


string_attr = _string_attr.__wrapped__
"""`_string_attr` not remembered (for importers' labels, which are mostly all different)."""


int64_attr = _i64
"""`_i64` for importers that make an operator's properties themselves (`ArkOp.assembled`)."""


@functools.cache
def _definition_shape(cls: type[IRDLOperation]) -> tuple[bool, bool]:
    """(a single result, an optional first operand) of an op class's definition."""
    op_def = cls.get_irdl_definition()
    return (not isinstance(op_def.results[0][1], VarResultDef),
            isinstance(op_def.operands[0][1], OptOperandDef))


_PLAIN_VALUES = frozenset({OpResult, BlockArgument})
"""The SSA value classes an op is usually built from (`isinstance` on the others)."""

_VIEW_SEGMENTS = (_segment_sizes((0, 0)), _segment_sizes((1, 0)))


def assemble(op: Operation, operands: Sequence[SSAValue], result_types: Sequence[Attribute],
             properties: dict[str, Attribute], location: Attribute | None = None) -> None:
    """`Operation.__init__(op, operands=..., result_types=..., properties=...)` with its
    fields set directly: the same uses, results and dictionaries (`properties` is taken, not
    copied), without the generic setters' work for the regions, successors and attributes
    such an op does not have (a quarter of importing a large model went to that)."""
    uses = []
    for index, value in enumerate(operands):
        use = Use(op, index)
        first = value.first_use      # `SSAValue.add_use`, which this inlines
        if first is not None:        # (a new use's links are None already)
            use._next_use = first  # noqa: SLF001
            first._prev_use = use  # noqa: SLF001
        value.first_use = use
        uses.append(use)
    # Plain attribute assignments, not `op.__dict__[...]`: asking for the instance's
    # dictionary makes CPython build one instead of keeping the values inline.
    op._operands = SSAValues(operands)  # noqa: SLF001
    op._operand_uses = tuple(uses)  # noqa: SLF001
    op.results = SSAValues((OpResult(result_types[0], op, 0),)) if len(result_types) == 1 \
        else SSAValues([OpResult(t, op, i) for i, t in enumerate(result_types)])
    op.properties = properties
    op.attributes = {}
    op.location = UNKNOWN_LOC if location is None else location
    op._successors = op._successor_uses = op.regions = ()  # noqa: SLF001




class ArkOp(IRDLOperation, ABC):
    """An ARK operator. Subclasses set TYPE (the ARK type name), ARITY and ARGS.

    Operands are the read tensors then the write tensors; results are the result tensors.
    `label` is the op's Name. `node` is the id of the model node holding it (models); `task`
    the id of the TaskInfo holding it (plans, see the `plan` dialect).
    `virtual` is stored only when it differs from the type's usual IsVirtual. `config` is the
    plan-file Config. `extra`, `extra_args` and `node_info` keep what the file says beyond this
    dialect (unknown keys, unknown args, producer/consumer order) for a faithful export.
    """

    read_tensors = var_operand_def(TensorType)
    write_tensors = var_operand_def(TensorType)
    result_tensors = var_result_def(TensorType)

    label = prop_def(StringAttr)
    node = opt_prop_def(IntegerAttr)
    task = opt_prop_def(IntegerAttr)
    virtual = opt_prop_def(BoolAttr)
    config = opt_prop_def(DictionaryAttr)
    extra = opt_prop_def(DictionaryAttr)
    extra_args = opt_prop_def(DictionaryAttr)
    node_info = opt_prop_def(DictionaryAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())
    FORMAT: ClassVar[str] = (
        "$label (`reads` `(` $read_tensors^ `:` type($read_tensors) `)`)? "
        "(`writes` `(` $write_tensors^ `:` type($write_tensors) `)`)? "
        "attr-dict (`->` type($result_tensors)^)?"
    )
    """The assembly format of every operator, read on first use (`_format_on_first_use`)."""

    TYPE: ClassVar[str]
    ARITY: ClassVar[Arity]
    ARGS: ClassVar[tuple[ArgSpec, ...]] = ()
    IS_VIRTUAL: ClassVar[bool] = False
    RESULT_ALIASES: ClassVar[str | None] = "write"
    """Which operands result i aliases: "write" (write i), "read" (read i) or None."""

    def __init__(
        self,
        label: str,
        reads: Sequence[SSAValue],
        writes: Sequence[SSAValue],
        result_types: Sequence[TensorType],
        *,
        args: dict[str, Attribute] | None = None,
        node: int | None = None,
        task: int | None = None,
        virtual: bool | None = None,
        config: DictionaryAttr | None = None,
        extra: DictionaryAttr | None = None,
        extra_args: DictionaryAttr | None = None,
        node_info: DictionaryAttr | None = None,
        location: Attribute | None = None,
    ):
        properties: dict[str, Attribute] = {
            "label": _string_attr(label) if type(label) is str else StringAttr(label)}
        if args:
            properties.update(args)
        # The optional properties that are given, in this order (an import makes thousands
        # of operators, most with a node id and nothing else).
        if node is not None:
            properties["node"] = _i64(node)
        if task is not None:
            properties["task"] = _i64(task)
        if virtual is not None and virtual != self.IS_VIRTUAL:
            properties["virtual"] = IntegerAttr(int(virtual), i1)
        if config is not None:
            properties["config"] = config
        if extra is not None:
            properties["extra"] = extra
        if extra_args is not None:
            properties["extra_args"] = extra_args
        if node_info is not None:
            properties["node_info"] = node_info
        reads, writes = tuple(reads), tuple(writes)
        operands = reads + writes
        if not _PLAIN_VALUES.issuperset(map(type, operands)):
            build_fast(self, [list(reads), list(writes)], list(result_types), properties,
                       location)
            return
        # `build_fast` for the definitions every operator has (two variadic operand groups,
        # variadic results), with the values already known to be plain SSA values.
        if args:
            properties = {k: v for k, v in properties.items() if v is not None}
        properties["operandSegmentSizes"] = _segment_sizes((len(reads), len(writes)))
        assemble(self, operands, result_types, properties, location)

    @classmethod
    def assembled(cls, properties: dict[str, Attribute], operands: list[SSAValue],
                  reads: int, result_types: Sequence[TensorType],
                  location: Attribute) -> ArkOp:
        """`cls(label, operands[:reads], operands[reads:], result_types, ...)` for plain SSA
        values (`OpResult`s and `BlockArgument`s), given the properties `__init__` would
        make, in its order (label, the typed arguments, node, task, virtual, config, extra,
        extra_args, node_info; none of them None): the same op without the keyword
        processing. `properties` is taken, not copied."""
        op = cls.__new__(cls)
        properties["operandSegmentSizes"] = _segment_sizes((reads, len(operands) - reads))
        assemble(op, operands, result_types, properties, location)
        return op

    # -- what passes and backends ask ----------------------------------------------------------

    @property
    def ark_type(self) -> str:
        return self.TYPE

    @property
    def is_virtual(self) -> bool:
        return bool(self.virtual.value.data) if self.virtual is not None else self.IS_VIRTUAL

    @property
    def node_id(self) -> int | None:
        return None if self.node is None else self.node.value.data

    @property
    def task_id(self) -> int | None:
        return None if self.task is None else self.task.value.data

    def config_value(self) -> dict:
        """The plan Config as plain JSON values ({} outside plans)."""
        from dialects.json_value import dict_value

        return dict_value(self.config)

    def arg_attrs(self) -> dict[str, Attribute]:
        """All arguments by JSON key (typed and extra), in ARK's alphabetical order."""
        found = {spec.key: getattr(self, spec.prop) for spec in self.ARGS}
        found = {k: v for k, v in found.items() if v is not None}
        if self.extra_args is not None:
            found.update(self.extra_args.data)
        return dict(sorted(found.items()))

    def tensor_type(self, value: SSAValue) -> TensorType:
        assert isinstance(value.type, TensorType)
        return value.type

    def operand_groups(self) -> tuple[tuple[SSAValue, ...], tuple[SSAValue, ...]]:
        """(read tensors, write tensors), the same as `read_tensors` and `write_tensors` but
        several times faster: the segment sizes are unpacked once per attribute, not on
        every access (passes over large models ask for them constantly)."""
        operands = self._operands
        sizes = self.properties["operandSegmentSizes"]
        cached = self.__dict__.get("_planc_groups")
        if cached is not None and cached[0] is operands and cached[1] is sizes:
            return cached[2]
        counts = sizes.__dict__.get("_planc_counts")
        if counts is None:
            counts = sizes.__dict__["_planc_counts"] = tuple(sizes.get_values())
        plain = tuple.__getitem__
        groups = (plain(operands, slice(0, counts[0])), plain(operands, slice(counts[0], None)))
        # Kept until the operands or their segment sizes are replaced (both are immutable
        # values that an update swaps for new ones, so identity says whether they changed).
        self.__dict__["_planc_groups"] = (operands, sizes, groups)
        return groups

    @property
    def inputs(self) -> list[TensorType]:
        return [v.type for v in self.operand_groups()[0]]

    @property
    def outputs(self) -> list[TensorType]:
        return [v.type for v in self.operand_groups()[1]]

    @property
    def results_types(self) -> list[TensorType]:
        return [self.tensor_type(v) for v in self.results]

    # -- verification -------------------------------------------------------------------------

    def fail(self, message: str) -> VerifyException:
        return VerifyException(f"{self.TYPE} '{self.label.data}': {message}")

    def verify_(self) -> None:
        reads, writes = self.operand_groups()  # the generic rules (segment sizes) held
        for operands, bounds, noun in (
            (reads, self.ARITY.reads, "read tensor"),
            (writes, self.ARITY.writes, "write tensor"),
            (self.results, self.ARITY.results, "result tensor"),
        ):
            if not _count(len(operands), bounds):
                raise self.fail(f"expected {_phrase(bounds, noun)}, got {len(operands)}")
        properties = self.properties
        for spec in self.ARGS:
            if properties.get(spec.prop) is None:
                raise self.fail(f"missing argument {spec.key} ({spec.kind.value})")
        self._verify_aliases()

    def _verify_aliases(self) -> None:
        if self.RESULT_ALIASES is None:
            return
        reads, writes = self.operand_groups()
        for value, source_value in zip(self.results, writes if self.RESULT_ALIASES == "write"
                                       else reads, strict=False):
            result, source = value.type, source_value.type
            if (result.buffer is source.buffer or result.buffer_id == source.buffer_id) and \
                    (result.shape is source.shape or result.shape_tuple == source.shape_tuple):
                continue   # equal attributes are often the same object: shared on import
            if result.buffer_id != source.buffer_id or \
                    result.shape_tuple != source.shape_tuple:
                raise self.fail(
                    f"result tensor {result.tensor_id} must alias {self.RESULT_ALIASES} tensor "
                    f"{source.tensor_id} (buffer {source.buffer_id}, shape {source.shape_list}), "
                    f"but is on buffer {result.buffer_id} with shape {result.shape_list}")

    def check_same_dtype(self, *tensors: TensorType) -> None:
        first = tensors[0].dtype.data
        if all(t.dtype.data == first for t in tensors):
            return
        dtypes = {t.data_type for t in tensors}
        if len(dtypes) > 1:
            listing = ", ".join(f"tensor {t.tensor_id} is {t.data_type}" for t in tensors)
            raise self.fail(f"data types differ: {listing}")

    def check_shape(self, tensor: TensorType, expected: Sequence[int], why: str) -> None:
        if tensor.shape_list != list(expected):
            raise self.fail(f"tensor {tensor.tensor_id} has shape {tensor.shape_list}, "
                            f"expected {list(expected)} ({why})")

    # -- the verdict of repeated operators ----------------------------------------------------

    VERDICT_READS: ClassVar[tuple[str, ...]] = ()
    """Properties whose values (beyond their class) this class's rules read besides its
    ARGS (which `verdict_key` always keys by value); a subclass whose `verify_` reads
    another property names it here."""

    def verify_quickly(self) -> tuple | bool:
        """Verify the op (xDSL's generic rules and `verify_`) and return its `verdict_key`
        (a true value), remembering that it passed: an operator whose key passed before
        passes again, so only its aliasing (which reads the buffers, not in the key) is
        checked. Raises as `fast_verify.verify_op` does; False (nothing checked) for an
        unusual op (regions, successors, discardable attributes, a value not of
        `TensorType`), which the caller verifies the usual way. Generated models repeat a
        few operator shapes thousands of times. The key also serves callers whose own
        checks read no more than it holds (a plan's Config checks)."""
        if self.regions or self._successors or self.attributes:
            return False
        found = verdict_key(self)
        if found is None:
            return False
        key, objects, types = found
        if key in _PASSED and _aliases_hold(self, types):
            return key
        verify_op(self)  # every rule, with its own message when one fails
        if len(_PASSED) >= 4096:
            _PASSED.clear()
        _PASSED[key] = objects
        return key


_PASSED: dict[tuple, tuple] = {}
"""The `verdict_key`s of operators that passed verification, each with the attributes
whose identities the key holds (kept alive here, so those ids are not reused)."""


def verdict_key(op: ArkOp) -> tuple[tuple, tuple, tuple[TensorType, ...]] | None:
    """(key, attributes it names by identity, the operands' then the results' types):
    everything the verification of `op` reads
    but the tensors' buffers (`_aliases_hold`), ids and names (messages only). The key holds
    the class; the properties' names and classes, and by identity (attributes are
    immutable) the properties whose rules read more than their class (ARGS,
    `VERDICT_READS`, constraints other than "an attribute of class X", the segment sizes);
    the operand count; and per operand and result its tensor's layout (data type, shape,
    strides, offsets, padded shape, pads, extra, as one shared object: `_layout_of`). None
    when a value is not exactly a `TensorType` (the usual verification decides)."""
    cls = type(op)
    read = _READ_PROPERTIES.get(cls)
    if read is None:
        read = _READ_PROPERTIES[cls] = _read_properties(cls)
    props = op.properties
    read_values = tuple(map(props.get, read))
    operands = op._operands  # noqa: SLF001 -- `operands`, a tuple
    types = (*map(_TYPE_OF, operands), *map(_TYPE_OF, op.results))
    layouts = []
    for tensor in types:
        if type(tensor) is not TensorType:
            return None
        layout = tensor.__dict__.get("_planc_layout")
        layouts.append(layout if layout is not None else _layout_of(tensor))
    key = (cls, tuple(props), tuple(map(type, props.values())), tuple(map(id, read_values)),
           len(operands), *map(id, layouts))
    return key, (read_values, layouts), types


_TYPE_OF = operator.attrgetter("_type")
"""`value.type`, without the property."""

_LAYOUTS: dict[tuple[int, ...], tuple[Attribute, ...]] = {}
"""One tuple per distinct layout, by the identities of its attributes (which it keeps
alive). Clearing it is safe: a tensor keeps its tuple, whose id stays its own."""


def _layout_of(tensor: TensorType) -> tuple[Attribute, ...]:
    """The tensor's parameters but its id and buffer, as a tuple shared by the tensors of
    equal (identical) attributes and kept with the (immutable) tensor."""
    fields = tensor.__dict__
    attrs = (fields["dtype"], fields["shape"], fields["strides"], fields["offsets"],
             fields["padded_shape"], fields["pads"], fields["extra"])
    ids = tuple(map(id, attrs))
    layout = _LAYOUTS.get(ids)
    if layout is None:
        if len(_LAYOUTS) >= 65536:
            _LAYOUTS.clear()
        layout = _LAYOUTS[ids] = attrs
    fields["_planc_layout"] = layout
    return layout


_READ_PROPERTIES: dict[type, tuple[str, ...]] = {}


def _read_properties(cls: type[ArkOp]) -> tuple[str, ...]:
    """The properties `verdict_key` keys by identity for `cls`: those whose check reads more
    than the attribute's class."""
    from dialects.fast_verify import plain_class_properties

    plain = plain_class_properties(cls)
    names = {name for name in cls.get_irdl_definition().properties if name not in plain}
    names |= {spec.prop for spec in cls.ARGS} | set(cls.VERDICT_READS)
    return tuple(sorted(names | {"operandSegmentSizes"}))


def _aliases_hold(op: ArkOp, types: tuple[TensorType, ...]) -> bool:
    """Whether `op`, whose operands' then results' types are `types` (each a `TensorType`)
    and whose segment sizes hold, passes `_verify_aliases` (False also when unsure)."""
    aliases = op.RESULT_ALIASES
    if aliases is None:
        return True
    count = len(op._operands)  # noqa: SLF001 -- `operands`, a tuple
    sizes = op.properties["operandSegmentSizes"]
    reads = sizes.__dict__.get("_planc_counts")
    if reads is None:
        reads = sizes.__dict__["_planc_counts"] = tuple(sizes.get_values())
    reads = reads[0]
    sources = types[reads:count] if aliases == "write" else types[:reads]
    for result, source in zip(types[count:], sources, strict=False):
        buffer, source_buffer = result.buffer, source.buffer
        if buffer is not source_buffer and buffer.id.data != source_buffer.id.data:
            return False
        if result.shape is not source.shape and \
                int_values(result.shape) != int_values(source.shape):
            return False
    return True


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> list[int] | None:
    """NumPy broadcasting of two shapes, or None when they are incompatible."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return out[::-1]


@functools.lru_cache(maxsize=4096)
def _broadcasts_to(shape: tuple[int, ...], out: tuple[int, ...]) -> bool:
    """Whether `shape` broadcasts to exactly `out` (a pure function of two shapes: models
    repeat a few pairs in thousands of operators)."""
    return broadcast_shapes(shape, out) == list(out)


@functools.lru_cache(maxsize=4096)
def _broadcast_output_ok(a: tuple[int, ...], b: tuple[int, ...], out: tuple[int, ...]) -> bool:
    """Whether `a` and `b` broadcast, to `out` up to leading ones (`BinaryOp`'s rule)."""
    expected = broadcast_shapes(a, b)
    return expected is not None and _same_modulo_leading_ones(out, expected)


def _same_modulo_leading_ones(a: Sequence[int], b: Sequence[int]) -> bool:
    n = max(len(a), len(b))
    return [1] * (n - len(a)) + list(a) == [1] * (n - len(b)) + list(b)


class UnaryOp(ArkOp, ABC):
    """Broadcast1 family: one input broadcast onto the output, element by element."""

    ARITY: ClassVar[Arity] = Arity.exactly(1, 1, 1)
    SAME_DTYPE: ClassVar[bool] = True

    def verify_(self) -> None:
        super().verify_()
        (x,), (out,) = self.inputs, self.outputs
        if not _broadcasts_to(x.shape_tuple, out.shape_tuple):
            raise self.fail(f"input shape {x.shape_list} does not broadcast to output shape "
                            f"{out.shape_list}")
        if self.SAME_DTYPE:
            self.check_same_dtype(x, out)


class BinaryOp(ArkOp, ABC):
    """Broadcast2 family: two inputs with NumPy broadcasting."""

    ARITY: ClassVar[Arity] = Arity.exactly(2, 1, 1)

    def verify_(self) -> None:
        super().verify_()
        (a, b), (out,) = self.inputs, self.outputs
        if _broadcast_output_ok(a.shape_tuple, b.shape_tuple, out.shape_tuple):
            self.check_same_dtype(a, b, out)
            return
        expected = broadcast_shapes(a.shape_list, b.shape_list)
        if expected is None:
            raise self.fail(f"shapes {a.shape_list} and {b.shape_list} do not broadcast")
        if not _same_modulo_leading_ones(out.shape_list, expected):
            raise self.fail(f"output shape {out.shape_list} is not the broadcast shape "
                            f"{expected} of {a.shape_list} and {b.shape_list}")
        self.check_same_dtype(a, b, out)


def _op(type_name: str, op_name: str, base: type[ArkOp], doc: str, **classvars) -> type[ArkOp]:
    """Define a concrete op class of an ARK type that needs no code of its own."""
    constants = {"TYPE": type_name, **{k: v for k, v in classvars.items() if k.isupper()}}
    fields = {k: v for k, v in classvars.items() if not k.isupper()}
    cls = type(f"{type_name}Op", (base,), {
        "__doc__": doc, "name": op_name, "__module__": __name__, **constants, **fields,
        # IRDL accepts upper-case constants only when annotated as ClassVar.
        "__annotations__": {k: ClassVar for k in constants}})
    return irdl_op_definition(cls)


AddOp = _op("Add", "ark.add", BinaryOp, "Element-wise sum with broadcasting.")
SubOp = _op("Sub", "ark.sub", BinaryOp, "Element-wise difference with broadcasting.")
MulOp = _op("Mul", "ark.mul", BinaryOp, "Element-wise product with broadcasting.")
DivOp = _op("Div", "ark.div", BinaryOp, "Element-wise quotient with broadcasting.")
RopeOp = _op("Rope", "ark.rope", BinaryOp,
             "Rotary embedding: adjacent pairs of the input times pairs of `other`, as complex "
             "numbers (out0 = a0*b0 - a1*b1, out1 = a0*b1 + a1*b0).")
ExpOp = _op("Exp", "ark.exp", UnaryOp, "Element-wise e^x.")
GeluOp = _op("Gelu", "ark.gelu", UnaryOp, "Element-wise GELU (tanh approximation, as ARK).")
ReluOp = _op("Relu", "ark.relu", UnaryOp, "Element-wise max(x, 0).")
RsqrtOp = _op("Rsqrt", "ark.rsqrt", UnaryOp, "Element-wise 1/sqrt(x).")
SigmoidOp = _op("Sigmoid", "ark.sigmoid", UnaryOp, "Element-wise 1/(1+e^-x).")
SqrtOp = _op("Sqrt", "ark.sqrt", UnaryOp, "Element-wise sqrt(x).")
CopyOp = _op("Copy", "ark.copy", UnaryOp, "Copies (and broadcasts) the input into the output.")
CastOp = _op("Cast", "ark.cast", UnaryOp,
             "Converts the input to the output's data type.", SAME_DTYPE=False)
ScalarAddOp = _op("ScalarAdd", "ark.scalar_add", UnaryOp, "x + Factor.",
                  ARGS=(ArgSpec("Factor", "factor", ArgKind.FLOAT),),
                  factor=opt_prop_def(FloatAttr[AnyFloat]))
ScalarMulOp = _op("ScalarMul", "ark.scalar_mul", UnaryOp, "x * Factor.",
                  ARGS=(ArgSpec("Factor", "factor", ArgKind.FLOAT),),
                  factor=opt_prop_def(FloatAttr[AnyFloat]))


@irdl_op_definition
class ScalarAssignOp(ArkOp):
    """Fills the output with the scalar Value."""

    name = "ark.scalar_assign"
    TYPE: ClassVar[str] = "ScalarAssign"
    ARITY: ClassVar[Arity] = Arity.exactly(0, 1, 1)
    ARGS: ClassVar[tuple[ArgSpec, ...]] = (ArgSpec("Value", "value", ArgKind.FLOAT),)
    value = opt_prop_def(FloatAttr[AnyFloat])


@irdl_op_definition
class MatmulOp(ArkOp):
    """Batched matrix product of `input` [.., M, K] and `other` [.., K, N] into [.., M, N].

    TransposeInput/TransposeOther transpose the last two dims of the respective operand first;
    leading (batch) dims broadcast.
    """

    name = "ark.matmul"
    TYPE: ClassVar[str] = "Matmul"
    ARITY: ClassVar[Arity] = Arity.exactly(2, 1, 1)
    ARGS: ClassVar[tuple[ArgSpec, ...]] = (
        ArgSpec("TransposeInput", "transpose_input", ArgKind.BOOL),
        ArgSpec("TransposeOther", "transpose_other", ArgKind.BOOL))
    transpose_input = opt_prop_def(BoolAttr)
    transpose_other = opt_prop_def(BoolAttr)

    @property
    def trans_input(self) -> bool:
        return self.transpose_input is not None and bool(self.transpose_input.value.data)

    @property
    def trans_other(self) -> bool:
        return self.transpose_other is not None and bool(self.transpose_other.value.data)

    def problem_mnk(self) -> tuple[int, int, int]:
        """(M, N, K) from the logical shapes, honouring the transposes."""
        (a, b) = (t.shape_list for t in self.inputs)
        a2, b2 = ([1] + a)[-2:], ([1] + b)[-2:]
        m, k = (a2[1], a2[0]) if self.trans_input else (a2[0], a2[1])
        k2, n = (b2[1], b2[0]) if self.trans_other else (b2[0], b2[1])
        if k != k2:
            raise self.fail(
                f"inner dimensions differ: input {a} gives K = {k} (TransposeInput "
                f"{str(self.trans_input).lower()}), other {b} gives K = {k2} (TransposeOther "
                f"{str(self.trans_other).lower()})")
        return m, n, k

    def verify_(self) -> None:
        super().verify_()
        (a, b), (out,) = self.inputs, self.outputs
        self.check_same_dtype(a, b, out)
        m, n, _ = self.problem_mnk()
        batch = broadcast_shapes(a.shape_list[:-2], b.shape_list[:-2])
        if batch is None:
            raise self.fail(f"batch dims of {a.shape_list} and {b.shape_list} do not broadcast")
        if not _same_modulo_leading_ones(out.shape_list, [*batch, m, n]):
            raise self.fail(f"output shape {out.shape_list} should be {[*batch, m, n]}")


class ReduceOp(ArkOp, ABC):
    """Reduction along `axis`; with keep_dim the axis stays with size 1."""

    ARITY: ClassVar[Arity] = Arity.exactly(1, 1, 1)
    ARGS: ClassVar[tuple[ArgSpec, ...]] = (ArgSpec("Axis", "axis", ArgKind.INT),
                                           ArgSpec("KeepDim", "keep_dim", ArgKind.BOOL))
    axis = opt_prop_def(IntegerAttr)
    keep_dim = opt_prop_def(BoolAttr)

    @property
    def axis_index(self) -> int:
        return self.axis.value.data

    @property
    def keeps_dim(self) -> bool:
        return bool(self.keep_dim.value.data)

    def reduced_shape(self, shape: Sequence[int]) -> list[int]:
        axis = self.axis_index
        if self.keeps_dim:
            return [1 if i == axis else d for i, d in enumerate(shape)]
        return [d for i, d in enumerate(shape) if i != axis] or [1]

    def verify_(self) -> None:
        super().verify_()
        (x,), (out,) = self.inputs, self.outputs
        if not 0 <= self.axis_index < len(x.shape_list):
            raise self.fail(f"Axis {self.axis_index} is out of range for a "
                            f"{len(x.shape_list)}-dim input")
        self.check_shape(out, self.reduced_shape(x.shape_list),
                         f"reducing axis {self.axis_index} of {x.shape_list}, "
                         f"KeepDim {str(self.keeps_dim).lower()}")
        self.check_same_dtype(x, out)


ReduceSumOp = _op("ReduceSum", "ark.reduce_sum", ReduceOp, "Sum along Axis.")
ReduceMaxOp = _op("ReduceMax", "ark.reduce_max", ReduceOp, "Maximum along Axis.")
ReduceMeanOp = _op("ReduceMean", "ark.reduce_mean", ReduceOp, "Mean along Axis.")


@irdl_op_definition
class TransposeOp(ArkOp):
    """Permutes dims: output dim i is input dim Permutation[i]."""

    name = "ark.transpose"
    TYPE: ClassVar[str] = "Transpose"
    ARITY: ClassVar[Arity] = Arity.exactly(1, 1, 1)
    ARGS: ClassVar[tuple[ArgSpec, ...]] = (ArgSpec("Permutation", "permutation", ArgKind.DIMS),)
    permutation = opt_prop_def(DenseArrayBase)

    @property
    def perm(self) -> list[int]:
        return list(self.permutation.get_values())

    def verify_(self) -> None:
        super().verify_()
        (x,), (out,) = self.inputs, self.outputs
        perm, shape = self.perm, x.shape_list
        if sorted(perm) != list(range(len(shape))):
            raise self.fail(f"Permutation {perm} is not a permutation of the "
                            f"{len(shape)} dims of input {shape}")
        self.check_shape(out, [shape[p] for p in perm], f"input {shape} permuted by {perm}")
        self.check_same_dtype(x, out)


@irdl_op_definition
class EmbeddingOp(ArkOp):
    """Gathers rows of `weight` [V, D] by integer `indices` [..] into [.., D]."""

    name = "ark.embedding"
    TYPE: ClassVar[str] = "Embedding"
    ARITY: ClassVar[Arity] = Arity.exactly(2, 1, 1)

    def verify_(self) -> None:
        super().verify_()
        (indices, weight), (out,) = self.inputs, self.outputs
        if indices.data_type not in INTEGER_DATA_TYPES:
            raise self.fail(f"indices tensor {indices.tensor_id} must have an integer data "
                            f"type, got {indices.data_type}")
        if len(indices.shape_list) > 3:
            raise self.fail(f"indices shape {indices.shape_list} has more than 3 dims")
        if len(weight.shape_list) != 2:
            raise self.fail(f"weight shape {weight.shape_list} must have 2 dims")
        self.check_shape(out, [*indices.shape_list, weight.shape_list[-1]],
                         "indices shape followed by the embedding width")
        self.check_same_dtype(weight, out)


NoopOp = _op("Noop", "ark.noop", ArkOp, "Does nothing; orders its input before what follows.",
             ARITY=Arity.exactly(1, 0, 0), RESULT_ALIASES=None)


class CommOp(ArkOp, ABC):
    """Operators that move data between ranks; their peers are in the buffers' tags."""


SendOp = _op("Send", "ark.send", CommOp,
             "Puts the input into a buffer of a remote rank (the write tensor, Rank = remote).",
             ARITY=Arity.exactly(1, 1, 1))
SendDoneOp = _op("SendDone", "ark.send_done", CommOp,
                 "Waits until the sends of the input have completed; returns an alias of it.",
                 ARITY=Arity.exactly(1, 0, 1), RESULT_ALIASES="read")
RecvOp = _op("Recv", "ark.recv", CommOp,
             "Waits for data a remote rank sent (read: virtual tensor on the remote buffer) and "
             "returns the local output.", ARITY=Arity.exactly(1, 1, 1))
DeviceSyncOp = _op("DeviceSync", "ark.device_sync", CommOp,
                   "Barrier among PeerNum + 1 ranks.", ARITY=Arity.exactly(1, 1, 1),
                   ARGS=(ArgSpec("PeerNum", "peer_num", ArgKind.INT),
                         ArgSpec("Rank", "rank", ArgKind.INT)),
                   peer_num=opt_prop_def(IntegerAttr), rank=opt_prop_def(IntegerAttr))
SendPacketOp = _op("SendPacket", "ark.send_packet", CommOp,
                   "Writes the input to a remote scratch buffer as flagged packets (LL protocol).",
                   ARITY=Arity.exactly(1, 1, 1),
                   ARGS=(ArgSpec("Flag", "flag", ArgKind.UINT32),),
                   flag=opt_prop_def(IntegerAttr))
RecvPacketOp = _op("RecvPacket", "ark.recv_packet", CommOp,
                   "Reads flagged packets from a local scratch buffer into the output.",
                   ARITY=Arity.exactly(2, 1, 1),
                   ARGS=(ArgSpec("Flag", "flag", ArgKind.UINT32),),
                   flag=opt_prop_def(IntegerAttr))
RecvReduceSendPacketOp = _op(
    "RecvReduceSendPacket", "ark.recv_reduce_send_packet", CommOp,
    "Receives NPeers packet streams, reduces them into the output and forwards the result to "
    "the peers' outputs.",
    ARITY=Arity((2, 2), (1, UNBOUNDED), (1, 1)),
    ARGS=(ArgSpec("Flag", "flag", ArgKind.UINT32), ArgSpec("NPeers", "npeers", ArgKind.UINT32),
          ArgSpec("Rank", "rank", ArgKind.INT)),
    flag=opt_prop_def(IntegerAttr), npeers=opt_prop_def(IntegerAttr),
    rank=opt_prop_def(IntegerAttr))
RecvReduceSendOp = _op(
    "RecvReduceSend", "ark.recv_reduce_send", CommOp,
    "Reduces the peers' contributions into the output and writes it to the peers' outputs.",
    ARITY=Arity((2, 2), (1, UNBOUNDED), (1, 1)),
    ARGS=(ArgSpec("NPeers", "npeers", ArgKind.UINT32), ArgSpec("Rank", "rank", ArgKind.INT)),
    npeers=opt_prop_def(IntegerAttr), rank=opt_prop_def(IntegerAttr))


class VirtualOp(ArkOp, ABC):
    """Operators that compute nothing: their result describes data that already exists."""

    ARITY: ClassVar[Arity] = Arity((0, UNBOUNDED), (0, 0), (1, 1))
    IS_VIRTUAL: ClassVar[bool] = True
    RESULT_ALIASES: ClassVar[str | None] = None


TensorOp = _op("Tensor", "ark.tensor", VirtualOp,
               "The virtual `Tensor` operator: declares, reshapes or slices a tensor (its "
               "result). Reads are the source tensor (plus extra dependencies for identity "
               "views) or nothing. `ark-compress` removes these nodes the way ARK's "
               "Model::compress() does.")
ReshapeOp = _op("Reshape", "ark.reshape", VirtualOp,
                "The registered `Reshape` type. ARK itself serializes reshapes as virtual "
                "`Tensor` ops; this class exists so a file that does name the type keeps it.")


@irdl_op_definition
class GenericOp(ArkOp):
    """An operator of a type this dialect does not know, kept verbatim.

    `type_name` is its Type and `args` its Args (each arg stored as in `ArgKind`), so it
    survives import and export unchanged; passes treat it as opaque.
    """

    name = "ark.generic"
    TYPE: ClassVar[str] = "<generic>"
    ARITY: ClassVar[Arity] = Arity((0, UNBOUNDED), (0, UNBOUNDED), (0, UNBOUNDED))
    RESULT_ALIASES: ClassVar[str | None] = None
    type_name = prop_def(StringAttr)
    args = opt_prop_def(DictionaryAttr)

    @property
    def ark_type(self) -> str:
        return self.type_name.data

    def arg_attrs(self) -> dict[str, Attribute]:
        return dict(sorted(self.args.data.items())) if self.args is not None else {}

    def fail(self, message: str) -> VerifyException:
        return VerifyException(f"{self.ark_type} '{self.label.data}': {message}")


# ---------------------------------------------------------------------------------------------
# Graph structure
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
@format_on_first_use
class ViewOp(IRDLOperation):
    """A tensor object that no operator of this graph produces.

    Model inputs and weights, the fresh tensors operators write into, and tensors whose
    producing virtual node was removed (ARK's compressed models) are views. `source`, when
    present, is the value whose data the view aliases (a reshape or slice of it); `after` are
    further values it must wait for (what an ARK identity op adds). Both keep dependencies in
    SSA form.
    """

    name = "ark.view"
    source = opt_operand_def(TensorType)
    after = var_operand_def(TensorType)
    result = result_def(TensorType)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = ("(`of` $source^ `:` type($source))? "
                       "(`after` `(` $after^ `:` type($after) `)`)? attr-dict `:` type($result)")

    def __init__(self, tensor: TensorType, source: SSAValue | None = None,
                 after: Sequence[SSAValue] = (), *, location: Attribute | None = None):
        if not after and (source is None or type(source) in _PLAIN_VALUES):
            # `build_fast` for the commonest views: an optional source, nothing after.
            assemble(self, () if source is None else (source,), (tensor,),
                     {"operandSegmentSizes": _VIEW_SEGMENTS[source is not None]}, location)
            return
        build_fast(self, [[source] if source is not None else [], list(after)], [tensor], {},
                   location)

    def verify_quickly(self) -> bool:
        """True when the view meets its definition (xDSL's generic rules: views have no
        others), decided by direct tests for the usual view (shared segment sizes, an
        optional source, one result, every value a `TensorType`, nothing else); False, having
        checked nothing, for any other (the generic verification decides, in its words)."""
        props = self.properties
        sizes = props.get("operandSegmentSizes")
        if len(props) != 1 or self.regions or self._successors or self.attributes:
            return False
        operands, results = self._operands, self.results
        item = tuple.__getitem__  # `SSAValues` indexes in Python
        if sizes is _VIEW_SEGMENTS[1]:
            if len(operands) != 1 or type(item(operands, 0)._type) is not TensorType:
                return False
        elif sizes is not _VIEW_SEGMENTS[0] or operands:
            return False
        return len(results) == 1 and type(item(results, 0)._type) is TensorType

    def source_value(self) -> SSAValue | None:
        """`source`, read directly for the usual segment sizes (xDSL's accessor unpacks them
        on every call; the value-flow sweep follows views back to producers constantly)."""
        sizes = self.properties.get("operandSegmentSizes")
        if sizes is _VIEW_SEGMENTS[1]:
            return tuple.__getitem__(self._operands, 0)
        if sizes is _VIEW_SEGMENTS[0]:
            return None
        return self.source

    @staticmethod
    def assembled(tensor: TensorType, source: OpResult | None, location: Attribute) -> ViewOp:
        """`ViewOp(tensor, source, location=location)` for a source that is an `OpResult`
        or None, without the keyword processing."""
        view = ViewOp.__new__(ViewOp)
        assemble(view, () if source is None else (source,), (tensor,),
                 {"operandSegmentSizes": _VIEW_SEGMENTS[source is not None]}, location)
        return view


@irdl_op_definition
@format_on_first_use
class ModelOp(IRDLOperation):
    """An ARK model file: the graph of one rank out of `world_size`.

    `node_form` is "Ops" for the legacy layout in which every node lists its operators in an
    `Ops` array; otherwise nodes hold a single `Op`. `extra` keeps unknown top-level keys.
    """

    name = "ark.model"
    rank = prop_def(IntegerAttr[I64])
    world_size = prop_def(IntegerAttr[I64])
    node_form = opt_prop_def(StringAttr)
    extra = opt_prop_def(DictionaryAttr)
    body = region_def()
    traits = traits_def(NoTerminator(), IsolatedFromAbove())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "`rank` $rank `of` $world_size attr-dict-with-keyword $body"

    def __init__(self, rank: int, world_size: int, body, *, node_form: str | None = None,
                 extra: DictionaryAttr | None = None):
        properties: dict[str, Attribute] = {
            "rank": IntegerAttr(rank, i64), "world_size": IntegerAttr(world_size, i64)}
        if node_form is not None:
            properties["node_form"] = StringAttr(node_form)
        if extra is not None:
            properties["extra"] = extra
        super().__init__(properties=properties, regions=[body])

    @property
    def rank_value(self) -> int:
        return self.rank.value.data

    @property
    def world_size_value(self) -> int:
        return self.world_size.value.data

    @property
    def graph(self) -> Block:
        """The block holding the model's views and operators."""
        return body_block(self.body)

    @property
    def uses_ops_lists(self) -> bool:
        return self.node_form is not None and self.node_form.data == "Ops"

    def operators(self) -> list[ArkOp]:
        return [op for op in self.graph.ops if isinstance(op, ArkOp)]

    def verify_(self) -> None:
        if self.node_form is not None and self.node_form.data not in ("Op", "Ops"):
            raise VerifyException(f"node_form must be \"Op\" or \"Ops\", got "
                                  f"\"{self.node_form.data}\"")
        if not 0 <= self.rank_value < max(self.world_size_value, 1) and self.rank_value != -1:
            raise VerifyException(f"Rank {self.rank_value} is not in [0, WorldSize "
                                  f"{self.world_size_value})")
        check_buffers_consistent(self.graph)


def check_buffers_consistent(block: Block) -> None:
    """Every tensor of one buffer must describe that buffer (rank, tags) the same way."""
    seen: dict[int, tuple[BufferAttr, TensorType]] = {}
    agreed: set[int] = set()
    """The ids of buffer objects known to equal the first description of their buffer (the
    block's tensors keep them alive while it is checked): tensors of one buffer usually
    share the object."""
    for op in op_list(block):
        for value in op.results:
            tensor = value._type  # noqa: SLF001 -- `value.type`, without the property
            if type(tensor) is not TensorType and not isinstance(tensor, TensorType):
                continue
            buffer = tensor.buffer
            if id(buffer) in agreed:
                continue
            first = seen.get(buffer.id.data)
            if first is None:
                seen[buffer.id.data] = (buffer, tensor)
            elif first[0] is not buffer and first[0] != buffer:
                raise VerifyException(
                    f"buffer {tensor.buffer_id} is described differently by tensor "
                    f"{first[1].tensor_id} and tensor {tensor.tensor_id}")
            agreed.add(id(buffer))


def producer_nodes(value: SSAValue) -> list[int]:
    """The nodes whose operators produced the data `value` holds, looking through views."""
    owner = value.owner
    if isinstance(owner, ViewOp):
        return [node for operand in owner.operands for node in producer_nodes(operand)]
    if isinstance(owner, ArkOp) and owner.node_id is not None:
        return [owner.node_id]
    return []


def node_producers(block: Block) -> dict[int, list[int]]:
    """For every node of a model body, the nodes whose results its operators use.

    This is ARK's ProducerNodeIds, derived from the dataflow: a node depends on the nodes
    that produced any tensor its operators read or write (writing into a tensor orders the
    write after its producer, as in ARK).
    """
    producers: dict[int, list[int]] = {}
    operators = _OPERATOR_CLASSES
    for op in op_list(block):
        node = op.properties.get("node") if type(op) in operators or isinstance(op, ArkOp) \
            else None
        if node is None:
            continue
        node_id = node.value.data
        found = producers.setdefault(node_id, [])
        for operand in op._operands:  # noqa: SLF001 -- `operands`, without its view object
            owner = operand.owner
            if type(owner) in operators or isinstance(owner, ArkOp):
                # the commonest case of `producer_nodes`
                other = owner.properties.get("node")
                nodes = () if other is None else (other.value.data,)
            else:
                nodes = producer_nodes(operand)
            for producer in nodes:
                if producer != node_id and producer not in found:
                    found.append(producer)
    return producers


def node_consumers(producers: dict[int, list[int]]) -> dict[int, list[int]]:
    """The inverse of `node_producers`: ARK's ConsumerNodeIds."""
    consumers: dict[int, list[int]] = {node: [] for node in producers}
    for node, found in producers.items():
        for producer in found:
            consumers[producer].append(node)
    return consumers


# ---------------------------------------------------------------------------------------------
# The dialect
# ---------------------------------------------------------------------------------------------

OPERATORS: tuple[type[ArkOp], ...] = (
    AddOp, CastOp, CopyOp, DivOp, EmbeddingOp, ExpOp, GeluOp, MatmulOp, MulOp, NoopOp, RecvOp,
    ReduceMaxOp, ReduceMeanOp, ReduceSumOp, ReluOp, ReshapeOp, RopeOp, RsqrtOp, ScalarAddOp,
    ScalarAssignOp, ScalarMulOp, SendOp, SendDoneOp, SigmoidOp, SqrtOp, SubOp, TensorOp,
    TransposeOp, SendPacketOp, RecvPacketOp, RecvReduceSendPacketOp, RecvReduceSendOp,
    DeviceSyncOp,
)
"""One class per ARK op type registered by ARK's ModelOpT::from_name (33 types)."""

OPERATOR_BY_TYPE: dict[str, type[ArkOp]] = {cls.TYPE: cls for cls in OPERATORS}
_OPERATOR_CLASSES = frozenset((*OPERATORS, GenericOp))
"""The op classes of ARK operators (a set lookup where `isinstance(op, ArkOp)` is slow)."""


def _format_on_first_use(cls: type[ArkOp]) -> None:
    """Give `cls` the parse and print methods that IRDL makes of an `assembly_format`, with
    the format (`ArkOp.FORMAT`) read when MLIR text is first parsed or printed: reading it for
    34 classes at import was a tenth of planc's start-up, which compiling JSON never needs."""
    program = None

    def load():
        nonlocal program
        if program is None:
            from xdsl.irdl.declarative_assembly_format import FormatProgram

            program = FormatProgram.from_str(ArkOp.FORMAT, cls.get_irdl_definition())
        return program

    def parse(op_cls: type[ArkOp], parser) -> ArkOp:
        return load().parse(parser, op_cls)

    def print_(self: ArkOp, printer: Printer) -> None:
        load().print(printer, self)

    cls.parse = classmethod(parse)
    cls.print = print_


for _cls in (*OPERATORS, GenericOp):
    _format_on_first_use(_cls)

Ark = Dialect(
    "ark",
    [*OPERATORS, GenericOp, ViewOp, ModelOp],
    [TensorType, BufferAttr, OffsetAttr],
)


# ---------------------------------------------------------------------------------------------
# Operator types ARK does not register
# ---------------------------------------------------------------------------------------------


def unknown_type_message(op: GenericOp) -> str:
    """What every command says of an operator whose type ARK does not register: ARK's
    `ModelOpT::from_name` throws on it when it loads the model or plan, so no runtime and no
    planc target can run it (import and export keep it, as they keep everything)."""
    from ground.diagnostics import did_you_mean

    known = sorted(OPERATOR_BY_TYPE)
    near = did_you_mean(op.ark_type, known)
    listing = "" if near else f" (ARK's operator types: {', '.join(known)})"
    return (f"{op.ark_type} '{op.label.data}': unknown ARK operator type "
            f"'{op.ark_type}'{near}{listing}")


def unknown_operators(module: Operation) -> list[GenericOp]:
    """The operators of `module` (models and plans) whose type ARK does not register. A
    model's operators are the ops of its block, which is all this reads of it."""
    found: list[GenericOp] = []
    tops = [module] if isinstance(module, ModelOp) else op_list(module.regions[0].block) \
        if module.regions and module.regions[0].blocks else [module]
    for top in tops:
        if type(top) is ModelOp:
            found += [op for op in top.body.block.ops if type(op) is GenericOp]
        elif top.regions:   # (lists, not generators: a plan holds tens of thousands of ops)
            found += [op for op in walk_ops(top) if type(op) is GenericOp]
        elif type(top) is GenericOp:
            found.append(top)
    return found


def unknown_type_error(op: GenericOp, document: str = "ark-model"):
    """`unknown_type_message` as a PlancError at the operator's JSON path (the rule is
    `document.operator-type`)."""
    from dialects.locations import source_path
    from ground.diagnostics import PlancError, extend_path

    path = source_path(op)
    return PlancError(unknown_type_message(op), rule=f"{document}.operator-type",
                      path=extend_path(path, "Type") if path is not None else None)


def refuse_unknown_operators(module: Operation) -> None:
    """Raise `unknown_type_error` for the first operator ARK does not register."""
    for op in unknown_operators(module):
        raise unknown_type_error(op)
