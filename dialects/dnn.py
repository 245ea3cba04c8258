"""The `dnn` dialect: a DNN layer graph over NCHW feature maps, what Gemini-style schedulers take.

Gemini's frontend layer description (conv2d, pooling, element-wise add, quantize, dense,
reshape, ...) imports into it one layer op per layer, and ARK models convert into it
(`dnn-from-ark`), so the Gemini scheduling passes have one input language:

* a feature map is an SSA value of type `!dnn.fmap<[N, C, H, W], int8>` (any rank 1..4 for the
  views the frontends produce; the element type is named as the frontend names it: int8,
  float16, ...);
* `dnn.input` defines what no layer produces: a network input or, with `constant`, weights and
  other constants; `dnn.output` marks a network output;
* every layer op has a `layer_name`, the frontend's `operation` string, its inputs (operands,
  activations first, then weights) and one result. The ops are grouped by what the hardware runs
  them on (`LAYER_TYPE`): the PE array (conv2d, grouped too, dense, matmul), the vector
  processor (pooling, element-wise, quantize, unary, reduce, local response normalisation) or
  the data-transfer engine (transpose, broadcast, strided slice, channel shuffle); a reshape
  a slice or a concatenation is a view.

Frontend fields the dialect does not model are kept in `extra`, with the file's member order in
`keys`, so that a layer description exports back unchanged. Scheduling passes record their
decisions on layers as discardable `gemini.*` attributes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException

from dialects.utils import parse_int

DTYPE_BITS: dict[str, int] = {
    "int8": 8, "uint8": 8, "int16": 16, "float16": 16, "bfloat16": 16, "int32": 32,
    "float32": 32, "uint32": 32,
}
"""Element types of feature maps and their widths."""


def _ints(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def ints(attr: DenseArrayBase | None, default: Sequence[int] = ()) -> list[int]:
    if attr is None:
        return list(default)
    # The unpacked values are kept on the (immutable) attribute, under the key the ark and
    # gemini dialects keep them: every pass asks each layer's shapes again (~30 times a layer
    # on Gemini, where unpacking was ~15% of a compile).
    values = attr.__dict__.get("_planc_values")
    if values is None:
        values = attr.__dict__["_planc_values"] = tuple(attr.get_values())
    return [int(v) for v in values]


# ---------------------------------------------------------------------------------------------
# Feature maps
# ---------------------------------------------------------------------------------------------


@irdl_attr_definition
class FmapType(ParametrizedAttribute, TypeAttribute):
    """A feature map: `!dnn.fmap<[1, 64, 56, 56], int8>` (NCHW for 4 dims)."""

    name = "dnn.fmap"
    shape: DenseArrayBase
    dtype: StringAttr

    @staticmethod
    def get(shape: Sequence[int], dtype: str) -> FmapType:
        key = tuple(shape)
        if all(type(v) is int for v in key):
            return _fmap_type(key, dtype)
        return FmapType(_ints(shape), StringAttr(dtype))

    @property
    def shape_list(self) -> list[int]:
        return ints(self.shape)

    @property
    def dtype_name(self) -> str:
        return self.dtype.data

    @property
    def bits(self) -> int:
        return DTYPE_BITS.get(self.dtype.data, 8)

    @property
    def nchw(self) -> list[int]:
        """The shape as 4 dims: lower ranks are [C], [N, C], [N, C, H] (a scalar is one of
        each)."""
        shape = self.shape_list
        rank = len(shape)
        if rank == 4:
            return shape
        if rank == 0:
            return [1, 1, 1, 1]
        if rank == 1:
            return [1, shape[0], 1, 1]
        if rank == 2:
            return [shape[0], shape[1], 1, 1]
        return [*shape, 1] if rank == 3 else shape

    @property
    def elements(self) -> int:
        return math.prod(self.shape_list)

    def verify(self) -> None:
        shape = self.shape_list
        # No dims: a scalar constant (Gemini's SSD files describe the divisor of their CPU
        # post-processing as `[]`); the frontend allows it for constants only.
        if len(shape) > 4 or (shape and min(shape) < 1):
            raise VerifyException(f"a feature map has 0 to 4 positive dims, got {shape}")
        if self.dtype.data not in DTYPE_BITS:
            raise VerifyException(f"unknown element type '{self.dtype.data}' (known: "
                                  f"{', '.join(DTYPE_BITS)})")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            shape = parser.parse_comma_separated_list(parser.Delimiter.SQUARE,
                                                      lambda: parse_int(parser))
            parser.parse_punctuation(",")
            dtype = parser.parse_identifier()
        return (_ints(shape), StringAttr(dtype))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.shape_list}, {self.dtype.data}>")


@functools.lru_cache(maxsize=1 << 12)
def _fmap_type(shape: tuple[int, ...], dtype: str) -> FmapType:
    """One type object per shape and element type (attributes are immutable): building the
    shape's array through xDSL's `from_list` was ~5% of a Gemini compile, for the few shapes a
    network has. Plain ints only, so that an equal key (1.0, True) never stands in for them."""
    return FmapType(_ints(shape), StringAttr(dtype))


def fmap(value: SSAValue) -> FmapType:
    assert isinstance(value.type, FmapType)
    return value.type


# ---------------------------------------------------------------------------------------------
# Graph, inputs, outputs
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class GraphOp(IRDLOperation):
    """A network: its inputs, layers (in topological order) and outputs."""

    name = "dnn.graph"
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    assembly_format = "attr-dict-with-keyword $body"

    @property
    def layers(self) -> list[LayerOp]:
        return [op for op in self.body.block.ops if isinstance(op, LayerOp)]

    @property
    def inputs(self) -> list[InputOp]:
        return [op for op in self.body.block.ops if isinstance(op, InputOp)]

    @property
    def outputs(self) -> list[OutputOp]:
        return [op for op in self.body.block.ops if isinstance(op, OutputOp)]

    def verify_(self) -> None:
        names: dict[str, Operation] = {}
        for op in self.body.block.ops:
            name = op.properties.get("layer_name") or op.properties.get("input_name")
            if isinstance(op, OutputOp) or name is None:
                continue
            if name.data in names:
                raise VerifyException(f"two layers are named '{name.data}'")
            names[name.data] = op


@irdl_op_definition
class InputOp(IRDLOperation):
    """What no layer produces: a network input, or (`constant`) weights and other constants."""

    name = "dnn.input"
    input_name = prop_def(StringAttr)
    constant = opt_prop_def(IntegerAttr)
    fill = opt_prop_def(FloatAttr)
    """A constant every element of which is this value (what ARK's ScalarAssign writes)."""
    output = result_def(FmapType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input_name attr-dict `:` type($output)"

    @staticmethod
    def new(name: str, type_: FmapType, constant: bool = False,
            fill: float | None = None) -> InputOp:
        props: dict[str, Attribute] = {"input_name": StringAttr(name)}
        if constant or fill is not None:
            props["constant"] = IntegerAttr(1, 1)
        if fill is not None:
            props["fill"] = FloatAttr(float(fill), f64)
        return InputOp.create(properties=props, result_types=[type_])

    @property
    def fill_value(self) -> float | None:
        return None if self.fill is None else self.fill.value.data

    @property
    def is_constant(self) -> bool:
        return self.constant is not None and bool(self.constant.value.data)


@irdl_op_definition
class OutputOp(IRDLOperation):
    """Marks `value` as the network output named `output_name`."""

    name = "dnn.output"
    output_name = prop_def(StringAttr)
    value = operand_def(FmapType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$output_name $value attr-dict `:` type($value)"

    @staticmethod
    def new(name: str, value: SSAValue) -> OutputOp:
        return OutputOp.create(properties={"output_name": StringAttr(name)}, operands=[value])


# ---------------------------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------------------------


class LayerOp(IRDLOperation):
    """A layer: `inputs` (activations, then weights/constants) to one feature map `output`."""

    LAYER_TYPE: ClassVar[str | None] = None
    """What runs it: "pe" (PE array), "vp" (vector processor), "dt" (data transfer), or None
    for a view that needs no work (reshape)."""
    OPERATIONS: ClassVar[tuple[str, ...]] = ()
    """The frontend `operation` strings this class stands for."""
    ACTIVATIONS: ClassVar[int] = 1
    """How many leading inputs are activations (the rest are weights/constants)."""

    layer_name = prop_def(StringAttr)
    operation = prop_def(StringAttr)
    layer_index = opt_prop_def(IntegerAttr)
    next_layer = opt_prop_def(ArrayAttr)
    keys = opt_prop_def(ArrayAttr)
    extra = opt_prop_def(DictionaryAttr)
    output_form = opt_prop_def(StringAttr)
    """How the frontend file wrote `output_shape`/`output_dtype` when not as one-element
    lists (the ResNet files' form): "flat" for Gemini's HPCA'24 files (`[1, 64, 224, 224]`
    and `"int8"`), "flat-shape" or "flat-dtype" for one of the two."""
    inputs = var_operand_def(FmapType)
    output = result_def(FmapType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("$layer_name $operation `(` $inputs `)` attr-dict `:` "
                       "functional-type($inputs, $output)")

    @classmethod
    def new(cls, name: str, operation: str, inputs: Sequence[SSAValue], out: FmapType,
            **props: Attribute | None) -> LayerOp:
        properties = {"layer_name": StringAttr(name), "operation": StringAttr(operation)}
        properties.update({k: v for k, v in props.items() if v is not None})
        return cls.create(operands=list(inputs), result_types=[out], properties=properties)

    @property
    def name_(self) -> str:
        return self.layer_name.data

    @property
    def op_name(self) -> str:
        return self.operation.data

    @property
    def activations(self) -> list[SSAValue]:
        return list(self.inputs[: self.ACTIVATIONS])

    @property
    def weights(self) -> list[SSAValue]:
        return list(self.inputs[self.ACTIVATIONS:])

    @property
    def out_type(self) -> FmapType:
        return self.output.type

    def extra_value(self, key: str, default=None):
        from dialects.json_value import from_attr

        if self.extra is None or key not in self.extra.data:
            return default
        return from_attr(self.extra.data[key])

    def fail(self, message: str) -> VerifyException:
        return VerifyException(f"{self.op_name} layer '{self.name_}': {message}")

    def verify_(self) -> None:
        if self.OPERATIONS and self.op_name not in self.OPERATIONS:
            raise self.fail(f"operation must be one of {', '.join(self.OPERATIONS)}")
        if len(self.inputs) < self.ACTIVATIONS:
            raise self.fail(f"needs {self.ACTIVATIONS} input(s), got {len(self.inputs)}")

    def expect_shape(self, shape: Sequence[int], why: str) -> None:
        if self.out_type.nchw != list(shape):
            raise self.fail(f"output shape {self.out_type.shape_list} should be {list(shape)} "
                            f"({why})")


def _window(size: int, kernel: int, stride: int, pad_lo: int, pad_hi: int,
            ceil_mode: bool = False) -> int:
    span = size + pad_lo + pad_hi - kernel
    return (-(-span // stride) if ceil_mode else span // stride) + 1


class WindowOp(LayerOp):
    """A layer sliding an R x S window with `stride` and `padding` [top, bottom, left, right]."""

    stride = opt_prop_def(DenseArrayBase)
    padding = opt_prop_def(DenseArrayBase)

    @property
    def strides(self) -> list[int]:
        return ints(self.stride, (1, 1))

    @property
    def pads(self) -> list[int]:
        return ints(self.padding, (0, 0, 0, 0))

    @property
    def window(self) -> list[int]:
        raise NotImplementedError

    @property
    def ceil_mode(self) -> bool:
        return False

    def expected_output_hw(self) -> list[int]:
        _, _, h, w = fmap(self.inputs[0]).nchw
        (r, s), (sh, sw), (top, bottom, left, right) = self.window, self.strides, self.pads
        return [_window(h, r, sh, top, bottom, self.ceil_mode),
                _window(w, s, sw, left, right, self.ceil_mode)]

    def verify_(self) -> None:
        super().verify_()
        if len(self.window) != 2 or len(self.strides) != 2 or len(self.pads) != 4:
            raise self.fail("window and stride need 2 values, padding 4 (top, bottom, left, "
                            "right)")
        if min(self.strides) < 1 or min(self.window) < 1 or min(self.pads) < 0:
            raise self.fail("window and stride must be >= 1 and padding >= 0")


@irdl_op_definition
class Conv2dOp(WindowOp):
    """2-D convolution of ifmap [N, C, H, W] with weights [K, C/g, R, S] into [N, K, H', W'];
    `activation_type` "relu" applies a ReLU (fused by the frontend).

    With `groups` g > 1 (grouped or, for g = C, depthwise convolution) the input channels and
    the output channels are cut into g equal groups, and output channel k reads only the C/g
    input channels of its group k // (K/g)."""

    name = "dnn.conv2d"
    LAYER_TYPE: ClassVar[str | None] = "pe"
    OPERATIONS: ClassVar[tuple[str, ...]] = ("conv2d",)
    kernel_size = opt_prop_def(DenseArrayBase)
    groups = opt_prop_def(IntegerAttr)

    @property
    def group_count(self) -> int:
        return 1 if self.groups is None else int(self.groups.value.data)

    @property
    def window(self) -> list[int]:
        if self.kernel_size is not None:
            return ints(self.kernel_size)
        return fmap(self.inputs[1]).nchw[2:] if len(self.inputs) > 1 else [1, 1]

    def verify_(self) -> None:
        super().verify_()
        if len(self.inputs) != 2:
            raise self.fail(f"takes an ifmap and weights, got {len(self.inputs)} inputs")
        n, c, _, _ = fmap(self.inputs[0]).nchw
        k, wc, r, s = fmap(self.inputs[1]).nchw
        g = self.group_count
        if g < 1 or c % g or k % g:
            raise self.fail(f"{g} groups do not divide {c} input and {k} output channels")
        if wc * g != c or [r, s] != self.window:
            raise self.fail(f"weights {[k, wc, r, s]} do not match {c} input channels"
                            f"{f' in {g} groups' if g > 1 else ''} and kernel {self.window}")
        self.expect_shape([n, k, *self.expected_output_hw()], "convolution arithmetic")


@irdl_op_definition
class PoolOp(WindowOp):
    """Max or average pooling over `pool_size` windows (a 7x7 average over a 7x7 map is a
    global average pool). Constants after the ifmap (the frontend's divisor) are kept."""

    name = "dnn.pool"
    LAYER_TYPE: ClassVar[str | None] = "vp"
    OPERATIONS: ClassVar[tuple[str, ...]] = ("max_pool2d", "avg_pool2d")
    pool_size = opt_prop_def(DenseArrayBase)
    count_include_pad = opt_prop_def(IntegerAttr)
    """Average pooling only: false divides each window by the number of its elements inside
    the input (ONNX's count_include_pad=0) instead of by the whole window. Only the
    arithmetic differs: the same data is read."""

    @property
    def window(self) -> list[int]:
        return ints(self.pool_size, (1, 1))

    @property
    def ceil_mode(self) -> bool:
        return bool(self.extra_value("ceil_mode", False))

    @property
    def excludes_pad(self) -> bool:
        return self.count_include_pad is not None and not self.count_include_pad.value.data

    def verify_(self) -> None:
        super().verify_()
        if self.count_include_pad is not None and self.op_name != "avg_pool2d":
            raise self.fail("count_include_pad applies to average pooling only")
        n, c, _, _ = fmap(self.inputs[0]).nchw
        self.expect_shape([n, c, *self.expected_output_hw()], "pooling arithmetic")


@irdl_op_definition
class LrnOp(LayerOp):
    """Local response normalisation across channels on the vector processor (ONNX LRN):
    out[n, c, h, w] = x[n, c, h, w] / (bias + alpha / size * sum of x[n, i, h, w]^2 over
    i in [c - (size-1)//2, c + size//2] within the channels) ** beta. A window over channels:
    output channel c needs input channels c - (size-1)//2 .. c + size//2, and the same pixels.

    Assumed, as no public Gemini IR has an LRN: the vector processor runs it in one pass over
    its input, costed like pooling and element-wise ops (input bytes / 32 + 16 cycles)."""

    name = "dnn.lrn"
    LAYER_TYPE: ClassVar[str | None] = "vp"
    OPERATIONS: ClassVar[tuple[str, ...]] = ("lrn",)
    size = prop_def(IntegerAttr)
    alpha = opt_prop_def(FloatAttr)
    beta = opt_prop_def(FloatAttr)
    bias = opt_prop_def(FloatAttr)

    @property
    def window_size(self) -> int:
        return int(self.size.value.data)

    @property
    def channel_reach(self) -> tuple[int, int]:
        """How many channels before and after an output channel its window reads."""
        return (self.window_size - 1) // 2, self.window_size // 2

    def coefficient(self, name: str, default: float) -> float:
        attr = getattr(self, name)
        return default if attr is None else attr.value.data

    def verify_(self) -> None:
        super().verify_()
        if self.window_size < 1:
            raise self.fail(f"size must be >= 1, got {self.window_size}")
        self.expect_shape(fmap(self.inputs[0]).nchw, "same shape as the input")


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> list[int] | None:
    out = []
    for x, y in zip(a, b, strict=False):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return out


@irdl_op_definition
class EltwiseOp(LayerOp):
    """An element-wise binary op (add, sub, mul, div, rope, ...) of two feature maps with
    broadcasting over dims of size 1 (the `operation` is element_wise_<op>)."""

    name = "dnn.eltwise"
    LAYER_TYPE: ClassVar[str | None] = "vp"
    ACTIVATIONS: ClassVar[int] = 2

    @property
    def function(self) -> str:
        return self.op_name.removeprefix("element_wise_")

    def verify_(self) -> None:
        super().verify_()
        if not self.op_name.startswith("element_wise_"):
            raise self.fail("operation must be element_wise_<add|sub|mul|div|...>")
        a, b = (fmap(v).nchw for v in self.inputs[:2])
        shape = broadcast_shape(a, b)
        if shape is None:
            raise self.fail(f"inputs {a} and {b} do not broadcast")
        self.expect_shape(shape, "broadcast of the inputs")


@irdl_op_definition
class QuantizeOp(LayerOp):
    """Changes the element type (quantize to int8, dequantize to float16) elementwise."""

    name = "dnn.quantize"
    LAYER_TYPE: ClassVar[str | None] = "vp"
    OPERATIONS: ClassVar[tuple[str, ...]] = ("quantize", "dequantize")

    def verify_(self) -> None:
        super().verify_()
        self.expect_shape(fmap(self.inputs[0]).nchw, "same shape as the input")


@irdl_op_definition
class DenseOp(LayerOp):
    """A fully connected layer: ifmap [N, C, 1, 1] times weights [K, C, 1, 1] into [N, K, 1, 1]."""

    name = "dnn.dense"
    LAYER_TYPE: ClassVar[str | None] = "pe"
    OPERATIONS: ClassVar[tuple[str, ...]] = ("dense",)

    def verify_(self) -> None:
        super().verify_()
        if len(self.inputs) != 2:
            raise self.fail(f"takes an ifmap and weights, got {len(self.inputs)} inputs")
        n, c, h, w = fmap(self.inputs[0]).nchw
        k, wc, _, _ = fmap(self.inputs[1]).nchw
        if wc != c * h * w:
            raise self.fail(f"weights for {wc} inputs do not match the ifmap's {c * h * w}")
        self.expect_shape([n, k, 1, 1], "one output per weight row")


@irdl_op_definition
class ReshapeOp(LayerOp):
    """The same elements under another shape: a view, no work on the accelerator.

    With `row_major` (reshapes of ARK tensors) the elements are ordered as ARK stores them,
    rows before columns: a feature map [N, C, H, 1] is the row-major array [N, H, C]."""

    name = "dnn.reshape"
    OPERATIONS: ClassVar[tuple[str, ...]] = ("reshape", "flatten")
    row_major = opt_prop_def(IntegerAttr)

    @property
    def is_row_major(self) -> bool:
        return self.row_major is not None and bool(self.row_major.value.data)

    def verify_(self) -> None:
        super().verify_()
        if fmap(self.inputs[0]).elements != self.out_type.elements:
            raise self.fail(f"{fmap(self.inputs[0]).shape_list} and "
                            f"{self.out_type.shape_list} have different sizes")


@irdl_op_definition
class SliceOp(LayerOp):
    """A box of the input: the output's shape, starting at `offsets` [n, c, h, w] of the
    input's NCHW dims. A view, no work: the consumers read that box of the input (ARK slices
    of rows, columns and whole leading dims, e.g. Q, K and V out of a fused projection)."""

    name = "dnn.slice"
    OPERATIONS: ClassVar[tuple[str, ...]] = ("slice",)
    offsets = prop_def(DenseArrayBase)

    @property
    def start(self) -> list[int]:
        return ints(self.offsets)

    def verify_(self) -> None:
        super().verify_()
        start, inner, outer = self.start, self.out_type.nchw, fmap(self.inputs[0]).nchw
        if len(start) != 4 or min(start) < 0 or any(
                o + i > e for o, i, e in zip(start, inner, outer, strict=False)):
            raise self.fail(f"offsets {start} with shape {inner} leave the input {outer}")


@irdl_op_definition
class ConcatOp(LayerOp):
    """Feature maps side by side along NCHW `axis` (1: channels, what CNNs concatenate). A
    view, no work and no copy: as in Gemini, a consumer of the concatenation reads each input
    where it lies, at its offset along the axis (its channel offset), so every input is an
    activation and the consumer's workloads get one ifmap per input they touch. The Gemini
    passes cut a reader's box at the offsets along any axis but N (batch groups cut N)."""

    name = "dnn.concat"
    OPERATIONS: ClassVar[tuple[str, ...]] = ("concat",)
    axis = prop_def(IntegerAttr)

    @property
    def axis_index(self) -> int:
        return self.axis.value.data

    @property
    def activations(self) -> list[SSAValue]:
        return list(self.inputs)

    @property
    def weights(self) -> list[SSAValue]:
        return []

    @property
    def offsets(self) -> list[int]:
        """Where each input starts along the axis."""
        starts, at = [], 0
        for value in self.inputs:
            starts.append(at)
            at += fmap(value).nchw[self.axis_index]
        return starts

    def verify_(self) -> None:
        super().verify_()
        axis = self.axis_index
        if not 0 <= axis < 4:
            raise self.fail(f"axis {axis} is not an NCHW dim")
        shapes = [fmap(v).nchw for v in self.inputs]
        expected = list(shapes[0])
        expected[axis] = sum(s[axis] for s in shapes)
        for shape in shapes[1:]:
            if [d for i, d in enumerate(shape) if i != axis] != \
                    [d for i, d in enumerate(shapes[0]) if i != axis]:
                raise self.fail(f"inputs {shapes[0]} and {shape} differ outside axis {axis}")
        self.expect_shape(expected, f"the inputs side by side along axis {axis}")


VIEW_CLASSES: tuple[type[LayerOp], ...] = (ReshapeOp, SliceOp, ConcatOp)
"""Layers that only view their input's data (no work on the accelerator)."""


@irdl_op_definition
class BroadcastOp(LayerOp):
    """A copy on the data-transfer engine that repeats the input over leading dims: the input,
    as the row-major ARK array of shape `from_shape`, broadcast to `to_shape` (same rank;
    dims of size 1 repeat), is the output's row-major array. What a batch-broadcast matmul
    or element-wise operand needs when the repeat is not over all of N."""

    name = "dnn.broadcast"
    LAYER_TYPE: ClassVar[str | None] = "dt"
    OPERATIONS: ClassVar[tuple[str, ...]] = ("broadcast",)
    from_shape = prop_def(DenseArrayBase)
    to_shape = prop_def(DenseArrayBase)

    def verify_(self) -> None:
        super().verify_()
        source, target = ints(self.from_shape), ints(self.to_shape)
        if len(source) != len(target) or any(a not in (1, b) for a, b in
                                             zip(source, target, strict=True)):
            raise self.fail(f"{source} does not broadcast to {target}")
        if math.prod(source) != fmap(self.inputs[0]).elements or \
                math.prod(target) != self.out_type.elements:
            raise self.fail(f"from_shape {source} and to_shape {target} do not hold the input "
                            f"and the output")


@irdl_op_definition
class StridedSliceOp(LayerOp):
    """A copy on the data-transfer engine of a window that is no box of the feature map: the
    input, as the row-major ARK array of shape `from_shape`, cut to the output's row-major
    `shape` from `offsets` (same rank), e.g. one head of every sample, [2, 1, rows, cols] out
    of [2, 4, rows, cols], which is not contiguous in N."""

    name = "dnn.strided_slice"
    LAYER_TYPE: ClassVar[str | None] = "dt"
    OPERATIONS: ClassVar[tuple[str, ...]] = ("strided_slice",)
    from_shape = prop_def(DenseArrayBase)
    offsets = prop_def(DenseArrayBase)
    shape = prop_def(DenseArrayBase)

    def verify_(self) -> None:
        super().verify_()
        outer, start, inner = ints(self.from_shape), ints(self.offsets), ints(self.shape)
        if not len(outer) == len(start) == len(inner) or min(start, default=0) < 0 or any(
                o + i > e for o, i, e in zip(start, inner, outer, strict=True)):
            raise self.fail(f"offsets {start} with shape {inner} leave {outer}")
        if math.prod(outer) != fmap(self.inputs[0]).elements or \
                math.prod(inner) != self.out_type.elements:
            raise self.fail(f"from_shape {outer} and shape {inner} do not hold the input and "
                            f"the output")


@irdl_op_definition
class MatmulOp(LayerOp):
    """A product of two feature maps on the PE array, per sample n: with a = [N, K, M, 1] and
    b = [N, J, K, 1] (or [N, K, J, 1] with `transpose_b`), out[n, j, m] = sum_k a[n, k, m] *
    b[n, j, k] (resp. b[n, k, j]). ARK rows are H, ARK columns are channels."""

    name = "dnn.matmul"
    LAYER_TYPE: ClassVar[str | None] = "pe"
    OPERATIONS: ClassVar[tuple[str, ...]] = ("matmul",)
    ACTIVATIONS: ClassVar[int] = 2
    transpose_b = opt_prop_def(IntegerAttr)

    @property
    def trans_b(self) -> bool:
        return self.transpose_b is not None and bool(self.transpose_b.value.data)

    def verify_(self) -> None:
        super().verify_()
        n, k, m, _ = fmap(self.inputs[0]).nchw
        bn, b1, b2, _ = fmap(self.inputs[1]).nchw
        bk, j = (b1, b2) if self.trans_b else (b2, b1)
        if bk != k or bn not in (1, n):
            raise self.fail(f"operands {fmap(self.inputs[0]).nchw} and "
                            f"{fmap(self.inputs[1]).nchw} do not multiply")
        self.expect_shape([n, j, m, 1], "matrix product")


@irdl_op_definition
class UnaryOp(LayerOp):
    """An element-wise function on the vector processor: relu, sigmoid, exp, gelu, sqrt, rsqrt,
    copy, cast, scalar_add, scalar_mul (with `factor`)."""

    name = "dnn.unary"
    LAYER_TYPE: ClassVar[str | None] = "vp"
    OPERATIONS: ClassVar[tuple[str, ...]] = ("relu", "sigmoid", "exp", "gelu", "sqrt", "rsqrt",
                                             "copy", "cast", "scalar_add", "scalar_mul",
                                             "scalar_assign")
    factor = opt_prop_def(FloatAttr)

    def verify_(self) -> None:
        super().verify_()
        if self.op_name != "scalar_assign":
            self.expect_shape(fmap(self.inputs[0]).nchw, "same shape as the input")


@irdl_op_definition
class ReduceOp(LayerOp):
    """Sum, max or mean along one NCHW `axis`, which keeps size 1."""

    name = "dnn.reduce"
    LAYER_TYPE: ClassVar[str | None] = "vp"
    OPERATIONS: ClassVar[tuple[str, ...]] = ("reduce_sum", "reduce_max", "reduce_mean")
    axis = prop_def(IntegerAttr)

    @property
    def axis_index(self) -> int:
        return self.axis.value.data

    def verify_(self) -> None:
        super().verify_()
        shape = fmap(self.inputs[0]).nchw
        if not 0 <= self.axis_index < 4:
            raise self.fail(f"axis {self.axis_index} is not an NCHW dim")
        shape[self.axis_index] = 1
        self.expect_shape(shape, f"reduced along axis {self.axis_index}")


@irdl_op_definition
class TransposeOp(LayerOp):
    """A layout change on the data-transfer engine: the input, as the row-major ARK array of
    shape `from_shape` (a feature map [N, C, H, 1] holds the rows of [N, H, C]), has its dims
    permuted by `perm`, and the result is the output's row-major array."""

    name = "dnn.transpose"
    LAYER_TYPE: ClassVar[str | None] = "dt"
    OPERATIONS: ClassVar[tuple[str, ...]] = ("transpose",)
    perm = prop_def(DenseArrayBase)
    from_shape = prop_def(DenseArrayBase)

    def verify_(self) -> None:
        super().verify_()
        perm, shape = ints(self.perm), ints(self.from_shape)
        if sorted(perm) != list(range(len(shape))):
            raise self.fail(f"perm {perm} is not a permutation of {len(shape)} dims")
        if math.prod(shape) != fmap(self.inputs[0]).elements or \
                math.prod(shape) != self.out_type.elements:
            raise self.fail(f"from_shape {shape} does not hold the input and the output")


@irdl_op_definition
class ChannelShuffleOp(LayerOp):
    """ShuffleNet's channel shuffle on the data-transfer engine: the C channels, seen as
    `groups` rows of C/groups, transposed: out[:, j * groups + i] = in[:, i * C/groups + j]
    (ONNX: Reshape to [N, g, C/g, H, W], Transpose [0, 2, 1, 3, 4], Reshape back). Pixels stay
    where they are."""

    name = "dnn.channel_shuffle"
    LAYER_TYPE: ClassVar[str | None] = "dt"
    OPERATIONS: ClassVar[tuple[str, ...]] = ("channel_shuffle",)
    groups = prop_def(IntegerAttr)

    @property
    def group_count(self) -> int:
        return int(self.groups.value.data)

    def verify_(self) -> None:
        super().verify_()
        channels = fmap(self.inputs[0]).nchw[1]
        if self.group_count < 1 or channels % self.group_count:
            raise self.fail(f"{self.group_count} groups do not divide {channels} channels")
        self.expect_shape(fmap(self.inputs[0]).nchw, "same shape as the input")


@irdl_op_definition
class GenericLayerOp(LayerOp):
    """A layer of an operation planc does not know: kept as written, not schedulable."""

    name = "dnn.layer"


LAYER_CLASSES: tuple[type[LayerOp], ...] = (
    Conv2dOp, PoolOp, EltwiseOp, QuantizeOp, DenseOp, ReshapeOp, SliceOp, MatmulOp, UnaryOp,
    ReduceOp, TransposeOp, BroadcastOp, StridedSliceOp, LrnOp, ChannelShuffleOp, ConcatOp)


# Typed members of layers that planc makes from ARK and ONNX models (Gemini's frontend writes
# none of them): the layer description carries them under these keys so that it reads back the
# same.
LAYER_MEMBERS: dict[type, dict[str, str]] = {}
"""class -> {property: kind} with kind "int", "bool", "float" or "ints"."""


def layer_class(operation: str) -> type[LayerOp]:
    """The op class of a frontend `operation` string."""
    if operation.startswith("element_wise_"):
        return EltwiseOp
    for cls in LAYER_CLASSES:
        if operation in cls.OPERATIONS:
            return cls
    return GenericLayerOp


def find_graph(module: Operation) -> GraphOp | None:
    return next((op for op in module.walk() if isinstance(op, GraphOp)), None)


Dnn = Dialect(
    "dnn",
    [GraphOp, InputOp, OutputOp, *LAYER_CLASSES, GenericLayerOp],
    [FmapType],
)


LAYER_MEMBERS.update({
    Conv2dOp: {"groups": "int"},
    PoolOp: {"count_include_pad": "bool"},
    LrnOp: {"size": "int", "alpha": "float", "beta": "float", "bias": "float"},
    ChannelShuffleOp: {"groups": "int"},
    ReduceOp: {"axis": "int"},
    MatmulOp: {"transpose_b": "bool"},
    UnaryOp: {"factor": "float"},
    ReshapeOp: {"row_major": "bool"},
    TransposeOp: {"perm": "ints", "from_shape": "ints"},
    SliceOp: {"offsets": "ints"},
    ConcatOp: {"axis": "int"},
    BroadcastOp: {"from_shape": "ints", "to_shape": "ints"},
    StridedSliceOp: {"from_shape": "ints", "offsets": "ints", "shape": "ints"},
})


def member_value(attr: Attribute, kind: str):
    """A typed layer property as its JSON value (see `LAYER_MEMBERS`)."""
    if kind == "ints":
        return ints(attr)
    if kind == "float":
        return attr.value.data
    value = attr.value.data
    return bool(value) if kind == "bool" else int(value)


def member_attr(value, kind: str) -> Attribute:
    """The property of a JSON value read back (see `LAYER_MEMBERS`)."""
    if kind == "ints":
        return _ints(value)
    if kind == "float":
        return FloatAttr(float(value), f64)
    return IntegerAttr(int(value), i1 if kind == "bool" else i64)
