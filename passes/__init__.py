"""planc's passes, one module each. `get_all_passes` is lazy, like xDSL's own."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    def get_ark_compress() -> type[ModulePass]:
        from passes.ark_compress import ArkCompressPass

        return ArkCompressPass

    def get_tt_tile() -> type[ModulePass]:
        from passes.tt_tile import TtTilePass

        return TtTilePass

    def get_tt_partition() -> type[ModulePass]:
        from passes.tt_partition import TtPartitionPass

        return TtPartitionPass

    def get_tt_place() -> type[ModulePass]:
        from passes.tt_place import TtPlacePass

        return TtPlacePass

    def get_tt_to_metalium() -> type[ModulePass]:
        from passes.tt_to_metalium import TtToMetaliumPass

        return TtToMetaliumPass

    return {
        "ark-compress": get_ark_compress,
        "tt-tile": get_tt_tile,
        "tt-partition": get_tt_partition,
        "tt-place": get_tt_place,
        "tt-to-metalium": get_tt_to_metalium,
    }
