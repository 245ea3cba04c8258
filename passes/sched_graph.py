"""Dependencies between operators and kernels of a schedule, shared by the `sched` passes.

An operator depends on the operators whose results it reads (SSA use-def, through views), and,
because tensors are windows of buffers, on every earlier operator whose access to a buffer
conflicts with its own: a read after a write of overlapping bytes (a concat written by slices,
then read whole; a KV-cache row written, then the whole cache read; a tensor updated in place,
then read through an earlier reshape), a write after a read and a write after a write. Overlap
is decided on byte regions (`targets.ark.byte_regions`), never element by element. Kernels depend on
the kernels of the operators their operators depend on.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from xdsl.ir import SSAValue

from dialects import ark
from targets.ark.byte_regions import ByteRegion, covers, overlaps
from targets.ark.tensor_layouts import layout_of


def shape4(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple([1] * (4 - len(shape)) + list(shape))


def tensor_shape4(tensor: ark.TensorType) -> tuple[int, ...]:
    """`shape4` of the tensor's shape (kept with the tensor's `Layout`)."""
    return (tensor.__dict__.get("_planc_pass_layout") or layout_of(tensor)).shape4


def data_producers(value: SSAValue) -> list[ark.ArkOp]:
    """The operators whose results `value` holds or waits for, looking through views."""
    owner = value.owner
    kind = type(owner)
    if is_a(kind, ark.ViewOp):
        return [op for operand in owner._operands  # noqa: SLF001
                for op in data_producers(operand)]
    return [owner] if is_a(kind, ark.ArkOp) else []


@functools.cache
def is_a(cls: type, kind: type) -> bool:
    """`issubclass`, remembered: `isinstance` on xDSL's abstract op classes goes through
    `ABCMeta` on every call."""
    return issubclass(cls, kind)


def is_fresh_write(value: SSAValue) -> bool:
    """Does an operator writing `value` write into a tensor nothing produced (a new buffer)?"""
    owner = value.owner
    # A view without a source and without values to wait for: one without operands.
    return is_a(type(owner), ark.ViewOp) and not owner._operands  # noqa: SLF001


Operands = tuple[tuple[SSAValue, ...], tuple[SSAValue, ...],
                 tuple[ByteRegion, ...], tuple[ByteRegion, ...], tuple[int | None, ...]]
"""An operator's read values, write values, their byte regions (`ByteRegion.of`, which also
give the values' `Layout`s), and for each operand (reads, then writes) the position of the
operator whose result it is (None: a view, or an op not listed)."""


def operand_table(ops: Sequence[ark.ArkOp],
                  position: dict[int, int] | None = None) -> list[Operands]:
    """The `Operands` of each operator of `ops`: what the passes ask of every operand, read
    from the IR once (`position`: the position of each operator of `ops` by `id`, when
    known)."""
    if position is None:
        position = {id(op): i for i, op in enumerate(ops)}
    at = position.get
    region_of = ByteRegion.of
    table: list[Operands] = []
    append = table.append
    for op in ops:
        reads, writes = op.operand_groups()
        append((reads, writes, tuple([region_of(v.type) for v in reads]),
                tuple([region_of(v.type) for v in writes]),
                tuple([at(id(v.owner)) for v in op._operands])))  # noqa: SLF001
    return table


def operator_dependencies(ops: Sequence[ark.ArkOp],
                          operands: Sequence[Operands] | None = None) -> list[set[int]]:
    """For each operator of `ops` (in block order), the positions in `ops` of the operators it
    must run after (`operands`: the `operand_table` of `ops`, when known). (Positions rather
    than ops: the passes keep their tables by position, and sets of ints cost less than sets
    of ops, whose hash is a Python call.)"""
    position: dict[int, int] = {}  # by `id` of operator, made when first needed
    if operands is None:
        position = {id(op): i for i, op in enumerate(ops)}
        operands = operand_table(ops, position)
    deps: list[set[int]] = []
    accesses: dict[int, BufferAccesses] = {}
    for i, op in enumerate(ops):
        found: set[int] = set()
        _, _, read_regions, write_regions, owners = operands[i]
        for value, p in zip(op._operands, owners, strict=True):  # noqa: SLF001
            if p is not None:  # (a result of an operator of `ops`)
                found.add(p)
                continue
            for producer in data_producers(value):  # (through views)
                if not position:
                    position = {id(op): i for i, op in enumerate(ops)}
                p = position.get(id(producer))
                if p is not None:
                    found.add(p)
        for region in read_regions:
            table = accesses.get(region.buffer)
            if table is not None:
                table.collect(region, False, found)
        for region in write_regions:
            table = accesses.get(region.buffer)
            if table is not None:
                table.collect(region, True, found)
        for region in write_regions:
            table = accesses.get(region.buffer)
            if table is not None:  # (else nothing accessed the buffer yet: nothing to forget)
                table.overwrite(region)
        for region in read_regions:
            _accesses(accesses, region.buffer).add(region, i, False)
        for region in write_regions:
            _accesses(accesses, region.buffer).add(region, i, True)
        found.discard(i)
        deps.append(found)
    return deps


def _accesses(table: dict[int, BufferAccesses], buffer: int) -> BufferAccesses:
    found = table.get(buffer)
    if found is None:
        found = table[buffer] = BufferAccesses()
    return found


class BufferAccesses:
    """The earlier reads and writes of one buffer that later accesses may conflict with.

    Accesses are grouped by region (many readers of one weight are one entry). An access whose
    region a later write fully covers is dropped: whatever conflicts with it conflicts with
    that write, which is ordered after it, so the ordering holds transitively. This keeps the
    list to the regions still exposed.
    """

    def __init__(self) -> None:
        self.reads: dict[int, tuple[ByteRegion, set[int]]] = {}
        self.writes: dict[int, tuple[ByteRegion, set[int]]] = {}
        """By `id` of region: the region and the operators (by position) that read or wrote
        it. (Regions are shared per layout of a buffer, so grouping by identity groups as by
        value, without calling their hash; regions equal but distinct would only be two
        entries that conflict and are covered alike. The entries keep their regions, so no
        other object has their `id`s.)"""

    def conflicts(self, region: ByteRegion, write: bool) -> set[int]:
        """Earlier operators an access of `region` must follow."""
        found: set[int] = set()
        self.collect(region, write, found)
        return found

    def collect(self, region: ByteRegion, write: bool, found: set[int]) -> None:
        """Add `conflicts(region, write)` to `found`."""
        for table in (self.writes, self.reads) if write else (self.writes,):
            for other, ops in table.values():
                if overlaps(other, region):
                    found |= ops

    def overwrite(self, region: ByteRegion) -> None:
        """Forget the accesses a write of `region` covers."""
        for table in (self.reads, self.writes):
            for key in [key for key, (other, _) in table.items() if covers(region, other)]:
                del table[key]

    def add(self, region: ByteRegion, op: int, write: bool) -> None:
        table = self.writes if write else self.reads
        entry = table.get(id(region))
        if entry is None:
            table[id(region)] = (region, {op})
        else:
            entry[1].add(op)


NO_ACCESSES = BufferAccesses()


def kernel_dependencies(kernel_of: Sequence[int | None],
                        deps: Sequence[set[int]]) -> dict[int, set[int]]:
    """For each kernel, the other kernels it must run after (`kernel_of`: the kernel of each
    operator of `deps`, by position; None for those of no kernel)."""
    out: dict[int, set[int]] = {k: set() for k in kernel_of if k is not None}
    for kernel, found in zip(kernel_of, deps, strict=True):
        if kernel is None:
            continue
        into = out[kernel]
        for p in found:
            into.add(kernel_of[p])
        into.discard(None)
        into.discard(kernel)
    return out


def levels(deps: dict[int, set[int]], order: Sequence[int]) -> dict[int, int]:
    """Longest-path depth of each kernel (`order` lists kernels producers first)."""
    level: dict[int, int] = {}
    for kernel in order:
        level[kernel] = 1 + max((level[d] for d in deps[kernel]), default=-1)
    return level


def op_kind(op: ark.ArkOp) -> str:
    """The kind of kernel an operator starts (see `dialects.sched.KernelOp`)."""
    kind = _class_kind(type(op))
    if kind is None:  # (a reduction that is no matmul: it depends on the reduction)
        return "rows" if is_row_reduction(op) else _class_kind(type(op), rows=False)
    return kind


@functools.cache
def _class_kind(cls: type, rows: bool = True) -> str | None:
    """`op_kind` of the operators of class `cls`, or None when it depends on the operator
    (a reduction, which may be a row reduction; `rows=False`: the kind when it is not)."""
    if is_a(cls, ark.MatmulOp):
        return "matmul"
    if rows and is_a(cls, ark.ReduceOp):
        return None
    if is_a(cls, ELEMENTWISE):
        return "elementwise"
    if is_a(cls, ark.TransposeOp):
        return "transpose"
    return "single"


ELEMENTWISE = (ark.UnaryOp, ark.BinaryOp, ark.ScalarAssignOp)
"""The operator classes of element-wise kernels."""


def is_row_reduction(op: ark.ArkOp) -> bool:
    """A reduction along the last axis that keeps it: the anchor of a `rows` kernel."""
    return (is_a(type(op), ark.ReduceOp) and op.keeps_dim
            and op.axis_index == len(op.inputs[0].shape_list) - 1)
