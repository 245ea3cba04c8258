"""Byte regions of buffers: which bytes a tensor view touches, decided without enumerating them.

An ARK tensor is a strided window of a buffer: `strides` are the extents of the array laid out
in the buffer (row-major), `offsets` where the window starts and `shape` its size. Its bytes are
a strided box: element (i0..i3) starts at byte
`base + sum(i_d * step_d)` with `step_d = prod(extents[d+1:]) * element_bytes`, and spans
`element_bytes` bytes.

Two questions are asked of regions, both in time independent of the tensors' sizes:

* `overlaps(a, b)`: can the views share a byte? Exact when both have the same extents and
  element size (then they are boxes of one grid, and overlap iff every dimension's index
  intervals intersect). Otherwise the answer compares their hulls (first to last byte): it may
  say "overlap" for interleaved views that share no byte, which only adds ordering, and never
  misses an overlap.
* `covers(a, b)`: does `a` hold every byte of `b`? Exact for the same grid; otherwise only
  when `a` is dense (its bytes are its whole hull) and its hull contains `b`'s. It may say "no"
  when the answer is yes (callers then keep information they could have dropped), never "yes"
  when it is no. `covered_by_union` asks the same of several regions of one grid.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from dialects import ark
from targets.ark.tensor_layouts import layout_of

MAX_UNION_CUTS = 4096
"""The most cells `covered_by_union` examines (the grid cut by the regions' boundaries); above
it the answer is "not known to be covered"."""


@dataclass(frozen=True)
class ByteRegion:
    """The bytes of a buffer one tensor view touches (see the module docstring). Derived
    figures are computed once per region (regions are immutable and shared per tensor)."""

    buffer: int
    element_bytes: int
    extents: tuple[int, ...]
    """The laid-out array's extents (ARK's `strides`), four dims, leading ones added."""
    offsets: tuple[int, ...]
    shape: tuple[int, ...]

    @staticmethod
    def of(tensor: ark.TensorType) -> ByteRegion:
        """The region of `tensor`, made once per (immutable) tensor type and kept with it:
        passes ask for the regions of every operand of every operator, repeatedly. Tensors
        of one layout share one region (and so its derived figures). A region made here also
        knows the tensors' `Layout` (`region.layout`, not a field: regions made otherwise
        have none), so that tables of regions answer for their tensors' layouts too."""
        region = tensor.__dict__.get("_planc_region")
        if region is not None:
            return region
        layout = tensor.__dict__.get("_planc_pass_layout") or layout_of(tensor)
        key = (tensor.buffer.id.data, layout)
        region = _SHARED.get(key)
        if region is None:
            if len(_SHARED) >= MAX_SHARED:
                _SHARED.clear()
            region = _SHARED[key] = ByteRegion._of_fields(
                key[0], layout.element_bytes, layout.extents4, layout.offsets4, layout.shape4)
            region.__dict__["layout"] = layout
        tensor.__dict__["_planc_region"] = region
        return region

    @staticmethod
    def _of_fields(buffer: int, element_bytes: int, extents: tuple[int, ...],
                   offsets: tuple[int, ...], shape: tuple[int, ...]) -> ByteRegion:
        """`ByteRegion(...)` of fields already in their final form, set in one step (the
        frozen dataclass's `__init__` sets them one `object.__setattr__` at a time)."""
        region = object.__new__(ByteRegion)
        region.__dict__.update(buffer=buffer, element_bytes=element_bytes, extents=extents,
                               offsets=offsets, shape=shape)
        return region

    @staticmethod
    def make(buffer: int, element_bytes: int, extents: Sequence[int], offsets: Sequence[int],
             shape: Sequence[int]) -> ByteRegion:
        return ByteRegion(buffer, element_bytes, _pad4(extents, 1), _pad4(offsets, 0),
                          _pad4(shape, 1))

    def __hash__(self) -> int:
        """The fields' hash, computed once (regions key the access tables of every buffer)."""
        found = self.__dict__.get("_hash")
        if found is None:
            found = hash((self.buffer, self.element_bytes, self.extents, self.offsets,
                          self.shape))
            object.__setattr__(self, "_hash", found)
        return found

    # -- derived figures ---------------------------------------------------------------------

    @cached_property
    def empty(self) -> bool:
        return any(s <= 0 for s in self.shape)

    @cached_property
    def steps(self) -> tuple[int, ...]:
        """Bytes between neighbours along each dimension."""
        return tuple(math.prod(self.extents[d + 1:]) * self.element_bytes for d in range(4))

    @cached_property
    def in_grid(self) -> bool:
        """Does the window lie inside its extents (so distinct indices are distinct bytes)?"""
        return all(0 <= o and o + s <= e
                   for o, s, e in zip(self.offsets, self.shape, self.extents, strict=True))

    @cached_property
    def hull(self) -> tuple[int, int]:
        """[first byte, last byte + 1); (0, 0) when empty."""
        if self.empty:
            return (0, 0)
        steps = self.steps
        first = sum(o * st for o, st in zip(self.offsets, steps, strict=True))
        last = first + sum((s - 1) * st for s, st in zip(self.shape, steps, strict=True))
        return (first, last + self.element_bytes)

    @cached_property
    def size_bytes(self) -> int:
        return 0 if self.empty else math.prod(self.shape) * self.element_bytes

    @cached_property
    def dense(self) -> bool:
        """Are its bytes exactly its hull (no gaps)?"""
        lo, hi = self.hull
        return self.in_grid and hi - lo == self.size_bytes

    def same_grid(self, other: ByteRegion) -> bool:
        return (self.buffer == other.buffer and self.extents == other.extents
                and self.element_bytes == other.element_bytes
                and self.in_grid and other.in_grid)

    def intervals(self) -> list[tuple[int, int]]:
        return list(self._intervals)

    @cached_property
    def _intervals(self) -> tuple[tuple[int, int], ...]:
        return tuple((o, o + s) for o, s in zip(self.offsets, self.shape, strict=True))


