"""ONNX operators that ARK lacks, as short decompositions into ARK's operators.

ARK computes with element-wise arithmetic (Add, Sub, Mul, Div, scalar add and multiply, Exp,
Sqrt, Rsqrt, Relu, Sigmoid), reductions, MatMul, Transpose, Embedding (a row gather), Cast,
Copy (a broadcast) and views. Everything here is built from those, and says so at `-v`:

* masks: a BOOL tensor is UINT8 holding 0 or 1. Comparisons of integer tensors are exact with
  Relu (`a > b` is `relu(d) - relu(d - 1)` of the integer `d = a - b`), of float tensors
  with the sign of the difference (`min(1, relu(d) * 1e30 * 1e30)`); And, Or, Not and Xor
  are arithmetic on 0/1; Where(c, x, y) is `c * x + (1 - c) * y`;
* data movement: Expand and Tile are broadcasting copies, Split and constant-index Gather are
  views, GatherElements, GatherND and Gather on any axis (negative indices included) are
  Embedding row gathers from a table of one column or of the trailing dims;
* math: Log is square roots and Halley steps (and LogSoftmax and Softplus use it),
  Reciprocal is 1 / x, Tanh is `2 sigmoid(2x) - 1`, Erf and the exact Gelu use Abramowitz
  and Stegun's 7.1.26 (|error| < 1.5e-7), Max/Min are `a + relu(b - a)`, Clip a
  Relu on each side, Pow with integer or half-integer exponents repeated products (and a
  Sqrt), LayerNormalization over any trailing axes, RMSNormalization, Trilu a constant mask.

What has no decomposition is refused naming the node and the reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from frontends.onnx_model import (
    ARK_DTYPES,
    FLOAT_TYPES,
    LOWEST,
    MAX_RANK,
    NUMPY_TO_ARK,
    ArkImporter,
    Pending,
    Wide,
    _all_const,
    _axis,
    _contiguous,
    _reshape_to,
    _safe_softmax_of,
    handles,
    shape_of,
)

# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------


def dtype_of(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return NUMPY_TO_ARK.get(value.dtype, "FP32")
    return value.type.data_type


def is_float(value: Any) -> bool:
    return dtype_of(value) in FLOAT_TYPES


def broadcast(*shapes: Sequence[int]) -> list[int]:
    return list(np.broadcast_shapes(*(tuple(s) for s in shapes)))


def _expand_to(imp: ArkImporter, x: Any, shape: Sequence[int]):
    """`x` broadcast to `shape` (a copy that broadcasts, or `x` when it has that shape).
    Above rank 4, adjacent dims that are both kept or both broadcast merge."""
    shape = list(shape)
    if isinstance(x, np.ndarray):
        return np.broadcast_to(x, shape)
    have = shape_of(x)
    if have == shape:
        return x
    if broadcast(have, shape) != shape:
        raise imp.fail(f"{have} does not broadcast to {shape}")
    if len(shape) > MAX_RANK or isinstance(x, Wide):
        source, target = _merged_broadcast([1] * (len(shape) - len(have)) + have, shape)
        if len(target) > MAX_RANK:
            raise imp.fail(f"broadcasting {have} to {shape} takes more than {MAX_RANK} dims "
                           "even with adjacent dims merged")
        return _reshape_to(imp, _expand_to(imp, _reshape_to(imp, x, source), target), shape)
    out = imp.m.tensor(imp.fit_rank(shape), x.type.data_type)
    return imp.m.copy(x, output=out)


def _merged_broadcast(have: list[int], want: list[int]) -> tuple[list[int], list[int]]:
    """The shapes of a broadcast with adjacent dims of one kind (kept, or 1 to n) merged."""
    source: list[int] = []
    target: list[int] = []
    kinds: list[bool] = []
    for h, w in zip(have, want, strict=True):
        spread = h != w
        if w == 1 and source:
            continue          # a unit dim joins either kind
        if kinds and kinds[-1] == spread:
            source[-1] *= h
            target[-1] *= w
        else:
            source.append(h)
            target.append(w)
            kinds.append(spread)
    return source or [1], target or [1]


def _scalar(value: Any) -> float | None:
    """The one value of a constant whose elements are all equal, else None."""
    if not isinstance(value, np.ndarray) or value.size == 0:
        return None
    flat = value.reshape(-1)
    first = flat[0]
    return float(first) if np.all(flat == first) else None


def _one_minus(imp: ArkImporter, x):
    return imp.m.scalar_add(imp.m.scalar_mul(x, -1.0), 1.0)


def _abs(imp: ArkImporter, x):
    return imp.m.add(imp.m.relu(x), imp.m.relu(imp.m.scalar_mul(x, -1.0)))


def _reciprocal(imp: ArkImporter, x):
    ones = imp.m.scalar_assign(x.type.shape_list, 1.0, x.type.data_type)
    return imp.m.div(ones, x)


def _as_int(imp: ArkImporter, x):
    """An integer or BOOL operand as INT32, where differences and Relu are exact."""
    x = imp.tensor(x)
    return x if x.type.data_type == "INT32" else imp.m.cast(x, "INT32")


def _as_bool(imp: ArkImporter, x):
    """A 0/1 integer tensor as BOOL (UINT8)."""
    return imp.m.cast(x, "UINT8")


# ---------------------------------------------------------------------------------------------
# Masks: comparisons and logic
# ---------------------------------------------------------------------------------------------

ZERO_TEST = {"FP16": 1e4}
"""What a float is multiplied by, twice, so that the smallest positive value reaches 1 (FP32
and BF16: 1e30)."""


def _greater_than_zero(imp: ArkImporter, d):
    """[d > 0] of an INT32 tensor: relu(d) - relu(d - 1)."""
    return imp.m.sub(imp.m.relu(d), imp.m.relu(imp.m.scalar_add(d, -1.0)))


def _at_least_zero(imp: ArkImporter, d):
    """[d >= 0] of an INT32 tensor: relu(d + 1) - relu(d)."""
    return imp.m.sub(imp.m.relu(imp.m.scalar_add(d, 1.0)), imp.m.relu(d))


def _is_zero(imp: ArkImporter, d):
    """[d == 0] of an INT32 tensor: relu(d + 1) - 2 relu(d) + relu(d - 1) (a hat)."""
    up = imp.m.add(imp.m.relu(imp.m.scalar_add(d, 1.0)), imp.m.relu(imp.m.scalar_add(d, -1.0)))
    return imp.m.sub(up, imp.m.scalar_mul(imp.m.relu(d), 2.0))


COMPARE = {"Equal": np.equal, "Less": np.less, "Greater": np.greater,
           "LessOrEqual": np.less_equal, "GreaterOrEqual": np.greater_equal}


@handles(*COMPARE)
def _compare(imp: ArkImporter, inputs, attrs):
    a, b = inputs
    kind = imp.node.op_type
    if _all_const(inputs):
        return [COMPARE[kind](a, b)]
    if is_float(a) or is_float(b):
        return [_compare_floats(imp, a, b, kind)]
    if kind in ("Less", "LessOrEqual"):
        a, b = b, a       # a < b is b > a
    d = imp.m.sub(_as_int(imp, a), _as_int(imp, b))
    test = {"Equal": _is_zero, "Less": _greater_than_zero, "Greater": _greater_than_zero,
            "LessOrEqual": _at_least_zero, "GreaterOrEqual": _at_least_zero}[kind]
    imp.decomposed("Relu of the integer difference")
    return [_as_bool(imp, test(imp, d))]


def _float_positive(imp: ArkImporter, d):
    """[d > 0] of a float tensor, as 0.0 or 1.0: min(1, relu(d) K K) with K so large that the
    smallest positive float (a subnormal) reaches 1 (1e30, FP16 1e4; an overflow to inf is
    still 1), computed as 1 - relu(1 - v)."""
    scale = ZERO_TEST.get(d.type.data_type, 1e30)
    m = imp.m
    return _one_minus(imp, m.relu(_one_minus(imp, m.scalar_mul(m.scalar_mul(m.relu(d), scale),
                                                               scale))))


def _compare_floats(imp: ArkImporter, a, b, kind: str):
    """Float comparisons from the sign of the difference, which IEEE arithmetic (with
    subnormals) gets right for every pair of finite values: a > b is [a - b > 0], a == b is
    1 - [a - b > 0] - [b - a > 0]. Infinities of one sign on both sides (inf - inf) and NaN
    give NaN here, where onnxruntime compares them."""
    if not is_float(a) or isinstance(a, np.ndarray):
        a, b = b, a
        kind = {"Less": "Greater", "Greater": "Less", "LessOrEqual": "GreaterOrEqual",
                "GreaterOrEqual": "LessOrEqual"}.get(kind, kind)
    bound = _scalar(b) if isinstance(b, np.ndarray) else None
    if bound is not None and math.isinf(bound):
        return _compare_with_infinity(imp, imp.tensor(a), bound, kind)
    a = imp.tensor(a)
    b = imp.tensor(b, a)
    if b.type.data_type != a.type.data_type:
        b = imp.m.cast(b, a.type.data_type)
    m = imp.m
    if kind in ("Greater", "LessOrEqual"):
        out = _float_positive(imp, m.sub(a, b))
    elif kind in ("Less", "GreaterOrEqual"):
        out = _float_positive(imp, m.sub(b, a))
    else:
        d = m.sub(a, b)
        out = _one_minus(imp, m.add(_float_positive(imp, d),
                                    _float_positive(imp, m.scalar_mul(d, -1.0))))
    if kind in ("LessOrEqual", "GreaterOrEqual"):
        out = _one_minus(imp, out)
    imp.decomposed("the sign of the float difference, with Relu and scaling")
    return _as_bool(imp, out)


def _compare_with_infinity(imp: ArkImporter, x, bound: float, kind: str):
    """x against the constant +inf or -inf (a difference would be inf - inf = NaN): [x == -inf]
    is min(1, relu(-x / F - 1)) with F the largest float (-x / F is at most 1 for every
    finite x and +inf for -inf), and every comparison with an infinity is that test or its
    complement (x > -inf is 1 - [x == -inf], x <= -inf is [x == -inf] ...)."""
    m = imp.m
    largest = -LOWEST.get(x.type.data_type, LOWEST["FP32"])
    sign = -1.0 if bound < 0 else 1.0      # [x == bound] from sign * x / F
    beyond = m.relu(m.scalar_add(m.scalar_mul(x, sign / largest), -1.0))
    equal = _one_minus(imp, m.relu(_one_minus(imp, beyond)))
    # x == bound, and which comparisons that is for -inf (for +inf, mirrored)
    same = {"Equal", "LessOrEqual"} if bound < 0 else {"Equal", "GreaterOrEqual"}
    never = {"Less"} if bound < 0 else {"Greater"}
    always = {"GreaterOrEqual"} if bound < 0 else {"LessOrEqual"}
    imp.decomposed("a test for an infinity: min(1, relu(-x / F - 1))")
    if kind in never or kind in always:
        constant = m.scalar_mul(equal, 0.0)
        return _as_bool(imp, _one_minus(imp, constant) if kind in always else constant)
    return _as_bool(imp, equal if kind in same else _one_minus(imp, equal))


LOGIC = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}


@handles(*LOGIC)
def _logic(imp: ArkImporter, inputs, attrs):
    a, b = inputs
    kind = imp.node.op_type
    if _all_const(inputs):
        return [LOGIC[kind](a, b)]
    if kind == "And" and isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
        a, b = b, a
    if kind == "And" and isinstance(b, np.ndarray) and b.all():
        return [_expand_to(imp, a, broadcast(shape_of(a), b.shape))]
    x, y = _as_int(imp, a), _as_int(imp, b)
    both = imp.m.mul(x, y)
    if kind == "And":
        out = both
    elif kind == "Or":
        out = imp.m.sub(imp.m.add(x, y), both)
    else:
        out = imp.m.sub(imp.m.add(x, y), imp.m.scalar_mul(both, 2.0))
    imp.decomposed("arithmetic on 0/1")
    return [_as_bool(imp, out)]


@handles("Not")
def _not(imp: ArkImporter, inputs, attrs):
    (x,) = inputs
    if _all_const(inputs):
        return [np.logical_not(x)]
    imp.decomposed("1 - x")
    return [_as_bool(imp, _one_minus(imp, _as_int(imp, x)))]


@handles("IsNaN")
def _is_nan(imp: ArkImporter, inputs, attrs):
    """ARK has no NaN test. Exporters write it in torch's safe softmax,
    Where(IsNaN(s), 0, s): a softmax is NaN only where its whole row is -inf (or holds a
    NaN), the Softmax of such an IsNaN is lowered in a form that gives 0 there
    (`onnx_model._safe_softmax_of`), and `_where` takes that softmax (reported at -v). A NaN
    in the softmax's input stays NaN (onnxruntime gives 0)."""
    (x,) = inputs
    if _all_const(inputs):
        return [np.isnan(x)]
    return [Pending(imp.node.output[0], x, "is an IsNaN, which ARK cannot compute (it has no "
                    "NaN test); planc lowers IsNaN only in Where(IsNaN(s), 0, s) of a Softmax "
                    "s", frozenset({"Where"}))]


