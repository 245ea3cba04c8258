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

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from dialects import ark, sched
from dialects.utils import op_list
from passes.sched_graph import ELEMENTWISE, is_a
from passes.sched_tables import ScheduleTables
from targets.ark.byte_regions import ByteRegion
from targets.ark.tensor_layouts import layout_of

Position = tuple[int, int, int]
"""(phase, kernel's place in the execution order, operator's place in its kernel)."""


MIXED = object()
"""A phase's kernel or layout when its accesses have more than one."""


class PhaseAccess:
    """How a buffer is accessed in one phase: by which kernel (`MIXED`: several), through
    which layout (`MIXED`: several), and whether every access is tile-aligned."""

    __slots__ = ("phase", "kernel", "layout", "aligned")

    def __init__(self, phase: int, kernel: int, layout: tuple, aligned: bool):
        self.phase, self.kernel, self.layout, self.aligned = phase, kernel, layout, aligned


class Life:
    """A buffer's lifetime. Accesses are recorded in execution order (positions never
    decrease), so its first and last accesses are the first and latest recorded, and what
    `disjoint` asks of a phase is asked only of its first phase (`first_phase`) and its last
    (`last_phase`): the phases in between are forgotten as soon as the next starts."""

    __slots__ = ("buffer", "size", "first", "first_is_write", "last", "last_op", "pinned",
                 "first_phase", "last_phase", "values")

    def __init__(self, buffer: int, size: int):
        self.buffer = buffer
        self.size = size
        self.first: Position | None = None
        self.first_is_write = False
        self.last: Position | None = None
        self.last_op: ark.ArkOp | None = None
        self.pinned = False
        self.first_phase: PhaseAccess | None = None
        self.last_phase: PhaseAccess | None = None
        self.values: list[SSAValue] = []
        """The schedule's tensor values on the buffer (`Lifetimes` fills it)."""

    def touch(self, at: Position, write: bool, op: ark.ArkOp, layout: tuple,
              aligned: bool) -> None:
        """Record an access at `at` (no earlier than any recorded before) through a tensor
        of `layout` (`Layout.alloc_key`)."""
        if self.first is None:
            self.first, self.first_is_write = at, write
            self.first_phase = self.last_phase = PhaseAccess(at[0], at[1], layout, aligned)
        else:
            if at == self.first:
                self.first_is_write = self.first_is_write and write
            access = self.last_phase
            if access.phase != at[0]:
                self.last_phase = PhaseAccess(at[0], at[1], layout, aligned)
            else:
                if access.kernel != at[1]:
                    access.kernel = MIXED
                if access.layout is not MIXED and access.layout != layout:
                    access.layout = MIXED
                if not aligned:
                    access.aligned = False
        self.last, self.last_op = at, op


def _alignment(op: ark.ArkOp, kind: str, write_regions: Sequence[ByteRegion]
               ) -> bool | tuple[int, ...] | None:
    """Does the tile of `op` (in a kernel of `kind`, the regions of its write tensors
    `write_regions`) touch exactly the tile-shaped part of an operand (no broadcast)? The
    answer, when it does not depend on the operand; else the output shape (4 dims) an
    operand's shape must be (element-wise operators), or None: it must be one of the writes
    (matmuls)."""
    cls = type(op)
    if kind == "rows":
        return not is_a(cls, ark.MatmulOp)
    if is_a(cls, ELEMENTWISE):
        return write_regions[0].layout.shape4 if write_regions else ()
    if is_a(cls, ark.MatmulOp):
        return None
    return False


