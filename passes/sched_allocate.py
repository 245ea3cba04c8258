"""`sched-allocate`: liveness-based memory reuse, and the device memory plan.

Every logical buffer lives from the first operator that writes it to the last that reads or
writes it, in the order the phases run. Buffers whose lifetimes do not overlap share one
physical buffer (a region of the device arena), as ARK's hand-tuned plans do: their tensors are
moved onto the region's buffer, whose size is the largest of them.

Two lifetimes do not overlap when the first ends in an earlier phase than the second starts
(phases are separated by barriers on every unit), or, inside one kernel, when the first's last
access comes no later than the second's first write and every tile touches the same bytes of
both (same shape, strides, offsets and element size, accessed tile-aligned): then each tile
finishes with the old tensor before it writes the new one in the same place. An element-wise
operator may so write its result over an input it reads for the last time (`in-place`).

Buffers holding model inputs and weights (read before anything writes them, so a repeated run
still finds them), model outputs, and buffers of other ranks or with communication tags keep
their own memory. `reuse=false` keeps every buffer apart (ARK's default layout).

The memory plan is recorded as `sched.region` ops in the device arena's order (ascending buffer
id, back to back, as ARK's executor lays buffers out); their total is the device memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from dialects import ark, sched
from dialects.utils import op_list
from passes.sched_graph import ELEMENTWISE, is_a, tensor_shape4
from passes.sched_tables import ScheduleTables

Position = tuple[int, int, int]
"""(phase, kernel's place in the execution order, operator's place in its kernel)."""


@dataclass
class Life:
    buffer: int
    size: int
    first: Position | None = None
    first_is_write: bool = False
    last: Position | None = None
    kernels_in_phase: dict[int, set[int]] = field(default_factory=dict)
    aligned_in_phase: dict[int, bool] = field(default_factory=dict)
    layouts_in_phase: dict[int, set[tuple]] = field(default_factory=dict)
    """Per phase: every access is to the same tile as the accessing operator's output tile."""
    last_op: ark.ArkOp | None = None
    pinned: bool = False

    def touch(self, at: Position, write: bool, op: ark.ArkOp, tensor: ark.TensorType,
              aligned: bool) -> None:
        first = self.first
        if first is None or at < first:
            self.first, self.first_is_write = at, write
        elif at == first:
            self.first_is_write = self.first_is_write and write
        if self.last is None or at >= self.last:
            self.last, self.last_op = at, op
        phase = at[0]
        kernels = self.kernels_in_phase.get(phase)
        if kernels is None:
            kernels = self.kernels_in_phase[phase] = set()
            self.layouts_in_phase[phase] = set()
        kernels.add(at[1])
        if not aligned:
            self.aligned_in_phase[phase] = False
        elif phase not in self.aligned_in_phase:
            self.aligned_in_phase[phase] = True
        self.layouts_in_phase[phase].add(_layout(tensor))


def _layout(tensor: ark.TensorType) -> tuple:
    """Shape, strides, offsets and element size, made once per (immutable) tensor type."""
    layout = tensor.__dict__.get("_planc_alloc_layout")
    if layout is None:
        layout = tensor.__dict__["_planc_alloc_layout"] = (
            tensor.shape_tuple, tensor.strides_tuple, tensor.offsets_tuple,
            tensor.element_bytes)
    return layout


def _alignment(op: ark.ArkOp, kind: str, writes: Sequence[SSAValue]
               ) -> bool | Callable[[SSAValue], bool]:
    """Does the tile of `op` (in a kernel of `kind`, its write tensors `writes`) touch exactly
    the tile-shaped part of an operand (no broadcast)? The answer, when it does not depend on
    the operand, else a function of the operand."""
    cls = type(op)
    if kind == "rows":
        return not is_a(cls, ark.MatmulOp)
    if is_a(cls, ELEMENTWISE):
        out = tensor_shape4(writes[0].type) if writes else ()
        return lambda value: tensor_shape4(value.type) == out
    if is_a(cls, ark.MatmulOp):
        return writes.__contains__
    return False