def _masked(imp: ArkImporter, value: Any, mask: Any, keep: bool, dtype: str):
    """`value` where the 0/1 `mask` is `keep`, else 0: a constant, a product, or None (all
    zero)."""
    if isinstance(mask, np.ndarray):
        chosen = mask.astype(bool) if keep else ~mask.astype(bool)
        if isinstance(value, np.ndarray):
            out = np.where(chosen, value, np.zeros((), value.dtype))
            return out if out.any() else None
        if chosen.all():
            return value
        if not chosen.any():
            return None
        return imp.m.mul(value, imp.weight(chosen.astype(np.float32), dtype))
    if isinstance(value, np.ndarray) and _scalar(value) == 0.0:
        return None
    select = imp.m.cast(mask, dtype)
    if not keep:
        select = _one_minus(imp, select)
    if isinstance(value, np.ndarray):
        scalar = _scalar(value)
        if scalar is not None and math.isinf(scalar) and dtype in FLOAT_TYPES:
            # 0 x inf is NaN: -inf where selected, 0 elsewhere, is 1 - 1/(1 - select)
            # (1 - 1/0 = -inf, 1 - 1/1 = 0), exact on 0/1
            infinite = _one_minus(imp, _reciprocal(imp, _one_minus(imp, select)))
            return infinite if scalar < 0 else imp.m.scalar_mul(infinite, -1.0)
        if not np.all(np.isfinite(value)) and dtype in FLOAT_TYPES:
            raise imp.fail("a constant with infinities among finite values: planc multiplies "
                           "by the 0/1 condition, and 0 x inf is NaN")
        if scalar == 0.0:
            return None
        if scalar is not None:
            return imp.m.scalar_mul(select, scalar)
        return imp.m.mul(select, imp.weight(value, dtype))
    return imp.m.mul(value, select)