class Lifetimes:
    """The lifetime of every buffer of a schedule, in execution order."""

    def __init__(self, schedule: sched.ScheduleOp, tables: ScheduleTables | None = None):
        self.schedule = schedule
        tables = tables or ScheduleTables(schedule)
        kernels = tables.kernels()
        operators = tables.kernel_operators()
        self.lives: dict[int, Life] = {}
        self._sizes_and_pins(schedule)
        lives = self.lives
        table, position = tables.operands(), tables.positions()
        order = 0
        for p, phase in enumerate(tables.phases()):
            for launch in phase:
                kind = kernels[launch.kernel_id].kind_name
                for i, op in enumerate(operators[launch.kernel_id]):
                    at = (p, order, i)
                    reads, writes, read_regions, write_regions, _ = table[position[id(op)]]
                    rule = _alignment(op, kind, write_regions)
                    for value, region in zip(reads, read_regions, strict=True):
                        life = lives[region.buffer]
                        if life.pinned:
                            continue  # (nothing more about it matters)
                        if life.first is None:
                            # Read before written (accesses come in execution order): an input.
                            life.pinned = True
                            continue
                        life.touch(at, False, op, region.layout.alloc_key,
                                   rule if type(rule) is bool else
                                   value in writes if rule is None
                                   else region.layout.shape4 == rule)
                    for region in write_regions:
                        life = lives[region.buffer]
                        if not life.pinned:
                            life.touch(at, True, op, region.layout.alloc_key,
                                       rule if type(rule) is bool else
                                       True if rule is None  # (a write is one of the writes)
                                       else region.layout.shape4 == rule)
                order += 1
        for life in self.lives.values():
            if life.first is None or not life.first_is_write:
                life.pinned = True  # never written, or read before written: an input

    def _sizes_and_pins(self, schedule: sched.ScheduleOp) -> None:
        """Make the life of every buffer of the schedule's tensors, with its size (the
        largest span of its tensors), pinned when it belongs to another rank, connects to
        other ranks or holds a model output; each with the tensor values on its buffer."""
        rank = schedule.rank.value.data
        lives = self.lives
        life_of: dict[int, Life] = {}  # by `id` of buffer attribute (a buffer's tensors share)
        remote: dict[tuple[int, int, int], bool] = {}  # (the values keep the attributes)
        tensor_type, arkop = ark.TensorType, ark.ArkOp
        for op in op_list(schedule.graph):
            for value in op.results:
                tensor = value.type
                if type(tensor) is not tensor_type:
                    continue
                buffer = tensor.buffer
                life = life_of.get(id(buffer))
                if life is None:
                    buffer_id = buffer.id.data
                    life = lives.get(buffer_id)
                    if life is None:
                        life = lives[buffer_id] = Life(buffer_id, 0)
                    life_of[id(buffer)] = life
                    # (Buffers share their rank and tag attributes: decided once per set.)
                    fields = buffer.__dict__
                    key = (id(fields["rank"]), id(fields["send_tags"]), id(fields["recv_tags"]))
                    far = remote.get(key)
                    if far is None:
                        far = remote[key] = _remote_or_tagged(buffer, rank)
                    if far:
                        life.pinned = True
                size = (tensor.__dict__.get("_planc_pass_layout") or layout_of(tensor)).span_bytes
                if size > life.size:
                    life.size = size
                life.values.append(value)
                if value.first_use is None and is_a(type(op), arkop):
                    life.pinned = True  # a model output: an operator's result nothing uses


def _remote_or_tagged(buffer: ark.BufferAttr, rank: int) -> bool:
    """Does the buffer belong to another rank, or connect to other ranks' buffers?"""
    return (buffer.rank.data not in (-1, rank) or bool(ark.int_values(buffer.send_tags))
            or bool(ark.int_values(buffer.recv_tags)))


def disjoint(a: Life, b: Life, in_place: bool) -> bool:
    """May `b` (starting later) use `a`'s memory? See the module docstring."""
    if a.last[0] < b.first[0]:
        return True
    if a.last[0] != b.first[0]:
        return False
    # The same phase: `a`'s accesses in its last phase and `b`'s in its first.
    before, after = a.last_phase, b.first_phase
    if not (before.aligned and after.aligned):
        return False
    kernel, layout = before.kernel, before.layout
    if kernel is MIXED or kernel != after.kernel or layout is MIXED or layout != after.layout:
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


def move_buffers(schedule: sched.ScheduleOp, regions: list[Region]) -> None:
    """Put every tensor of a region's later occupants on the region's buffer (each life
    lists the values of its buffer: `Lifetimes` made it)."""
    for region in regions:
        if len(region.lives) > 1:
            # The first occupant's own description of the buffer: a model lifted from a plan
            # in ARK's PyTorch format states IsExternal on every buffer, and tensors of one
            # buffer must describe it alike (a bare one made a second description).
            first = region.lives[0].values
            physical = (first[0].type.buffer if first and first[0].type.buffer_id ==
                        region.buffer else ark.BufferAttr.get(region.buffer))
            for life in region.lives[1:]:
                for value in life.values:
                    retype(value, _on_buffer(value.type, physical))


_TENSOR_FIELDS = tuple(name for name, _ in ark.TensorType.get_irdl_definition().parameters)
_KEEPS = frozenset({*_TENSOR_FIELDS, "_planc_pass_layout", "_planc_layout",
                    "_planc_equivalence"})
"""What a moved tensor takes from the tensor it copies: its parameters, its `Layout` and the
dialect's shared layout tuple (`ark._layout_of`), neither of which depends on the buffer, and
the facts translation validation keeps (`targets.ark.equivalence`, which names the buffer it
holds for: a moved tensor's no longer matches, and is computed again)."""


def _on_buffer(tensor: ark.TensorType, buffer: ark.BufferAttr) -> ark.TensorType:
    """`tensor.with_buffer(buffer)`, its parameters copied in one step (tens of thousands of
    tensors move). Of the values cached with `tensor`, only its `Layout` is kept (its byte
    region, which names the buffer, is not)."""
    moved = ark.TensorType.__new__(ark.TensorType)
    source = tensor.__dict__
    fields = source.copy()
    fields.pop("_planc_region", None)
    if not _KEEPS.issuperset(fields):  # other cached values: the parameters only
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
        move_buffers(schedule, regions)
        tables.retyped()
        if not tables.planning:  # (`sched-to-plan` would only erase them)
            record_regions(schedule, regions)
