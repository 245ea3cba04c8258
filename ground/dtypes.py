"""ARK element types in numpy: storage, exact rounding, and comparison tolerances.

Tensors are stored in their own element type (bf16 as its 16-bit pattern, since numpy has no
bf16) and computed in float32 (floats) or int64 (integers), the way ARK's kernels widen to
float for transcendental functions and accumulation. Converting back rounds to nearest even,
as the CUDA/HIP conversion intrinsics do.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

STORAGE: dict[str, np.dtype] = {
    "FP32": np.dtype(np.float32),
    "FP16": np.dtype(np.float16),
    "BF16": np.dtype(np.uint16),
    "INT32": np.dtype(np.int32),
    "UINT32": np.dtype(np.uint32),
    "INT8": np.dtype(np.int8),
    "UINT8": np.dtype(np.uint8),
    "BYTE": np.dtype(np.uint8),
}

FLOATS = frozenset({"FP32", "FP16", "BF16"})


def bf16_bits_to_float(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def float_to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """Round float32 values to bf16 (nearest, ties to even), as `__float2bfloat16_rn`."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    nan = np.isnan(values)
    rounded = bits + (np.uint32(0x7FFF) + ((bits >> 16) & 1))
    out = (rounded >> 16).astype(np.uint16)
    return np.where(nan, np.uint16(0x7FC0), out)


BULK = 1 << 16
"""Arrays of at least this many elements take the bulk fp16 conversions below (smaller ones,
numpy's own: the same values, and a scalar stays a 0-d array)."""

_F16_SUBNORMAL_TOP = np.float32(2.0 ** -14)


@functools.cache
def _fp16_table() -> np.ndarray:
    """Every fp16 bit pattern's float32 value, as numpy converts it (NaN payloads too)."""
    return np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)


def fp16_to_float(stored: np.ndarray) -> np.ndarray:
    """fp16 elements as float32: numpy's `astype`, or for a large array a lookup of the same
    values (numpy converts subnormal fp16 several times slower than normal ones, and a
    softmax's results are full of them)."""
    if stored.size < BULK:
        return stored.astype(np.float32)
    return _fp16_table()[stored.view(np.uint16)]


CHUNK = 1 << 18
"""Elements `float_to_fp16` rounds at a time: its scratch arrays stay in cache and are reused
(on whole tensors of a real model, fresh scratch pages cost as much as the arithmetic)."""


def float_to_fp16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to fp16 (nearest, ties to even): numpy's `astype`, whose result
    this is bit for bit, except that where many values round to fp16 subnormals (below
    2^-14), those are rounded here on whole chunks: numpy rounds each one alone, 15x slower
    than a normal one (most of a Llama layer's reference run went into its attention's)."""
    if values.dtype != np.float32 or values.size < BULK or not values.flags.c_contiguous:
        return values.astype(np.float16)
    out = np.empty(values.shape, dtype=np.float16)
    flat, into = values.reshape(-1), out.reshape(-1)
    for start in range(0, flat.size, CHUNK):
        _round_chunk(flat[start:start + CHUNK], into[start:start + CHUNK])
    return out


def _round_chunk(values: np.ndarray, out: np.ndarray) -> None:
    magnitude = np.abs(values)
    small = magnitude < _F16_SUBNORMAL_TOP      # NaN is not small
    if np.count_nonzero(small) * 16 < small.size:
        out[...] = values       # numpy's conversion: the few small ones cost little
        return
    # Below 2^-14 the fp16 value is m * 2^-24, m = |x| / 2^-24 rounded to nearest even.
    # Adding 0.5 (whose float32 ulp is 2^-24) rounds |x| exactly so, ties to even; m is then
    # the low bits of the sum. The other elements' sums are garbage, never used.
    with np.errstate(invalid="ignore"):     # signalling NaNs among the garbage
        magnitude += np.float32(0.5)
    work = magnitude.view(np.uint32)
    work -= np.uint32(0x3F000000)
    bits = work.astype(np.uint16)
    np.right_shift(values.view(np.uint32), 16, out=work)
    work &= np.uint32(0x8000)                   # the sign
    np.bitwise_or(bits, work, out=bits, casting="unsafe")
    zeroed = magnitude                          # reused: values with the small ones zero
    np.copyto(zeroed, values)
    np.copyto(zeroed, np.float32(0), where=small)
    out[...] = zeroed
    np.copyto(out.view(np.uint16), bits, where=small)


def to_compute(stored: np.ndarray, dtype: str) -> np.ndarray:
    """Stored elements as float32 (float types) or int64 (integer types)."""
    if dtype == "BF16":
        return bf16_bits_to_float(stored)
    if dtype == "FP16":
        return fp16_to_float(stored)
    if dtype in FLOATS:
        return stored.astype(np.float32)
    return stored.astype(np.int64)


def to_storage(values: np.ndarray, dtype: str) -> np.ndarray:
    """Computed values rounded and converted to the stored element type."""
    values = np.asarray(values)
    if dtype == "BF16":
        return float_to_bf16_bits(values.astype(np.float32))
    target = STORAGE[dtype]
    if dtype in FLOATS:
        with np.errstate(over="ignore"):  # overflow to inf is what the device does too
            return float_to_fp16(values) if dtype == "FP16" else values.astype(target)
    if values.dtype.kind == "f":
        # Float to integer conversion rounds to nearest, as __half2int_rn / __float2int_rn.
        values = np.rint(values)
    info = np.iinfo(target)
    return np.clip(values, info.min, info.max).astype(target)


def round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """The computed values after a round trip through `dtype` storage."""
    return to_compute(to_storage(values, dtype), dtype)


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


TOLERANCE: dict[str, Tolerance] = {
    "FP32": Tolerance(1e-4, 1e-5),
    "FP16": Tolerance(1e-2, 1e-2),
    "BF16": Tolerance(4e-2, 4e-2),
}
"""How far two correct computations of one tensor may differ (summation order, rounding of
intermediates); integer types must match exactly."""


def tolerance(dtype: str) -> Tolerance:
    return TOLERANCE.get(dtype, Tolerance(0.0, 0.0))