@handles("Where")
def _where(imp: ArkImporter, inputs, attrs):
    cond, x, y = inputs
    if isinstance(cond, Pending):
        return [_safe_softmax(imp, cond, x, y)]
    if _all_const(inputs):
        return [np.where(cond, x, y)]
    shape = broadcast(shape_of(cond), shape_of(x), shape_of(y))
    dtype = dtype_of(x if not isinstance(x, np.ndarray) else y)
    parts = [p for p in (_masked(imp, x, cond, True, dtype), _masked(imp, y, cond, False, dtype))
             if p is not None]
    consts = [p for p in parts if isinstance(p, np.ndarray)]
    tensors = [p for p in parts if not isinstance(p, np.ndarray)]
    if not tensors:
        return [np.broadcast_to(sum(consts) if consts else np.zeros(shape), shape)]
    out = tensors[0]
    for part in tensors[1:]:
        out = imp.m.add(out, part)
    if consts:
        out = imp.m.add(out, imp.tensor(sum(consts).astype(np.float32), out))
    imp.decomposed("c * x + (1 - c) * y")
    return [_expand_to(imp, out, shape)]


def _safe_softmax(imp: ArkImporter, test: Pending, x, y):
    softmax = test.source
    if not (y is softmax and _scalar(x) == 0.0 and softmax in imp.softmax_results):
        raise imp.fail(f"its condition '{test.name}' {test.reason}")
    imp.decomposed("the safe Softmax before it, which gives 0 on rows that are all -inf")
    return softmax


# ---------------------------------------------------------------------------------------------
# Shape and data movement
# ---------------------------------------------------------------------------------------------


@handles("Expand")
def _expand(imp: ArkImporter, inputs, attrs):
    x, shape = inputs
    target = broadcast(shape_of(x), [int(v) for v in imp.const(shape, "the shape").reshape(-1)])
    if isinstance(x, np.ndarray):
        return [np.broadcast_to(x, target)]
    return [_expand_to(imp, x, target)]


@handles("Tile")
def _tile(imp: ArkImporter, inputs, attrs):
    """Each repeated dim d (repeats r) becomes [1, d] broadcast to [r, d], then merged: one
    broadcasting copy."""
    x, repeats = inputs
    reps = [int(v) for v in imp.const(repeats, "the repeats").reshape(-1)]
    shape = shape_of(x)
    if len(reps) != len(shape) or min(reps, default=1) < 0:
        raise imp.fail(f"repeats {reps} for a rank-{len(shape)} input")
    if isinstance(x, np.ndarray):
        return [np.tile(x, reps)]
    if 0 in reps:
        raise imp.fail("the result is empty (a repeat of 0)")
    split, tiled = [], []
    for d, r in zip(shape, reps, strict=True):
        split += [1, d] if r > 1 else [d]
        tiled += [r, d] if r > 1 else [d]
    if split == shape:
        return [x]
    spread = _reshape_to(imp, x, split)
    imp.decomposed("a broadcasting Copy")
    out = _expand_to(imp, spread, tiled)
    return [_reshape_to(imp, out, [d * r for d, r in zip(shape, reps, strict=True)])]


