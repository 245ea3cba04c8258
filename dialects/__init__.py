"""planc's dialects, one module each. `get_all_dialects` is lazy, like xDSL's own."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Dialect


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    def get_ark() -> Dialect:
        from dialects.ark import Ark

        return Ark

    def get_plan() -> Dialect:
        from dialects.plan import Plan

        return Plan

    def get_tt() -> Dialect:
        from dialects.tt import TT

        return TT

    def get_metalium() -> Dialect:
        from dialects.metalium import Metalium

        return Metalium

    return {
        "ark": get_ark,
        "plan": get_plan,
        "tt": get_tt,
        "metalium": get_metalium,
    }
