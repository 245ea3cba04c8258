"""planc's passes, one module each. `get_all_passes` is lazy, like xDSL's own."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    def get_ark_compress() -> type[ModulePass]:
        from passes.ark_compress import ArkCompressPass

        return ArkCompressPass

    def get_lower_ark_comm_to_mscclpp() -> type[ModulePass]:
        from passes.lower_ark_comm_to_mscclpp import LowerArkCommToMscclppPass

        return LowerArkCommToMscclppPass

    return {
        "ark-compress": get_ark_compress,
        "lower-ark-comm-to-mscclpp": get_lower_ark_comm_to_mscclpp,
    }
