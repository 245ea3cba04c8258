"""The schedule's fast scans (`schedules`, `operators`, `kernels`, `kernel_operators`,
`phases`, `memory_regions`) return what plain `isinstance` filters over `walk()` return."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from compiler.pipeline import import_file, run_pipeline
from dialects import ark, sched
from tests.conftest import EXAMPLES

STAGES = ("ark-to-sched{device=a100}", "sched-fuse", "sched-tile", "sched-partition",
          "sched-allocate")


def plain_kernel_operators(schedule: sched.ScheduleOp) -> dict:
    kernels = {op.kernel_id: op for op in schedule.graph.ops if isinstance(op, sched.KernelOp)}
    grouped: dict = {k: [] for k in kernels}
    for op in schedule.graph.ops:
        if isinstance(op, ark.ArkOp) and op.task_id is not None:
            grouped.setdefault(op.task_id, []).append(op)
    return grouped


def test_scans_match_isinstance_filters_at_every_stage():
    modules = [import_file(str(EXAMPLES / name))[1] for name in ("ffn.json", "attention.json")]
    for stage in STAGES:
        combined = ModuleOp([])
        for module in modules:
            run_pipeline(module, stage)
        for module in modules:  # two schedules in one module, in this order
            for op in list(module.ops):
                op.detach()
                combined.body.block.add_op(op)
        found = sched.schedules(combined)
        assert found == [op for op in combined.walk() if isinstance(op, sched.ScheduleOp)]
        assert len(found) == 2
        for schedule in found:
            ops = list(schedule.graph.ops)
            assert schedule.operators() == [op for op in ops if isinstance(op, ark.ArkOp)]
            assert schedule.kernels() == {op.kernel_id: op for op in ops
                                          if isinstance(op, sched.KernelOp)}
            assert schedule.phases() == [op for op in ops if isinstance(op, sched.PhaseOp)]
            assert schedule.memory_regions() == [op for op in ops
                                                 if isinstance(op, sched.RegionOp)]
            got, want = schedule.kernel_operators(), plain_kernel_operators(schedule)
            assert list(got) == list(want) and got == want
        for module, schedule in zip(modules, found, strict=True):
            schedule.detach()
            module.body.block.add_op(schedule)
