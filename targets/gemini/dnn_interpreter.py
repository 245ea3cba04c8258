"""Run a `dnn` layer graph with numpy: the ground truth Gemini schedules are checked against.

Values are float64 arrays of each feature map's shape. Inputs are drawn in [0.5, 1.5) and
constants (weights) in [-1, 1) / sqrt(fan-in), so that square roots, logarithms of sums and
exponentials stay finite; filled constants (ARK's ScalarAssign) hold their value.
Quantisation is not modelled (quantize/dequantize pass values through): the point is to
check where data goes, not int8 arithmetic.

`LAYER_FUNCTIONS` maps each layer class to its function of (layer, inputs) -> output, usable on
full inputs whose unknown parts are NaN: a result that depends on missing data comes out NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from xdsl.ir import SSAValue

from dialects import dnn
from dialects.locations import source_path
from ground.diagnostics import PlancError

Array = np.ndarray


def _nchw(x: Array) -> Array:
    shape = {1: lambda: (1, x.shape[0], 1, 1), 2: lambda: (*x.shape, 1, 1),
             3: lambda: (*x.shape, 1)}.get(x.ndim, lambda: x.shape)()
    return x.reshape(shape)


def _windows(x: Array, layer: dnn.WindowOp, fill: float) -> Array:
    """[N, C, H', W', R, S] windows of the padded input."""
    (r, s), (sh, sw), (top, bottom, left, right) = layer.window, layer.strides, layer.pads
    padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=fill)
    _, _, h_out, w_out = layer.out_type.nchw
    need_h, need_w = (h_out - 1) * sh + r, (w_out - 1) * sw + s
    if padded.shape[2] < need_h or padded.shape[3] < need_w:   # ceil_mode
        padded = np.pad(padded, ((0, 0), (0, 0), (0, max(0, need_h - padded.shape[2])),
                                 (0, max(0, need_w - padded.shape[3]))), constant_values=fill)
    windows = sliding_window_view(padded, (r, s), axis=(2, 3))
    return windows[:, :, : need_h - r + 1: sh, : need_w - s + 1: sw]


def conv2d(layer: dnn.Conv2dOp, inputs: list[Array]) -> Array:
    """Each group of output channels reads only its group of input channels (groups = 1: all
    of them), so data missing from other groups cannot reach it."""
    x, w = _nchw(inputs[0]), _nchw(inputs[1])
    g = layer.group_count
    windows = _windows(x, layer, 0.0)
    n, c, h, wd, r, s = windows.shape
    k = w.shape[0]
    out = np.einsum("ngchwrs,gkcrs->ngkhw", windows.reshape(n, g, c // g, h, wd, r, s),
                    w.reshape(g, k // g, c // g, r, s), optimize=True).reshape(n, k, h, wd)
    if layer.extra_value("activation_type") == "relu":
        out = np.maximum(out, 0)
    return out


def pool(layer: dnn.PoolOp, inputs: list[Array]) -> Array:
    x = _nchw(inputs[0])
    if layer.op_name == "max_pool2d":
        return _windows(x, layer, -np.inf).max(axis=(4, 5))
    r, s = layer.window
    total = _windows(x, layer, 0.0).sum(axis=(4, 5))
    if layer.excludes_pad:   # divide by the window's elements inside the input
        inside = np.ones((1, 1, *x.shape[2:]))
        return total / _windows(inside, layer, 0.0).sum(axis=(4, 5))
    return total / (r * s)


def lrn(layer: dnn.LrnOp, inputs: list[Array]) -> Array:
    """ONNX LRN: each channel divided by (bias + alpha/size * the sum of squares over its
    channel window, clipped to the channels) ** beta."""
    x = _nchw(inputs[0])
    before, after = layer.channel_reach
    squares = np.pad(x * x, ((0, 0), (before, after), (0, 0), (0, 0)))
    sums = sliding_window_view(squares, before + after + 1, axis=1).sum(axis=-1)
    alpha, beta = layer.coefficient("alpha", 1e-4), layer.coefficient("beta", 0.75)
    bias = layer.coefficient("bias", 1.0)
    return x / (bias + alpha / layer.window_size * sums) ** beta


def _rope(a: Array, b: Array) -> Array:
    """Adjacent channel pairs as complex numbers, multiplied (ARK's Rope)."""
    a0, a1, b0, b1 = a[:, 0::2], a[:, 1::2], b[:, 0::2], b[:, 1::2]
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[:, 0::2] = a0 * b0 - a1 * b1
    out[:, 1::2] = a0 * b1 + a1 * b0
    return out


ELEMENTWISE: dict[str, Callable[[Array, Array], Array]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "rope": _rope,
}


def eltwise(layer: dnn.EltwiseOp, inputs: list[Array]) -> Array:
    fn = ELEMENTWISE.get(layer.function)
    if fn is None:
        raise PlancError(f"layer '{layer.name_}': no reference for {layer.op_name}",
                         path=source_path(layer))
    out = fn(_nchw(inputs[0]), _nchw(inputs[1]))
    modules = layer.extra_value("module_list") or {}
    if isinstance(modules, dict) and "relu_group" in modules:
        out = np.maximum(out, 0)
    return out


def _gelu(x: Array) -> Array:
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


UNARY: dict[str, Callable[[Array, float], Array]] = {
    "relu": lambda x, f: np.maximum(x, 0), "sigmoid": lambda x, f: 1 / (1 + np.exp(-x)),
    "exp": lambda x, f: np.exp(x), "gelu": lambda x, f: _gelu(x),
    "sqrt": lambda x, f: np.sqrt(x), "rsqrt": lambda x, f: 1 / np.sqrt(x),
    "copy": lambda x, f: x, "cast": lambda x, f: x, "scalar_add": lambda x, f: x + f,
    "scalar_mul": lambda x, f: x * f, "scalar_assign": lambda x, f: np.full_like(x, f),
}


def unary(layer: dnn.UnaryOp, inputs: list[Array]) -> Array:
    factor = layer.factor.value.data if layer.factor is not None else 0.0
    out = UNARY[layer.op_name](_nchw(inputs[0]), factor)
    return np.broadcast_to(out, layer.out_type.nchw)


def reduce(layer: dnn.ReduceOp, inputs: list[Array]) -> Array:
    fn = {"reduce_sum": np.sum, "reduce_max": np.max, "reduce_mean": np.mean}[layer.op_name]
    return fn(_nchw(inputs[0]), axis=layer.axis_index, keepdims=True)


def dense(layer: dnn.DenseOp, inputs: list[Array]) -> Array:
    x = _nchw(inputs[0])
    w = _nchw(inputs[1]).reshape(_nchw(inputs[1]).shape[0], -1)
    return (x.reshape(x.shape[0], -1) @ w.T)[:, :, None, None]


def matmul(layer: dnn.MatmulOp, inputs: list[Array]) -> Array:
    a, b = _nchw(inputs[0])[..., 0], _nchw(inputs[1])[..., 0]
    pattern = "nkm,nkj->njm" if layer.trans_b else "nkm,njk->njm"
    if b.shape[0] == 1 and a.shape[0] > 1:
        b = np.broadcast_to(b, (a.shape[0], *b.shape[1:]))
    return np.einsum(pattern, a, b)[..., None]


def to_rows(x: Array) -> Array:
    """A feature map [N, C, H, 1] as the row-major array [N, H, C] it stands for."""
    return _nchw(x)[..., 0].transpose(0, 2, 1)


def from_rows(rows: Array, out: dnn.FmapType) -> Array:
    n, c, h, _ = out.nchw
    return rows.reshape(n, h, c).transpose(0, 2, 1)[..., None]


def transpose(layer: dnn.TransposeOp, inputs: list[Array]) -> Array:
    rows = to_rows(inputs[0]).reshape(dnn.ints(layer.from_shape)).transpose(dnn.ints(layer.perm))
    return from_rows(rows, layer.out_type)


def reshape(layer: dnn.ReshapeOp, inputs: list[Array]) -> Array:
    if layer.is_row_major:
        return from_rows(to_rows(inputs[0]), layer.out_type)
    return inputs[0]


def slice_(layer: dnn.SliceOp, inputs: list[Array]) -> Array:
    box = tuple(slice(o, o + d) for o, d in zip(layer.start, layer.out_type.nchw, strict=True))
    return _nchw(inputs[0])[box]


def concat(layer: dnn.ConcatOp, inputs: list[Array]) -> Array:
    return np.concatenate([_nchw(x) for x in inputs], axis=layer.axis_index)


def strided_slice(layer: dnn.StridedSliceOp, inputs: list[Array]) -> Array:
    rows = to_rows(inputs[0]).reshape(dnn.ints(layer.from_shape))
    box = tuple(slice(o, o + d) for o, d in zip(dnn.ints(layer.offsets), dnn.ints(layer.shape),
                                                strict=True))
    return from_rows(rows[box], layer.out_type)


def broadcast(layer: dnn.BroadcastOp, inputs: list[Array]) -> Array:
    rows = to_rows(inputs[0]).reshape(dnn.ints(layer.from_shape))
    return from_rows(np.broadcast_to(rows, dnn.ints(layer.to_shape)), layer.out_type)


def channel_shuffle(layer: dnn.ChannelShuffleOp, inputs: list[Array]) -> Array:
    x = _nchw(inputs[0])
    n, c, h, w = x.shape
    g = layer.group_count
    return x.reshape(n, g, c // g, h, w).transpose(0, 2, 1, 3, 4).reshape(n, c, h, w)


LAYER_FUNCTIONS: dict[type, Callable[[Any, list[Array]], Array]] = {
    dnn.Conv2dOp: conv2d, dnn.PoolOp: pool, dnn.EltwiseOp: eltwise,
    dnn.QuantizeOp: lambda layer, inputs: inputs[0], dnn.DenseOp: dense,
    dnn.ReshapeOp: reshape, dnn.MatmulOp: matmul,
    dnn.UnaryOp: unary, dnn.ReduceOp: reduce, dnn.TransposeOp: transpose,
    dnn.SliceOp: slice_, dnn.BroadcastOp: broadcast, dnn.StridedSliceOp: strided_slice,
    dnn.LrnOp: lrn, dnn.ChannelShuffleOp: channel_shuffle, dnn.ConcatOp: concat,
}


def evaluate(layer: dnn.LayerOp, inputs: list[Array]) -> Array:
    """The layer's output (in its declared shape) from full inputs."""
    fn = LAYER_FUNCTIONS.get(type(layer))
    if fn is None:
        raise PlancError(f"layer '{layer.name_}': operation '{layer.op_name}' has no reference "
                         f"implementation", path=source_path(layer))
    return np.asarray(fn(layer, inputs), dtype=np.float64).reshape(layer.out_type.shape_list)


def random_value(op: dnn.InputOp, rng: np.random.Generator) -> Array:
    shape = op.output.type.shape_list
    if op.fill_value is not None:
        return np.full(shape, op.fill_value)
    if op.is_constant:
        fan_in = max(1, math.prod(shape[1:]))
        return rng.uniform(-1, 1, shape) / math.sqrt(fan_in)
    return rng.uniform(0.5, 1.5, shape)


def run_graph(graph: dnn.GraphOp, seed: int = 0, given: dict[str, Array] | None = None,
              ) -> dict[SSAValue, Array]:
    """Every value of the graph, computed layer by layer; inputs named in `given` take those
    values, the others are drawn at random."""
    refuse_too_large(graph)
    rng = np.random.default_rng(seed)
    values: dict[SSAValue, Array] = {}
    for op in graph.body.block.ops:
        if isinstance(op, dnn.InputOp):
            value = (given or {}).get(op.input_name.data)
            values[op.output] = random_value(op, rng) if value is None else \
                np.asarray(value, dtype=np.float64).reshape(op.output.type.shape_list)
        elif isinstance(op, dnn.LayerOp):
            values[op.output] = evaluate(op, [values[v] for v in op.inputs])
    return values


def refuse_too_large(graph: dnn.GraphOp) -> None:
    """`run_graph` keeps every value (float64) until the end: a graph whose values exceed the
    numpy interpreters' memory is refused from its shapes, before any allocation (20,000
    layers of 5.5 MB each ended in a MemoryError)."""
    from targets.ark.model_interpreter import MAX_MEMORY_BYTES

    total = 8 * sum(math.prod(op.output.type.shape_list) for op in graph.body.block.ops
                    if isinstance(op, dnn.InputOp | dnn.LayerOp))
    if total > MAX_MEMORY_BYTES:
        raise PlancError(f"the graph's values hold {total / 1e9:.3g} GB, more than the "
                         f"{MAX_MEMORY_BYTES / 1e9:.3g} GB planc's numpy interpreter runs")


def simulate_graph(module, options) -> dict[str, Any]:
    """`planc simulate` on a layer description: run it and report the outputs."""
    graph = dnn.find_graph(module)
    values = run_graph(graph, getattr(options, "seed", 0))
    outputs = {out.output_name.data: values[out.value] for out in graph.outputs}
    finite = all(np.isfinite(v).all() for v in outputs.values())
    macs = sum(_macs(layer) for layer in graph.layers)
    return {"ok": bool(finite), "layers": len(graph.layers), "macs": macs,
            "outputs": {name: list(v.shape) for name, v in outputs.items()}}


def _macs(layer: dnn.LayerOp) -> int:
    n, k, h, w = layer.out_type.nchw
    if isinstance(layer, dnn.Conv2dOp):
        _, c, r, s = dnn.fmap(layer.inputs[1]).nchw    # c: input channels per group
        return n * k * h * w * c * r * s
    if isinstance(layer, dnn.DenseOp):
        return n * k * dnn.fmap(layer.inputs[1]).nchw[1]
    if isinstance(layer, dnn.MatmulOp):
        return n * k * h * dnn.fmap(layer.inputs[0]).nchw[1]
    return 0
