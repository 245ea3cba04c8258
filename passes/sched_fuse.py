"""`sched-fuse`: group operators into kernels that run tile by tile.

Operators are visited in model order. An operator joins the kernel of one of its producers when
every tile it computes needs only the same tile of that kernel's results, so each tile index
can run all of the kernel's operators one after another on the same warps:

* element-wise chains: an element-wise operator joins an element-wise kernel of the same output
  shape (`elementwise`);
* matmul epilogues: bias, activation, scale, cast, residual and gating operators on a matmul's
  output join the matmul's kernel (`epilogue`); a second matmul of the same output shape whose
  result such an operator combines with the first (the gate and up projections of an FFN) is
  merged into the same kernel;
* row patterns: a reduction along the last axis starts (or joins) a `rows` kernel whose tiles
  are blocks of whole rows; the element-wise work on those rows and on the reduced values
  joins it, which fuses softmax (max, subtract, exp, sum, divide) and RMSNorm/LayerNorm
  (square, mean, add, rsqrt, scale) into one kernel each (`rows`).

Joining is refused when the operator reads a kernel result through a view (another tile
layout), writes into an existing tensor (in place), or when it would make the kernel depend on
itself through another kernel. `max-ops` bounds a kernel's size.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from dialects import ark, sched
from dialects.utils import bare_op
from passes.sched_graph import (
    data_producers,
    is_fresh_write,
    op_kind,
    operand_table,
    operator_dependencies,
)
from passes.sched_tables import ScheduleTables
from targets.ark.byte_regions import ByteRegion

MERGED_KIND = {
    frozenset({"matmul"}): "matmul", frozenset({"matmul", "elementwise"}): "matmul",
    frozenset({"rows"}): "rows", frozenset({"rows", "elementwise"}): "rows",
    frozenset({"elementwise"}): "elementwise",
    frozenset({"transpose", "elementwise"}): "transpose",
}
"""The kind of a kernel made of two kernels (absent: they cannot be merged)."""

KIND_PREFERENCE = {"matmul": 0, "rows": 1, "elementwise": 2, "transpose": 3}


@dataclass
class Group:
    kind: str
    space: tuple[int, ...]
    """The tile space: the output shape (4 dims) its tiles cut; for rows, the full rows."""
    ops: list[int]
    """Its operators, by position (`Fuser.ops`)."""
    preds: set[int] = field(default_factory=set)
    succs: set[int] = field(default_factory=set)
    open: bool = True
    """Can other operators join?"""


class Fuser:
    """The kernels of a schedule's operators. Operators are known by their position in
    `ops` (block order), kernels by number; `group_of` is each placed operator's kernel."""

    def __init__(self, schedule: sched.ScheduleOp, pass_: SchedFusePass,
                 tables: ScheduleTables | None = None):
        self.options = pass_
        tables = tables or ScheduleTables(schedule)
        operators = tables.operators()
        # (Virtual operators keep whatever kernel they had; a schedule being planned has none:
        # `ark-to-sched` replaced them by views.)
        self.ops = (operators if tables.planning
                    else [op for op in operators if not op.is_virtual])
        if len(self.ops) == len(operators):
            self.operands = tables.operands()
            self.deps = tables.dependencies(operator_dependencies)
            self.position = tables.positions()
        else:
            self.position = {id(op): i for i, op in enumerate(self.ops)}
            self.operands = operand_table(self.ops, self.position)
            self.deps = operator_dependencies(self.ops, self.operands)
        self.groups: dict[int, Group] = {}
        self.group_of: list[int | None] = [None] * len(self.ops)
        self.next_id = 0
        self.touched: set[int] = set()
        """Buffers operators visited so far read or write."""
        self.allowed_kinds = {"matmul": pass_.epilogue, "rows": pass_.rows,
                              "elementwise": pass_.elementwise,
                              "transpose": pass_.elementwise}

    def kernel_of(self, op: Operation) -> int | None:
        """The kernel of an operator placed already (None for other ops: views)."""
        p = self.position.get(id(op))
        return None if p is None else self.group_of[p]

    # -- the kernel graph ------------------------------------------------------------------

    def reaches(self, start: int, goal: int) -> bool:
        """Is there a dependency path from kernel `start` to kernel `goal`?"""
        seen, stack = {start}, [start]
        while stack:
            for succ in self.groups[stack.pop()].succs:
                if succ == goal:
                    return True
                if succ not in seen:
                    seen.add(succ)
                    stack.append(succ)
        return False

    def new_group(self, op: int, kind: str, space: tuple[int, ...]) -> None:
        gid = self.next_id
        self.next_id += 1
        self.groups[gid] = Group(kind, space, [], open=kind != "single")
        self.add(op, gid)

    def add(self, op: int, gid: int) -> None:
        group = self.groups[gid]
        group.ops.append(op)
        group_of = self.group_of
        group_of[op] = gid
        for dep in self.deps[op]:
            other = group_of[dep]
            if other != gid:
                group.preds.add(other)
                self.groups[other].succs.add(gid)

    def merge(self, gid: int, into: int) -> None:
        """Move kernel `gid` into kernel `into` (they are independent)."""
        group, target = self.groups.pop(gid), self.groups[into]
        target.kind = MERGED_KIND[frozenset({group.kind, target.kind})]
        for op in group.ops:
            self.group_of[op] = into
        target.ops.extend(group.ops)
        for pred in group.preds:
            self.groups[pred].succs.discard(gid)
            self.groups[pred].succs.add(into)
        for succ in group.succs:
            self.groups[succ].preds.discard(gid)
            self.groups[succ].preds.add(into)
        target.preds |= group.preds
        target.succs |= group.succs

    # -- the rules -------------------------------------------------------------------------

    def fits(self, gid: int, out: tuple[int, ...]) -> bool:
        """Can an operator with output shape `out` compute its tiles in kernel `gid`?"""
        group = self.groups[gid]
        if not group.open or len(group.ops) >= self.options.max_ops:
            return False
        if group.kind == "rows":
            return out in (group.space, group.space[:-1] + (1,))
        return out == group.space

    def local(self, region: ByteRegion, gid: int, out: tuple[int, ...]) -> bool:
        """Does each tile of an output `out` in kernel `gid` read only the same tile of the
        value of `region` (a result of that kernel)?"""
        group = self.groups[gid]
        have = region.layout.shape4
        if group.kind == "rows":
            # Tiles are blocks of whole rows: any row-shaped or reduced value is local.
            return have in (group.space, group.space[:-1] + (1,))
        return have == out == group.space

    def mergeable(self, gid: int, into: int) -> bool:
        a, b = self.groups[gid], self.groups[into]
        kinds = frozenset({a.kind, b.kind})
        return (self.options.siblings and a.open and a.space == b.space
                and kinds in MERGED_KIND and all(self.allowed_kind(k) for k in kinds)
                and len(a.ops) + len(b.ops) < self.options.max_ops
                and not self.reaches(gid, into) and not self.reaches(into, gid))

    def try_join(self, op: int, gid: int, out: tuple[int, ...]) -> list[int] | None:
        """The kernels to merge into `gid` for operator `op` to join it, or None if it
        cannot."""
        merges: list[int] = []
        reads, _, read_regions, _, owners = self.operands[op]
        group_of = self.group_of
        for value, region, p in zip(reads, read_regions, owners, strict=False):
            direct = None if p is None else group_of[p]  # (only operators have kernels)
            if direct == gid:
                if not self.local(region, gid, out):
                    return None
                continue
            if direct is None and any(self.kernel_of(p) == gid
                                      for p in data_producers(value)):
                return None  # through a view: another tile layout
            if (direct is not None and direct not in merges
                    and self.local(region, direct, out) and self.fits(gid, out)
                    and self.mergeable(direct, gid)):
                merges.append(direct)
        for dep in self.deps[op]:
            other = group_of[dep]
            if other != gid and other not in merges and self.reaches(gid, other):
                return None
        return merges

    def join_any(self, op: int, candidates: list[int], out: tuple[int, ...]) -> bool:
        for gid in candidates:
            if not self.fits(gid, out):
                continue
            merges = self.try_join(op, gid, out)
            if merges is None:
                continue
            for other in merges:
                self.merge(other, gid)
            self.add(op, gid)
            return True
        return False

    def allowed(self, gid: int) -> bool:
        return self.allowed_kind(self.groups[gid].kind)

    def allowed_kind(self, kind: str) -> bool:
        """May element-wise operators join kernels of this kind?"""
        return self.allowed_kinds.get(kind, False)

    def candidates(self, owners: Sequence[int | None]) -> list[int]:
        """Kernels producing values an operator reads directly (`owners`: the positions of
        their operators, from `Operands`): matmul first, then the most recent."""
        found: list[int] = []
        group_of = self.group_of
        for p in owners:
            gid = None if p is None else group_of[p]
            if gid is not None and gid not in found and self.allowed(gid):
                found.append(gid)
        return sorted(found, key=lambda g: (KIND_PREFERENCE.get(self.groups[g].kind, 9), -g))

    def place(self, i: int) -> None:
        kind = op_kind(self.ops[i])
        reads, writes, read_regions, write_regions, owners = self.operands[i]
        out = write_regions[0].layout.shape4 if writes else ()
        # Writing into a buffer an earlier operator used is an in-place write: never fused.
        touched = self.touched
        fresh = True
        for value, region in zip(writes, write_regions, strict=True):
            if region.buffer in touched or not is_fresh_write(value):
                fresh = False
                break
        for region in read_regions:
            touched.add(region.buffer)
        for region in write_regions:
            touched.add(region.buffer)
        if kind == "elementwise" and fresh and reads:
            if self.join_any(i, self.candidates(owners[:len(reads)]), out):
                return
            self.new_group(i, "elementwise", out)
        elif kind == "rows":
            rows = read_regions[0].layout.shape4
            if fresh and self.options.rows and self.join_rows(i, owners[0], rows):
                return
            self.new_group(i, "rows", rows)
        else:
            self.new_group(i, kind, out)
            if not fresh:
                self.groups[self.group_of[i]].open = False

    def join_rows(self, op: int, owner: int | None, rows: tuple[int, ...]) -> bool:
        """A row reduction joins the rows kernel of its input (`owner`: the position of the
        operator whose result it is), or turns the element-wise kernel computing its input
        into one."""
        gid = None if owner is None else self.group_of[owner]
        if gid is None:
            return False
        group = self.groups[gid]
        if group.space != rows or group.kind not in ("rows", "elementwise"):
            return False
        kind = group.kind
        group.kind = "rows"
        if self.join_any(op, [gid], rows[:-1] + (1,)):
            return True
        group.kind = kind
        return False

    def run(self) -> list[Group]:
        """The kernels, in order of their first operator, each with its operators in block
        order."""
        for i in range(len(self.ops)):
            self.place(i)
        groups = list(self.groups.values())
        for group in groups:
            group.ops.sort()
        return sorted(groups, key=lambda g: g.ops[0])


