"""What the `sched` passes of one `ark-plan` run know about a schedule, kept between passes.

Every `sched` pass needs the same views of a schedule: its operators in block order, their
dependencies, its kernels by id and each kernel's operators. Scanning the block (tens of
thousands of ops) and deciding dependencies (byte regions of every operand) in every pass cost
more than the passes' own work, so `ark-plan` hands one `ScheduleTables` from pass to pass.

A pass run on its own (`--pipeline`) starts from a fresh `ScheduleTables`, which computes each
view from the IR when first asked. A pass that changes what a view shows updates it (fusion
sets the kernels, partitioning renumbers them) or forgets it (`forget`, after split-K rewrote
operators), so a later pass never sees a stale table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dialects import ark, sched

Dependencies = dict[ark.ArkOp, set[ark.ArkOp]]


class ScheduleTables:
    """Lazily computed, shared views of one `sched.schedule` (see the module docstring)."""

    def __init__(self, schedule: sched.ScheduleOp):
        self.schedule = schedule
        self._operators: list[ark.ArkOp] | None = None
        self._dependencies: Dependencies | None = None
        self._kernels: dict[int, sched.KernelOp] | None = None
        self._kernel_operators: dict[int, list[ark.ArkOp]] | None = None
        self.launch_kernels: list[list[int]] | None = None
        """Per phase, the kernel of each launch (set by partitioning, None: read the IR)."""
        self.signatures: dict[tuple, tuple] = {}
        """`sched_tile.signature` by (kind, operators): a kernel's structure, asked by tiling
        and partitioning alike."""

    def operators(self) -> list[ark.ArkOp]:
        """The schedule's operators, in block order."""
        if self._operators is None:
            self._operators = self.schedule.operators()
        return self._operators

    def dependencies(self, compute: Callable[[Sequence[ark.ArkOp]], Dependencies]
                     ) -> Dependencies:
        """`compute(self.operators())` (the caller's `operator_dependencies`), computed once."""
        if self._dependencies is None:
            self._dependencies = compute(self.operators())
        return self._dependencies

    def kernels(self) -> dict[int, sched.KernelOp]:
        """`ScheduleOp.kernels()`."""
        if self._kernels is None:
            self._kernels = self.schedule.kernels()
        return self._kernels

    def kernel_operators(self) -> dict[int, list[ark.ArkOp]]:
        """`ScheduleOp.kernel_operators()`."""
        if self._kernel_operators is None:
            self._kernel_operators = self.schedule.kernel_operators()
        return self._kernel_operators

    def set_kernels(self, kernels: dict[int, sched.KernelOp],
                    operators: dict[int, list[ark.ArkOp]]) -> None:
        """Record the kernels a pass has just written (ids in block order of declaration)."""
        self._kernels, self._kernel_operators = kernels, operators

    def forget(self) -> None:
        """Drop every view: the pass changed operators or kernels in ways it does not track."""
        self.__init__(self.schedule)


def tables_for(schedule: sched.ScheduleOp,
               shared: dict[sched.ScheduleOp, ScheduleTables] | None) -> ScheduleTables:
    """The tables of `schedule` in `shared` (made there when missing), or fresh ones."""
    if shared is None:
        return ScheduleTables(schedule)
    found = shared.get(schedule)
    if found is None:
        found = shared[schedule] = ScheduleTables(schedule)
    return found
