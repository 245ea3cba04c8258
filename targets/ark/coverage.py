"""Counting, without enumerating, how often index sets cover a range.

The index sets of ARK plans are arithmetic progressions (task ranges `[begin, end, step]`,
the blocks a processor runs); their sizes are user-sized (a Llama layer has 740k tasks), their
number is small (task groups, processors). Everything here is arithmetic on progressions and
intervals, in time linear in their number (times the lcm of their steps, which is bounded).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

MAX_LCM = 4096
"""Progressions whose steps have a larger lcm are not decided (reported as such)."""


@dataclass(frozen=True)
class Progression:
    """begin, begin+step, ... < end."""

    begin: int
    end: int
    step: int = 1

    def __len__(self) -> int:
        return max(0, -(-(self.end - self.begin) // self.step))


@dataclass
class Coverage:
    """How a multiset of progressions covers [0, size)."""

    size: int
    missing: int = 0
    first_missing: int | None = None
    repeated: int = 0
    """Indices covered more than once (each counted once)."""
    first_repeated: int | None = None
    outside: int = 0
    """Covered indices outside [0, size)."""
    decided: bool = True

    @property
    def exact(self) -> bool:
        return self.decided and not (self.missing or self.repeated or self.outside)


def count_in(lo: int, hi: int, residue: int, modulus: int) -> int:
    """How many k in [lo, hi) have k % modulus == residue."""
    if hi <= lo:
        return 0
    first = lo + (residue - lo) % modulus
    return 0 if first >= hi else (hi - 1 - first) // modulus + 1


def cover(progressions: Iterable[Progression], size: int) -> Coverage:
    """The coverage of [0, size) by the progressions (a multiset)."""
    aps = [p for p in progressions if len(p)]
    result = Coverage(size)
    if len(aps) == 1 and aps[0].begin == 0 and aps[0].end == size and aps[0].step == 1:
        return result   # (the common case, one range of every index: exact)
    modulus = 1
    for p in aps:
        modulus = math.lcm(modulus, p.step)
        if modulus > MAX_LCM:
            result.decided = False
            return result
    # Index i = r + k * modulus; each progression is, per residue r, an interval of k. Only
    # the residues a progression has are visited (one each when every step is the modulus).
    by_residue: dict[int, list[tuple[int, int]]] = {}
    for p in aps:
        for r in range(p.begin % p.step, modulus, p.step):
            by_residue.setdefault(r, []).append((max(0, -(-(p.begin - r) // modulus)),
                                                 -(-(p.end - r) // modulus)))
    if size > 0:
        for r in range(min(modulus, size)):
            intervals = by_residue.get(r)
            limit = -(-(size - r) // modulus)
            if intervals is None:
                _note(result, "missing", 0, limit, r, modulus)
            else:
                _sweep(result, sorted(intervals), r, modulus, limit)
    result.outside = sum(len(p) for p in aps) - _inside(aps, size)
    return result


def _inside(aps: list[Progression], size: int) -> int:
    total = 0
    for p in aps:
        end = min(p.end, size)
        begin = p.begin if p.begin >= 0 else p.begin + (-p.begin + p.step - 1) // p.step * p.step
        total += len(Progression(begin, end, p.step)) if end > begin else 0
    return total


def _sweep(result: Coverage, intervals: list[tuple[int, int]], r: int, modulus: int,
           limit: int) -> None:
    """Fold the k-intervals of residue r (sorted by start) over [0, limit)."""
    position = 0            # everything below is accounted for
    reach = 0               # the furthest end seen so far
    for lo, hi in intervals:
        lo, hi = max(lo, 0), min(hi, limit)
        if hi <= lo:
            continue
        if lo > reach:      # a gap [reach, lo) nobody covers
            _note(result, "missing", reach, lo, r, modulus)
        elif lo < reach:    # [lo, min(hi, reach)) is covered again
            _note(result, "repeated", max(lo, position), min(hi, reach), r, modulus)
        position = max(position, min(hi, reach))
        reach = max(reach, hi)
    if reach < limit:
        _note(result, "missing", reach, limit, r, modulus)


def _note(result: Coverage, kind: str, lo: int, hi: int, r: int, modulus: int) -> None:
    if hi <= lo:
        return
    setattr(result, kind, getattr(result, kind) + hi - lo)
    first = f"first_{kind}"
    index = r + lo * modulus
    current = getattr(result, first)
    if current is None or index < current:
        setattr(result, first, index)


def describe(coverage: Coverage, unit: str) -> str:
    """'1792 tasks never run (the first is 256); 16 run twice (the first is 0)'."""
    parts = []
    if coverage.missing:
        parts.append(f"{coverage.missing} {unit} never run (the first is "
                     f"{coverage.first_missing})")
    if coverage.repeated:
        parts.append(f"{coverage.repeated} {unit} run more than once (the first is "
                     f"{coverage.first_repeated})")
    if coverage.outside:
        parts.append(f"{coverage.outside} {unit} beyond the {coverage.size} there are")
    return "; ".join(parts)