@handles("Split")
def _split(imp: ArkImporter, inputs, attrs):
    """Views of the input, one per output (ARK slices)."""
    x = inputs[0]
    shape = shape_of(x)
    axis = _axis(imp, attrs.get("axis", 0), len(shape))
    outputs = len(imp.node.output)
    if len(inputs) > 1 and inputs[1] is not None:
        sizes = [int(v) for v in imp.const(inputs[1], "the split sizes").reshape(-1)]
    elif "split" in attrs:
        sizes = list(attrs["split"])
    else:
        parts = attrs.get("num_outputs", outputs)
        size = -(-shape[axis] // parts)   # the last part is smaller (opset 18)
        sizes = [size] * (parts - 1) + [shape[axis] - size * (parts - 1)]
    if sum(sizes) != shape[axis] or min(sizes, default=0) < 0 or len(sizes) != outputs:
        raise imp.fail(f"sizes {sizes} do not split dim {axis} of {shape} into {outputs}")
    results, offset = [], 0
    for size in sizes:
        if isinstance(x, np.ndarray):
            results.append(np.take(x, range(offset, offset + size), axis=axis))
        elif size == 0:
            raise imp.fail("an output is empty")
        else:
            offsets = [offset if i == axis else 0 for i in range(len(shape))]
            results.append(imp.m.slice(x, offsets, [size if i == axis else d
                                                    for i, d in enumerate(shape)]))
        offset += size
    return results


@handles("CastLike")
def _cast_like(imp: ArkImporter, inputs, attrs):
    from onnx import helper

    x, like = inputs
    if isinstance(like, np.ndarray):
        to = helper.np_dtype_to_tensor_dtype(like.dtype)
    else:
        to = next(k for k, v in ARK_DTYPES.items() if v == like.type.data_type)
    from frontends.onnx_model import HANDLERS

    return HANDLERS["Cast"](imp, [x], {"to": to})


def _fixed_indices(imp: ArkImporter, indices: np.ndarray, size: int) -> np.ndarray:
    """Constant indices into a dim of `size`, negative ones counted from the end."""
    flat = indices.astype(np.int64)
    if flat.size and (flat.min() < -size or flat.max() >= size):
        raise imp.fail(f"an index is outside [-{size}, {size - 1}]")
    return np.where(flat < 0, flat + size, flat)


def _wrapped_indices(imp: ArkImporter, indices, size: int):
    """Model-computed indices with negative ones counted from the end: i + size * [i < 0]
    (exact on integers; what ARK reads out of range is the model's error, as in ONNX)."""
    i = _as_int(imp, indices)
    negative = _greater_than_zero(imp, imp.m.scalar_mul(i, -1.0))
    imp.decomposed("indices + size * [indices < 0]")
    return imp.m.add(i, imp.m.scalar_mul(negative, float(size)))


def _rows(imp: ArkImporter, table, indices, index_shape: Sequence[int], width: int):
    """Embedding rows of a [rows, width] table at `indices` (constant or INT32), shaped
    index_shape + [width]."""
    if isinstance(indices, np.ndarray):
        flat = indices.reshape(-1).astype(np.int32)
        if flat.size and np.array_equal(flat, np.arange(flat[0], flat[0] + flat.size)):
            view = imp.m.slice(table, [int(flat[0]), 0], [flat.size, width])
            return _reshape_to(imp, view, [*index_shape, width])
        indices = imp.weight(flat, "INT32")
    else:
        indices = _reshape_to(imp, indices, [int(np.prod(index_shape))])
    if isinstance(table, np.ndarray):
        table = imp.weight(table)
    rows = imp.m.embedding(indices, _contiguous(imp, table))
    return _reshape_to(imp, rows, [*index_shape, width])


@handles("Gather")
def _gather(imp: ArkImporter, inputs, attrs):
    """Rows of the input along `axis` (negative indices from the end): a view for one index or
    a constant range, else an Embedding from the input with `axis` moved first and the
    other dims as the row."""
    data, indices = inputs
    shape = shape_of(data)
    axis = _axis(imp, attrs.get("axis", 0), len(shape))
    if isinstance(indices, np.ndarray):
        indices = _fixed_indices(imp, indices, shape[axis])
    if _all_const([data, indices]):
        return [np.take(data, indices, axis=axis)]
    index_shape = shape_of(indices)
    out_shape = [*shape[:axis], *index_shape, *shape[axis + 1:]]
    if isinstance(indices, np.ndarray) and indices.size == 1:
        i = int(indices.reshape(-1)[0])
        view = imp.m.slice(data, [i if d == axis else 0 for d in range(len(shape))],
                           [1 if d == axis else n for d, n in enumerate(shape)])
        return [_reshape_to(imp, _contiguous(imp, view), out_shape or [1])]
    if not isinstance(indices, np.ndarray):
        indices = _wrapped_indices(imp, indices, shape[axis])
    moved = [axis, *[d for d in range(len(shape)) if d != axis]]
    rest = [shape[d] for d in moved[1:]]
    width = int(np.prod(rest))
    if isinstance(data, np.ndarray):
        table = np.transpose(data, moved).reshape(shape[axis], width)
    else:
        first = data if axis == 0 else imp.m.transpose(data, moved)
        table = _reshape_to(imp, first, [shape[axis], width])
    if axis != 0 or len(shape) != 2:
        imp.decomposed("an Embedding of the input with the gathered axis first")
    rows = _rows(imp, table, indices, [int(np.prod(index_shape))], width)
    if axis == 0:
        return [_reshape_to(imp, rows, out_shape or [1])]
    spread = _reshape_to(imp, rows, [int(np.prod(index_shape)), *rest])
    back = [*range(1, axis + 1), 0, *range(axis + 1, len(shape))]
    moved_back = imp.m.transpose(spread, back)
    return [_reshape_to(imp, moved_back, out_shape or [1])]


def _element_table(imp: ArkImporter, data):
    """The input as a table of one column: every element a row."""
    if isinstance(data, np.ndarray):
        return data.reshape(-1, 1)
    return _reshape_to(imp, data, [int(np.prod(shape_of(data))), 1])


@handles("GatherElements")
def _gather_elements(imp: ArkImporter, inputs, attrs):
    """out[i][j] = data[index[i][j]][j] (axis 0): an Embedding of single elements at the flat
    position index * stride(axis) + (the position of [i][j] without the axis)."""
    data, indices = inputs
    shape = shape_of(data)
    rank = len(shape)
    axis = _axis(imp, attrs.get("axis", 0), rank)
    index_shape = shape_of(indices)
    if len(index_shape) != rank:
        raise imp.fail(f"indices {index_shape} and data {shape} differ in rank")
    strides = [int(np.prod(shape[d + 1:])) for d in range(rank)]
    grid = np.indices(index_shape)
    base = sum(grid[d] * strides[d] for d in range(rank) if d != axis)
    if isinstance(indices, np.ndarray):
        fixed = _fixed_indices(imp, indices, shape[axis])
        if isinstance(data, np.ndarray):
            return [np.take_along_axis(data, fixed, axis=axis)]
        flat = fixed * strides[axis] + base
    else:
        wrapped = _wrapped_indices(imp, indices, shape[axis])
        flat = imp.m.add(imp.m.scalar_mul(wrapped, float(strides[axis])),
                         imp.weight(base.astype(np.int32), "INT32"))
    imp.decomposed("an Embedding of single elements")
    rows = _rows(imp, _element_table(imp, data), flat, [int(np.prod(index_shape))], 1)
    return [_reshape_to(imp, rows, index_shape)]


@handles("GatherND")
def _gather_nd(imp: ArkImporter, inputs, attrs):
    """Slices of the input at constant index tuples: an Embedding of the rows of the input
    seen as [addressed positions, trailing elements] (a view when they are a range)."""
    data, indices = inputs
    if attrs.get("batch_dims", 0):
        raise imp.fail("planc gathers with batch_dims 0 only")
    indices = imp.const(indices, "the indices")
    shape = shape_of(data)
    depth = indices.shape[-1]
    if depth > len(shape):
        raise imp.fail(f"index tuples of {depth} into a rank-{len(shape)} input")
    lead = shape[:depth]
    fixed = np.stack([_fixed_indices(imp, indices[..., d], lead[d]) for d in range(depth)],
                     axis=-1) if depth else indices
    positions = np.ravel_multi_index(tuple(np.moveaxis(fixed, -1, 0)), lead) if depth \
        else np.zeros(indices.shape[:-1], np.int64)
    if isinstance(data, np.ndarray):
        return [data.reshape(int(np.prod(lead)), -1)[positions].reshape(
            [*indices.shape[:-1], *shape[depth:]])]
    width = int(np.prod(shape[depth:]))
    table = _reshape_to(imp, data, [int(np.prod(lead)), width])
    imp.decomposed("an Embedding (or a view) of the addressed rows")
    rows = _rows(imp, table, positions, [int(positions.size)], width)
    return [_reshape_to(imp, rows, [*indices.shape[:-1], *shape[depth:]] or [1])]


@handles("Trilu")
def _trilu(imp: ArkImporter, inputs, attrs):
    """The upper or lower triangle of the last two dims: a product with a constant 0/1
    mask."""
    x = inputs[0]
    k = int(imp.const(inputs[1], "k").reshape(-1)[0]) if len(inputs) > 1 and \
        inputs[1] is not None else 0
    shape = shape_of(x)
    if len(shape) < 2:
        raise imp.fail("Trilu takes the last two dims of a rank >= 2 input")
    pick = np.triu if attrs.get("upper", 1) else np.tril
    if isinstance(x, np.ndarray):
        return [pick(x, k)]
    mask = pick(np.ones(shape[-2:], np.float32), k)
    imp.decomposed("a product with a constant triangle")
    return [imp.m.mul(x, imp.weight(mask, x.type.data_type))]


@handles("EyeLike")
def _eye_like(imp: ArkImporter, inputs, attrs):
    from onnx import helper

    shape = shape_of(inputs[0])
    if len(shape) != 2:
        raise imp.fail("EyeLike takes a 2-D input")
    dtype = (helper.tensor_dtype_to_np_dtype(attrs["dtype"]) if "dtype" in attrs
             else inputs[0].dtype if isinstance(inputs[0], np.ndarray)
             else _numpy_dtype(dtype_of(inputs[0])))
    return [np.eye(shape[0], shape[1], attrs.get("k", 0), dtype=dtype)]


def _numpy_dtype(ark_dtype: str) -> np.dtype:
    return {"FP16": np.float16, "INT32": np.int32, "UINT8": np.uint8,
            "INT8": np.int8}.get(ark_dtype, np.float32)


@handles("Size")
def _size(imp: ArkImporter, inputs, attrs):
    return [np.array(int(np.prod(shape_of(inputs[0]))), np.int64)]


# ---------------------------------------------------------------------------------------------
# Math
# ---------------------------------------------------------------------------------------------


@handles("Reciprocal")
def _reciprocal_op(imp: ArkImporter, inputs, attrs):
    (x,) = inputs
    if _all_const(inputs):
        return [np.reciprocal(x)]
    imp.decomposed("Div(1, x)")
    return [_reciprocal(imp, x)]


@handles("Abs")
def _abs_op(imp: ArkImporter, inputs, attrs):
    (x,) = inputs
    if _all_const(inputs):
        return [np.abs(x)]
    imp.decomposed("relu(x) + relu(-x)")
    return [_abs(imp, x)]


@handles("Tanh")
def _tanh(imp: ArkImporter, inputs, attrs):
    (x,) = inputs
    if _all_const(inputs):
        return [np.tanh(x)]
    imp.decomposed("2 sigmoid(2x) - 1")
    return [_tanh_of(imp, x)]


def _tanh_of(imp: ArkImporter, x):
    doubled = imp.m.sigmoid(imp.m.scalar_mul(x, 2.0))
    return imp.m.scalar_add(imp.m.scalar_mul(doubled, 2.0), -1.0)


ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
"""Abramowitz and Stegun 7.1.26: erf(a) = 1 - t(a1 + t(a2 + ... + t a5)) e^(-a^2) with
t = 1 / (1 + p a), for a >= 0, |error| <= 1.5e-7."""

SIGN_GUARD = {"FP16": 6.2e-5}
"""What `x / (|x| + guard)` adds to |x| so that x = 0 gives 0 (the smallest normal of FP16;
1e-30 for FP32 and BF16)."""


def _erf_of_abs(imp: ArkImporter, a):
    """erf(a) for a >= 0 (A&S 7.1.26)."""
    t = _reciprocal(imp, imp.m.scalar_add(imp.m.scalar_mul(a, ERF_P), 1.0))
    poly = imp.m.scalar_mul(t, ERF_A[-1])
    for coefficient in reversed(ERF_A[:-1]):
        poly = imp.m.mul(imp.m.scalar_add(poly, coefficient), t)
    decay = imp.m.exp(imp.m.scalar_mul(imp.m.mul(a, a), -1.0))
    return _one_minus(imp, imp.m.mul(poly, decay))


@handles("Erf")
def _erf(imp: ArkImporter, inputs, attrs):
    (x,) = inputs
    if _all_const(inputs):
        return [np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)]
    x = imp.tensor(x)
    a = _abs(imp, x)
    guard = SIGN_GUARD.get(x.type.data_type, 1e-30)
    sign = imp.m.div(x, imp.m.scalar_add(a, guard))
    imp.decomposed("sign(x) erf(|x|), A&S 7.1.26 (|error| < 1.5e-7)")
    return [imp.m.mul(sign, _erf_of_abs(imp, a))]