class Lifetimes:
    """The lifetime of every buffer of a schedule, in execution order."""

    def __init__(self, schedule: sched.ScheduleOp, tables: ScheduleTables | None = None):
        self.schedule = schedule
        tables = tables or ScheduleTables(schedule)
        kernels = tables.kernels()
        operators = tables.kernel_operators()
        rank = schedule.rank.value.data
        self.values = _tensor_values(schedule)
        """The schedule's tensor values, in block order."""
        lives: dict[int, Life] = {}
        self.lives = lives
        remote: dict[int, bool] = {}  # by buffer attribute (shared by a buffer's tensors)
        for value in self.values:
            tensor = value.type
            buffer = tensor.buffer
            buffer_id = buffer.id.data
            life = lives.get(buffer_id)
            if life is None:
                life = lives[buffer_id] = Life(buffer_id, 0)
            size = math.prod(ark.int_values(tensor.strides)) * tensor.element_bytes  # span
            if size > life.size:
                life.size = size
            if life.pinned:
                continue
            far = remote.get(id(buffer))
            if far is None:
                far = remote[id(buffer)] = _remote_or_tagged(buffer, rank)
            # (a model output: an operator's result nothing uses)
            if far or (is_a(type(value.owner), ark.ArkOp) and value.first_use is None):
                life.pinned = True
        order = 0
        for p, phase in enumerate(tables.phases()):
            for launch in phase:
                kernel = kernels[launch.kernel_id]
                kind = kernel.kind_name
                for i, op in enumerate(operators[kernel.kernel_id]):
                    at = (p, order, i)
                    reads, writes = op.operand_groups()
                    aligned = _alignment(op, kind, writes)
                    for value in reads:
                        tensor = value.type
                        life = lives[tensor.buffer.id.data]
                        if life.pinned:
                            continue  # (nothing more about it matters)
                        if life.first is None:
                            # Read before written (accesses come in execution order): an input.
                            life.pinned = True
                            continue
                        life.touch(at, False, op, tensor,
                                   aligned if type(aligned) is bool else aligned(value))
                    for value in writes:
                        tensor = value.type
                        life = lives[tensor.buffer.id.data]
                        if not life.pinned:
                            life.touch(at, True, op, tensor,
                                       aligned if type(aligned) is bool else aligned(value))
                order += 1
        for life in self.lives.values():
            if life.first is None or not life.first_is_write:
                life.pinned = True  # never written, or read before written: an input


def _tensor_values(schedule: sched.ScheduleOp) -> list[SSAValue]:
    return [r for op in op_list(schedule.graph) for r in op.results
            if type(r.type) is ark.TensorType]


def _remote_or_tagged(buffer: ark.BufferAttr, rank: int) -> bool:
    """Does the buffer belong to another rank, or connect to other ranks' buffers?"""
    return (buffer.rank.data not in (-1, rank) or bool(ark.int_values(buffer.send_tags))
            or bool(ark.int_values(buffer.recv_tags)))


def disjoint(a: Life, b: Life, in_place: bool) -> bool:
    """May `b` (starting later) use `a`'s memory? See the module docstring."""
    if a.last[0] < b.first[0]:
        return True
    phase = a.last[0]
    if phase != b.first[0] or not (a.aligned_in_phase[phase] and b.aligned_in_phase[phase]):
        return False
    kernels = a.kernels_in_phase[phase] | b.kernels_in_phase[phase]
    layouts = a.layouts_in_phase[phase]
    if len(kernels) != 1 or len(layouts) != 1 or layouts != b.layouts_in_phase[phase]:
        return False
    if a.last[2] < b.first[2]:
        return True
    return (in_place and a.last[2] == b.first[2] and writes_in_place_safely(a.last_op))


def writes_in_place_safely(op: ark.ArkOp) -> bool:
    """Can `op` write its result over an input of the same layout? Element-wise operators can:
    each output element needs only the input element at its own place. Rotary embedding
    cannot: an element needs its pair partner, which another thread may already have
    overwritten."""
    return isinstance(op, (ark.UnaryOp, ark.BinaryOp)) and not isinstance(op, ark.RopeOp)


