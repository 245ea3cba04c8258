"""Reference semantics: run an `ark.model` with numpy, operator by operator.

This is the ground truth that lowered plans are compared with. Memory is modelled the way ARK
has it: every buffer is one flat byte array and every tensor a strided window of it (shape
`Strides`, window at `Offsets` of size `Shape`), so aliasing, in-place writes and views behave
as on the device. Values are computed in float32 and rounded to each output's element type.

Inputs get reproducible random values unless the caller supplies them; embedding indices are
drawn inside the embedding table. The run tracks which bytes of each buffer hold a value (given,
drawn or written), so a tensor is an input exactly when it is read with bytes nothing has
filled: the old rows of a KV cache that an operator updated through a slice are input, and two
views of one input (a tensor and its reshape) see the same values.

A table-driven evaluator is used rather than xDSL's `Interpreter`: results live in buffers, not
in SSA values, and errors must surface as planc diagnostics rather than interpreter traces.
"""

from __future__ import annotations

import math
from argparse import Namespace
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from dialects import ark
from dialects.locations import source_path
from dialects.utils import single_root
from ground import dtypes
from ground.diagnostics import PlancError
from targets.ark.model_outputs import final_outputs

# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------


def buffer_sizes(tensors: list[ark.TensorType]) -> dict[int, int]:
    """Bytes per local buffer: the largest layout of any tensor on it (how ARK sizes them)."""
    sizes: dict[int, int] = {}
    for t in tensors:
        sizes[t.buffer_id] = max(sizes.get(t.buffer_id, 0), t.span_bytes)
    return sizes


MAX_MEMORY_BYTES = 8 << 30
"""The most buffer memory the numpy interpreters allocate (a model's whole device memory)."""


class Memory:
    """Buffers as byte arrays; tensors as numpy views into them."""

    def __init__(self, sizes: dict[int, int]):
        total = sum(sizes.values())
        if total > MAX_MEMORY_BYTES:
            raise PlancError(f"the buffers hold {total / 1e9:.3g} GB, more than the "
                             f"{MAX_MEMORY_BYTES / 1e9:.3g} GB planc's numpy interpreter runs; "
                             "use --cost-only (plans) or a smaller instance of the model")
        self.buffers = {b: np.zeros(n, dtype=np.uint8) for b, n in sizes.items()}

    def view(self, tensor: ark.TensorType) -> np.ndarray:
        """The stored elements of `tensor` (writable, aliasing the buffer)."""
        storage = dtypes.STORAGE[tensor.data_type]
        strides = tensor.strides_list
        raw = self.buffers[tensor.buffer_id][: math.prod(strides) * storage.itemsize]
        window = tuple(slice(o, o + s) for o, s in zip(tensor.offsets_list, tensor.shape_list,
                                                         strict=True))
        return raw.view(storage).reshape(strides)[window]

    def bytes_of(self, tensor: ark.TensorType) -> np.ndarray:
        """The bytes of `tensor`'s elements, shape + [element bytes] (writable)."""
        return byte_view(self.buffers[tensor.buffer_id], tensor)

    def read(self, tensor: ark.TensorType) -> np.ndarray:
        return dtypes.to_compute(self.view(tensor), tensor.data_type)

    def write(self, tensor: ark.TensorType, values: np.ndarray) -> None:
        shape = tensor.shape_list
        values = np.asarray(values)
        if list(values.shape) != shape:
            values = np.broadcast_to(values.reshape(_squeeze_to(values.shape, len(shape))),
                                     shape)
        self.view(tensor)[...] = dtypes.to_storage(values, tensor.data_type)


def byte_view(raw: np.ndarray, tensor: ark.TensorType) -> np.ndarray:
    """The bytes of `tensor` in the byte array `raw` of its buffer, as shape + [element bytes]
    (used on the buffers themselves, and on masks of them)."""
    strides = tensor.strides_list
    size = tensor.element_bytes
    window = tuple(slice(o, o + s) for o, s in zip(tensor.offsets_list, tensor.shape_list,
                                                     strict=True))
    return raw[: math.prod(strides) * size].reshape([*strides, size])[window]


