"""`ark-plan`: planc's whole ARK planning pipeline as one pass.

    ark-compress, ark-to-sched{device}, sched-fuse, sched-tile, sched-partition,
    sched-allocate, sched-to-plan

`planc MODEL --target ark` runs this pass: the IR is verified once, after it, rather than after
each of the seven (verification costs about as much as a pass, and `--pipeline` with the
separate passes remains for inspecting every step). The passes share what they know of each
schedule (`passes.sched_tables`) instead of rescanning it, and ark-to-sched leaves the
one-operator kernels out (fusion replaces them at once).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from dialects import sched
from passes.ark_to_sched import schedules_and_operators
from passes.sched_allocate import SchedAllocatePass
from passes.sched_fuse import SchedFusePass
from passes.sched_partition import SchedPartitionPass
from passes.sched_tables import ScheduleTables, tables_for
from passes.sched_tile import SchedTilePass
from passes.sched_to_plan import SchedToPlanPass


@dataclass(frozen=True)
class ArkPlanPass(ModulePass):
    name = "ark-plan"

    device: str = "a100"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # ark-to-sched removes virtual operators itself; ark-compress would only renumber
        # model nodes, which plans do not have.
        made = schedules_and_operators(op, self.device, kernels=False)
        # The schedules just made from models are planned by the passes as one (see
        # `ScheduleTables.planning`); any others the module had, pass by pass.
        shared = {schedule: ScheduleTables(schedule, planning=True, operators=operators)
                  for schedule, operators in made}
        schedules = sched.schedules(op)  # the passes below keep them (and make no others)
        for step in (SchedFusePass(), SchedTilePass(), SchedPartitionPass(),
                     SchedAllocatePass()):
            for schedule in schedules:
                step.run(schedule, tables_for(schedule, shared))
        SchedToPlanPass().apply(ctx, op, shared)
