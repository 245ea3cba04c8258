"""Convolutional ONNX networks as Gemini layer graphs (`dnn.graph`).

Conv (its bias an element-wise add; a following BatchNormalization folded into it: into the
weights and bias when their values are known, by shape otherwise), Relu (fused into the
convolution before it, as Gemini's frontend does, or a vector layer), MaxPool, AveragePool and
GlobalAveragePool, Add and Sum (element-wise adds), Mul (a per-channel scale), Gemm (a dense
layer), Flatten and Reshape (views), Softmax (reduce-max, subtract, exp, reduce-sum, divide:
what the vector processor runs), LRN (a vector layer over a window of channels), Dropout and
Identity (inference: nothing). Grouped and depthwise convolutions keep their groups; average
pooling that leaves padding out of its divisor is flagged. Shape computations fold as in
`onnx_model`. Concat along channels is a `dnn.concat` view (as in Gemini, its consumers read
every input at its channel offset; no copy); Concat along another axis has no Gemini layer:
an error names the node.

Gemini computes in int8 (its frontend quantizes networks before scheduling them), so feature
maps and weights are int8 here whatever the ONNX element type: that is what sizes L2 and WL0
buffers and DRAM traffic. The layer graph's numbers (the dnn interpreter, which computes in
float) are those of the float network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, f64, i64
from xdsl.ir import Block, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from dialects import dnn
from frontends.onnx_model import HANDLERS as CONSTANT_FOLDING
from frontends.onnx_model import (
    OnnxImport,
    array_of,
    attributes,
    node_error,
    node_order,
    node_values,
    opset_of,
)
from ground.diagnostics import PlancError

DTYPES = {1: "float32", 10: "float16", 16: "bfloat16", 3: "int8", 2: "uint8", 6: "int32"}
FOLDED = ("Constant", "Shape", "ConstantOfShape", "Range", "Unsqueeze", "Squeeze", "Cast",
          "Gather", "Concat")


def _float64_copy(value: np.ndarray) -> np.ndarray:
    """`value` as float64 that nobody else can change: a copy, except for a broadcast of one
    element (ConstantOfShape's weights), which stays a read-only broadcast of its element."""
    if value.size and not any(value.strides):
        return np.broadcast_to(np.float64(value.flat[0]), value.shape)
    return np.array(value, dtype=np.float64)


class CnnImporter:
    def __init__(self, model: Any, path: str):
        self.model, self.path, self.graph = model, path, model.graph
        self.block = Block()
        self.env: dict[str, Any] = {}
        self.result = OnnxImport(None)
        self.node: Any = None
        self.index = -1
        self.dtype = "int8"       # what Gemini computes in (see the module docstring)
        self.names: set[str] = set()
        self.uses: dict[str, int] = {}
        for node in self.graph.node:
            for name in node.input:
                self.uses[name] = self.uses.get(name, 0) + 1
        for value in self.graph.output:
            self.uses[value.name] = self.uses.get(value.name, 0) + 1

    def fail(self, message: str) -> PlancError:
        return node_error(self.node, self.index, "$.graph", message).in_file(self.path)

    # -- values --------------------------------------------------------------------------------

    def fmap(self, shape, dtype: str | None = None) -> dnn.FmapType:
        shape = [int(d) for d in shape] or [1]
        if len(shape) > 4:
            raise self.fail(f"shape {shape} has more than 4 dimensions (NCHW)")
        try:
            return dnn.FmapType.get(shape, dtype or self.dtype)
        except VerifyException as e:    # dims of 0 or less: padding or strides gone wrong
            raise self.fail(str(e)) from None

    def add(self, op):
        self.block.add_op(op)
        return op

    def unique(self, name: str) -> str:
        base, n = name or "layer", 1
        while name in self.names:
            name, n = f"{base}_{n}", n + 1
        self.names.add(name)
        return name

    def constant(self, value: np.ndarray, name: str) -> SSAValue:
        op = self.add(dnn.InputOp.new(self.unique(name), self.fmap(value.shape), constant=True))
        self.result.values[op.input_name.data] = _float64_copy(value)
        return op.output

    def value(self, x: Any, name: str) -> SSAValue:
        return self.constant(x, name) if isinstance(x, np.ndarray) else x

    def layer(self, cls, operation: str, inputs, shape, **props) -> SSAValue:
        name = self.unique(self.node.name or self.node.output[0])
        op = cls.new(name, operation, list(inputs), self.fmap(shape), **props)
        try:
            op.verify_()
        except Exception as e:  # noqa: BLE001 -- VerifyException: the node's shapes disagree
            raise self.fail(str(e).split(": ", 1)[-1]) from None
        return self.add(op).output

    # -- the graph -----------------------------------------------------------------------------

    def run(self) -> OnnxImport:
        initializers = {t.name: array_of(t, f"$.graph.initializer[{i}]")
                        for i, t in enumerate(self.graph.initializer)}
        self.env.update(initializers)
        for value in self.graph.input:
            if value.name in initializers:
                continue
            kind = value.type.tensor_type
            dtype = DTYPES.get(kind.elem_type)
            shape = [d.dim_value for d in kind.shape.dim]
            if dtype is None or min(shape, default=1) < 1 or len(shape) > 4:
                raise PlancError(f"input '{value.name}': element type {kind.elem_type} and "
                                 f"shape {shape} must be a known NCHW feature map",
                                 path="$.graph.input", file=self.path)
            op = self.add(dnn.InputOp.new(self.unique(value.name), self.fmap(shape)))
            self.env[value.name] = op.output
            self.result.inputs[value.name] = op.input_name.data
        for index, node in node_order(self.graph, "$.graph"):
            self.index, self.node = index, node
            inputs = [self.env.get(n) if n else None for n in node.input]
            with node_values(self):
                outputs = self.node_outputs(inputs, attributes(node))
            for position, name in enumerate(node.output[len(outputs):], len(outputs)):
                if name in self.uses:
                    raise self.fail(f"its output {position} ('{name}') is used, and planc "
                                    f"lowers only the first {len(outputs)}")
            for name, value in zip(node.output, outputs, strict=False):
                if name:
                    self.env[name] = np.asarray(value) if isinstance(value, np.generic) \
                        else value
        for value in self.graph.output:
            out = self.env[value.name]
            _refuse_split_channels(self, [out], value.name)
            self.add(dnn.OutputOp.new(value.name, self.value(out, value.name)))
            self.result.outputs[value.name] = value.name
        graph = dnn.GraphOp.create(regions=[Region(self.block)])
        self.result.module = ModuleOp([graph])
        return self.result

    def node_outputs(self, inputs: list[Any], attrs: dict[str, Any]) -> list[Any]:
        """The values of the current node's outputs."""
        handler = HANDLERS.get(self.node.op_type)
        if handler is not None:
            _refuse_split_channels(self, inputs)
            return handler(self, inputs, attrs)
        if self.node.op_type in FOLDED and all(isinstance(v, np.ndarray) or v is None
                                               for v in inputs):
            return CONSTANT_FOLDING[self.node.op_type](self, inputs, attrs)
        raise self.fail(f"Gemini has no layer for it (supported: "
                        f"{', '.join(sorted(HANDLERS))}, and shape computations); "
                        "run it on the host and cut the network there")

    # `onnx_model`'s constant folding asks its importer for these:
    def const(self, value: Any, what: str) -> np.ndarray:
        if not isinstance(value, np.ndarray):
            raise self.fail(f"{what} must be known when the model is imported")
        return value


def shape_of(x: Any) -> list[int]:
    return list(x.shape) if isinstance(x, np.ndarray) else x.type.shape_list


HANDLERS: dict[str, Any] = {}


def handles(*names: str):
    def register(fn):
        for name in names:
            HANDLERS[name] = fn
        return fn
    return register


def _pads(attrs: dict, kernel: list[int], in_hw: list[int], strides: list[int]) -> list[int]:
    """ONNX pads [top, left, bottom, right] (or auto_pad) as Gemini's [top, bottom, left,
    right]."""
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for size, k, s in zip(in_hw, kernel, strides, strict=True):
            total = max((-(-size // s) - 1) * s + k - size, 0)
            small, large = total // 2, total - total // 2
            pads.append((small, large) if auto == "SAME_UPPER" else (large, small))
        return [pads[0][0], pads[0][1], pads[1][0], pads[1][1]]
    p = list(attrs.get("pads", [0, 0, 0, 0]))
    return [p[0], p[2], p[1], p[3]]


def _window_props(imp: CnnImporter, attrs: dict, kernel: list[int], x) -> dict:
    if len(kernel) != 2:
        raise imp.fail("Gemini layers slide 2-D windows (NCHW)")
    if any(d != 1 for d in attrs.get("dilations", [1, 1])):
        raise imp.fail("Gemini convolutions have no dilation")
    strides = list(attrs.get("strides", [1, 1]))
    pads = _pads(attrs, kernel, shape_of(x)[2:], strides)
    return {"stride": dnn._ints(strides), "padding": dnn._ints(pads)}


def _out_hw(in_hw, kernel, props, ceil_mode=False):
    strides, pads = dnn.ints(props["stride"]), dnn.ints(props["padding"])
    return [dnn._window(in_hw[0], kernel[0], strides[0], pads[0], pads[1], ceil_mode),
            dnn._window(in_hw[1], kernel[1], strides[1], pads[2], pads[3], ceil_mode)]


@handles("Conv")
def _conv(imp: CnnImporter, inputs, attrs):
    x, w = inputs[0], inputs[1]
    kernel = shape_of(w)[2:]
    props = _window_props(imp, attrs, kernel, x)
    n, _, h, wd = shape_of(x)
    k = shape_of(w)[0]
    out = imp.layer(dnn.Conv2dOp, "conv2d", [x, imp.value(w, f"{imp.node.output[0]}_w")],
                    [n, k, *_out_hw([h, wd], kernel, props)], kernel_size=dnn._ints(kernel),
                    **props, **_groups(attrs))
    if len(inputs) > 2 and inputs[2] is not None:
        bias = imp.value(np.asarray(inputs[2]).reshape(1, k, 1, 1) if isinstance(
            inputs[2], np.ndarray) else inputs[2], f"{imp.node.output[0]}_b")
        out = imp.layer(dnn.EltwiseOp, "element_wise_add", [out, bias], shape_of(out))
    return [out]


def _groups(attrs: dict) -> dict:
    """A grouped (or depthwise) convolution: the `groups` of its Gemini layer (weights
    K x C/g x R x S, as ONNX has them)."""
    group = int(attrs.get("group", 1))
    return {"groups": IntegerAttr(group, i64)} if group != 1 else {}


@handles("LRN")
def _lrn(imp: CnnImporter, inputs, attrs):
    """Local response normalisation: a vector-processor layer whose receptive field is a
    window of `size` channels (see `dnn.LrnOp`)."""
    x = inputs[0]
    if len(shape_of(x)) != 4:
        raise imp.fail("Gemini normalises NCHW feature maps")
    if not isinstance(attrs.get("size"), int):
        raise imp.fail("its size (the channel window) must be given as an integer")
    coefficients = {name: FloatAttr(float(attrs.get(name, default)), f64)
                    for name, default in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0))}
    return [imp.layer(dnn.LrnOp, "lrn", [x], shape_of(x),
                      size=IntegerAttr(int(attrs["size"]), i64), **coefficients)]


@handles("BatchNormalization")
def _batch_norm(imp: CnnImporter, inputs, attrs):
    x, scale, bias, mean, var = inputs[:5]
    eps = attrs.get("epsilon", 1e-5)
    c = shape_of(x)[1]
    if all(isinstance(v, np.ndarray) for v in (scale, bias, mean, var)):
        if np.any(var + eps <= 0):       # its square root divides: numpy's warning, or inf
            raise imp.fail("its variance plus epsilon must be positive")
        factor = scale / np.sqrt(var + eps)
        shift = bias - mean * factor
    else:
        raise imp.fail("the scale, bias, mean and variance must be known at import")
    folded = _fold_into_conv(imp, x, factor, shift)
    if folded is not None:
        return [folded]
    # A per-channel scale and shift: one multiply and one add on the vector processor.
    out = imp.layer(dnn.EltwiseOp, "element_wise_mul",
                    [x, imp.constant(factor.reshape(1, c, 1, 1), f"{imp.node.output[0]}_s")],
                    shape_of(x))
    return [imp.layer(dnn.EltwiseOp, "element_wise_add",
                      [out, imp.constant(shift.reshape(1, c, 1, 1), f"{imp.node.output[0]}_t")],
                      shape_of(x))]


def _constant_values(imp: CnnImporter, value: SSAValue) -> np.ndarray | None:
    owner = value.owner
    if isinstance(owner, dnn.InputOp) and owner.is_constant and value.has_one_use():
        return imp.result.values.get(owner.input_name.data)
    return None


def _set_constant(imp: CnnImporter, value: SSAValue, array: np.ndarray) -> None:
    imp.result.values[value.owner.input_name.data] = array


def _per_channel(weights: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """`weights * factor` (one factor per output channel): weights that are one value per
    output channel (a broadcast, as ConstantOfShape's are) stay a broadcast."""
    if weights.ndim > 1 and not any(weights.strides[1:]):
        first = weights[(slice(None),) + (slice(0, 1),) * (weights.ndim - 1)]
        return np.broadcast_to(first * factor, weights.shape)
    return weights * factor


def _fold_into_conv(imp: CnnImporter, x: SSAValue, factor: np.ndarray, shift: np.ndarray
                    ) -> SSAValue | None:
    """Batch normalisation after a convolution (and its bias) whose weights are known and used
    by it alone: scale the weights, and shift through the bias (added when there was none)."""
    if imp.uses.get(imp.node.input[0], 0) != 1 or x.uses:
        return None       # another node reads the un-normalised values too
    owner, bias = x.owner, None
    if isinstance(owner, dnn.EltwiseOp) and owner.function == "add" and \
            isinstance(owner.inputs[0].owner, dnn.Conv2dOp) and owner.inputs[0].has_one_use():
        bias = _constant_values(imp, owner.inputs[1])
        if bias is None:
            return None
        owner = owner.inputs[0].owner
    if not isinstance(owner, dnn.Conv2dOp):
        return None
    weights = _constant_values(imp, owner.inputs[1])
    if weights is None:
        return None
    k = weights.shape[0]
    _set_constant(imp, owner.inputs[1], _per_channel(weights, factor.reshape(k, 1, 1, 1)))
    if bias is not None:
        _set_constant(imp, x.owner.inputs[1], bias * factor.reshape(bias.shape)
                      + shift.reshape(bias.shape))
        return x
    return imp.layer(dnn.EltwiseOp, "element_wise_add",
                     [x, imp.constant(shift.reshape(1, k, 1, 1), f"{imp.node.output[0]}_b")],
                     shape_of(x))


@handles("Relu")
def _relu(imp: CnnImporter, inputs, attrs):
    x = inputs[0]
    owner = x.owner
    if isinstance(owner, dnn.Conv2dOp) and imp.uses.get(imp.node.input[0], 0) == 1 and \
            owner.extra_value("activation_type") is None:
        from dialects.json_value import dict_attr, dict_value

        extra = dict_value(owner.extra) if owner.extra is not None else {}
        owner.extra = dict_attr({**extra, "activation_type": "relu"})
        return [x]
    return [imp.layer(dnn.UnaryOp, "relu", [x], shape_of(x))]


def _scalar_layer(imp: CnnImporter, operation: str, x, factor: float):
    return imp.layer(dnn.UnaryOp, operation, [x], shape_of(x), factor=FloatAttr(factor, f64))


def _clamped(imp: CnnImporter, x, lo: float | None, hi: float | None):
    """x clipped to [lo, hi] with the vector processor's ReLU and scalar layers:
    max(x, lo) = relu(x - lo) + lo, min(y, hi) = hi - relu(hi - y)."""
    if lo is not None and np.isfinite(lo):
        shifted = x if lo == 0.0 else _scalar_layer(imp, "scalar_add", x, -lo)
        x = imp.layer(dnn.UnaryOp, "relu", [shifted], shape_of(x))
        if lo != 0.0:
            x = _scalar_layer(imp, "scalar_add", x, lo)
    if hi is not None and np.isfinite(hi):
        gap = imp.layer(dnn.UnaryOp, "relu", [_scalar_layer(
            imp, "scalar_add", _scalar_layer(imp, "scalar_mul", x, -1.0), hi)], shape_of(x))
        x = _scalar_layer(imp, "scalar_add", _scalar_layer(imp, "scalar_mul", gap, -1.0), hi)
    return x


def _bound(imp: CnnImporter, value: Any, what: str) -> float | None:
    if value is None:
        return None
    array = np.asarray(imp.const(value, what))
    if array.size != 1:
        raise imp.fail(f"{what} has {array.size} values; Clip's bounds are scalars")
    return float(array.reshape(-1)[0])


@handles("Clip")
def _clip(imp: CnnImporter, inputs, attrs):
    """ReLU6 and other clips: ReLU and scalar layers on the vector processor."""
    if opset_of(imp.model) < 11:
        lo, hi = attrs.get("min"), attrs.get("max")
    else:
        lo, hi = (_bound(imp, inputs[i] if len(inputs) > i else None, what)
                  for i, what in ((1, "the minimum"), (2, "the maximum")))
    return [_clamped(imp, inputs[0], lo, hi)]


@handles("HardSigmoid", "HardSwish")
def _hard(imp: CnnImporter, inputs, attrs):
    """HardSigmoid is clip(alpha x + beta, 0, 1); HardSwish x times it (alpha 1/6, beta
    1/2): scalar, ReLU and multiply layers."""
    x = inputs[0]
    alpha, beta = (float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))) \
        if imp.node.op_type == "HardSigmoid" else (1 / 6, 0.5)
    line = _scalar_layer(imp, "scalar_add", _scalar_layer(imp, "scalar_mul", x, alpha), beta)
    gate = _clamped(imp, line, 0.0, 1.0)
    if imp.node.op_type == "HardSigmoid":
        return [gate]
    return [imp.layer(dnn.EltwiseOp, "element_wise_mul", [x, gate], shape_of(x))]


@handles("ReduceMean")
def _reduce_mean(imp: CnnImporter, inputs, attrs):
    """The mean over both spatial axes with the dims kept (what the dynamo exporter writes
    for adaptive average pooling to 1x1): a global average pool."""
    x = inputs[0]
    shape = shape_of(x)
    axes = list(imp.const(inputs[1], "the axes")) if len(inputs) > 1 and inputs[1] is not None \
        else list(attrs.get("axes", []))
    if len(shape) != 4 or sorted(int(a) % 4 for a in axes) != [2, 3] or \
            not attrs.get("keepdims", 1):
        raise imp.fail("Gemini averages over both spatial axes of NCHW with the dims kept "
                       f"(a global average pool), not axes {axes} of {shape}")
    return _global_pool(imp, [x], {})


@handles("MaxPool", "AveragePool")
def _pool(imp: CnnImporter, inputs, attrs):
    x = inputs[0]
    kernel = list(attrs["kernel_shape"])
    props = _window_props(imp, attrs, kernel, x)
    ceil = bool(attrs.get("ceil_mode", 0))
    if ceil and imp.node.op_type == "AveragePool":
        raise imp.fail("Gemini's average pool divides by the whole window, which ceil_mode's "
                       "partial last windows do not")
    if ceil:
        strides, pads = dnn.ints(props["stride"]), dnn.ints(props["padding"])
        for size, k, stride, lo, hi in zip(shape_of(x)[2:], kernel, strides, pads[::2],
                                           pads[1::2], strict=True):
            last = (dnn._window(size, k, stride, lo, hi, True) - 1) * stride
            if last >= size + lo:
                raise imp.fail("with ceil_mode its last window would start in the padding, "
                               "which ONNX drops and Gemini's pooling keeps")
    n, c, h, w = shape_of(x)
    operation = "max_pool2d" if imp.node.op_type == "MaxPool" else "avg_pool2d"
    from dialects.json_value import dict_attr

    extra = {"extra": dict_attr({"ceil_mode": True})} if ceil else {}
    return [imp.layer(dnn.PoolOp, operation, [x], [n, c, *_out_hw([h, w], kernel, props, ceil)],
                      pool_size=dnn._ints(kernel), **props, **extra,
                      **_exclude_pad(imp, attrs, props))]


def _exclude_pad(imp: CnnImporter, attrs: dict, props: dict) -> dict:
    """ONNX's AveragePool leaves padding out of the divisor (count_include_pad=0, the
    default): recorded on the layer when there is padding to leave out (the vector processor
    reads the same data either way; only the divisors at the borders change)."""
    if imp.node.op_type != "AveragePool" or not any(dnn.ints(props["padding"])) or \
            attrs.get("count_include_pad", 0):
        return {}
    return {"count_include_pad": IntegerAttr(0, 1)}


@handles("GlobalAveragePool")
def _global_pool(imp: CnnImporter, inputs, attrs):
    x = inputs[0]
    n, c, h, w = shape_of(x)
    return [imp.layer(dnn.PoolOp, "avg_pool2d", [x], [n, c, 1, 1], pool_size=dnn._ints([h, w]),
                      stride=dnn._ints([1, 1]), padding=dnn._ints([0, 0, 0, 0]))]


@handles("Add", "Sum", "Mul", "Sub", "Div")
def _eltwise(imp: CnnImporter, inputs, attrs):
    if all(isinstance(v, np.ndarray) for v in inputs):
        fn = {"Add": np.add, "Sum": np.add, "Mul": np.multiply, "Sub": np.subtract,
              "Div": np.divide}[imp.node.op_type]
        out = inputs[0]
        for v in inputs[1:]:
            out = fn(out, v)
        return [out]
    function = {"Add": "add", "Sum": "add", "Mul": "mul", "Sub": "sub",
                "Div": "div"}[imp.node.op_type]
    out = inputs[0]
    for index, other in enumerate(inputs[1:], 1):
        if isinstance(out, np.ndarray):
            out, other = other, out   # keep the feature map first
        if isinstance(other, np.ndarray):
            other = imp.constant(_as_nchw(other, shape_of(out)),
                                 f"{imp.node.output[0]}_c{index}")
        shape = dnn.broadcast_shape(dnn.fmap(out).nchw, dnn.fmap(other).nchw)
        if shape is None:
            raise imp.fail(f"{shape_of(out)} and {shape_of(other)} do not broadcast")
        out = imp.layer(dnn.EltwiseOp, f"element_wise_{function}", [out, other],
                        shape[: len(shape_of(out))] if len(shape_of(out)) < 4 else shape)
    return [out]


def _broadcast(shape: tuple[int, ...], like: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape `shape` and `like` broadcast to (ONNX's multidirectional rule), or None."""
    try:
        return tuple(np.broadcast_shapes(shape, like))
    except ValueError:
        return None


def _as_nchw(value: np.ndarray, like: list[int]) -> np.ndarray:
    """A constant broadcast against a feature map, with the map's rank (ONNX aligns right)."""
    value = np.asarray(value)
    shape = [1] * (len(like) - value.ndim) + list(value.shape)
    return value.reshape(shape)


@handles("Concat")
def _concat(imp: CnnImporter, inputs, attrs):
    """Feature maps side by side along channels: a `dnn.concat` view, no copy (Gemini's
    consumers read each input at its channel offset). Shape computations fold."""
    if all(isinstance(v, np.ndarray) for v in inputs):
        return CONSTANT_FOLDING["Concat"](imp, inputs, attrs)
    like = next(v for v in inputs if not isinstance(v, np.ndarray))
    rank = len(shape_of(like))
    axis = attrs.get("axis", 1)
    if not -rank <= axis < rank:
        raise imp.fail(f"axis {axis} is not a dim of the rank-{rank} inputs")
    if axis % rank != 1:
        raise imp.fail(f"it concatenates along axis {axis % rank}; Gemini concatenates feature "
                       f"maps along channels only (axis 1: its consumers read each input at a "
                       f"channel offset)")
    parts = [imp.value(v, f"{imp.node.output[0]}_c{i}") for i, v in enumerate(inputs)]
    shape = list(shape_of(like))
    shape[1] = sum(shape_of(p)[1] for p in parts)
    return [imp.layer(dnn.ConcatOp, "concat", parts, shape, axis=IntegerAttr(1, i64))]


@handles("Gemm")
def _gemm(imp: CnnImporter, inputs, attrs):
    x, w = inputs[0], inputs[1]
    if attrs.get("transA", 0):
        raise imp.fail("a dense layer's input is not transposed")
    weights = np.asarray(w) if isinstance(w, np.ndarray) else None
    k = shape_of(w)[0] if attrs.get("transB", 0) else shape_of(w)[1]
    if weights is not None and not attrs.get("transB", 0):
        weights = weights.T
    if weights is None and not attrs.get("transB", 0):
        raise imp.fail("the weights of a dense layer must be known, or given transposed")
    alpha = attrs.get("alpha", 1.0)
    if weights is not None and alpha != 1.0:
        weights = weights * alpha
    n = shape_of(x)[0]
    w_value = imp.value(weights if weights is not None else w, f"{imp.node.output[0]}_w")
    out = imp.layer(dnn.DenseOp, "dense", [x, w_value], [n, k, 1, 1])
    if len(inputs) > 2 and inputs[2] is not None:
        c = inputs[2]
        if isinstance(c, np.ndarray) and _broadcast(c.shape, (n, k)) != (n, k):
            raise imp.fail(f"a dense layer's bias of shape {list(c.shape)} does not broadcast "
                           f"to its output [{n}, {k}]")
        bias = imp.value(_as_nchw(np.asarray(c) * attrs.get("beta", 1.0), [n, k])
                         .reshape(1, k, 1, 1) if isinstance(c, np.ndarray) else c,
                         f"{imp.node.output[0]}_b")
        out = imp.layer(dnn.EltwiseOp, "element_wise_add", [out, bias], [n, k, 1, 1])
    return [imp.layer(dnn.ReshapeOp, "reshape", [out], [n, k])]


@handles("Flatten")
def _flatten(imp: CnnImporter, inputs, attrs):
    x = inputs[0]
    shape = shape_of(x)
    axis = attrs.get("axis", 1) % (len(shape) + 1)
    new = [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))]
    if isinstance(x, np.ndarray):
        return [x.reshape(new)]
    return [imp.layer(dnn.ReshapeOp, "flatten", [x], new)]


@handles("Reshape")
def _reshape(imp: CnnImporter, inputs, attrs):
    x = inputs[0]
    target = [int(v) for v in imp.const(inputs[1], "the new shape")]
    current = x.shape if isinstance(x, ChannelSplit) else shape_of(x)
    target = [current[i] if v == 0 else v for i, v in enumerate(target)]
    if -1 in target:
        target[target.index(-1)] = int(np.prod(current)) // int(
            np.prod([v for v in target if v != -1]))
    if isinstance(x, np.ndarray):
        return [x.reshape(target)]
    if isinstance(x, ChannelSplit) or len(target) == 5:
        return [_channel_shuffle_step(imp, x, target)]
    if target == current:
        return [x]
    return [imp.layer(dnn.ReshapeOp, "reshape", [x], target)]