def _squeeze_to(shape: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    """Drop leading unit dims beyond `ndim` (ARK shapes are equal up to leading ones)."""
    shape = tuple(shape)
    while len(shape) > ndim and shape[0] == 1:
        shape = shape[1:]
    return shape


# ---------------------------------------------------------------------------------------------
# Operator semantics
# ---------------------------------------------------------------------------------------------


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # Integer tensors divide as C++ integers do on the device: truncating toward zero.
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.trunc(np.true_divide(a, b))
    return a / b


def _gelu(x: np.ndarray) -> np.ndarray:
    # ARK's kernel uses the tanh approximation.
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


def _rope(x: np.ndarray, r: np.ndarray) -> np.ndarray:
    x, r = np.broadcast_arrays(x, r)
    out = np.empty(np.broadcast_shapes(x.shape, r.shape), dtype=np.float32)
    x0, x1, r0, r1 = x[..., 0::2], x[..., 1::2], r[..., 0::2], r[..., 1::2]
    out[..., 0::2] = x0 * r0 - x1 * r1
    out[..., 1::2] = x0 * r1 + x1 * r0
    return out


def _matmul(op: ark.MatmulOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.atleast_2d(a)
    b = np.atleast_2d(b)
    if op.trans_input:
        a = np.swapaxes(a, -1, -2)
    if op.trans_other:
        b = np.swapaxes(b, -1, -2)
    # Cast first: np.matmul(..., dtype=) takes numpy's generic loop instead of BLAS (~100x
    # slower); float32 operands give the same float32 accumulation.
    return np.matmul(a.astype(np.float32, copy=False), b.astype(np.float32, copy=False))


def _reduce(fn: Callable[..., np.ndarray]) -> Callable[[ark.ReduceOp, np.ndarray], np.ndarray]:
    return lambda op, x: fn(x, axis=op.axis_index, keepdims=op.keeps_dim)


def _cast(op: ark.CastOp, x: np.ndarray) -> np.ndarray:
    src, dst = op.inputs[0].data_type, op.outputs[0].data_type
    if src in dtypes.FLOATS and dst not in dtypes.FLOATS and src == "FP32":
        return np.trunc(x)  # a C cast from float truncates; half/bf16 casts round (to_storage)
    return x


ONE_INPUT: dict[type[ark.ArkOp], Callable[[Any, np.ndarray], np.ndarray]] = {
    ark.ExpOp: lambda op, x: np.exp(x),
    ark.GeluOp: lambda op, x: _gelu(x),
    ark.ReluOp: lambda op, x: np.maximum(x, 0),
    ark.RsqrtOp: lambda op, x: 1.0 / np.sqrt(x),
    ark.SigmoidOp: lambda op, x: 1.0 / (1.0 + np.exp(-x)),
    ark.SqrtOp: lambda op, x: np.sqrt(x),
    ark.CopyOp: lambda op, x: x,
    ark.CastOp: _cast,
    ark.ScalarAddOp: lambda op, x: x + np.float32(op.factor.value.data),
    ark.ScalarMulOp: lambda op, x: x * np.float32(op.factor.value.data),
    ark.ReduceSumOp: _reduce(np.sum),
    ark.ReduceMaxOp: _reduce(np.max),
    ark.ReduceMeanOp: _reduce(np.mean),
    ark.TransposeOp: lambda op, x: np.transpose(x, op.perm),
}
"""Operators of one input: output = f(op, input)."""

TWO_INPUTS: dict[type[ark.ArkOp], Callable[[Any, np.ndarray, np.ndarray], np.ndarray]] = {
    ark.AddOp: lambda op, a, b: a + b,
    ark.SubOp: lambda op, a, b: a - b,
    ark.MulOp: lambda op, a, b: a * b,
    ark.DivOp: lambda op, a, b: _divide(a, b),
    ark.RopeOp: lambda op, a, b: _rope(a, b),
    ark.MatmulOp: _matmul,
    ark.EmbeddingOp: lambda op, idx, w: w[idx],
}
"""Operators of two inputs: output = f(op, input, other)."""

NO_COMPUTE = (ark.NoopOp, ark.TensorOp, ark.ReshapeOp)
"""Operators with nothing to compute: their results alias data that is already in memory."""


def evaluate(op: ark.ArkOp, inputs: list[np.ndarray]) -> np.ndarray | None:
    """The value `op` writes into its (first) output, or None if it writes nothing."""
    with np.errstate(all="ignore"):  # inf/nan are results to compare, not crashes
        if type(op) in ONE_INPUT:
            return ONE_INPUT[type(op)](op, inputs[0])
        if type(op) in TWO_INPUTS:
            return TWO_INPUTS[type(op)](op, inputs[0], inputs[1])
    if isinstance(op, ark.ScalarAssignOp):
        return np.full(op.outputs[0].shape_list, op.value.value.data, dtype=np.float32)
    if isinstance(op, NO_COMPUTE):
        return None
    if isinstance(op, ark.CommOp):
        raise PlancError(f"{op.ark_type} '{op.label.data}': communication operators are not "
                         "simulated by the model interpreter", path=source_path(op))
    if isinstance(op, ark.GenericOp):
        raise ark.unknown_type_error(op)
    raise PlancError(f"{op.ark_type} '{op.label.data}': operator type '{op.ark_type}' has no "
                     "reference semantics", path=source_path(op))


# ---------------------------------------------------------------------------------------------
# Error scales
# ---------------------------------------------------------------------------------------------


def _matmul_scale(op: ark.MatmulOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A matmul's error scale from its operands' (`a`, `b`): the root of the sum of its terms'
    squared scales, sqrt(2 |A|^2 @ |B|^2) (both operands perturbed). Rounding differences are
    independent from term to term, so their sum grows as the root of the number of terms, not
    as |A| @ |B|: that sum would be sqrt(K) times larger and hide a wrong plan, such as one K
    block of 64 of K = 4096 left out (0.4 of the |A| @ |B| bound, 9 times this one)."""
    return np.sqrt(2 * _matmul(op, np.square(a), np.square(b)))


def _sum_scale(op: ark.ReduceOp, s: np.ndarray, mean: bool = False) -> np.ndarray:
    """A sum's (or mean's) error scale: the root of its terms' squared scales (`_matmul_scale`
    says why not their sum)."""
    total = np.sqrt(np.sum(np.square(s), axis=op.axis_index, keepdims=op.keeps_dim))
    return total / s.shape[op.axis_index] if mean else total


_ABSOLUTE: dict[type[ark.ArkOp], Callable[[Any, list[np.ndarray]], np.ndarray]] = {
    ark.AddOp: lambda op, s: s[0] + s[1],
    ark.SubOp: lambda op, s: s[0] + s[1],
    ark.MulOp: lambda op, s: s[0] * s[1],
    ark.MatmulOp: lambda op, s: _matmul_scale(op, s[0], s[1]),
    ark.ScalarMulOp: lambda op, s: s[0] * np.float32(abs(op.factor.value.data)),
    ark.ScalarAddOp: lambda op, s: s[0] + np.float32(abs(op.factor.value.data)),
    ark.CopyOp: lambda op, s: s[0],
    ark.TransposeOp: lambda op, s: np.transpose(s[0], op.perm),
    ark.ReduceSumOp: lambda op, s: _sum_scale(op, s[0]),
    ark.ReduceMeanOp: lambda op, s: _sum_scale(op, s[0], mean=True),
    ark.ReduceMaxOp: lambda op, s: _reduce(np.max)(op, s[0]),
}
"""Sums, products and the operators built of them (and the maximum), evaluated on the error
scales of their inputs (see `error_scale`)."""


def error_scale(op: ark.ArkOp, scales: list[np.ndarray], result: np.ndarray
                ) -> np.ndarray:
    """How far two correct computations of `op`'s result may differ, in units of the
    tolerance's rtol: the result evaluated with every input replaced by its error scale (an
    input's scale is its magnitude), every subtraction by an addition, and every long sum
    (matmul, reduction) by the root of its terms' squares; at least |result|.

    Perturbing every input and intermediate by a relative rtol (another summation order, an
    intermediate rounded the other way, 1 ulp from a fused kernel) moves the result by about
    rtol times it. It is what makes a comparison relative to each element's own magnitude
    wrong where terms cancel: a matmul element whose terms' magnitudes are large but that
    sums to 0.1 moves by more than rtol * 0.1 when its fp16 inputs move by an ulp. Those
    moves are independent from term to term, hence the root of the squares for long sums
    (Wilkinson's |A| @ |B| bound is sqrt(K) times looser and accepts a matmul that leaves out
    a K block); a perturbation correlated across a whole row (a norm's scalar rounded the other
    way) moves the result relative to itself, which |result| covers. Other operators (exp,
    sigmoid, division, ...) start again from their result's magnitude."""
    magnitude = np.abs(result)
    rule = _ABSOLUTE.get(type(op))
    if rule is None:
        return magnitude
    with np.errstate(all="ignore"):
        scale = np.asarray(rule(op, scales), dtype=np.float32)
    try:
        scale = np.broadcast_to(scale.reshape(_squeeze_to(scale.shape, magnitude.ndim)),
                                magnitude.shape)
    except ValueError:
        return magnitude
    return np.fmax(scale, magnitude)


# ---------------------------------------------------------------------------------------------
# Running a model
# ---------------------------------------------------------------------------------------------


@dataclass
class ModelRun:
    """What running a model produced, by tensor id."""

    inputs: dict[int, np.ndarray] = field(default_factory=dict)
    """The values given to (or drawn for) tensors read before being written."""
    tensors: dict[int, np.ndarray] = field(default_factory=dict)
    """Every input and every result tensor, as it was right after it was produced."""
    outputs: list[int] = field(default_factory=list)
    """Result tensors no other operator uses: the model's outputs."""
    types: dict[int, ark.TensorType] = field(default_factory=dict)
    memory: Memory | None = None
    """The buffers at the end of the run (inputs and weights are still there)."""
    reads: dict[tuple[Operation, int], np.ndarray] = field(default_factory=dict)
    """(operator, tensor id) -> the values the operator read, for the reads `run_model` was
    asked to keep (`keep_reads`): a view's bytes may be written by several operators and
    later reused, so neither the results nor the final memory tell what it held then."""
    scales: dict[int, np.ndarray] = field(default_factory=dict)
    """Result tensor id -> each element's error scale (`error_scale`), when `run_model` was
    asked for them (`error_scales=True`); a tensor without one (an input, a view) has its
    magnitude."""


def _all_tensor_types(model: ark.ModelOp) -> list[ark.TensorType]:
    return [r.type for op in model.graph.ops for r in op.results]


def _every_byte(mask: np.ndarray) -> np.ndarray:
    """`mask.all(axis=-1)` (whether every byte of each element holds a value), as one AND per
    byte of an element: numpy reduces over a last axis of 2 or 4 a dozen times slower, a
    second per tensor of a real model."""
    every = mask[..., 0].copy()
    for byte in range(1, mask.shape[-1]):
        every &= mask[..., byte]
    return every


DRAW_CHUNK = 1 << 18
"""Elements `_random_input` draws at a time: its float64 scratch stays in cache instead of a
fresh float64 copy of a whole tensor (the generator's stream, and so every value, is the same
as one draw of the whole)."""


def _random_input(tensor: ark.TensorType, rng: np.random.Generator,
                  index_bound: int | None, scale: float) -> np.ndarray:
    shape = tensor.shape_list
    if tensor.data_type in dtypes.FLOATS:
        drawn = np.empty(shape, dtype=np.float32)
        flat = drawn.reshape(-1)
        for start in range(0, flat.size, DRAW_CHUNK):
            chunk = rng.uniform(-1.0, 1.0, size=min(DRAW_CHUNK, flat.size - start))
            chunk *= scale      # in float64, then rounded once to float32
            flat[start:start + DRAW_CHUNK] = chunk
        return drawn
    if index_bound is not None:
        return rng.integers(0, index_bound, size=shape)
    unsigned = tensor.data_type.startswith("U") or tensor.data_type == "BYTE"
    return rng.integers(0 if unsigned else -8, 16 if unsigned else 8, size=shape)


def _input_scales(model: ark.ModelOp) -> dict[SSAValue, float]:
    """Scales for random matmul operands, so that products keep unit magnitude.

    Each operand of a product over K terms is drawn at K^-1/4 of the usual range: like the
    1/sqrt(K) scaling of trained weights, this keeps fp16 models from overflowing to inf.
    """
    scales: dict[SSAValue, float] = {}
    for op in model.operators():
        if isinstance(op, ark.MatmulOp):
            k = op.problem_mnk()[2]
            for value in op.read_tensors:
                scales[value] = min(scales.get(value, 1.0), k ** -0.25)
    return scales


def _index_bounds(model: ark.ModelOp) -> dict[SSAValue, int]:
    """Values used as embedding indices, with the number of rows they may select."""
    return {op.read_tensors[0]: op.inputs[1].shape_list[0]
            for op in model.operators() if isinstance(op, ark.EmbeddingOp)}


def run_model(
    model: ark.ModelOp | ModuleOp,
    inputs: dict[int, np.ndarray] | None = None,
    *,
    seed: int = 0,
    keep_reads: Callable[[SSAValue], bool] | None = None,
    error_scales: bool = False,
) -> ModelRun:
    """Execute every operator in order; see the module docstring. The values of the reads
    `keep_reads` selects are kept in `ModelRun.reads`; with `error_scales`, every result's error
    scales in `ModelRun.scales` (one more evaluation of the sums and products)."""
    if isinstance(model, ModuleOp):
        model = single_root(model, ark.ModelOp)
    given = inputs or {}
    rng = np.random.default_rng(seed)
    sizes = buffer_sizes(_all_tensor_types(model))
    memory = Memory(sizes)
    initial = Memory(sizes)
    """Every buffer as it was before the first operator: given and drawn values only. The
    inputs are read from it, so that they agree wherever they overlap (a cache read whole
    after an in-place update of its rows is input with the rows' values from before it)."""
    held = {b: np.zeros(n, dtype=bool) for b, n in sizes.items()}
    """Which bytes hold a value (given, drawn or written); np.zeros maps pages lazily."""
    bounds = _index_bounds(model)
    scales = _input_scales(model)
    run = ModelRun()
    # Given tensors are in memory from the start, so views of them (a reshape of an input)
    # read the given values too.
    types = {t.tensor_id: t for t in _all_tensor_types(model)}
    for tensor_id, data in given.items():
        tensor = types.get(tensor_id)
        if tensor is not None:
            memory.write(tensor, data)
            initial.write(tensor, data)
            byte_view(held[tensor.buffer_id], tensor)[...] = True
            run.inputs[tensor_id] = run.tensors[tensor_id] = memory.read(tensor)
            run.types[tensor_id] = tensor

    whole: set[ark.TensorType] = set()
    """Tensors whose every byte is known to hold a value (bytes are never emptied again)."""
    fresh: dict[int, dict[ark.TensorType, np.ndarray]] = {}
    """Per buffer, computed values of its tensors as they are in memory now (dropped when
    the buffer is written): each tensor is converted from its element type once, not again
    for every operator that reads it (on a Llama layer those conversions were most of the
    run)."""

    def current(tensor: ark.TensorType) -> np.ndarray:
        values = fresh.get(tensor.buffer_id, {}).get(tensor)
        if values is None:
            values = memory.read(tensor)
            fresh.setdefault(tensor.buffer_id, {})[tensor] = values
        return values

    def read(value: SSAValue) -> np.ndarray:
        tensor = value.type
        if tensor in whole:
            return current(tensor)
        mask = byte_view(held[tensor.buffer_id], tensor)
        if not mask.all():
            data = given.get(tensor.tensor_id)
            if data is None:
                data = _random_input(tensor, rng, bounds.get(value), scales.get(value, 1.0))
            unheld = ~_every_byte(mask)
            fresh.pop(tensor.buffer_id, None)
            _fill_unheld(memory, tensor, data, unheld)
            _fill_unheld(initial, tensor, data, unheld)
            mask[...] = True
            # The input is the tensor before any operator ran (bytes operators wrote before
            # this read are the initial ones too, which those operators then overwrite); the
            # operator reads its current value.
            run.inputs[tensor.tensor_id] = initial.read(tensor)
            run.tensors[tensor.tensor_id] = current(tensor)
            run.types[tensor.tensor_id] = tensor
        whole.add(tensor)
        return current(tensor)

    for op in model.operators():
        args = [read(v) for v in op.read_tensors]
        if keep_reads is not None:
            for value, values in zip(op.read_tensors, args, strict=True):
                if keep_reads(value):
                    run.reads[op, value.type.tensor_id] = values
        result = evaluate(op, args)
        if result is not None:
            for out in op.outputs[:1]:
                fresh.pop(out.buffer_id, None)
                memory.write(out, result)
        for tensor in op.outputs:
            byte_view(held[tensor.buffer_id], tensor)[...] = True
        for value in op.result_tensors:
            # A fresh array (the conversion makes one), shared with later reads of it only
            # while its buffer is not written: nobody changes these arrays in place.
            run.tensors[value.type.tensor_id] = current(value.type)
            run.types[value.type.tensor_id] = value.type
        if error_scales and result is not None and op.result_tensors:
            tid = op.result_tensors[0].type.tensor_id
            given_scales = [_scale_of(run, v, a) for v, a in zip(op.read_tensors, args,
                                                                   strict=True)]
            run.scales[tid] = error_scale(op, given_scales, run.tensors[tid])
    run.outputs = [v.type.tensor_id for v in final_outputs(model.operators())]
    run.memory = memory
    return run


def _scale_of(run: ModelRun, value: SSAValue, values: np.ndarray) -> np.ndarray:
    """The error scale of an operator's input `values`: its producer's, else its magnitude."""
    scale = run.scales.get(value.type.tensor_id)
    return scale if scale is not None and scale.shape == values.shape else np.abs(values)


def _fill_unheld(memory: Memory, tensor: ark.TensorType, data: np.ndarray,
                 unheld: np.ndarray) -> None:
    """Store `data` into the elements of `tensor` marked in `unheld`, keeping the others."""
    values = np.asarray(data)
    shape = tensor.shape_list
    if list(values.shape) != shape:
        values = np.broadcast_to(values.reshape(_squeeze_to(values.shape, len(shape))), shape)
    view = memory.view(tensor)
    if unheld.all():    # a fresh input: all of it (a masked copy costs seconds at real sizes)
        view[...] = dtypes.to_storage(values, tensor.data_type)
    else:
        view[unheld] = dtypes.to_storage(values, tensor.data_type)[unheld]


# ---------------------------------------------------------------------------------------------
# `planc simulate` on a model file
# ---------------------------------------------------------------------------------------------


def _summary(values: np.ndarray) -> dict[str, Any]:
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    return {
        "mean": float(finite.mean()) if finite.size else None,
        "max_abs": float(np.abs(finite).max()) if finite.size else None,
        "finite": bool(finite.size == values.size),
    }


def simulate_model(module: ModuleOp, options: Namespace) -> dict[str, Any]:
    """Run the model on random inputs and describe its outputs."""
    run = run_model(module, seed=getattr(options, "seed", 0) or 0)
    outputs = {
        str(t): {"shape": run.types[t].shape_list, "dtype": run.types[t].data_type,
                 **_summary(run.tensors[t])}
        for t in run.outputs
    }
    return {
        "ok": all(o["finite"] for o in outputs.values()),
        "inputs": {str(t): run.types[t].shape_list for t in run.inputs},
        "outputs": outputs,
    }
