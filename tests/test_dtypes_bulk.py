"""The bulk fp16 conversions of `ground.dtypes` give numpy's values bit for bit: every fp16
bit pattern read, and float32 values written around every fp16 subnormal, tie and boundary
(the reference interpreters round every stored result through them)."""

from __future__ import annotations

import numpy as np

from ground import dtypes


def _bits32(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)


def test_every_fp16_pattern_reads_as_numpy_reads_it():
    patterns = np.tile(np.arange(1 << 16, dtype=np.uint16), 2).view(np.float16)
    assert patterns.size >= dtypes.BULK
    got = dtypes.to_compute(patterns, "FP16")
    assert got.dtype == np.float32
    assert np.array_equal(_bits32(got), _bits32(patterns.astype(np.float32)))
    strided = patterns[::3]     # a window of a buffer is a strided view
    assert np.array_equal(_bits32(dtypes.to_compute(strided, "FP16")),
                          _bits32(strided.astype(np.float32)))


def _around_subnormals() -> np.ndarray:
    """float32 values where fp16 rounding is delicate: every subnormal step m * 2^-24, the
    ties between steps and their float32 neighbours, both signs; float32 subnormals, zeros,
    the smallest normals, overflow, infinities and NaN; and random bit patterns."""
    steps = np.arange(0, 1026, dtype=np.float64) * 2.0 ** -24
    ties = (np.arange(0, 1025, dtype=np.float64) + 0.5) * 2.0 ** -24
    exact = np.concatenate([steps, ties]).astype(np.float32)
    near = np.concatenate([exact, np.nextafter(exact, np.float32(1)),
                           np.nextafter(exact, np.float32(0))])
    special = np.array([0.0, 2.0 ** -14, 2.0 ** -15, 2.0 ** -25, 2.0 ** -26, 1e-45, 1e-40,
                        65504.0, 65520.0, 65519.996, 1e30, np.inf, np.nan, 1.0, 3.0e-5],
                       dtype=np.float32)
    rng = np.random.default_rng(26)
    random_bits = rng.integers(0, 1 << 32, size=20_000, dtype=np.uint64).astype(np.uint32)
    small = rng.uniform(-2.0 ** -13, 2.0 ** -13, size=80_000).astype(np.float32)
    values = np.concatenate([near, special, random_bits.view(np.float32), small])
    return np.concatenate([values, -values])


def test_float32_written_as_fp16_as_numpy_rounds_it():
    values = _around_subnormals()
    assert values.size >= dtypes.BULK
    small = np.abs(values) < 2.0 ** -14
    assert np.count_nonzero(small) * 16 >= values.size     # the bulk rounding is taken
    with np.errstate(all="ignore"):
        want = values.astype(np.float16).view(np.uint16)
    got = dtypes.to_storage(values, "FP16")
    assert got.dtype == np.float16
    assert np.array_equal(got.view(np.uint16), want)
    # the same through a strided window and a 2-D shape
    window = values[: values.size // 3 * 3].reshape(-1, 3)[:, 1]
    with np.errstate(all="ignore"):
        assert np.array_equal(dtypes.to_storage(window, "FP16").view(np.uint16),
                              window.astype(np.float16).view(np.uint16))


def test_few_subnormals_take_numpy_and_give_the_same():
    rng = np.random.default_rng(7)
    values = rng.uniform(-4, 4, size=dtypes.BULK * 2).astype(np.float32)
    values[::1000] = np.float32(3e-6)
    assert np.array_equal(dtypes.to_storage(values, "FP16").view(np.uint16),
                          values.astype(np.float16).view(np.uint16))


def test_chunks_of_either_kind_join_up(monkeypatch):
    """Chunks that take numpy's rounding and chunks rounded in bulk, side by side, give one
    array equal to numpy's."""
    monkeypatch.setattr(dtypes, "CHUNK", 1000)
    rng = np.random.default_rng(3)
    values = rng.uniform(-4, 4, size=dtypes.BULK * 2).astype(np.float32)
    values[: values.size // 2] *= np.float32(2.0 ** -16)     # the first half subnormal
    values = values.reshape(4, -1)
    with np.errstate(all="ignore"):
        want = values.astype(np.float16).view(np.uint16)
    assert np.array_equal(dtypes.to_storage(values, "FP16").view(np.uint16), want)
