"""planc's passes, one module each. `get_all_passes` is lazy, like xDSL's own."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    def get_ark_compress() -> type[ModulePass]:
        from passes.ark_compress import ArkCompressPass

        return ArkCompressPass

    def get_ark_default_plan() -> type[ModulePass]:
        from passes.ark_default_plan import ArkDefaultPlanPass

        return ArkDefaultPlanPass

    def get_ark_plan() -> type[ModulePass]:
        from passes.ark_plan import ArkPlanPass

        return ArkPlanPass

    def get_ark_to_sched() -> type[ModulePass]:
        from passes.ark_to_sched import ArkToSchedPass

        return ArkToSchedPass

    def get_sched_fuse() -> type[ModulePass]:
        from passes.sched_fuse import SchedFusePass

        return SchedFusePass

    def get_sched_tile() -> type[ModulePass]:
        from passes.sched_tile import SchedTilePass

        return SchedTilePass

    def get_sched_partition() -> type[ModulePass]:
        from passes.sched_partition import SchedPartitionPass

        return SchedPartitionPass

    def get_sched_allocate() -> type[ModulePass]:
        from passes.sched_allocate import SchedAllocatePass

        return SchedAllocatePass

    def get_sched_to_plan() -> type[ModulePass]:
        from passes.sched_to_plan import SchedToPlanPass

        return SchedToPlanPass

    return {
        "ark-compress": get_ark_compress,
        "ark-default-plan": get_ark_default_plan,
        "ark-plan": get_ark_plan,
        "ark-to-sched": get_ark_to_sched,
        "sched-fuse": get_sched_fuse,
        "sched-tile": get_sched_tile,
        "sched-partition": get_sched_partition,
        "sched-allocate": get_sched_allocate,
        "sched-to-plan": get_sched_to_plan,
    }