def write_kernels(schedule: sched.ScheduleOp, groups: list[Group], fused: Sequence[ark.ArkOp],
                  tables: ScheduleTables | None = None) -> None:
    """Replace the schedule's kernels by `groups` (of operators of `fused`, by position),
    numbered in order of their first operator."""
    for kernel in list((tables or ScheduleTables(schedule)).kernels().values()):
        kernel.detach()
        kernel.erase()
    block = schedule.graph
    kernels: dict[int, sched.KernelOp] = {}
    operators: dict[int, list[ark.ArkOp]] = {}
    for kernel_id, group in enumerate(groups):
        ops = operators[kernel_id] = [fused[i] for i in group.ops]
        kernel = kernels[kernel_id] = kernel_op(kernel_id, group.kind)
        block.insert_op_before(kernel, ops[0])
        attr = kernel.id
        for op in ops:
            op.properties["task"] = attr  # (`op.task = attr`, without the descriptor)
    if tables is not None:
        tables.set_kernels(kernels, operators)


def kernel_op(kernel_id: int, kind: str) -> sched.KernelOp:
    """`sched.KernelOp(kernel_id, kind)`, built bare (`dialects.utils.bare_op`): fusion makes
    thousands."""
    return bare_op(sched.KernelOp, {"id": sched.int_attr(kernel_id), "kind": _kind_attr(kind)})


@functools.cache
def _kind_attr(kind: str) -> StringAttr:
    return StringAttr(kind)


@dataclass(frozen=True)
class SchedFusePass(ModulePass):
    name = "sched-fuse"

    elementwise: bool = True
    epilogue: bool = True
    rows: bool = True
    siblings: bool = True
    max_ops: int = 32

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for schedule in sched.schedules(op):
            self.run(schedule, ScheduleTables(schedule))

    def run(self, schedule: sched.ScheduleOp, tables: ScheduleTables) -> None:
        fuser = Fuser(schedule, self, tables)
        write_kernels(schedule, fuser.run(), fuser.ops, tables)
        if len(fuser.ops) != len(tables.operators()):
            tables.forget()  # virtual operators keep whatever kernel they had
