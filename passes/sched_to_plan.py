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
from xdsl.ir import Block, Region
from xdsl.passes import ModulePass

from devices.hardware import gpu_device
from dialects import ark, plan, sched
from dialects.utils import bare_op
from ground.diagnostics import PlancError
from passes.sched_tables import Launch, ScheduleTables, tables_for


def _attr(r: plan.Range) -> plan.RangeAttr:
    return plan.range_attr(r.begin, r.end, None if r.step == 1 else r.step)


def resource_groups(launches: Sequence[Launch | sched.LaunchOp]) -> list[plan.ResourceGroupOp]:
    """The resource groups of a phase's launches."""
    groups: list[plan.ResourceGroupOp] = []
    key = None
    members: list[plan.TaskGroupOp] = []
    for launch in launches:
        here = (launch.unit_range, launch.warp_range, launch.sram_range)
        task_group = task_group_op(launch.kernel_id, _attr(launch.tile_range), launch.gran)
        if here == key:
            members.append(task_group)
            continue
        if key is not None:
            groups.append(resource_group_op(*(_attr(r) for r in key), members))
        key, members = here, [task_group]
    if key is not None:
        groups.append(resource_group_op(*(_attr(r) for r in key), members))
    return groups


# The plan ops this pass makes by the thousand, built from the properties their constructors
# would give them (`dialects.utils.bare_op`: the constructors' generic argument handling
# and xDSL's generic builder cost more than the lowering; `tests/sched/test_plan_tables.py`
# checks both agree).


def task_op(kernel: sched.KernelOp) -> plan.TaskOp:
    """`plan.TaskOp(kernel.kernel_id, kernel.warps, kernel.sram)`."""
    return bare_op(plan.TaskOp, {
        "id": kernel.id, "num_warps": kernel.num_warps, "sram_bytes": kernel.sram_bytes})


def task_group_op(task: int, tasks: plan.RangeAttr, granularity: int) -> plan.TaskGroupOp:
    """`plan.TaskGroupOp(task, tasks, granularity)`."""
    return bare_op(plan.TaskGroupOp, {
        "task_id": sched.int_attr(task), "task_range": tasks,
        "granularity": sched.int_attr(granularity)})


def resource_group_op(processors: plan.RangeAttr, warps: plan.RangeAttr, sram: plan.RangeAttr,
                      task_groups: Sequence[plan.TaskGroupOp]) -> plan.ResourceGroupOp:
    """`plan.ResourceGroupOp(processors, warps, sram, task_groups)`."""
    return bare_op(
        plan.ResourceGroupOp,
        {"processor_range": processors, "warp_range": warps, "sram_range": sram},
        [Region(Block(task_groups))])


def processor_group_op(processors: plan.RangeAttr, resource_groups: Sequence[plan.ResourceGroupOp]
                       ) -> plan.ProcessorGroupOp:
    """`plan.ProcessorGroupOp(processors, resource_groups)`."""
    return bare_op(plan.ProcessorGroupOp, {"processor_range": processors},
                   [Region(Block(resource_groups))])


def lower(schedule: sched.ScheduleOp, tables: ScheduleTables | None = None) -> plan.PlanOp:
    """The plan of `schedule`, whose ops it takes (with `tables.planning`: its phases come
    from the tables, and every operator is known to be tiled)."""
    device = gpu_device(schedule.device_name)
    block = schedule.graph
    tables = tables or ScheduleTables(schedule)
    has_kernels = bool(tables.kernels())
    everything = plan.range_attr(0, device.processors)
    groups = []
    warps = 1
    if tables.planning:
        for phase in tables.phases():
            groups.append(processor_group_op(everything, resource_groups(phase)))
            warps = max([warps, *(launch.warp_range.end for launch in phase)])
        ops = list(tables.kernels().values())
    else:
        ops = list(block.ops)
    for op in ops:
        if isinstance(op, sched.KernelOp):
            if not op.tiled:
                raise PlancError(f"kernel {op.kernel_id} is not tiled; run sched-tile first")
            block.insert_op_before(task_op(op), op)
            op.detach()
            op.erase()
        elif isinstance(op, sched.PhaseOp):
            groups.append(processor_group_op(everything, resource_groups(op.launches())))
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
    if not tables.planning:
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