def _exact_gelu(imp: ArkImporter, x):
    """x Phi(x) = x/2 + |x|/2 erf(|x| / sqrt 2): no sign needed."""
    a = _abs(imp, x)
    erf = _erf_of_abs(imp, imp.m.scalar_mul(a, 1 / math.sqrt(2.0)))
    imp.decomposed("x/2 + |x|/2 erf(|x|/sqrt 2), A&S 7.1.26 (|error| < 1.5e-7)")
    return imp.m.add(imp.m.scalar_mul(x, 0.5), imp.m.scalar_mul(imp.m.mul(a, erf), 0.5))


@handles("Gelu")
def _gelu(imp: ArkImporter, inputs, attrs):
    """ARK's Gelu is the tanh approximation (approximate='tanh'); the exact (erf) form is the
    decomposition."""
    x = imp.tensor(inputs[0])
    if attrs.get("approximate", b"none") in (b"tanh", "tanh"):
        return [imp.m.gelu(x)]
    return [_exact_gelu(imp, x)]


def _extremum(imp: ArkImporter, a, b, larger: bool):
    """max(a, b) = a + relu(b - a); min(a, b) = a - relu(a - b)."""
    if isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
        a, b = b, a
    a = imp.tensor(a)
    if larger:
        return imp.m.add(a, imp.m.relu(imp.m.sub(imp.tensor(b, a), a)))
    return imp.m.sub(a, imp.m.relu(imp.m.sub(a, imp.tensor(b, a))))


@handles("Max", "Min", "Sum", "Mean")
def _variadic(imp: ArkImporter, inputs, attrs):
    kind = imp.node.op_type
    values = [v for v in inputs if v is not None]
    if not values:
        raise imp.fail("no inputs")
    if _all_const(values):
        fold = {"Max": np.maximum, "Min": np.minimum, "Sum": np.add, "Mean": np.add}[kind]
        out = values[0]
        for v in values[1:]:
            out = fold(out, v)
        return [out / len(values) if kind == "Mean" else out]
    shape = broadcast(*(shape_of(v) for v in values))
    out = values[0]
    for v in values[1:]:
        if kind in ("Max", "Min"):
            out = _extremum(imp, out, v, kind == "Max")
        else:
            first = imp.tensor(out, v)
            out = imp.m.add(first, imp.tensor(v, first))
    if kind in ("Max", "Min") and len(values) > 1:
        imp.decomposed("a + relu(b - a)" if kind == "Max" else "a - relu(a - b)")
    if kind == "Mean":
        out = imp.m.scalar_mul(imp.tensor(out), 1.0 / len(values))
    return [_expand_to(imp, imp.tensor(out), shape)]


@handles("Clip")
def _clip(imp: ArkImporter, inputs, attrs):
    """Relu on each side: max(x, lo) = lo + relu(x - lo), min(y, hi) = hi - relu(hi - y)."""
    x = inputs[0]
    if imp.opset < 11:
        lo, hi = attrs.get("min"), attrs.get("max")
    else:
        lo, hi = (inputs[i] if len(inputs) > i else None for i in (1, 2))
    if _all_const([x, lo, hi]):
        out = x
        if lo is not None:
            out = np.maximum(out, lo)
        if hi is not None:
            out = np.minimum(out, hi)
        return [np.asarray(out, dtype=x.dtype)]
    out = imp.tensor(x)
    for bound, larger in ((lo, True), (hi, False)):
        if bound is None:
            continue
        value = _scalar(np.asarray(bound)) if not hasattr(bound, "type") else None
        if value is None:
            out = _extremum(imp, out, bound, larger)
        elif math.isinf(value):
            continue
        elif larger:
            shifted = out if value == 0.0 else imp.m.scalar_add(out, -value)
            out = imp.m.relu(shifted) if value == 0.0 else \
                imp.m.scalar_add(imp.m.relu(shifted), value)
        else:
            gap = imp.m.relu(imp.m.scalar_add(imp.m.scalar_mul(out, -1.0), value))
            out = imp.m.scalar_add(imp.m.scalar_mul(gap, -1.0), value)
    imp.decomposed("Relu on each side")
    return [out]


def _integer_power(imp: ArkImporter, x, n: int):
    """x^n for n >= 1 by repeated squaring."""
    result, square = None, x
    while n:
        if n & 1:
            result = square if result is None else imp.m.mul(result, square)
        n >>= 1
        if n:
            square = imp.m.mul(square, square)
    return result


MAX_POWER = 64


@handles("Pow")
def _pow(imp: ArkImporter, inputs, attrs):
    """Integer and half-integer constant exponents: repeated products, a Sqrt for the half,
    1/x for a negative exponent. Others need a logarithm, which ARK lacks."""
    x, exponent = inputs
    if _all_const(inputs):
        return [np.power(x, exponent).astype(x.dtype)]
    power = _scalar(imp.const(exponent, "the exponent"))
    if power is None:
        raise imp.fail("the exponent differs between elements; planc decomposes one constant "
                       "exponent")
    x = imp.tensor(x)
    doubled = power * 2
    if doubled != int(doubled) or abs(power) > MAX_POWER:
        raise imp.fail(f"ARK has no power or logarithm; planc decomposes integer and "
                       f"half-integer exponents up to {MAX_POWER}, not {power:g}")
    if int(doubled) % 2 and x.type.data_type not in FLOAT_TYPES:
        raise imp.fail("a half-integer power of an integer tensor")
    whole = int(abs(power))
    parts = []
    if whole:
        parts.append(_integer_power(imp, x, whole))
    if int(doubled) % 2:
        parts.append(imp.m.sqrt(x))
    if not parts:
        return [_expand_to(imp, imp.m.scalar_assign(x.type.shape_list, 1.0, x.type.data_type),
                           broadcast(x.type.shape_list, shape_of(exponent)))]
    out = parts[0] if len(parts) == 1 else imp.m.mul(parts[0], parts[1])
    if power < 0:
        out = _reciprocal(imp, out)
    if power not in (1.0, 2.0, 0.5):
        imp.decomposed("products" + (" and a Sqrt" if int(doubled) % 2 else "")
                       + (" and 1/x" if power < 0 else ""))
    return [_expand_to(imp, out, broadcast(x.type.shape_list, shape_of(exponent)))]


# ---------------------------------------------------------------------------------------------
# Normalisations
# ---------------------------------------------------------------------------------------------


