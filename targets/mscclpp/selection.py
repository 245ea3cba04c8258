"""Choosing the fastest standard algorithm for a message size under the cost model."""

from __future__ import annotations

from argparse import Namespace
from dataclasses import dataclass, replace
from functools import lru_cache

from dialects import mscclpp as ms
from ground.diagnostics import PlancError, UsageError
from targets.mscclpp.cost import (
    Hardware,
    Timing,
    hardware_named,
    model_time,
    padded_message,
    padding_note,
    parse_size,
)
from targets.mscclpp.synthesis import MAX_SIZE, Spec, refuse_too_large, synthesize, variants

INSTANCES = (1, 2, 4, 8)


@dataclass
class Choice:
    spec: Spec
    algorithm: ms.AlgorithmOp
    timing: Timing


def candidates(spec: Spec, protocol: str | None = None,
               fixed_instances: int | None = None) -> list[Spec]:
    """Every generated variant of `spec`'s collective, rank count and placement."""
    found = []
    for name, proto in variants(spec.collective, spec.ranks):
        if protocol is not None and proto != protocol:
            continue
        for instances in ((fixed_instances,) if fixed_instances else INSTANCES):
            if spec.ranks * spec.ranks * instances <= MAX_SIZE:
                found.append(replace(spec, algorithm=name, protocol=proto, instances=instances))
    return found


@lru_cache(maxsize=256)
def _timing_plan(spec: Spec) -> ms.AlgorithmOp:
    """A variant built once for timing only (never handed out: an op has one parent)."""
    return synthesize(spec)


def modeled(spec: Spec, hardware: Hardware, size: int) -> Timing | None:
    """The modeled time of a generated variant for `size` bytes, padded to what its chunks
    take (None if it cannot run on this hardware)."""
    if spec.algorithm == "nvls" and hardware.switch_Bps == 0:
        return None
    return _modeled(spec, hardware, padded_message(_timing_plan(spec), size))


@lru_cache(maxsize=4096)
def _modeled(spec: Spec, hardware: Hardware, size: int) -> Timing | None:
    try:
        return model_time(_timing_plan(spec), hardware, size)
    except PlancError:
        return None


def note_padding(algorithm: ms.AlgorithmOp, size: int | None) -> ms.AlgorithmOp:
    """Record in the plan (top-level `planc_message`, which the executor ignores) how a
    `size`-byte message is padded to run on it, when it must be."""
    from dialects.json_value import dict_attr, dict_value

    note = padding_note(algorithm, size) if size else None
    if note is not None:
        algorithm.extra = dict_attr({**dict_value(algorithm.extra), "planc_message": note})
    return algorithm


def fastest(spec: Spec, protocol: str | None, message: str | int | None, hardware: str,
            fixed_instances: int | None = None) -> Choice:
    """The candidate with the least modeled time for `message` bytes (default 1 MiB)."""
    try:
        size = parse_size(message) if isinstance(message, str) else (message or 2**20)
    except ValueError as e:
        raise UsageError(f"--message-size: {e}") from None
    model = hardware_named(hardware)
    timed = [(modeled(c, model, size), c) for c in candidates(spec, protocol, fixed_instances)]
    timed = [(t, c) for t, c in timed if t is not None]
    if not timed:
        raise UsageError(f"no {spec.collective} algorithm for {spec.ranks} ranks accepts a "
                         f"{size}-byte message")
    timing, best = min(timed, key=lambda pair: pair[0].seconds)
    return Choice(best, note_padding(synthesize(best), size), timing)


def spec_from_options(options: Namespace) -> Spec:
    collective = options.collective
    ranks = getattr(options, "ranks", None)
    if ranks is None:
        raise UsageError("--collective needs --ranks N")
    def given(name: str, default):
        value = getattr(options, name, None)
        return default if value is None else value

    return Spec(collective, ranks, given("algorithm", "auto"), given("protocol", "Simple"),
                given("instances", 1), not getattr(options, "out_of_place", False),
                given("root", 0))


def synthesize_from_options(options: Namespace) -> ms.AlgorithmOp:
    spec = spec_from_options(options)
    if spec.instances < 1:      # before `auto`, which reads a 0 as "not given"
        raise UsageError(f"--instances must be at least 1, got {spec.instances}")
    if spec.ranks < 2:
        raise UsageError(f"--ranks must be at least 2, got {spec.ranks}")
    refuse_too_large(replace(spec, instances=getattr(options, "instances", None) or 1))
    if spec.algorithm == "auto":
        protocol = getattr(options, "protocol", None)
        return fastest(spec, protocol, getattr(options, "message_size", None),
                       getattr(options, "mscclpp_hw", None) or "h100",
                       fixed_instances=getattr(options, "instances", None)).algorithm
    algorithm = synthesize(spec)
    size_text = getattr(options, "message_size", None)
    if size_text:
        try:
            size = parse_size(size_text)
        except ValueError as e:
            raise UsageError(f"--message-size: {e}") from None
        note_padding(algorithm, size)
    return algorithm
