"""`sched-to-plan`: lower a partitioned schedule to an ARK plan (`plan.plan`).

* Each kernel becomes a TaskInfo with the same id (kernels are numbered in execution order,
  so ids are positions, as ARK's code generator needs), its operators keeping their configs.
* Each phase becomes a processor group over all processors of the device, so that ARK's
  barrier rule puts a barrier over every processor between two phases. Consecutive launches
  on the same processors, warps and shared memory form one resource group (their task groups
  run in order, each starting where the last stopped); launches on other ranges get resource
  groups of their own and run concurrently.
* The header: the device's processor count and Architecture, and as many warps per processor
  as the widest resource group uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from compiler.diagnostics import PlancError
from compiler.hardware import gpu_device
from dialects import ark, plan, sched
from passes.sched_tables import Launch, ScheduleTables, tables_for


def _attr(r: plan.Range) -> plan.RangeAttr:
    return plan.range_attr(r.begin, r.end, None if r.step == 1 else r.step)


def resource_groups(launches: Sequence[Launch | sched.LaunchOp]) -> list[plan.ResourceGroupOp]:
    """The resource groups of a phase's launches."""
    groups: list[plan.ResourceGroupOp] = []
    key = None
    for launch in launches:
        here = (launch.unit_range, launch.warp_range, launch.sram_range)
        task_group = plan.TaskGroupOp(launch.kernel_id, _attr(launch.tile_range), launch.gran)
        if here == key:
            groups[-1].body.block.add_op(task_group)
            continue
        key = here
        groups.append(plan.ResourceGroupOp(_attr(here[0]), _attr(here[1]), _attr(here[2]),
                                           [task_group]))
    return groups


def lower(schedule: sched.ScheduleOp, tables: ScheduleTables | None = None) -> plan.PlanOp:
    """The plan of `schedule`, whose ops it takes (with `tables.planning`: its phases come
    from the tables)."""
    device = gpu_device(schedule.device_name)
    block = schedule.graph
    tables = tables or ScheduleTables(schedule)
    has_kernels = bool(tables.kernels())
    everything = plan.range_attr(0, device.processors)
    groups = []
    if tables.planning:
        groups = [plan.ProcessorGroupOp(everything, resource_groups(phase))
                  for phase in tables.phases()]
    for op in list(block.ops):
        if isinstance(op, sched.KernelOp):
            if not op.tiled:
                raise PlancError(f"kernel {op.kernel_id} is not tiled; run sched-tile first")
            block.insert_op_before(plan.TaskOp(op.kernel_id, op.warps, op.sram), op)
            op.detach()
            op.erase()
        elif isinstance(op, sched.PhaseOp):
            groups.append(plan.ProcessorGroupOp(everything, resource_groups(op.launches())))
            op.detach()
            op.erase()
        elif isinstance(op, sched.RegionOp):
            op.detach()
            op.erase()
        elif isinstance(op, ark.ArkOp) and op.config is None and not op.is_virtual:
            raise PlancError(f"{op.ark_type} '{op.label.data}' has no tiling; run sched-tile "
                             "first")
    if not groups and has_kernels:
        raise PlancError("the schedule has no phases; run sched-partition first")
    block.add_ops(groups)
    warps = max([1, *(rg.warps.end for g in groups for rg in g.resource_groups())])
    body = schedule.detach_region(schedule.body)
    return plan.PlanOp(schedule.rank.value.data, schedule.world_size.value.data,
                       device.processors, warps, body, architecture=device.architecture)


@dataclass(frozen=True)
class SchedToPlanPass(ModulePass):
    name = "sched-to-plan"

    def apply(self, ctx: Context, op: ModuleOp,
              shared: dict[sched.ScheduleOp, ScheduleTables] | None = None) -> None:
        """Lower every schedule of `op` (with `shared`: the tables `ark-plan` kept of them)."""
        for schedule in [s for s in op.ops if isinstance(s, sched.ScheduleOp)]:
            result = lower(schedule, tables_for(schedule, shared))
            result.location = schedule.location
            op.body.block.insert_op_before(result, schedule)
            schedule.detach()
            schedule.erase()