def _trailing_rows(imp: ArkImporter, x, axis: int):
    """`x` as [rows, elements from axis on] (one reduction over the last dim)."""
    shape = x.type.shape_list
    if axis == len(shape) - 1:
        return x
    return _reshape_to(imp, x, [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))])


def _stat_shape(shape: list[int], axis: int) -> list[int]:
    return [*shape[:axis], *[1] * (len(shape) - axis)]


def _scale_and_shift(imp: ArkImporter, y, inputs):
    if len(inputs) > 1 and inputs[1] is not None:
        y = imp.m.mul(y, imp.tensor(inputs[1], y))
    if len(inputs) > 2 and inputs[2] is not None:
        y = imp.m.add(y, imp.tensor(inputs[2], y))
    return y


@handles("LayerNormalization")
def _layer_norm(imp: ArkImporter, inputs, attrs):
    """Normalises over the dims from `axis` on (as one trailing dim), then scale and bias;
    the Mean and InvStdDev outputs are the statistics' tensors."""
    x = imp.tensor(inputs[0])
    shape = x.type.shape_list
    axis = _axis(imp, attrs.get("axis", -1), len(shape))
    rows = _trailing_rows(imp, x, axis)
    mean = imp.m.reduce_mean(rows, -1)
    centered = imp.m.sub(rows, mean)
    variance = imp.m.reduce_mean(imp.m.mul(centered, centered), -1)
    inverse = imp.m.rsqrt(imp.m.scalar_add(variance, attrs.get("epsilon", 1e-5)))
    y = _scale_and_shift(imp, _reshape_to(imp, imp.m.mul(centered, inverse), shape), inputs)
    if not any(name in imp.wanted for name in imp.node.output[1:]):
        return [y]
    stats = _stat_shape(shape, axis)
    return [y, _reshape_to(imp, mean, stats), _reshape_to(imp, inverse, stats)]


@handles("RMSNormalization")
def _rms_norm(imp: ArkImporter, inputs, attrs):
    """x / sqrt(mean(x^2) + epsilon) over the dims from `axis` on, times the scale."""
    x = imp.tensor(inputs[0])
    shape = x.type.shape_list
    axis = _axis(imp, attrs.get("axis", -1), len(shape))
    rows = _trailing_rows(imp, x, axis)
    mean_square = imp.m.reduce_mean(imp.m.mul(rows, rows), -1)
    inverse = imp.m.rsqrt(imp.m.scalar_add(mean_square, attrs.get("epsilon", 1e-5)))
    y = _reshape_to(imp, imp.m.mul(rows, inverse), shape)
    return [_scale_and_shift(imp, y, inputs[:2])]


def _quarter_power(imp: ArkImporter, x, power: float):
    """x^power for a positive `x` and a multiple of 1/4 up to MAX_POWER: products of x, its
    Sqrt and the Sqrt of that (LRN's usual beta, 0.75, is sqrt(x) * sqrt(sqrt(x))); None for
    another power."""
    quarters = power * 4
    if quarters != int(quarters) or not 0 < power <= MAX_POWER:
        return None
    whole, rest = divmod(int(quarters), 4)
    parts = [_integer_power(imp, x, whole)] if whole else []
    if rest:
        root = imp.m.sqrt(x)
        parts += [root] * (rest >= 2) + ([imp.m.sqrt(root)] if rest % 2 else [])
    out = parts[0]
    for part in parts[1:]:
        out = imp.m.mul(out, part)
    return out


MAX_LRN_CHANNELS = 8192
"""The most channels `LRN` sums over with its [C, C] band of ones (64 M elements)."""


@handles("LRN")
def _lrn(imp: ArkImporter, inputs, attrs):
    """Local response normalisation (AlexNet, GoogLeNet): y = x / (bias + alpha / size *
    S)^beta, S the sum of x^2 over the `size` channels around each one (ONNX's window:
    floor((size - 1) / 2) before, the rest after, cut at the edges). ARK has no pooling over
    channels, so S is a matmul by a [C, C] band of ones over x^2 as [N, C, H*W] (the band's
    sums are exact: it adds at most `size` squares); beta must be a multiple of 1/4."""
    x = imp.tensor(inputs[0])
    shape = x.type.shape_list
    if len(shape) < 3 or x.type.data_type not in FLOAT_TYPES:
        raise imp.fail("LRN normalises a float tensor [N, C, D1, ...] over its channels")
    size, channels = int(attrs.get("size", 0)), shape[1]
    alpha, beta = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75)
    if size < 1:
        said = f"is {size}" if "size" in attrs else "is missing"
        raise imp.fail(f"its size attribute {said}: LRN sums squares over a window of at "
                       "least 1 channel")
    if channels > MAX_LRN_CHANNELS:
        raise imp.fail(f"{channels} channels: planc sums LRN's window with a band of ones "
                       f"over up to {MAX_LRN_CHANNELS} channels")
    before = (size - 1) // 2
    index = np.arange(channels)
    offset = index[None, :] - index[:, None]          # input channel - output channel
    band = ((offset >= -before) & (offset <= size - 1 - before)).astype(np.float32)
    rows = _reshape_to(imp, x, [shape[0], channels, int(np.prod(shape[2:]))])
    summed = imp.m.matmul(imp.weight(band, x.type.data_type), imp.m.mul(rows, rows))
    scaled = imp.m.scalar_add(imp.m.scalar_mul(summed, alpha / size), attrs.get("bias", 1.0))
    power = _quarter_power(imp, scaled, beta)
    if power is None:
        raise imp.fail(f"ARK has no power or logarithm; planc decomposes LRN's beta in "
                       f"multiples of 1/4 up to {MAX_POWER}, not {beta:g}")
    imp.decomposed("a square, a matmul by a band of ones, scalar ops, Sqrts and a Div")
    return [_reshape_to(imp, imp.m.div(rows, power), shape)]


# ---------------------------------------------------------------------------------------------
# Attention (opset 23)
# ---------------------------------------------------------------------------------------------

# LOWEST (onnx_model): what a runtime BOOL mask adds where it masks (-inf would be 0 x inf =
# NaN in the product with the mask); rows it masks entirely are zeroed after the softmax, as
# ONNX's fully-masked-row rule says.


