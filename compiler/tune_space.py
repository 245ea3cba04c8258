"""The search spaces of `planc tune`: the decisions each target can make, and their values.

A candidate is one value per dimension. Dimensions are of two kinds:

* a target option (`grid`, `partition`, `mesh`, `buffer_size`, `algorithm`, ...), passed as the
  command line would pass the flag;
* a pass option, `pass.option` (`sched-partition.split_k`), which changes one pass of the
  target's default pipeline (ARK plans: planc's planner pass by pass).

The first value of every dimension is planc's own decision, so the first candidate is what
`planc MODEL --target T` writes. `--space 'name=v1,v2;other=...'` replaces or adds dimensions.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ground.diagnostics import UsageError, did_you_mean, near_match

Value = str | int | float | bool


@dataclass(frozen=True)
class Dimension:
    name: str
    values: tuple[Value, ...]

    @property
    def is_pass_option(self) -> bool:
        return "." in self.name


# ARK plans: planc's planner, pass by pass (`planner=ark-default` ignores the pass options).
ARK_PASSES = ("ark-to-sched", "sched-fuse", "sched-tile", "sched-partition", "sched-allocate",
              "sched-to-plan")

DEFAULT_SPACES: dict[str, tuple[Dimension, ...]] = {
    "ark": (
        Dimension("planner", ("planc", "ark-default")),
        Dimension("sched-fuse.elementwise", (True, False)),
        Dimension("sched-fuse.epilogue", (True, False)),
        Dimension("sched-fuse.rows", (True, False)),
        Dimension("sched-partition.concurrency", ("auto", "ranges", "sequence")),
        Dimension("sched-partition.split_k", (True, False)),
        Dimension("sched-partition.granularity", (1, 2, 4)),
        Dimension("sched-allocate.reuse", (True, False)),
    ),
    "tt": (
        Dimension("partition", ("auto", "row_major", "column_major", "block", "z_order")),
        Dimension("grid", (None, "1x1", "2x2", "4x4", "8x4", "4x8", "8x8")),
    ),
    "gemini": (
        Dimension("mesh", ("1x1", "1x2", "2x1", "2x2", "2x4", "4x2", "4x4")),
        Dimension("buffer_size", (8388608, 2097152, 4194304, 16777216)),
    ),
    "mscclpp": (
        Dimension("algorithm", ("auto", "ring", "allpairs", "oneshot", "nvls")),
        Dimension("protocol", (None, "Simple", "LL")),
        Dimension("instances", (None, 2, 4)),
    ),
}


@dataclass
class Space:
    target: str
    dimensions: tuple[Dimension, ...]
    fixed: dict[str, Any] = field(default_factory=dict)
    """Target options that stay as given (e.g. the collective, its ranks, the message size)."""

    @property
    def size(self) -> int:
        return math.prod(len(d.values) for d in self.dimensions)

    def default(self) -> dict[str, Value]:
        return {d.name: d.values[0] for d in self.dimensions}

    def canonical(self, decisions: dict[str, Value]) -> dict[str, Value]:
        """Equal plans, equal decisions: ARK's default planner has no pass options."""
        if decisions.get("planner") == "ark-default":
            return {k: (v if k == "planner" or "." not in k else self._first(k))
                    for k, v in decisions.items()}
        return dict(decisions)

    def _first(self, name: str) -> Value:
        return next(d.values[0] for d in self.dimensions if d.name == name)

    def all(self) -> Iterator[dict[str, Value]]:
        """Every candidate, planc's own first; duplicates (after `canonical`) once."""
        seen: set[str] = set()
        names = [d.name for d in self.dimensions]
        for values in itertools.product(*(d.values for d in self.dimensions)):
            decisions = self.canonical(dict(zip(names, values, strict=True)))
            key = candidate_key(decisions)
            if key not in seen:
                seen.add(key)
                yield decisions

    def sample(self, rng: random.Random) -> dict[str, Value]:
        return self.canonical({d.name: rng.choice(d.values) for d in self.dimensions})

    def contains(self, decisions: dict[str, Value]) -> bool:
        """Is `decisions` a candidate of this space (a stored row of another space is not)?"""
        values = {d.name: d.values for d in self.dimensions}
        return (decisions.keys() == values.keys()
                and all(decisions[n] in values[n] for n in values)
                and self.canonical(decisions) == decisions)

    def baseline(self, decisions: dict[str, Value]) -> bool:
        """A candidate that takes none of the space's decisions: ARK's default planner, in a
        space that also explores planc's planner and its passes. It is scored for comparison,
        but its success is not the space's: a study whose planc candidates all fail has
        failed, even when ARK's default plan is scored."""
        planners = next((d.values for d in self.dimensions if d.name == "planner"), ())
        return (decisions.get("planner") == "ark-default" and "planc" in planners
                and any(d.is_pass_option for d in self.dimensions))