@dataclass
class Region:
    lives: list[Life]
    size: int

    @property
    def buffer(self) -> int:
        return self.lives[0].buffer


def assign_regions(lifetimes: Lifetimes, reuse: bool, in_place: bool) -> list[Region]:
    """Greedy interval colouring: each buffer, in order of its first write, takes the
    best-fitting region whose last occupant it may follow (growing the largest one when none
    is big enough), or a region of its own."""
    regions: list[Region] = []
    movable = sorted((life for life in lifetimes.lives.values() if not life.pinned),
                     key=lambda life: (life.first, life.buffer))
    for life in sorted((life for life in lifetimes.lives.values() if life.pinned),
                       key=lambda life: life.buffer):
        regions.append(Region([life], life.size))
    free: list[Region] = []
    for life in movable:
        fits = [r for r in free if disjoint(r.lives[-1], life, in_place)] if reuse else []
        big = [r for r in fits if r.size >= life.size]
        chosen = (min(big, key=lambda r: (r.size, r.buffer)) if big
                  else max(fits, key=lambda r: (r.size, -r.buffer)) if fits else None)
        if chosen is None:
            chosen = Region([], 0)
            free.append(chosen)
            regions.append(chosen)
        chosen.lives.append(life)
        chosen.size = max(chosen.size, life.size)
    return regions


def move_buffers(schedule: sched.ScheduleOp, regions: list[Region],
                 values: list[SSAValue] | None = None) -> None:
    """Put every tensor of a region's later occupants on the region's buffer (`values`: the
    schedule's tensor values, when known)."""
    target = {}
    for region in regions:
        physical = ark.BufferAttr.get(region.buffer)
        target.update({life.buffer: physical for life in region.lives[1:]})
    if not target:
        return
    for value in _tensor_values(schedule) if values is None else values:
        tensor = value.type
        new = target.get(tensor.buffer.id.data)
        if new is not None:
            retype(value, _on_buffer(tensor, new))


_TENSOR_FIELDS = tuple(name for name, _ in ark.TensorType.get_irdl_definition().parameters)


def _on_buffer(tensor: ark.TensorType, buffer: ark.BufferAttr) -> ark.TensorType:
    """`tensor.with_buffer(buffer)`, its parameters copied in one step (tens of thousands of
    tensors move; values cached with `tensor`, e.g. its byte region, are not copied)."""
    moved = ark.TensorType.__new__(ark.TensorType)
    source = tensor.__dict__
    fields = {name: source[name] for name in _TENSOR_FIELDS}
    fields["buffer"] = buffer
    moved.__dict__.update(fields)
    return moved


def retype(value: SSAValue, new_type: ark.TensorType) -> None:
    """Give `value` another type in place. `Rewriter.replace_value_with_new_type` makes a new
    value and moves every use onto it, tens of thousands of times here; the value's type is
    all that changes (no rule of a use depends on the buffer a tensor lives on)."""
    value._type = new_type  # noqa: SLF001 -- SSAValue.type is read-only only by convention


def record_regions(schedule: sched.ScheduleOp, regions: list[Region]) -> int:
    for region in schedule.memory_regions():
        region.detach()
        region.erase()
    offset = 0
    block = schedule.graph
    for region in sorted(regions, key=lambda r: r.buffer):
        block.add_op(sched.RegionOp(region.buffer, offset, region.size,
                                    [life.buffer for life in region.lives]))
        offset += region.size
    return offset


@dataclass(frozen=True)
class SchedAllocatePass(ModulePass):
    name = "sched-allocate"

    reuse: bool = True
    in_place: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for schedule in sched.schedules(op):
            self.run(schedule, ScheduleTables(schedule))

    def run(self, schedule: sched.ScheduleOp, tables: ScheduleTables) -> None:
        lifetimes = Lifetimes(schedule, tables)
        regions = assign_regions(lifetimes, self.reuse, self.in_place)
        move_buffers(schedule, regions, lifetimes.values)
        if not tables.planning:  # (`sched-to-plan` would only erase them)
            record_regions(schedule, regions)
