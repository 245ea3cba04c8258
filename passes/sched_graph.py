"""Dependencies between operators and kernels of a schedule, shared by the `sched` passes.

An operator depends on the operators whose results it reads (SSA use-def, through views), and,
because tensors are windows of buffers, on earlier operators that read or wrote a buffer it
writes (an in-place write must wait for the readers of what it overwrites). Kernels depend on
the kernels of the operators their operators depend on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.ir import SSAValue

from dialects import ark


def shape4(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple([1] * (4 - len(shape)) + list(shape))


def data_producers(value: SSAValue) -> list[ark.ArkOp]:
    """The operators whose results `value` holds or waits for, looking through views."""
    owner = value.owner
    if isinstance(owner, ark.ViewOp):
        return [op for operand in owner.operands for op in data_producers(operand)]
    return [owner] if isinstance(owner, ark.ArkOp) else []


def is_fresh_write(value: SSAValue) -> bool:
    """Does an operator writing `value` write into a tensor nothing produced (a new buffer)?"""
    owner = value.owner
    return isinstance(owner, ark.ViewOp) and owner.source is None and not owner.after


def operator_dependencies(ops: Iterable[ark.ArkOp]) -> dict[ark.ArkOp, set[ark.ArkOp]]:
    """For each operator (in block order), the operators it must run after."""
    deps: dict[ark.ArkOp, set[ark.ArkOp]] = {}
    readers: dict[int, set[ark.ArkOp]] = {}
    writers: dict[int, set[ark.ArkOp]] = {}
    for op in ops:
        found = {p for value in op.operands for p in data_producers(value)}
        reads, writes = op.operand_groups()
        for value in writes:
            buffer = value.type.buffer_id
            found |= readers.pop(buffer, set()) | writers.get(buffer, set())
            writers[buffer] = {op}
        for value in reads:
            readers.setdefault(value.type.buffer_id, set()).add(op)
        found.discard(op)
        deps[op] = found
    return deps


def kernel_dependencies(kernel_of: dict[ark.ArkOp, int],
                        deps: dict[ark.ArkOp, set[ark.ArkOp]]) -> dict[int, set[int]]:
    """For each kernel, the other kernels it must run after."""
    out: dict[int, set[int]] = {k: set() for k in kernel_of.values()}
    for op, found in deps.items():
        kernel = kernel_of.get(op)
        if kernel is None:
            continue
        out[kernel].update(kernel_of[p] for p in found if p in kernel_of)
        out[kernel].discard(kernel)
    return out


def levels(deps: dict[int, set[int]], order: Sequence[int]) -> dict[int, int]:
    """Longest-path depth of each kernel (`order` lists kernels producers first)."""
    level: dict[int, int] = {}
    for kernel in order:
        level[kernel] = 1 + max((level[d] for d in deps[kernel]), default=-1)
    return level


def op_kind(op: ark.ArkOp) -> str:
    """The kind of kernel an operator starts (see `dialects.sched.KernelOp`)."""
    if isinstance(op, ark.MatmulOp):
        return "matmul"
    if is_row_reduction(op):
        return "rows"
    if isinstance(op, (ark.UnaryOp, ark.BinaryOp, ark.ScalarAssignOp)):
        return "elementwise"
    if isinstance(op, ark.TransposeOp):
        return "transpose"
    return "single"


def is_row_reduction(op: ark.ArkOp) -> bool:
    """A reduction along the last axis that keeps it: the anchor of a `rows` kernel."""
    return (isinstance(op, ark.ReduceOp) and op.keeps_dim
            and op.axis_index == len(op.inputs[0].shape_list) - 1)
