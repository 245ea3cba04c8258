"""planc's dialects, one module each. `get_all_dialects` is lazy, like xDSL's own."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Dialect


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    def get_ark() -> Dialect:
        from dialects.ark import Ark

        return Ark

    def get_mscclpp() -> Dialect:
        from dialects.mscclpp import Mscclpp

        return Mscclpp

    return {
        "ark": get_ark,
        "mscclpp": get_mscclpp,
    }
