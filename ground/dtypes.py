"""ARK element types in numpy: storage, exact rounding, and comparison tolerances.

Tensors are stored in their own element type (bf16 as its 16-bit pattern, since numpy has no
bf16) and computed in float32 (floats) or int64 (integers), the way ARK's kernels widen to
float for transcendental functions and accumulation. Converting back rounds to nearest even,
as the CUDA/HIP conversion intrinsics do.
"""

from __future__ import annotations

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


def to_compute(stored: np.ndarray, dtype: str) -> np.ndarray:
    """Stored elements as float32 (float types) or int64 (integer types)."""
    if dtype == "BF16":
        return bf16_bits_to_float(stored)
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
            return values.astype(target)
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
