"""Convolutional networks as ARK models: Conv, pooling and BatchNormalization decomposed into
ARK's Embedding (a row gather), MatMul, reductions and element-wise operators.

A convolution is im2col and a matrix product. The input, moved to channels last, is a table
of one row per pixel ([N*H*W, C]) with one extra row of the padding value; a constant index
tensor names, for every output pixel and kernel tap, the row it reads (the padding row where
the tap falls outside the image, at any stride, dilation and padding), and one Embedding
gathers the columns [N*OH*OW, KH*KW*C]. The product with the weights, reordered to
[KH*KW*C, M] at import, gives channels last; a Transpose gives NCHW back. Grouped convolutions
multiply per group (a batched MatMul over groups); depthwise ones (one input channel per
group) are a product with the taps' weights and a sum over the taps. A 1x1 convolution of
stride 1 without padding needs no gather: W [M, C] times the image [C, H*W].

Pooling gathers the windows the same way (the padding row -inf for MaxPool, 0 for
AveragePool) and reduces over the taps; AveragePool divides by the count ONNX defines for each
window (with or without the padding, `count_include_pad`). GlobalAveragePool and GlobalMaxPool
reduce the spatial axes. BatchNormalization in inference is one scale and one shift per
channel, folded from its four constants at import.

The index tensor has one entry per output pixel and tap (the size of the columns it gathers,
which the plan holds anyway); beyond `MAX_GATHER` entries the node is refused.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from frontends.onnx_model import (
    FLOAT_TYPES,
    ArkImporter,
    _all_const,
    _contiguous,
    _reshape_to,
    handles,
    shape_of,
)

MAX_GATHER = 1 << 24
"""The most (output pixel, tap) pairs one convolution or pooling gathers: 16 Mi indices."""


# ---------------------------------------------------------------------------------------------
# Geometry: ONNX's output sizes, padding and the rows each tap reads
# ---------------------------------------------------------------------------------------------


def _ints(attrs: dict[str, Any], key: str, default: list[int]) -> list[int]:
    value = attrs.get(key)
    return [int(v) for v in value] if value else list(default)


def _geometry(imp: ArkImporter, attrs: dict[str, Any], spatial: list[int], kernel: list[int],
              *, pooling: bool) -> tuple[list[int], list[int], list[int], list[int]]:
    """(output sizes, strides, dilations, leading pads) of a convolution or pooling over
    `spatial` with `kernel`, as ONNX defines them (auto_pad, pads, ceil_mode)."""
    rank = len(spatial)
    strides = _ints(attrs, "strides", [1] * rank)
    dilations = _ints(attrs, "dilations", [1] * rank)
    pads = _ints(attrs, "pads", [0] * (2 * rank))
    if len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
        raise imp.fail(f"strides {strides}, dilations {dilations} and pads {pads} do not fit "
                       f"{rank} spatial dims")
    if min(strides) < 1 or min(dilations) < 1 or min(pads) < 0:
        raise imp.fail("strides and dilations are at least 1 and pads at least 0")
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    ceil = bool(attrs.get("ceil_mode", 0)) and pooling
    span = [d * (k - 1) + 1 for d, k in zip(dilations, kernel, strict=True)]
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-i // s) for i, s in zip(spatial, strides, strict=True)]
        total = [max(0, (o - 1) * s + e - i)
                 for o, s, e, i in zip(out, strides, span, spatial, strict=True)]
        begin = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
        return out, strides, dilations, begin
    if auto == "VALID":
        pads = [0] * (2 * rank)
    elif auto != "NOTSET":
        raise imp.fail(f"auto_pad '{auto}' is none of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    out = []
    for axis in range(rank):
        room = spatial[axis] + pads[axis] + pads[axis + rank] - span[axis]
        if room < 0:
            raise imp.fail(f"the kernel {kernel} is larger than the padded input {spatial}")
        size = (-(-room // strides[axis]) if ceil else room // strides[axis]) + 1
        if ceil and (size - 1) * strides[axis] >= spatial[axis] + pads[axis]:
            size -= 1     # the last window would start in the trailing padding
        out.append(size)
    return out, strides, dilations, pads[:rank]


def _taps(spatial: list[int], out: list[int], kernel: list[int], strides: list[int],
          dilations: list[int], begin: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """For each output pixel and kernel tap (2-D: [OH, OW, KH, KW]) the flat input pixel it
    reads, and whether that pixel is inside the image (False: padding)."""
    h, w = spatial
    oh = np.arange(out[0]).reshape(-1, 1, 1, 1)
    ow = np.arange(out[1]).reshape(1, -1, 1, 1)
    kh = np.arange(kernel[0]).reshape(1, 1, -1, 1)
    kw = np.arange(kernel[1]).reshape(1, 1, 1, -1)
    row = oh * strides[0] - begin[0] + kh * dilations[0]
    col = ow * strides[1] - begin[1] + kw * dilations[1]
    inside = (row >= 0) & (row < h) & (col >= 0) & (col < w)
    return np.where(inside, row * w + col, 0), inside


def _windows(imp: ArkImporter, x, attrs, kernel: list[int], pad_value: float, *,
             pooling: bool):
    """The columns of `x` [N, C, *spatial]: ([N*OH*OW, KH*KW, C] gathered, the geometry).
    Spatial rank 1 is a height of 1."""
    shape = shape_of(x)
    if len(shape) not in (3, 4):
        raise imp.fail(f"input {shape}: planc lowers convolutions and pooling over 1 or 2 "
                       "spatial dims (N, C, L or N, C, H, W)")
    n, c, spatial = shape[0], shape[1], list(shape[2:])
    if len(kernel) != len(spatial):
        raise imp.fail(f"kernel {kernel} for {len(spatial)} spatial dims")
    out, strides, dilations, begin = _geometry(imp, attrs, spatial, kernel, pooling=pooling)
    if len(spatial) == 1:
        spatial, kernel, out = [1, *spatial], [1, *kernel], [1, *out]
        strides, dilations, begin = [1, *strides], [1, *dilations], [0, *begin]
    pixels = int(np.prod(out))
    taps = int(np.prod(kernel))
    if n * pixels * taps > MAX_GATHER:
        raise imp.fail(f"its columns have {n * pixels * taps:,} (pixel, tap) pairs, more than "
                       f"the {MAX_GATHER:,} planc gathers in one operator")
    where, inside = _taps(spatial, out, kernel, strides, dilations, begin)
    plane = spatial[0] * spatial[1]
    images = np.arange(n).reshape(-1, 1, 1, 1, 1) * plane
    pad_row = n * plane
    indices = np.where(inside, where + images, pad_row).astype(np.int32)
    dtype = x.type.data_type
    table = imp.m.tensor([pad_row + 1, c], dtype)
    pixels_last = _reshape_to(imp, imp.m.transpose(_reshape_to(imp, x, [n, c, plane]),
                                                   [0, 2, 1]), [pad_row, c])
    imp.m.copy(pixels_last, output=imp.m.slice(table, [0, 0], [pad_row, c]))
    fill = np.full([1, c], pad_value, dtype=np.float32 if dtype in FLOAT_TYPES else np.int32)
    imp.m.copy(imp.weight(fill, dtype), output=imp.m.slice(table, [pad_row, 0], [1, c]))
    rows = imp.m.embedding(imp.weight(indices.reshape(-1), "INT32"), table)
    columns = _reshape_to(imp, rows, [n * pixels, taps, c])
    return columns, (n, out, inside)


def _channels_first(imp: ArkImporter, y, n: int, out: list[int], shape: list[int]):
    """[N*OH*OW, C] channels last -> the NCHW (or NCL) result of `shape`."""
    channels = shape_of(y)[-1]
    pixels = int(np.prod(out))
    moved = imp.m.transpose(_reshape_to(imp, y, [n, pixels, channels]), [0, 2, 1])
    return _reshape_to(imp, moved, shape)


def _result_shape(x_shape: list[int], channels: int, out: list[int]) -> list[int]:
    return [x_shape[0], channels, *(out[1:] if len(x_shape) == 3 else out)]


# ---------------------------------------------------------------------------------------------
# Conv
# ---------------------------------------------------------------------------------------------


@handles("Conv")
def _conv(imp: ArkImporter, inputs, attrs):
    x, w = inputs[0], imp.const(inputs[1], "the weights")
    bias = inputs[2] if len(inputs) > 2 else None
    if isinstance(x, np.ndarray):
        x = imp.weight(x)
    shape = shape_of(x)
    groups = int(attrs.get("group", 1))
    m, cg, kernel = w.shape[0], w.shape[1], list(w.shape[2:])
    if groups < 1 or shape[1] != cg * groups or m % groups:
        raise imp.fail(f"weights {list(w.shape)} with {groups} groups do not fit input {shape}")
    if "kernel_shape" in attrs and list(attrs["kernel_shape"]) != kernel:
        raise imp.fail(f"kernel_shape {list(attrs['kernel_shape'])} is not the weights' "
                       f"{kernel}")
    dtype = x.type.data_type
    if dtype not in FLOAT_TYPES:
        raise imp.fail(f"a convolution of {dtype} (planc convolves floats)")
    plain = (all(k == 1 for k in kernel) and shape[0] == 1 and groups == 1
             and not any(_ints(attrs, "pads", [])) and all(s == 1 for s in _ints(
                 attrs, "strides", [1])) and attrs.get("auto_pad", b"NOTSET") in (
                     b"NOTSET", "NOTSET", b"VALID", "VALID"))
    if plain:
        imp.decomposed("MatMul of the weights [M, C] and the image [C, H*W]")
        pixels = int(np.prod(shape[2:]))
        y = imp.m.matmul(imp.weight(w.reshape(m, cg).astype(np.float32), dtype),
                         _reshape_to(imp, x, [shape[1], pixels]))
        if bias is not None:
            y = imp.m.add(y, imp.tensor(np.asarray(bias).reshape(m, 1), y)
                          if isinstance(bias, np.ndarray) else _reshape_to(imp, bias, [m, 1]))
        return [_reshape_to(imp, y, [1, m, *shape[2:]])]
    columns, (n, out, _) = _windows(imp, x, attrs, kernel, 0.0, pooling=False)
    taps = int(np.prod(kernel))
    mg = m // groups
    # weights [M, Cg, k...] -> [G, taps, Cg, Mg]: a tap's channels in the columns' order
    w4 = np.asarray(w, np.float32).reshape(groups, mg, cg, taps).transpose(0, 3, 2, 1)
    pixels = n * int(np.prod(out))
    if groups == 1:
        imp.decomposed("im2col: an Embedding of the pixels, channels last, and a MatMul")
        y = imp.m.matmul(_reshape_to(imp, columns, [pixels, taps * cg]),
                         imp.weight(w4.reshape(taps * cg, mg), dtype))
    elif cg == 1:
        imp.decomposed("depthwise: an Embedding of the windows, a Mul by the taps' weights "
                       "and a ReduceSum over the taps")
        # weights [G*Mg, 1, k...] -> [taps, G, Mg]: a tap's weight for each channel
        taps_first = np.asarray(w, np.float32).reshape(groups, mg, taps).transpose(2, 0, 1)
        if mg == 1:
            y = imp.m.reduce_sum(imp.m.mul(columns, imp.weight(
                np.ascontiguousarray(taps_first.reshape(taps, groups)), dtype)), 1)
        else:
            spread = _reshape_to(imp, columns, [pixels, taps, groups, 1])
            y = imp.m.reduce_sum(imp.m.mul(spread, imp.weight(
                np.ascontiguousarray(taps_first), dtype)), 1)
        y = _reshape_to(imp, y, [pixels, m])
    else:
        imp.decomposed("grouped im2col: an Embedding of the pixels and a MatMul per group")
        split = _reshape_to(imp, columns, [pixels, taps, groups, cg])
        per_group = _reshape_to(imp, imp.m.transpose(split, [2, 0, 1, 3]),
                                [groups, pixels, taps * cg])
        y = imp.m.matmul(per_group, imp.weight(w4.reshape(groups, taps * cg, mg), dtype))
        y = _reshape_to(imp, imp.m.transpose(y, [1, 0, 2]), [pixels, m])
    if bias is not None:
        y = imp.m.add(y, imp.tensor(np.asarray(bias).reshape(m), y)
                      if isinstance(bias, np.ndarray) else _reshape_to(imp, bias, [m]))
    return [_channels_first(imp, y, n, out, _result_shape(shape, m, out))]


# ---------------------------------------------------------------------------------------------
# Pooling and batch normalisation
# ---------------------------------------------------------------------------------------------


def _pool_counts(imp: ArkImporter, attrs, shape: list[int], inside: np.ndarray,
                 out: list[int]) -> np.ndarray:
    """AveragePool's divisor per output pixel [OH*OW, 1]: the taps inside the image, or with
    `count_include_pad` those inside the padded image (a window that ceil_mode lets run past
    the trailing padding counts only what lies within it)."""
    if not attrs.get("count_include_pad", 0):
        counts = inside.reshape(int(np.prod(out)), -1).sum(axis=1)
    elif attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
        raise imp.fail("count_include_pad with auto_pad SAME_*: planc counts the padding "
                       "that `pads` gives")
    else:
        spatial = [1, shape[2]] if len(shape) == 3 else list(shape[2:])
        kernel = _ints(attrs, "kernel_shape", [])
        kernel = [1, *kernel] if len(shape) == 3 else kernel
        rank = len(shape) - 2
        pads = _ints(attrs, "pads", [0] * (2 * rank))
        strides = _ints(attrs, "strides", [1] * rank)
        dilations = _ints(attrs, "dilations", [1] * rank)
        if len(shape) == 3:
            pads, strides, dilations = [0, pads[0], 0, pads[1]], [1, *strides], [1, *dilations]
        extent = [spatial[a] + pads[a] + pads[a + 2] for a in range(2)]
        _, padded = _taps(extent, out, kernel, strides, dilations, [0, 0])
        counts = padded.reshape(int(np.prod(out)), -1).sum(axis=1)
    if counts.min() == 0:
        raise imp.fail("a window covers only padding (its average divides by 0)")
    return counts.astype(np.float32).reshape(-1, 1)


@handles("MaxPool", "AveragePool")
def _pool(imp: ArkImporter, inputs, attrs):
    x = imp.tensor(inputs[0])
    shape = shape_of(x)
    kernel = _ints(attrs, "kernel_shape", [])
    if not kernel:
        raise imp.fail("no kernel_shape")
    if attrs.get("storage_order", 0):
        raise imp.fail("storage_order 1 (column-major indices)")
    dtype = x.type.data_type
    if dtype not in FLOAT_TYPES:
        raise imp.fail(f"pooling of {dtype} (planc pools floats)")
    maximum = imp.node.op_type == "MaxPool"
    pad = -math.inf if maximum else 0.0
    columns, (n, out, inside) = _windows(imp, x, attrs, kernel, pad, pooling=True)
    c = shape[1]
    if maximum:
        y = imp.m.reduce_max(columns, 1)
    else:
        counts = _pool_counts(imp, attrs, shape, inside, out)
        y = _reshape_to(imp, imp.m.reduce_sum(columns, 1), [n, int(np.prod(out)), c])
        y = imp.m.div(y, imp.weight(counts, dtype))
    imp.decomposed(f"an Embedding of the windows and a {'ReduceMax' if maximum else 'ReduceSum'}"
                   " over the taps")
    return [_channels_first(imp, _reshape_to(imp, y, [n * int(np.prod(out)), c]), n, out,
                            _result_shape(shape, c, out))]


@handles("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(imp: ArkImporter, inputs, attrs):
    x = imp.tensor(inputs[0])
    shape = shape_of(x)
    if len(shape) < 3:
        raise imp.fail(f"input {shape} has no spatial dims")
    reduce = imp.m.reduce_mean if imp.node.op_type == "GlobalAveragePool" else imp.m.reduce_max
    n, c = shape[:2]
    flat = _reshape_to(imp, _contiguous(imp, x), [n, c, int(np.prod(shape[2:]))])
    return [_reshape_to(imp, reduce(flat, 2), [n, c] + [1] * (len(shape) - 2))]


@handles("BatchNormalization")
def _batch_norm(imp: ArkImporter, inputs, attrs):
    """Inference: y = x * scale / sqrt(var + eps) + (B - mean * scale / sqrt(var + eps)),
    one factor and one shift per channel folded at import. Training mode (which updates the
    running statistics from the batch) is refused."""
    if attrs.get("training_mode", 0) or (imp.opset < 7 and not attrs.get("is_test", 0)):
        raise imp.fail("training mode normalises with the batch's statistics and updates the "
                       "running ones; planc plans inference (export in eval mode)")
    x = inputs[0]
    scale, shift, mean, var = (np.asarray(imp.const(v, "the statistics"), np.float64)
                               for v in inputs[1:5])
    factor = scale / np.sqrt(var + float(attrs.get("epsilon", 1e-5)))
    offset = shift - mean * factor
    shape = shape_of(x)
    channel = [shape[1]] + [1] * (len(shape) - 2) if len(shape) > 1 else [shape[0]]
    if _all_const([x]):
        return [(x * factor.reshape(channel) + offset.reshape(channel)).astype(x.dtype)]
    x = imp.tensor(x)
    dtype = x.type.data_type
    imp.decomposed("a Mul and an Add per channel, folded from the four statistics")
    y = imp.m.mul(x, imp.weight(factor.astype(np.float32).reshape(channel), dtype))
    return [imp.m.add(y, imp.weight(offset.astype(np.float32).reshape(channel), dtype))]