def candidate_key(decisions: dict[str, Value]) -> str:
    return ";".join(f"{k}={decisions[k]}" for k in sorted(decisions))


def check_target(target: str | None) -> None:
    """A UsageError unless planc tune explores `target`."""
    if target not in DEFAULT_SPACES:
        raise UsageError(f"planc tune explores --target {', '.join(DEFAULT_SPACES)}, not "
                         f"{target}{did_you_mean(str(target), DEFAULT_SPACES)}")


def dimension_names(target: str) -> list[str]:
    """What `--space` may name for `target`: its options (the flags `planc -t TARGET` takes)
    and, for ARK plans, `pass.option` for every option of planc's planning passes."""
    from backends import flags_of

    names = [f.dest for f in flags_of(target) if f.dest != "arch"]
    if target == "ark":
        from passes import pass_options

        names += [f"{p}.{option.replace('-', '_')}" for p in ARK_PASSES
                  for option, _, _ in pass_options(p) if option != "device"]
    return names


def space_for(target: str, spec: str | None = None, fixed: dict[str, Any] | None = None) -> Space:
    """The target's default space, with the dimensions of `spec` replacing or added; a name
    the target has no decision for is an error (it refused every candidate before)."""
    check_target(target)
    dims = {d.name: d for d in DEFAULT_SPACES[target]}
    for given, values in parse_space(spec).items():
        name = _known_dimension(target, given)
        if "." in name:
            _check_pass_values(name, values)
        dims[name] = Dimension(name, values)
    for name in fixed or {}:
        dims.pop(name, None)     # an option given on the command line is not explored
    return Space(target, tuple(dims.values()), dict(fixed or {}))


def _known_dimension(target: str, given: str) -> str:
    """`given` (`sched-partition.split-k`, `buffer-size`) as the space spells it, or a
    UsageError naming the nearest decision (by its whole name or its option alone)."""
    known = dimension_names(target)
    unit, dot, option = given.rpartition(".")
    name = f"{unit}{dot}{option.replace('-', '_')}"
    if name in known:
        return name
    by_option = {n.rpartition(".")[2]: n for n in known if "." in n}
    near = near_match(name, [*known, *by_option])
    hint = f": did you mean {by_option.get(near, near)}?" if near else ""
    raise UsageError(f"--space: --target {target} has no decision '{given}'{hint} (its "
                     f"decisions: {', '.join(known)})")


def _check_pass_values(name: str, values: tuple[Value, ...]) -> None:
    """A UsageError for a value pass option `name` (`sched-partition.granularity`) does not
    take: written into each candidate's pipeline, it refused every candidate with it."""
    from passes import check_pipeline

    pass_name, _, option = name.partition(".")
    for value in values:
        # As `tune_evaluate.options_of` writes it into the candidate's pipeline.
        text = str(value).lower() if isinstance(value, bool) else str(value)
        try:
            check_pipeline(f"{pass_name}{{{option.replace('_', '-')}={text}}}")
        except UsageError as e:
            raise UsageError(f"--space: {name}: {e.message}") from None


def parse_space(spec: str | None) -> dict[str, tuple[Value, ...]]:
    """`--space 'grid=2x2,4x4; sched-partition.split_k=true,false'`."""
    dims: dict[str, tuple[Value, ...]] = {}
    for part in filter(None, (p.strip() for p in (spec or "").split(";"))):
        name, sep, values = part.partition("=")
        if not sep or not name.strip() or not values.strip():
            raise UsageError(f"--space: expected 'name=value,value;...', got '{part}'")
        dims[name.strip()] = tuple(_value(v.strip()) for v in values.split(","))
    return dims


def _value(text: str) -> Value:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "default"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