def _heads(imp: ArkImporter, x, heads: int | None, what: str):
    """A 3-D [B, S, heads * D] input as [B, heads, S, D]; 4-D inputs are that already."""
    shape = x.type.shape_list
    if len(shape) == 4:
        return x
    if len(shape) != 3 or not heads or shape[2] % heads:
        raise imp.fail(f"{what} {shape} with {heads} heads: planc takes [B, S, heads * D] or "
                       "[B, heads, S, D]")
    split = _reshape_to(imp, x, [shape[0], shape[1], heads, shape[2] // heads])
    return imp.m.transpose(split, [0, 2, 1, 3])


SAFE = "safe"
"""`_attention_bias`'s answer for a mask that needs the safe softmax (`_safe_softmax_of`)."""


def _attention_bias(imp: ArkImporter, mask, causal: bool, q_len: int, kv_len: int,
                    offset: int, dtype: str):
    """(additive bias or None, 0/1 rows-with-a-key or None): the mask and the causal rule
    (bottom-right aligned by `offset`, the past length)."""
    bias = np.zeros((q_len, kv_len), np.float32) if causal else None
    if causal:
        allowed = np.arange(kv_len)[None, :] <= np.arange(q_len)[:, None] + offset
        bias = np.where(allowed, 0.0, -np.inf).astype(np.float32)
    if mask is None:
        return bias, None
    if shape_of(mask)[-1] != kv_len:
        raise imp.fail(f"a mask of {shape_of(mask)[-1]} keys for {kv_len}: planc takes masks "
                       "as long as the keys")
    if isinstance(mask, np.ndarray):
        add = np.where(mask, 0.0, -np.inf) if mask.dtype == np.bool_ else mask
        total = add.astype(np.float32) if bias is None else bias + add
        return total, None
    if mask.type.data_type == "UINT8":
        keep = imp.m.cast(mask, dtype)
        lowest = LOWEST.get(dtype, LOWEST["FP32"]) / 2   # a causal bias adds as much
        add = imp.m.scalar_mul(imp.m.scalar_add(keep, -1.0), -lowest)   # 0 or lowest
        rows = imp.m.reduce_max(keep, -1)
        if bias is not None:
            # rows the causal rule masks entirely keep no key either
            open_rows = (bias.max(axis=-1, keepdims=True) > -np.inf).astype(np.float32)
            rows = imp.m.mul(rows, imp.weight(open_rows, dtype))
            add = imp.m.add(add, imp.weight(np.maximum(bias, lowest), dtype))
        return add, rows
    if dtype not in LOWEST:
        raise imp.fail(f"a float mask the model computes, of {dtype}")
    # A float mask the model computes: added as it is, and the softmax made safe, so that a
    # row it masks wholly with -inf gives 0 as ONNX does.
    add = mask if bias is None else imp.m.add(
        mask, imp.weight(bias, mask.type.data_type))
    return add, SAFE


@handles("Attention")
def _attention(imp: ArkImporter, inputs, attrs):
    """softmax(Q K^T scale (softcapped) + bias) V per head, heads repeated for grouped
    queries, the past keys and values concatenated in front."""
    q, k, v = (imp.tensor(x) for x in inputs[:3])
    mask, past_k, past_v = (inputs[i] if len(inputs) > i else None for i in (3, 4, 5))
    if len(inputs) > 6 and inputs[6] is not None:
        raise imp.fail("nonpad_kv_seqlen (a per-batch key length) is not lowered")
    if attrs.get("left_window_size", -1) >= 0 or attrs.get("right_window_size", -1) >= 0:
        raise imp.fail("sliding windows are not lowered")
    dtype = q.type.data_type
    three_d = len(q.type.shape_list) == 3
    q = _heads(imp, q, attrs.get("q_num_heads"), "Q")
    k = _heads(imp, k, attrs.get("kv_num_heads"), "K")
    v = _heads(imp, v, attrs.get("kv_num_heads"), "V")
    offset = 0
    if past_k is not None:
        from frontends.onnx_model import HANDLERS

        offset = shape_of(past_k)[2]
        k = HANDLERS["Concat"](imp, [past_k, k], {"axis": 2})[0]
        v = HANDLERS["Concat"](imp, [past_v, v], {"axis": 2})[0]
    present_k, present_v = k, v
    heads, kv_heads = q.type.shape_list[1], k.type.shape_list[1]
    if heads != kv_heads:
        if heads % kv_heads:
            raise imp.fail(f"{heads} query heads for {kv_heads} key heads")
        k, v = (_reshape_to(imp, _expand_to(imp, _reshape_to(
            imp, x, [x.type.shape_list[0], kv_heads, 1, *x.type.shape_list[2:]]),
            [x.type.shape_list[0], kv_heads, heads // kv_heads, *x.type.shape_list[2:]]),
            [x.type.shape_list[0], heads, *x.type.shape_list[2:]]) for x in (k, v))
    scale = attrs.get("scale", 1.0 / math.sqrt(q.type.shape_list[3]))
    scores = imp.m.scalar_mul(imp.m.matmul(q, k, transpose_other=True), scale)
    capped = scores
    softcap = attrs.get("softcap", 0.0)
    if softcap > 0:
        capped = imp.m.scalar_mul(_tanh_of(imp, imp.m.scalar_mul(scores, 1 / softcap)), softcap)
    bias, rows = _attention_bias(imp, mask, bool(attrs.get("is_causal", 0)),
                                 q.type.shape_list[2], k.type.shape_list[2], offset, dtype)
    biased = capped
    if isinstance(bias, np.ndarray):
        empty = bias.max(axis=-1, keepdims=True) == -np.inf
        if empty.any():       # fully masked rows: a finite row, zeroed after the softmax
            rows = imp.weight((~empty).astype(np.float32), dtype)
            bias = np.where(empty, 0.0, bias)
        biased = imp.m.add(capped, imp.weight(bias.astype(np.float32), dtype))
    elif bias is not None:
        biased = imp.m.add(capped, bias)
    if rows is SAFE:
        probabilities, rows = _safe_softmax_of(imp, biased)(biased, 3), None
    else:
        probabilities = imp.m.softmax(biased, 3)
    if rows is not None:
        probabilities = imp.m.mul(probabilities, rows)
    y = imp.m.matmul(probabilities, v)
    if three_d:
        shape = y.type.shape_list
        y = _reshape_to(imp, imp.m.transpose(y, [0, 2, 1, 3]),
                        [shape[0], shape[2], shape[1] * shape[3]])
    mode = attrs.get("qk_matmul_output_mode", 0)
    qk = {0: scores, 1: capped, 2: biased, 3: probabilities}.get(mode, scores)
    imp.decomposed("MatMul, scale, mask, Softmax, MatMul per head")
    return [y, present_k, present_v, qk]


# ---------------------------------------------------------------------------------------------
# Reductions and activations built from others
# ---------------------------------------------------------------------------------------------

REDUCE_FORMS = {"ReduceMin": ("ReduceMax", "-max(-x)"),
                "ReduceSumSquare": ("ReduceSum", "sum(x x)"),
                "ReduceL1": ("ReduceSum", "sum(|x|)"), "ReduceL2": ("ReduceSum", "sqrt(sum(x x))")}


@handles(*REDUCE_FORMS)
def _reduce_form(imp: ArkImporter, inputs, attrs):
    from frontends.onnx_model import HANDLERS

    kind = imp.node.op_type
    x = inputs[0]
    if isinstance(x, np.ndarray):
        x = x.astype(np.float32) if x.dtype.kind == "f" else x
        before = {"ReduceMin": -x, "ReduceSumSquare": x * x, "ReduceL1": np.abs(x),
                  "ReduceL2": x * x}[kind]
    else:
        if kind == "ReduceMin" and not is_float(x):
            x = _as_int(imp, x)       # -x of UINT8 (a BOOL) has no UINT8 value
        before = {"ReduceMin": lambda: imp.m.scalar_mul(x, -1.0),
                  "ReduceSumSquare": lambda: imp.m.mul(x, x),
                  "ReduceL1": lambda: _abs(imp, x), "ReduceL2": lambda: imp.m.mul(x, x)}[kind]()
    base, form = REDUCE_FORMS[kind]
    (out,) = HANDLERS[base](imp, [before, *inputs[1:]], attrs, kind=base)
    if isinstance(out, np.ndarray):
        result = {"ReduceMin": -out, "ReduceL2": np.sqrt(out)}.get(kind, out)
        return [result.astype(inputs[0].dtype)]
    imp.decomposed(form)
    if kind == "ReduceMin":
        out = imp.m.scalar_mul(imp.tensor(out), -1.0)
        if out.type.data_type != dtype_of(inputs[0]):
            out = imp.m.cast(out, dtype_of(inputs[0]))
    elif kind == "ReduceL2":
        out = imp.m.sqrt(imp.tensor(out))
    return [out]


def _negative_part(imp: ArkImporter, x):
    """min(x, 0) = -relu(-x)."""
    return imp.m.scalar_mul(imp.m.relu(imp.m.scalar_mul(x, -1.0)), -1.0)


ACTIVATIONS = ("Elu", "Selu", "Celu", "LeakyRelu", "HardSigmoid", "HardSwish", "Softsign",
               "Swish", "PRelu")


def _activation_numpy(kind: str, x: np.ndarray, attrs, other=None) -> np.ndarray:
    alpha = attrs.get("alpha")
    if kind == "Elu":
        return np.where(x > 0, x, (alpha or 1.0) * (np.exp(x) - 1))
    if kind == "Selu":
        return attrs.get("gamma", 1.0507) * np.where(x > 0, x, (alpha or 1.67326) * (np.exp(x) - 1))
    if kind == "Celu":
        a = alpha or 1.0
        return np.maximum(x, 0) + np.minimum(0, a * (np.exp(x / a) - 1))
    if kind == "LeakyRelu":
        return np.where(x > 0, x, (alpha or 0.01) * x)
    if kind == "PRelu":
        return np.where(x > 0, x, other * x)
    if kind in ("HardSigmoid", "HardSwish"):
        a, b = (alpha or 0.2, attrs.get("beta", 0.5)) if kind == "HardSigmoid" else (1 / 6, 0.5)
        h = np.clip(a * x + b, 0, 1)
        return h if kind == "HardSigmoid" else x * h
    if kind == "Softsign":
        return x / (1 + np.abs(x))
    return x / (1 + np.exp(-(alpha or 1.0) * x))


@handles(*ACTIVATIONS)
def _activation(imp: ArkImporter, inputs, attrs):
    """Relu, Exp and Sigmoid compositions: Elu is relu(x) + alpha (exp(min(x, 0)) - 1), the
    hard ones are clipped lines, PRelu relu(x) + slope min(x, 0)."""
    kind = imp.node.op_type
    x = inputs[0]
    if _all_const(inputs):
        return [_activation_numpy(kind, x, attrs, *inputs[1:]).astype(x.dtype)]
    x = imp.tensor(x)
    m = imp.m
    alpha = attrs.get("alpha")
    if kind in ("Elu", "Selu", "Celu"):
        a = alpha if alpha is not None else {"Elu": 1.0, "Selu": 1.67326319217681884765625,
                                             "Celu": 1.0}[kind]
        low = _negative_part(imp, x)
        if kind == "Celu":
            low = m.scalar_mul(low, 1 / a)
        out = m.add(m.relu(x), m.scalar_mul(m.scalar_add(m.exp(low), -1.0), a))
        if kind == "Selu":
            out = m.scalar_mul(out, attrs.get("gamma", 1.05070102214813232421875))
    elif kind in ("LeakyRelu", "PRelu"):
        low = _negative_part(imp, x)
        slope = inputs[1] if kind == "PRelu" else np.array(alpha if alpha is not None else 0.01)
        scaled = m.scalar_mul(low, float(_scalar(slope))) if _scalar(slope) is not None \
            else m.mul(low, imp.tensor(slope, x))
        out = _expand_to(imp, m.add(m.relu(x), scaled),
                         broadcast(x.type.shape_list, shape_of(slope)))
    elif kind in ("HardSigmoid", "HardSwish"):
        a, b = (alpha if alpha is not None else 0.2, attrs.get("beta", 0.5)) \
            if kind == "HardSigmoid" else (1 / 6, 0.5)
        line = m.relu(m.scalar_add(m.scalar_mul(x, a), b))
        out = _one_minus(imp, m.relu(_one_minus(imp, line)))
        if kind == "HardSwish":
            out = m.mul(x, out)
    elif kind == "Softsign":
        out = m.div(x, m.scalar_add(_abs(imp, x), 1.0))
    else:
        out = m.mul(x, m.sigmoid(m.scalar_mul(x, alpha if alpha is not None else 1.0)))
    imp.decomposed("Relu, Exp and Sigmoid")
    return [out]


# ---------------------------------------------------------------------------------------------
# Logarithms
# ---------------------------------------------------------------------------------------------

LOG_ROOTS = 10
"""Square roots taken before the first estimate: ln x = 2^10 ln(x^(1/2^10)), and the root is
within e^(+-0.087) of 1 for every finite float, where 2 atanh((r-1)/(r+1)) ~ 2u is good to
0.06 after the scaling."""
LOG_STEPS = 2
"""Halley steps y += 2 (x e^-y - 1) / (x e^-y + 1), each cubing the error (0.06 -> 1e-5 ->
below float precision)."""


def _log_of(imp: ArkImporter, x):
    """ln x from Sqrt, Exp and arithmetic (ARK has no logarithm): a first estimate from
    repeated square roots, refined by Halley's method on e^y = x. ln 0 is -inf (x = 0 is
    replaced by 1 and -inf added, as 1 - 1/(1 - [x = 0])); a negative x gives NaN, as
    onnxruntime does."""
    m = imp.m
    scale = ZERO_TEST.get(x.type.data_type, 1e30)
    zero = m.relu(_one_minus(imp, m.scalar_mul(m.scalar_mul(x, scale), scale)))  # [x == 0]
    safe = m.add(x, zero)
    root = safe
    for _ in range(LOG_ROOTS):
        root = m.sqrt(root)
    u = m.div(m.scalar_add(root, -1.0), m.scalar_add(root, 1.0))
    y = m.scalar_mul(u, 2.0 ** (LOG_ROOTS + 1))
    for _ in range(LOG_STEPS):
        t = m.mul(safe, m.exp(m.scalar_mul(y, -1.0)))
        step = m.div(m.scalar_add(t, -1.0), m.scalar_add(t, 1.0))
        y = m.add(y, m.scalar_mul(step, 2.0))
    minus_infinity = _one_minus(imp, _reciprocal(imp, _one_minus(imp, zero)))
    imp.decomposed(f"ln x: {LOG_ROOTS} square roots and {LOG_STEPS} Halley steps on e^y = x")
    return m.add(y, minus_infinity)


@handles("Log")
def _log(imp: ArkImporter, inputs, attrs):
    (x,) = inputs
    if _all_const(inputs):
        with np.errstate(divide="ignore", invalid="ignore"):
            return [np.log(x)]
    x = imp.tensor(x)
    if x.type.data_type not in FLOAT_TYPES:
        raise imp.fail(f"a logarithm of {x.type.data_type}")
    return [_log_of(imp, x)]


@handles("LogSoftmax")
def _log_softmax(imp: ArkImporter, inputs, attrs):
    """(x - m) - ln(sum e^(x - m)) along `axis` (before opset 13, of the input coerced to 2-D
    at `axis`, as Softmax); the sum is at least 1, so its logarithm is finite."""
    x = imp.tensor(inputs[0])
    shape = x.type.shape_list
    if imp.opset >= 13:
        axis, rows = _axis(imp, attrs.get("axis", -1), len(shape)), None
    else:
        axis = _axis(imp, attrs.get("axis", 1), len(shape), inclusive=True)
        rows = [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))]
        x, axis = _reshape_to(imp, x, rows), 1
    m = imp.m
    shifted = m.sub(x, m.reduce_max(x, axis))
    out = m.sub(shifted, _log_of(imp, m.reduce_sum(m.exp(shifted), axis)))
    return [_reshape_to(imp, out, shape) if rows else out]


@handles("Softplus")
def _softplus(imp: ArkImporter, inputs, attrs):
    """ln(1 + e^x) = relu(x) + ln(1 + e^-|x|) (no overflow for large x)."""
    (x,) = inputs
    if _all_const(inputs):
        return [np.logaddexp(0, x).astype(x.dtype)]
    x = imp.tensor(x)
    m = imp.m
    tail = m.scalar_add(m.exp(m.scalar_mul(_abs(imp, x), -1.0)), 1.0)
    return [m.add(m.relu(x), _log_of(imp, tail))]
