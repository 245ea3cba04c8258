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
from typing import NamedTuple

from dialects import ark, sched
from dialects.plan import Range
from passes.sched_graph import Operands, operand_table

Dependencies = list[set[int]]
"""For each operator (by position in block order), the positions of those it must follow."""


class Signatures:
    """Kernel signatures as numbers, remembered per kernel (`sched_tile.cached_signature`):
    equal numbers for equal signatures, within one schedule's tables."""

    def __init__(self) -> None:
        self.by_kernel: dict[tuple, tuple[Sequence, list, int]] = {}
        """(kind, *`id`s of operators) -> (the operators, their operands, the signature's
        number)."""
        self.numbers: dict[tuple, int] = {}


class Launch(NamedTuple):
    """A `sched.launch` as plain data (the same names as `LaunchOp`'s accessors)."""

    kernel_id: int
    tile_range: Range
    unit_range: Range
    warp_range: Range
    sram_range: Range
    gran: int = 1

    @staticmethod
    def of(op: sched.LaunchOp) -> Launch:
        return Launch(op.kernel_id, op.tile_range, op.unit_range, op.warp_range,
                      op.sram_range, op.gran)

    def op(self) -> sched.LaunchOp:
        return sched.LaunchOp(self.kernel_id, self.tile_range, self.unit_range,
                              self.warp_range, self.sram_range, self.gran)


class ScheduleTables:
    """Lazily computed, shared views of one `sched.schedule` (see the module docstring).

    With `planning` (the passes run as one, `ark-plan`): the schedule was made from a model in
    this run (it has no kernels, phases or memory regions yet, and `ark-to-sched` replaced its
    virtual operators by views), and what only the following passes of the run read (phases,
    memory regions) is kept here as plain data rather than built as ops.
    """

    def __init__(self, schedule: sched.ScheduleOp, planning: bool = False,
                 operators: list[ark.ArkOp] | None = None):
        """(`operators`: the schedule's operators in block order, when known.)"""
        self.schedule = schedule
        self.planning = planning
        self._operators: list[ark.ArkOp] | None = operators
        self._positions: dict[int, int] | None = None
        self._operands: list[Operands] | None = None
        self._dependencies: Dependencies | None = None
        self._kernels: dict[int, sched.KernelOp] | None = {} if planning else None
        self._kernel_operators: dict[int, list[ark.ArkOp]] | None = {} if planning else None
        self._phases: list[list[Launch]] | None = [] if planning else None
        self.signatures = Signatures()
        """Kernels' `sched_tile.signature`s, asked by tiling and partitioning alike."""

    def operators(self) -> list[ark.ArkOp]:
        """The schedule's operators, in block order."""
        if self._operators is None:
            self._operators = self.schedule.operators()
        return self._operators

    def positions(self) -> dict[int, int]:
        """The position of each operator in `operators()`, by `id` of the operator."""
        if self._positions is None:
            self._positions = {id(op): i for i, op in enumerate(self.operators())}
        return self._positions

    def operands(self) -> list[Operands]:
        """The `Operands` of each operator (by position): `sched_graph.operand_table`."""
        if self._operands is None:
            self._operands = operand_table(self.operators(), self.positions())
        return self._operands

    def dependencies(self, compute: Callable[[Sequence[ark.ArkOp], Sequence[Operands]],
                                             Dependencies]) -> Dependencies:
        """`compute(self.operators(), self.operands())` (the caller's
        `operator_dependencies`), computed once."""
        if self._dependencies is None:
            self._dependencies = compute(self.operators(), self.operands())
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

    def phases(self) -> list[list[Launch]]:
        """The launches of each phase (`ScheduleOp.phases()`, as plain data)."""
        if self._phases is None:
            self._phases = [[Launch.of(op) for op in phase.launches()]
                            for phase in self.schedule.phases()]
        return self._phases

    def set_phases(self, phases: list[list[Launch]]) -> None:
        self._phases = phases

    def set_kernels(self, kernels: dict[int, sched.KernelOp],
                    operators: dict[int, list[ark.ArkOp]]) -> None:
        """Record the kernels a pass has just written (ids in block order of declaration)."""
        self._kernels, self._kernel_operators = kernels, operators

    def reordered(self) -> None:
        """The operators moved in the block: their order (and the dependencies, listed in it)
        is to be read again."""
        self._operators = self._positions = self._operands = self._dependencies = None

    def retyped(self) -> None:
        """Operands were given other types (memory planning moved their tensors): their
        regions are to be read again."""
        self._operands = None

    def forget(self) -> None:
        """Drop the views of operators and kernels: the pass changed them in ways it does not
        track."""
        self._operators = self._positions = self._operands = self._dependencies = None
        self._kernels = self._kernel_operators = None
        # (signatures stay: they are checked against the operators' operands, and estimates
        # made meanwhile are keyed by their numbers)


def tables_for(schedule: sched.ScheduleOp,
               shared: dict[sched.ScheduleOp, ScheduleTables] | None) -> ScheduleTables:
    """The tables of `schedule` in `shared` (made there when missing), or fresh ones."""
    if shared is None:
        return ScheduleTables(schedule)
    found = shared.get(schedule)
    if found is None:
        found = shared[schedule] = ScheduleTables(schedule)
    return found
