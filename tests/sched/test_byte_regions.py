"""`targets.ark.byte_regions` against a brute-force oracle: the set of bytes each view touches,
enumerated, on ~1000 random pairs of views (same grid, other grids, other element sizes)."""

from __future__ import annotations

import random

import pytest

from dialects import ark
from targets.ark.byte_regions import (
    ByteRegion,
    byte_set,
    covered_by_union,
    covers,
    overlaps,
)

PAIRS = 1000


def random_view(rng: random.Random, extents: list[int] | None = None,
                element_bytes: int | None = None) -> ByteRegion:
    extents = extents or [rng.randint(1, 5) for _ in range(rng.randint(1, 4))]
    offsets, shape = [], []
    for e in extents:
        o = rng.randrange(e)
        offsets.append(o)
        shape.append(rng.randint(1, e - o))
    return ByteRegion.make(0, element_bytes or rng.choice((1, 2, 4)), extents, offsets, shape)


def random_pair(rng: random.Random) -> tuple[ByteRegion, ByteRegion]:
    a = random_view(rng)
    kind = rng.random()
    if kind < 0.5:      # one grid: the exact case
        return a, random_view(rng, list(a.extents), a.element_bytes)
    if kind < 0.7:      # the same bytes seen with another element size
        return a, random_view(rng, list(a.extents), rng.choice((1, 2, 4)))
    return a, random_view(rng)


@pytest.fixture(scope="module")
def pairs():
    rng = random.Random(11)
    return [random_pair(rng) for _ in range(PAIRS)]


def test_overlap_never_misses_and_is_exact_on_one_grid(pairs):
    exact = 0
    for a, b in pairs:
        truth = bool(byte_set(a) & byte_set(b))
        got = overlaps(a, b)
        assert got or not truth, (a, b)
        if a.same_grid(b):
            exact += 1
            assert got == truth, (a, b)
        else:
            lo1, hi1 = a.hull
            lo2, hi2 = b.hull
            assert got == (lo1 < hi2 and lo2 < hi1)
    assert exact > PAIRS // 3


def test_covers_never_claims_wrongly_and_is_exact_on_one_grid(pairs):
    claimed = 0
    for a, b in pairs:
        truth = byte_set(b) <= byte_set(a)
        got = covers(a, b)
        assert truth or not got, (a, b)
        claimed += got
        if a.same_grid(b):
            assert got == truth, (a, b)
    assert claimed > 20


def test_a_dense_view_covers_what_its_hull_holds():
    whole = ByteRegion.make(0, 2, [4, 8], [0, 0], [4, 8])
    rows = ByteRegion.make(0, 2, [4, 8], [1, 0], [2, 8])
    flat = ByteRegion.make(0, 4, [16], [4], [8])              # the same rows as FP32
    assert whole.dense and rows.dense
    assert covers(rows, flat) and covers(flat, rows) and covers(whole, flat)
    column = ByteRegion.make(0, 2, [4, 8], [0, 2], [4, 1])
    assert not column.dense and not covers(column, flat)


def test_union_cover_matches_the_oracle():
    rng = random.Random(3)
    checked = 0
    for _ in range(300):
        b = random_view(rng)
        parts = [random_view(rng, list(b.extents), b.element_bytes)
                 for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.3:      # a view of another grid among them
            parts.append(random_view(rng))
        truth = byte_set(b) <= set().union(*map(byte_set, parts))
        got = covered_by_union(b, parts)
        assert truth or not got
        if all(p.same_grid(b) for p in parts):
            checked += 1
            assert got == truth, (b, parts)
    assert checked > 100


def test_halves_cover_the_whole():
    whole = ByteRegion.make(0, 4, [40, 96], [0, 0], [40, 96])
    halves = [ByteRegion.make(0, 4, [40, 96], [0, o], [40, 48]) for o in (0, 48)]
    assert covered_by_union(whole, halves)
    assert not covered_by_union(whole, halves[:1])
    assert not any(covers(h, whole) for h in halves)


def test_regions_of_ark_tensors():
    buffer = ark.BufferAttr.get(3, -1, [], [])
    whole = ark.TensorType.get(0, "FP16", [8, 16], buffer)
    half = ark.TensorType.get(1, "FP16", [8, 8], buffer, strides=[8, 16], offsets=[0, 8])
    other = ark.TensorType.get(2, "FP16", [8, 8], ark.BufferAttr.get(4, -1, [], []))
    a, b = ByteRegion.of(whole), ByteRegion.of(half)
    assert b.hull == (16, 256) and b.size_bytes == 128
    assert covers(a, b) and overlaps(a, b) and not covers(b, a)
    assert not overlaps(b, ByteRegion.of(other))
    assert byte_set(b) == {r * 32 + 16 + c for r in range(8) for c in range(16)}