MAX_SHARED = 1 << 16
"""The most layouts `_SHARED` remembers (it starts over beyond)."""

_SHARED: dict[tuple, ByteRegion] = {}
"""Regions by (buffer, `Layout`): immutable, so shared by the tensors of one layout on one
buffer. (Equal regions of different `Layout`s are equal, not identical: `overlaps` and
`covers` decide them by their fields.)"""


def _pad4(values: Sequence[int], fill: int) -> tuple[int, ...]:
    values = tuple(values)
    return (fill,) * (4 - len(values)) + values if len(values) < 4 else values


def overlaps(a: ByteRegion, b: ByteRegion) -> bool:
    """May `a` and `b` share a byte? Exact on one grid, by hulls otherwise (see module)."""
    if a.buffer != b.buffer or a.empty or b.empty:
        return False
    if a is b:  # (tensors of one layout share their region)
        return True
    if a.extents == b.extents and a.element_bytes == b.element_bytes and a.in_grid \
            and b.in_grid:  # (`same_grid`, inline: the sweeps ask this of every access)
        ia, ib = a._intervals, b._intervals
        if len(ia) == 4:    # (always, but for tensors of more than four dimensions)
            return (ia[0][0] < ib[0][1] and ib[0][0] < ia[0][1] and ia[1][0] < ib[1][1]
                    and ib[1][0] < ia[1][1] and ia[2][0] < ib[2][1] and ib[2][0] < ia[2][1]
                    and ia[3][0] < ib[3][1] and ib[3][0] < ia[3][1])
        return all(lo1 < hi2 and lo2 < hi1 for (lo1, hi1), (lo2, hi2)
                   in zip(ia, ib, strict=True))
    (lo1, hi1), (lo2, hi2) = a.hull, b.hull
    return lo1 < hi2 and lo2 < hi1


def covers(a: ByteRegion, b: ByteRegion) -> bool:
    """Does `a` hold every byte of `b`? Never "yes" wrongly (see module)."""
    if b.empty:
        return True
    if a.buffer != b.buffer or a.empty:
        return False
    if a.extents == b.extents and a.element_bytes == b.element_bytes and a.in_grid \
            and b.in_grid:  # (`same_grid`, inline)
        ia, ib = a._intervals, b._intervals
        if len(ia) == 4:
            return (ia[0][0] <= ib[0][0] and ib[0][1] <= ia[0][1] and ia[1][0] <= ib[1][0]
                    and ib[1][1] <= ia[1][1] and ia[2][0] <= ib[2][0] and ib[2][1] <= ia[2][1]
                    and ia[3][0] <= ib[3][0] and ib[3][1] <= ia[3][1])
        return all(lo1 <= lo2 and hi2 <= hi1 for (lo1, hi1), (lo2, hi2)
                   in zip(ia, ib, strict=True))
    if not a.dense:
        return False
    (lo1, hi1), (lo2, hi2) = a.hull, b.hull
    return lo1 <= lo2 and hi2 <= hi1


def covered_by_union(b: ByteRegion, regions: Sequence[ByteRegion]) -> bool:
    """Do `regions` together hold every byte of `b`? Exact when one of them covers `b`, or
    when those overlapping `b` share its grid and cut it into at most `MAX_UNION_CUTS` cells;
    otherwise "no" (the safe answer for callers that would skip work when covered)."""
    if b.empty:
        return True
    near = [r for r in regions if overlaps(r, b)]
    if any(covers(r, b) for r in near):
        return True
    if not near or not all(r.same_grid(b) for r in near):
        return False
    cuts = []
    for d, (lo, hi) in enumerate(b.intervals()):
        points = {lo, hi}
        for r in near:
            rlo, rhi = r.intervals()[d]
            points.update(p for p in (rlo, rhi) if lo < p < hi)
        cuts.append(sorted(points))
    if math.prod(len(c) - 1 for c in cuts) > MAX_UNION_CUTS:
        return False
    for cell in itertools.product(*(list(zip(c, c[1:], strict=False)) for c in cuts)):
        if not any(all(rlo <= lo and hi <= rhi for (lo, hi), (rlo, rhi)
                       in zip(cell, r.intervals(), strict=True)) for r in near):
            return False
    return True


def byte_set(region: ByteRegion) -> set[int]:
    """Every byte of `region`, enumerated: the brute-force oracle for tests (small views)."""
    if region.empty:
        return set()
    steps = region.steps
    found: set[int] = set()
    for index in itertools.product(*(range(o, o + s) for o, s
                                     in zip(region.offsets, region.shape, strict=True))):
        start = sum(i * st for i, st in zip(index, steps, strict=True))
        found.update(range(start, start + region.element_bytes))
    return found