# -- ShuffleNet's channel shuffle: Reshape [N, C, H, W] -> [N, g, C/g, H, W], Transpose
#    [0, 2, 1, 3, 4], Reshape -> [N, C, H, W]; the 5-D values in between are held as
#    `ChannelSplit`s and the last reshape becomes one `dnn.channel_shuffle` layer.

SHUFFLE = "Gemini holds 5-D values only as ShuffleNet's channel shuffle (Reshape to [N, g, " \
    "C/g, H, W], Transpose [0, 2, 1, 3, 4], Reshape back to [N, C, H, W])"


@dataclass
class ChannelSplit:
    """A feature map's channels seen as [N, g, C/g, H, W] (or, `swapped`, [N, C/g, g, H, W])."""

    value: SSAValue
    groups: int
    swapped: bool = False

    @property
    def shape(self) -> list[int]:
        n, c, h, w = shape_of(self.value)
        g = self.groups
        return [n, c // g, g, h, w] if self.swapped else [n, g, c // g, h, w]


def _refuse_split_channels(imp: CnnImporter, values, output: str | None = None) -> None:
    if any(isinstance(v, ChannelSplit) for v in values) and \
            imp.node.op_type not in ("Reshape", "Transpose") or \
            output is not None and isinstance(values[0], ChannelSplit):
        raise imp.fail(f"{'network output ' + repr(output) + ': ' if output else ''}{SHUFFLE}; "
                       "this is not expressible otherwise")


def _channel_shuffle_step(imp: CnnImporter, x, target: list[int]):
    if not isinstance(x, ChannelSplit):
        n, c, h, w = shape_of(x) if len(shape_of(x)) == 4 else (0, 0, 0, 0)
        if len(target) == 5 and target[0] == n and target[1] * target[2] == c and \
                target[3:] == [h, w]:
            return ChannelSplit(x, target[1])
    elif x.swapped and target == shape_of(x.value):
        return imp.layer(dnn.ChannelShuffleOp, "channel_shuffle", [x.value], target,
                         groups=IntegerAttr(x.groups, i64))
    raise imp.fail(f"reshape to {target}: {SHUFFLE}; this is not expressible otherwise")


@handles("Transpose")
def _transpose(imp: CnnImporter, inputs, attrs):
    x = inputs[0]
    if isinstance(x, np.ndarray):
        return [np.transpose(x, attrs.get("perm"))]
    if isinstance(x, ChannelSplit) and not x.swapped and list(attrs.get("perm", [])) == \
            [0, 2, 1, 3, 4]:
        return [ChannelSplit(x.value, x.groups, swapped=True)]
    raise imp.fail(f"Gemini has no layer for it: {SHUFFLE}; run other transposes on the host "
                   "and cut the network there")


@handles("Dropout", "Identity")
def _identity(imp: CnnImporter, inputs, attrs):
    return [inputs[0]]


def _softmax_axis(imp: CnnImporter, shape: list[int], attrs: dict) -> int:
    """The one dim Softmax normalises over. Before opset 13 it normalises the input flattened
    from `axis` (default 1) on, which is one dim when the others from there are 1 (a
    classifier's [N, 1000, 1, 1])."""
    opset = next((o.version for o in imp.model.opset_import if o.domain in ("", "ai.onnx")),
                 13)
    rank = len(shape)
    if opset >= 13:
        return attrs.get("axis", -1) % rank
    start = attrs.get("axis", 1) % rank
    spread = [d for d in range(start, rank) if shape[d] != 1]
    if len(spread) > 1:
        raise imp.fail(f"before opset 13 it normalises dims {spread} together; Gemini reduces "
                       f"along channels only")
    return spread[0] if spread else start


@handles("Softmax")
def _softmax(imp: CnnImporter, inputs, attrs):
    x = inputs[0]
    rank = len(shape_of(x))
    axis = _softmax_axis(imp, shape_of(x), attrs)
    if axis != 1:
        raise imp.fail("Gemini reduces along channels (axis 1) here")

    def reduce(operation: str, value):
        shape = dnn.fmap(value).nchw
        shape[1] = 1
        return imp.layer(dnn.ReduceOp, operation, [value], shape[:rank] if rank < 4 else shape,
                         axis=IntegerAttr(1, i64))

    def binary(function: str, a, b):
        return imp.layer(dnn.EltwiseOp, f"element_wise_{function}", [a, b], shape_of(a))

    shifted = binary("sub", x, reduce("reduce_max", x))
    e = imp.layer(dnn.UnaryOp, "exp", [shifted], shape_of(x))
    return [binary("div", e, reduce("reduce_sum", e))]


def import_cnn(model: Any, path: str) -> OnnxImport:
    return CnnImporter(model, path).run()
