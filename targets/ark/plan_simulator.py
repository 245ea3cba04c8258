"""`planc simulate PLAN.json`: run an ARK plan tile by tile and check it against its model.

A plan carries no model, so the model is derived from the plan's own operators: each operator
once (copies of an operator that several TaskInfos share are one operator), in the order the
plan runs them, as an `ark.model` that `targets.ark.model_interpreter.run_model` executes on random
inputs. The plan is then executed the way ARK executes it, on the same inputs:

* processor groups in order; before each, the barriers `plan.barriers` places;
* in each resource group, each task group's tasks distributed over processors and slots by
  `plan.resource_group_schedule` (ARK's task_seq, with its processor rotation);
* each task runs its operators in order, each on its own output tile (`plan.task_tile`),
  reading just the input regions that tile needs.

Memory starts as NaN-filled bytes (so a read of data nobody wrote shows up in the results), and
a shadow records for every element the last task that wrote it and the last that read it. Each
task runs at a point of a happens-before order: tasks in one slot run one after another, tasks
on one processor run in program order, and tasks on different processors are ordered only by
the barriers between processor groups (vector clocks, one per processor). Checking every access
against the shadow finds

* races: a read or write of an element whose last writer (or a write of an element whose last
  reader) is not ordered before it, e.g. consumer and producer on disjoint processors with no
  barrier in between, or a fused operator reading a tile another processor computes;
* clobbered data: a read that finds an element last written by an operator that did not
  produce the tensor being read, i.e. two tensors that are live at once share memory;
* missing data: a read of an element no operator wrote, e.g. a tile its producer never ran;
* unsafe in-place writes: an operator writing over an input whose elements it needs at other
  places than their own (rotary embedding's pairs, a transpose, a matmul, a reduction);
* tasks never run, and tiles whose values differ from the model's.

Every tile and every output is compared with the model's within `dtypes.tolerance`, scaled
per element by the model's error scales (`model_interpreter.error_scale`): the plan computes
from its own values of its inputs, which differ from the model's within the tolerance (another
summation order rounds an intermediate the other way), and a sum whose terms cancel amplifies
that difference beyond a tolerance relative to the result alone. The cost model
(`targets.ark.cost_model`) gives the modeled time, per-processor utilisation and warp occupancy;
`plan.buffer_layout` gives the device memory the plan needs.
"""

from __future__ import annotations

import heapq
import math
from argparse import Namespace
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue

from devices.hardware import GpuDevice, gpu_device, gpu_for_architecture
from dialects import ark, plan
from dialects.locations import source_path
from dialects.utils import single_root
from ground import dtypes
from ground.diagnostics import PlancError
from targets.ark.byte_regions import ByteRegion, overlaps
from targets.ark.cost_model import plan_cost, refuse_impossible_grid
from targets.ark.model_interpreter import (
    ONE_INPUT,
    Memory,
    ModelRun,
    buffer_sizes,
    evaluate,
    run_model,
)

MAX_ERRORS = 20
INPUT = -1
"""The shadow's writer id of data no task wrote (model inputs)."""


# ---------------------------------------------------------------------------------------------
# The model a plan computes
# ---------------------------------------------------------------------------------------------


def operator_copies(p: plan.PlanOp) -> dict[ark.ArkOp, ark.ArkOp]:
    """Every operator of the plan mapped to the one it is a copy of (itself if original).

    A plan may run one operator in several TaskInfos (each with its own Config, over part of
    its tiles); the importer gives each copy fresh results, so copies are recognised by their
    result tensor ids.
    """
    first: dict[tuple, ark.ArkOp] = {}
    out = {}
    for op in p.graph.ops:
        if isinstance(op, ark.ArkOp):
            key = (op.ark_type, op.label.data, tuple(t.tensor_id for t in op.results_types))
            out[op] = first.setdefault(key, op) if key[2] else op
    return out


def execution_order(p: plan.PlanOp) -> dict[int, tuple[int, int, int]]:
    """For each TaskInfo that runs: (processor group, resource group, task group) of its first
    task group, the position where the plan starts it."""
    first: dict[int, tuple[int, int, int]] = {}
    for g, pg in enumerate(p.processor_groups()):
        for r, rg in enumerate(pg.resource_groups()):
            for t, tg in enumerate(rg.task_groups()):
                if len(tg.tasks) and len(rg.processors):
                    first.setdefault(tg.task, (g, r, t))
    return first


def derive_model(p: plan.PlanOp, clones: dict[Operation, Operation] | None = None,
                 run_only: bool = False) -> tuple[ark.ModelOp, list[ark.ArkOp], list[str]]:
    """The model `p` computes: its original operators in the order the plan starts them
    (producers first where the plan gets that wrong, which is reported), as an `ark.model` of
    clones. Also the original operators in that order, and ordering problems found; `clones`,
    when given, gets each plan operator's clone. `run_only` leaves out the operators of
    TaskInfos no task group runs, but those a running operator reads (`plan_check` reports
    such a read as `ark-plan.missing-producer`)."""
    copies = operator_copies(p)
    started = execution_order(p)
    never = (math.inf, 0, 0)
    runs: dict[ark.ArkOp, list[tuple]] = {}
    for op, original in copies.items():
        if op.task_id in started:
            runs.setdefault(original, []).append(started[op.task_id])
    originals = [op for op, orig in copies.items() if op is orig]
    position = {op: i for i, op in enumerate(originals)}
    heap = [(min(runs.get(op, [never])), position[op], op) for op in originals
            if op in runs or not run_only]
    heapq.heapify(heap)
    problems: list[str] = []
    ordered: list[ark.ArkOp] = []
    done: set[ark.ArkOp] = set()

    def place(op: ark.ArkOp) -> None:
        if op in done:
            return
        done.add(op)
        reads = set(op.read_tensors)
        for value in op.operands:
            for producer in _data_owner(value):
                producer = copies.get(producer, producer)
                if producer in done:
                    continue
                if value in reads:
                    problems.append(f"'{op.label.data}' (task {op.task_id}) starts before "
                                    f"'{producer.label.data}' (task {producer.task_id}), "
                                    "whose result it reads")
                place(producer)
        ordered.append(op)

    while heap:
        place(heapq.heappop(heap)[2])
    return _clone_as_model(p, ordered, clones), ordered, problems


def _evaluate_elements(op: ark.ArkOp, coords: np.ndarray,
                       elements: Callable[[ark.TensorType], np.ndarray],
                       on_read: Callable[[SSAValue, ark.TensorType, np.ndarray], None]
                       ) -> np.ndarray:
    """An element-wise operator's values at its output elements `coords`: each operand's
    elements gathered from `elements(tensor)` (broadcast to the output), `on_read(value,
    tensor, flat indices)` told of each read first (the per-slot run checks it, the batched
    run records it)."""
    out = op.outputs[0]
    args = []
    for value in op.read_tensors:
        tensor = value.type
        flat = element_indices(tensor, broadcast_coordinates(tensor.shape_list,
                                                             out.shape_list, coords))
        on_read(value, tensor, flat)
        args.append(dtypes.to_compute(elements(tensor)[flat], tensor.data_type))
    if isinstance(op, ark.ScalarAssignOp):
        return np.full(len(coords), op.value.value.data, dtype=np.float32)
    return np.broadcast_to(evaluate(op, args), (len(coords),))


def data_root(value: SSAValue) -> SSAValue:
    """The tensor `value` is a view of: through views, up to a plain tensor or an operator's
    result. Reads of an operator's result want that operator's data (another operator writing
    the result's bytes through an unrelated tensor clobbers it); only writes through views of
    the same tensor (or result) are updates of it."""
    owner = value.owner
    while isinstance(owner, ark.ViewOp) and owner.source is not None:
        value = owner.source
        owner = value.owner
    return value


def updates(write: SSAValue, root: SSAValue) -> bool:
    """Does writing `write` (a view of `root`) update the tensor `root`? Always for a plain
    tensor (a concat's output written by slices, a cache written by rows). An operator's result
    is updated in place through itself or through a window of it; a tensor of the result's own
    layout that another operator writes is memory the plan reuses while the result is live."""
    if write is root or not isinstance(root.owner, ark.ArkOp):
        return True
    return not write.type.same_layout(root.type)


def _data_owner(value: SSAValue) -> list[ark.ArkOp]:
    """The operators whose results a value reads, looking through views."""
    owner = value.owner
    if isinstance(owner, ark.ViewOp):
        return [o for operand in owner.operands for o in _data_owner(operand)]
    return [owner] if isinstance(owner, ark.ArkOp) else []


def _clone_as_model(p: plan.PlanOp, ordered: Sequence[ark.ArkOp],
                    clones: dict[Operation, Operation] | None = None) -> ark.ModelOp:
    block = Block()
    mapping: dict[SSAValue, SSAValue] = {}

    def emit(op: Operation) -> None:
        for operand in op.operands:
            if operand not in mapping and isinstance(operand.owner, ark.ViewOp):
                emit(operand.owner)
        clone = op.clone(value_mapper=mapping)
        for old, new in zip(op.results, clone.results, strict=True):
            mapping[old] = new
        if clones is not None:
            clones[op] = clone
        block.add_op(clone)

    for op in ordered:
        emit(op)
    return ark.ModelOp(p.rank.value.data, p.world_size.value.data, Region(block))


# ---------------------------------------------------------------------------------------------
# Shadow memory and happens-before
# ---------------------------------------------------------------------------------------------


class Events:
    """Every (task group, processor, slot) execution: the unit of ordering. Kept in numpy
    arrays that grow by doubling: `ordered_before` looks events up by id on every access
    check, and rebuilding arrays from lists after each new event made a plan's run
    quadratic in its task executions (most of a CNN plan's `planc run`)."""

    def __init__(self) -> None:
        self.count = 0
        self.columns = np.zeros((4, 64), dtype=np.int64)  # processor, clock, slot, task

    def new(self, processor: int, clock: int, slot: int, task: int) -> int:
        if self.count == self.columns.shape[1]:
            self.columns = np.concatenate([self.columns, np.zeros_like(self.columns)], axis=1)
        self.columns[:, self.count] = (processor, clock, slot, task)
        self.count += 1
        return self.count - 1

    @property
    def processor(self) -> np.ndarray:
        return self.columns[0, :self.count]

    @property
    def task(self) -> np.ndarray:
        return self.columns[3, :self.count]

    def as_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Processor, clock and slot of every event, by event id."""
        return self.columns[0], self.columns[1], self.columns[2]


class Clocks:
    """Vector clocks: known[q][p] = how many task groups of processor p have finished as far
    as processor q knows (its own count for p == q)."""

    def __init__(self, processors: int):
        self.known = np.zeros((processors, processors), dtype=np.int64)

    def barrier(self, members: Sequence[int]) -> None:
        rows = np.asarray(members)
        self.known[rows] = self.known[rows].max(axis=0)

    def finish(self, processor: int) -> None:
        self.known[processor, processor] += 1

    def now(self, processor: int) -> int:
        return int(self.known[processor, processor])

    def ordered_before(self, events: np.ndarray, ev: Events, processor: int,
                       slot: int) -> np.ndarray:
        """Which of `events` happen before the current task on (processor, slot)."""
        procs, clocks, slots = ev.as_arrays()
        p, c, s = procs[events], clocks[events], slots[events]
        now = self.now(processor)
        same = p == processor
        return np.where(same, (c < now) | ((c == now) & (s == slot)),
                        c < self.known[processor][p])


class Shadow:
    """Per buffer, per element of its smallest element type: last writer and last reader
    event, and the operator that wrote the data."""

    def __init__(self, sizes: dict[int, int], units: dict[int, int]):
        self.units = units
        self.writer = {b: np.full(n // units[b], -1, np.int64) for b, n in sizes.items()}
        self.reader = {b: np.full(n // units[b], -1, np.int64) for b, n in sizes.items()}
        self.data_op = {b: np.full(n // units[b], INPUT, np.int64) for b, n in sizes.items()}

    def window(self, tensor: ark.TensorType, region: tuple[slice, ...]
               ) -> tuple[slice, ...] | np.ndarray:
        """How to index a shadow array for `region` (slices over the tensor's dims): slices of
        the array shaped as the tensor's strides when its elements are shadow units (a view,
        no copy), else flat indices."""
        if tensor.element_bytes != self.units[tensor.buffer_id]:
            return self.indices(tensor, region)
        return (_Reshaped(tensor.strides_list), tuple(
            slice(o + s.start, o + s.stop) for o, s in
            zip(tensor.offsets_list, _concrete(region, tensor.shape_list), strict=True)))

    def get(self, array: np.ndarray, where) -> np.ndarray:
        if isinstance(where, tuple):
            shape, window = where
            return array[: math.prod(shape.dims)].reshape(shape.dims)[window]
        return array[where]

    def set(self, array: np.ndarray, where, value: int) -> None:
        if isinstance(where, tuple):
            shape, window = where
            array[: math.prod(shape.dims)].reshape(shape.dims)[window] = value
        else:
            array[where] = value

    def flat(self, tensor: ark.TensorType, elements: np.ndarray) -> np.ndarray:
        """Shadow indices of the tensor's flat element indices `elements`."""
        scale = tensor.element_bytes // self.units[tensor.buffer_id]
        if scale == 1:
            return elements
        return (elements[:, None] * scale + np.arange(scale)[None, :]).reshape(-1)

    def indices(self, tensor: ark.TensorType, region: tuple[slice, ...]) -> np.ndarray:
        """Shadow element indices of `region` (slices over the tensor's dims)."""
        unit = self.units[tensor.buffer_id]
        scale = tensor.element_bytes // unit
        strides = tensor.strides_list
        coords = [np.arange(o + s.start, o + s.stop) for o, s in
                  zip(tensor.offsets_list, _concrete(region, tensor.shape_list), strict=True)]
        flat = np.zeros(1, dtype=np.int64)
        for coord, extent in zip(coords, strides, strict=True):
            flat = (flat[:, None] * extent + coord[None, :]).reshape(-1)
        return (flat[:, None] * scale + np.arange(scale)[None, :]).reshape(-1)


@dataclass(frozen=True)
class _Reshaped:
    dims: tuple[int, ...]

    def __init__(self, dims: Sequence[int]):
        object.__setattr__(self, "dims", tuple(dims))


def _concrete(region: tuple[slice, ...], shape: Sequence[int]) -> list[slice]:
    return [slice(*s.indices(n)[:2]) for s, n in zip(region, shape, strict=True)]


def _units(tensors: Sequence[ark.TensorType]) -> dict[int, int]:
    """Per buffer, the smallest element size of the tensors on it (the shadow's unit)."""
    units: dict[int, int] = {}
    for t in tensors:
        units[t.buffer_id] = math.gcd(units.get(t.buffer_id, t.element_bytes),
                                      t.element_bytes)
    return units


# ---------------------------------------------------------------------------------------------
# Input regions of an output tile
# ---------------------------------------------------------------------------------------------


def _pad4(values: Sequence[Any], fill: Any) -> list[Any]:
    return [fill] * (4 - len(values)) + list(values)


def _matmul_regions(op: ark.MatmulOp, tile: tuple[slice, ...]) -> list[tuple[slice, ...]]:
    """Rows of the input and columns of the other operand (all of K) behind an output tile."""
    out_batch = op.outputs[0].shape_list[:-2]
    rows, cols, batch = tile[-2], tile[-1], tile[:-2]
    everything = slice(None)
    regions = []
    for value, transposed, inner, first in ((op.read_tensors[0], op.trans_input, rows, True),
                                            (op.read_tensors[1], op.trans_other, cols, False)):
        shape = value.type.shape_list
        if len(shape) < 2:
            regions.append((everything,))
            continue
        # The input's M (the other's N) is its second-to-last dim unless transposed.
        inner_last = transposed if first else not transposed
        last = (everything, inner) if inner_last else (inner, everything)
        regions.append((*_broadcast_region_dims(shape[:-2], out_batch, batch), *last))
    return regions


def _broadcast_region_dims(shape: Sequence[int], out_shape: Sequence[int],
                           tile: Sequence[slice]) -> list[slice]:
    if not shape:
        return []
    n = max(len(shape), len(out_shape))
    in_p, out_p = [1] * (n - len(shape)) + list(shape), [1] * (n - len(out_shape)) + list(out_shape)
    tile_p = [slice(0, 1)] * (n - len(tile)) + list(tile)
    region = [slice(0, 1) if in_p[d] == 1 and out_p[d] != 1 else tile_p[d] for d in range(n)]
    return region[n - len(shape):]


def input_regions(op: ark.ArkOp, tile: tuple[slice, ...]) -> list[tuple[slice, ...] | None]:
    """For each read tensor of `op`, the region the output tile `tile` needs (None: all)."""
    out_shape = plan.output_shape(op)
    if isinstance(op, ark.MatmulOp):
        return _matmul_regions(op, tile)
    if isinstance(op, ark.ReduceOp):
        region = list(tile)
        if not op.keeps_dim:
            region.insert(op.axis_index, slice(None))
        else:
            region[op.axis_index] = slice(None)
        return [tuple(region)]
    if isinstance(op, ark.TransposeOp):
        region: list[slice] = [slice(None)] * len(tile)
        for i, p in enumerate(op.perm):
            region[p] = tile[i]
        return [tuple(region)]
    if isinstance(op, ark.EmbeddingOp):
        return [tuple(tile[:-1]), None]
    return [tuple(_broadcast_region_dims(v.type.shape_list, out_shape, tile))
            for v in op.read_tensors]


def _even_last(tile: tuple[slice, ...], shape: Sequence[int]) -> tuple[slice, ...]:
    """The tile widened to whole (even, odd) pairs in the last dim, as rotary embedding needs."""
    last = slice(*tile[-1].indices(shape[-1])[:2])
    start, stop = last.start - last.start % 2, min(shape[-1], last.stop + last.stop % 2)
    return (*tile[:-1], slice(start, stop))


# ---------------------------------------------------------------------------------------------
# Running a plan
# ---------------------------------------------------------------------------------------------


@dataclass
class Problem:
    kind: str
    message: str
    path: str | None = None

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class PlanRunner:
    """Executes a plan functionally; see the module docstring."""

    def __init__(self, p: plan.PlanOp, reference: ModelRun, originals: Sequence[ark.ArkOp],
                 *, batched: bool = True):
        self.plan = p
        self.batched = batched
        """Run a task group's independent tiles as one numpy operation (`run_group_batched`);
        False runs every tile on its own, the reference the batched run equals."""
        self.group_batchable: dict[tuple[ark.ArkOp, ...], bool] = {}
        self.batched_groups: Counter[str] = Counter()
        """Task groups run batched, by operator type; `fallen_back`: those left to the
        per-tile run (tests show which run is taken)."""
        self.fallen_back: Counter[str] = Counter()
        self.ref = reference
        self.copies = operator_copies(p)
        self.index = {op: i for i, op in enumerate(originals)}
        tensors = [r.type for op in p.graph.ops for r in op.results
                   if isinstance(r.type, ark.TensorType)]
        sizes = buffer_sizes(tensors)
        self.memory = Memory(sizes)
        for raw in self.memory.buffers.values():
            raw.fill(0xFF)  # NaN in every float type: reads of unwritten data show
        self.view = self.memory.view
        self.shadow = Shadow(sizes, _units(tensors))
        self.events = Events()
        self.clocks = Clocks(p.processor_count)
        self.problems: list[Problem] = []
        self.counts: dict[str, int] = {}
        self.provenance_cache: dict[SSAValue, frozenset[int]] = {}
        self.in_place_checked: set[ark.ArkOp] = set()
        self.view_writes: dict[SSAValue, set[tuple[int, ByteRegion]]] | None = None
        self.view_writer_cache: dict[tuple[ark.ArkOp, SSAValue], frozenset[int]] = {}
        for tid, values in reference.inputs.items():
            tensor = reference.types[tid]
            self.view(tensor)[...] = dtypes.to_storage(values, tensor.data_type)

    def report(self, kind: str, message: str, op: Operation | None = None) -> None:
        """Count a problem; keep the first MAX_ERRORS distinct messages."""
        self.counts[kind] = self.counts.get(kind, 0) + 1
        problem = Problem(kind, message, source_path(op) if op else None)
        if len(self.problems) < MAX_ERRORS and problem not in self.problems:
            self.problems.append(problem)

    def provenance(self, value: SSAValue, direct: bool = True) -> frozenset[int]:
        """Operators (original indices) whose writes `value` may hold; INPUT for model data."""
        cached = self.provenance_cache.get(value) if direct else None
        if cached is not None:
            return cached
        owner = value.owner
        if isinstance(owner, ark.ViewOp):
            found = (self.provenance(owner.source, direct=False) if owner.source is not None
                     else frozenset({INPUT}))
        elif isinstance(owner, ark.ArkOp):
            original = self.copies.get(owner, owner)
            if owner.RESULT_ALIASES == "read":
                found = self.provenance(owner.read_tensors[value.index], direct)
            else:
                found = frozenset({self.index[original]})
                if not direct and owner.write_tensors:
                    found |= self.provenance(owner.write_tensors[value.index], direct=False)
        else:
            found = frozenset({INPUT})
        if direct:
            self.provenance_cache[value] = found
        return found

    def other_view_writers(self, op: ark.ArkOp, value: SSAValue) -> frozenset[int]:
        """Operators (original indices) the model runs before `op` that write bytes `value`
        reads through another view of the same data (a slice of a concat's output, a row of
        a KV cache, a tensor updated in place and read through an earlier reshape): their
        data is what `value` must hold there, not a clobber."""
        key = (op, value)
        cached = self.view_writer_cache.get(key)
        if cached is not None:
            return cached
        if self.view_writes is None:
            self.view_writes = {}
            for other, original in self.copies.items():
                for tensor in other.write_tensors:
                    root = data_root(tensor)
                    if updates(tensor, root):
                        self.view_writes.setdefault(root, set()).add(
                            (self.index[original], ByteRegion.of(tensor.type)))
        before = self.index[self.copies.get(op, op)]
        region = ByteRegion.of(value.type)
        found = frozenset(i for i, written in self.view_writes.get(data_root(value), ())
                          if i < before and overlaps(written, region))
        self.view_writer_cache[key] = found
        return found

    # -- checks -----------------------------------------------------------------------------

    def check_read(self, op: ark.ArkOp, value: SSAValue, region: tuple[slice, ...],
                   event: int, where: tuple[int, int]) -> None:
        self.check_read_at(op, value, self.shadow.window(value.type, region), event, where)

    def check_read_at(self, op: ark.ArkOp, value: SSAValue, spot, event: int,
                      where: tuple[int, int]) -> None:
        """Check a read of the shadow elements `spot` (see `Shadow.window`)."""
        tensor = value.type
        shadow = self.shadow
        buf = tensor.buffer_id
        writers = shadow.get(shadow.writer[buf], spot)
        written = writers >= 0
        if written.any():
            unordered = ~self.clocks.ordered_before(writers[written], self.events, *where)
            if unordered.any():
                other = int(writers[written][np.argmax(unordered)])
                self.report("race", f"'{op.label.data}' (task {op.task_id}) reads tensor "
                            f"{tensor.tensor_id} (buffer {buf}) that task "
                            f"{self.events.task[other]} on processor "
                            f"{self.events.processor[other]} writes with no barrier in between",
                            op)
        expected = self.provenance(value) | self.other_view_writers(op, value)
        found = shadow.get(shadow.data_op[buf], spot)
        if len(expected) == 1:
            wrong = found != next(iter(expected))
        else:
            wrong = ~np.isin(found, list(expected))
        if wrong.any():
            culprit = int(found[wrong][0])
            if culprit == INPUT:
                self.report("missing", f"'{op.label.data}' (task {op.task_id}) reads elements "
                            f"of tensor {tensor.tensor_id} (buffer {buf}) that no task has "
                            "written yet (a tile its producer never ran, or runs later)", op)
            else:
                self.report("clobbered", f"'{op.label.data}' (task {op.task_id}) reads tensor "
                            f"{tensor.tensor_id} (buffer {buf}), but "
                            f"'{self._name(culprit)}' overwrote it: tensors that are live at "
                            "the same time share memory", op)
        shadow.set(shadow.reader[buf], spot, event)

    def check_write(self, op: ark.ArkOp, tensor: ark.TensorType, region: tuple[slice, ...],
                    event: int, where: tuple[int, int]) -> None:
        self.check_write_at(op, tensor, self.shadow.window(tensor, region), event, where)

    def check_write_at(self, op: ark.ArkOp, tensor: ark.TensorType, spot, event: int,
                       where: tuple[int, int]) -> None:
        """Check a write of the shadow elements `spot`, then record it."""
        shadow = self.shadow
        buf = tensor.buffer_id
        for kind, last in (("wrote", shadow.get(shadow.writer[buf], spot)),
                           ("read", shadow.get(shadow.reader[buf], spot))):
            seen = (last >= 0) & (last != event)
            if not seen.any():
                continue
            unordered = ~self.clocks.ordered_before(last[seen], self.events, *where)
            if unordered.any():
                other = int(last[seen][np.argmax(unordered)])
                self.report("race", f"'{op.label.data}' (task {op.task_id}) writes buffer "
                            f"{buf} that task {self.events.task[other]} on processor "
                            f"{self.events.processor[other]} {kind} with no barrier in between",
                            op)
        shadow.set(shadow.writer[buf], spot, event)
        shadow.set(shadow.data_op[buf], spot, self.index[self.copies.get(op, op)])

    def _name(self, index: int) -> str:
        return next((op.label.data for op, i in self.index.items() if i == index), "?")

    # -- execution --------------------------------------------------------------------------

    def run(self) -> dict[int, np.ndarray]:
        """Run every processor group; return how often each task index of each TaskInfo ran."""
        p = self.plan
        tasks = p.tasks()
        operators = p.task_operators()
        ran = {t: np.zeros(p.num_tasks(t), dtype=np.int64) for t in tasks}
        from ground.progress import progress

        groups = p.processor_groups()
        for pg, syncs in progress(list(zip(groups, plan.barriers(groups), strict=True)),
                                  "simulating processor groups"):
            for sync in syncs:
                self.clocks.barrier(list(sync))
            for rg in pg.resource_groups():
                for schedule in plan.resource_group_schedule(rg, tasks):
                    ops = operators[schedule.task_group.task]
                    if not (self.batched and self.run_group_batched(schedule, ops, ran)):
                        self.run_group(schedule, ops, ran)
        return ran

    def run_group(self, schedule: plan.TaskGroupSchedule, ops: Sequence[ark.ArkOp],
                  ran: dict[int, np.ndarray]) -> None:
        """Run one task group the way ARK does: processor by processor, slot by slot, each
        slot's tiles one after another (an element-wise operator's at once, `run_batch`)."""
        task_id = schedule.task_group.task
        for proc, slots in schedule.assignment.items():
            clock = self.clocks.now(proc)
            for slot, indices in enumerate(slots):
                if not indices:
                    continue
                event = self.events.new(proc, clock, slot, task_id)
                np.add.at(ran[task_id], indices, 1)
                if batchable(ops):
                    self.run_batch(ops[0], indices, event, (proc, slot))
                    continue
                for index in indices:
                    for op in ops:
                        self.run_tile(op, index, event, (proc, slot))
            self.clocks.finish(proc)

    def run_group_batched(self, schedule: plan.TaskGroupSchedule, ops: Sequence[ark.ArkOp],
                          ran: dict[int, np.ndarray]) -> bool:
        """Run every tile of a task group at once, on every processor and slot, when that is
        what `run_group` does (True), or change nothing (False: `run_group` runs it).

        Taken where no tile reads or writes what another tile of the group writes
        (`whole_group_runs`): one element-wise operator (computed as `run_batch` computes a
        slot's tiles, over all of the group's), a reduction, transpose or embedding whose
        output shares no byte with its inputs, or a chain of element-wise operators whose
        tensors meet only in one layout (then tile i of every operator touches only tile i's
        elements). There, running each operator over every tile before the next, reading its
        inputs before writing its output, reads and writes what the per-tile run does: every
        check is made against the state it would see, each access with its own tile's
        processor, slot, clock and event; the values are the per-tile ones (each tile's
        inputs gathered as its own array, operators applied over a leading tile dim, which
        keeps each tile's reduction order). Anything a check would report, a tile's
        difference from the model, a task index twice or out of range undoes the group and
        leaves it to `run_group`, so its reports are the per-tile ones, in order."""
        key = tuple(ops)
        if key not in self.group_batchable:
            self.group_batchable[key] = whole_group_runs(ops)
        if not self.group_batchable[key]:
            return False
        tiles = _group_tiles(schedule)
        if tiles is None:
            return False
        slots, index, slot_of = tiles
        for op in ops:
            self.check_in_place(op)
        task_id = schedule.task_group.task
        mark = self.events.count
        events = np.array([self.events.new(proc, self.clocks.now(proc), slot, task_id)
                           for proc, slot in slots], dtype=np.int64)[slot_of]
        undo: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        name = "+".join(op.ark_type for op in ops)
        for op in ops:
            batch = _GroupBatch(self, op, slots, index, slot_of, events)
            if not batch.prepare() or not batch.clean():
                for array, where, old in reversed(undo):
                    array[where] = old
                self.events.count = mark
                self.fallen_back[name] += 1
                return False
            batch.store(undo)
        np.add.at(ran[task_id], index, 1)
        for proc in schedule.assignment:
            self.clocks.finish(proc)
        self.batched_groups[name] += 1
        return True

    def check_in_place(self, op: ark.ArkOp) -> None:
        """An operator may write over what it reads only element by element: an element-wise
        operator over an input of its output's layout. Otherwise (rotary embedding's pairs,
        a transpose, a matmul, a reduction, a broadcast input) a thread may overwrite input
        another thread has yet to read."""
        if op in self.in_place_checked or not op.outputs:
            return
        self.in_place_checked.add(op)
        out = op.outputs[0]
        elementwise = isinstance(op, (ark.UnaryOp, ark.BinaryOp)) and \
            not isinstance(op, ark.RopeOp)
        for tensor in op.inputs:
            if tensor.buffer_id != out.buffer_id or (elementwise and tensor.same_layout(out)):
                continue
            everything = tuple(slice(None) for _ in tensor.shape_list)
            read = self.shadow.indices(tensor, everything)
            written = self.shadow.indices(out, tuple(slice(None) for _ in out.shape_list))
            if np.intersect1d(read, written).size:
                self.report("in-place", f"{op.ark_type} '{op.label.data}' (task {op.task_id}) "
                            f"writes tensor {out.tensor_id} over tensor {tensor.tensor_id} it "
                            f"reads (buffer {out.buffer_id}), but its output elements need other "
                            "input elements than their own: one thread can overwrite what "
                            "another has yet to read", op)

    def run_tile(self, op: ark.ArkOp, index: int, event: int, where: tuple[int, int]) -> None:
        if isinstance(op, (ark.NoopOp, ark.TensorOp, ark.ReshapeOp)) or not op.outputs:
            return
        self.check_in_place(op)

        def read(value: SSAValue, region: tuple[slice, ...], embedding_rows=None):
            if embedding_rows is not None:
                return self._gather_rows(op, value, embedding_rows, event, where)
            self.check_read(op, value, region, event, where)
            return dtypes.to_compute(self.view(value.type)[region], value.type.data_type)

        out = op.outputs[0]
        tile, values = tile_values(op, index, read)
        target = self.view(out)[tile]
        self.check_write(op, out, tile, event, where)
        target[...] = dtypes.to_storage(np.broadcast_to(values, target.shape), out.data_type)
        self.compare_tile(op, tile, index)

    def elements(self, tensor: ark.TensorType) -> np.ndarray:
        """The tensor's buffer as a flat array of its element type."""
        storage = dtypes.STORAGE[tensor.data_type]
        raw = self.memory.buffers[tensor.buffer_id]
        return raw[: len(raw) // storage.itemsize * storage.itemsize].view(storage)

    def run_batch(self, op: ark.ArkOp, indices: Sequence[int], event: int,
                  where: tuple[int, int]) -> None:
        """All tiles `indices` of an element-wise operator that one slot runs, at once: the
        same as one after another, since each tile reads only what it writes or data no tile
        of the operator writes (see `batchable`)."""
        self.check_in_place(op)
        out = op.outputs[0]
        coords = tile_coordinates(op, np.asarray(indices, dtype=np.int64))

        def check_read(value, tensor, flat):
            self.check_read_at(op, value, self.shadow.flat(tensor, flat), event, where)

        values = _evaluate_elements(op, coords, self.elements, check_read)
        flat = element_indices(out, coords)
        self.check_write_at(op, out, self.shadow.flat(out, flat), event, where)
        self.elements(out)[flat] = dtypes.to_storage(values, out.data_type)
        original = self.copies.get(op, op)
        result = original.results_types[0]
        expected = self.ref.tensors.get(result.tensor_id)
        if expected is None:
            return
        got = dtypes.to_compute(self.elements(out)[flat], out.data_type)
        want = expected[tuple(coords.T)]
        if not _close(got, want, result.data_type,
                      _scales(self.ref, result.tensor_id, tuple(coords.T))):
            self.report("mismatch", f"'{op.label.data}' (task {op.task_id}) computes tiles "
                        f"{_first(indices)} differently from the model (largest difference "
                        f"{_max_diff(got, want):.3g})", op)

    def _gather_rows(self, op: ark.EmbeddingOp, weight: SSAValue, indices: np.ndarray,
                     event: int, where: tuple[int, int]) -> np.ndarray:
        rows = np.unique(np.asarray(indices, dtype=np.int64))
        table = dtypes.to_compute(self.view(weight.type), weight.type.data_type)
        for row in rows:
            self.check_read(op, weight, (slice(int(row), int(row) + 1), slice(None)), event,
                            where)
        return table

    def compare_tile(self, op: ark.ArkOp, tile: tuple[slice, ...], index: int) -> None:
        original = self.copies.get(op, op)
        result = original.results_types[0] if original.results_types else None
        if result is None or result.tensor_id not in self.ref.tensors:
            return
        expected = self.ref.tensors[result.tensor_id][tile]
        got = dtypes.to_compute(self.view(op.outputs[0])[tile], op.outputs[0].data_type)
        if not _close(got, expected, result.data_type,
                      _scales(self.ref, result.tensor_id, tile)):
            self.report("mismatch", f"'{op.label.data}' (task {op.task_id}) computes tile "
                        f"{index} differently from the model (largest difference "
                        f"{_max_diff(got, expected):.3g})", op)


def tile_values(op: ark.ArkOp, index: int, read) -> tuple[tuple[slice, ...], np.ndarray]:
    """Task `index` of `op`: its output tile and the values it computes there, reading each
    input region with `read(value, region)` (`read(value, None, rows)` for an embedding
    table). Shared by the full run and the sampled one."""
    if isinstance(op, ark.GenericOp):
        raise ark.unknown_type_error(op, "ark-plan")
    if isinstance(op, ark.CommOp):
        raise PlancError(f"{op.ark_type} '{op.label.data}': planc cannot simulate "
                         f"{op.ark_type} operators", path=source_path(op))
    out = op.outputs[0]
    tile = plan.task_tile(op, index)
    # Rotary embedding pairs neighbouring elements: compute whole pairs, store the tile.
    calc = _even_last(tile, out.shape_list) if isinstance(op, ark.RopeOp) else tile
    regions = input_regions(op, calc)
    args: list[np.ndarray] = []
    for value, region in zip(op.read_tensors, regions, strict=True):
        full = region is None
        region = tuple(slice(None) for _ in value.type.shape_list) if full else region
        if isinstance(op, ark.EmbeddingOp) and full:
            args.append(read(value, None, args[0]))
            continue
        args.append(read(value, region))
    if isinstance(op, ark.ScalarAssignOp):
        values = np.full(_extents(calc, out.shape_list), op.value.value.data, dtype=np.float32)
    else:
        values = evaluate(op, args)
    shape = tuple(s.stop - s.start for s in _concrete(tile, out.shape_list))
    values = np.asarray(values).reshape(_fit(np.shape(values), len(shape)))
    if calc is not tile:
        skip = tile[-1].start - calc[-1].start
        values = values[..., skip:skip + shape[-1]]
    return tile, values


def batchable(ops: Sequence[ark.ArkOp]) -> bool:
    """Can a slot run all its tiles of this task at once (`PlanRunner.run_batch`)? Yes for a
    lone element-wise operator whose inputs do not overlap its output in another layout (then
    no tile reads what another tile writes)."""
    if len(ops) != 1:
        return False
    (op,) = ops
    if not isinstance(op, (ark.UnaryOp, ark.BinaryOp, ark.ScalarAssignOp)) or \
            isinstance(op, ark.RopeOp) or not op.outputs:
        return False
    out = op.outputs[0]
    return all(t.buffer_id != out.buffer_id or t.same_layout(out)
               for t in op.inputs)


FULL, ONE = -1, -2
"""`region_map` entries for a region dim that is all of the tensor's dim, or its index 0."""


def region_map(op: ark.ArkOp) -> list[tuple[int, ...] | None] | None:
    """`input_regions` of `op` symbolically: per read tensor, per dim of its region, the output
    tile dim whose slice it takes, FULL or ONE (None: the tensor read whole, an embedding's
    table). Found by asking `input_regions` about a tile of marker slices, so the batched run
    reads the regions the per-tile run reads. None when a region is anything else (or has
    another rank than its tensor: the per-tile run then fails as before)."""
    marks = tuple(slice("tile", d) for d in range(len(plan.output_shape(op))))
    maps: list[tuple[int, ...] | None] = []
    for value, region in zip(op.read_tensors, input_regions(op, marks), strict=True):
        if region is None:
            maps.append(None)
            continue
        if len(region) != len(value.type.shape_list):
            return None
        dims = []
        for cut in region:
            if cut.start == "tile":
                dims.append(cut.stop)
            elif cut == slice(None):
                dims.append(FULL)
            elif cut == slice(0, 1):
                dims.append(ONE)
            else:
                return None
        maps.append(tuple(dims))
    return maps


def group_batchable(op: ark.ArkOp) -> bool:
    """Can a task group of this lone operator run all its tiles at once
    (`PlanRunner.run_group_batched`)? Yes for a reduction, transpose or embedding (the
    gathers and reductions that im2col convolutions and their pooling are made of) whose
    output shares no byte with what it reads, of at most 4 dims (task tiles are 4-dim)."""
    if not isinstance(op, (ark.ReduceOp, ark.TransposeOp, ark.EmbeddingOp)) or \
            not op.outputs or len(plan.output_shape(op)) > 4:
        return False
    out = ByteRegion.of(op.outputs[0])
    if any(overlaps(ByteRegion.of(v.type), out) for v in op.read_tensors):
        return False
    maps = region_map(op)
    if maps is None:
        return False
    if isinstance(op, ark.EmbeddingOp):   # indices by tile, then rows of a 2-dim table
        return maps[0] is not None and maps[1] is None and \
            len(op.read_tensors[1].type.shape_list) == 2
    return type(op) in ONE_INPUT and None not in maps


def whole_group_runs(ops: Sequence[ark.ArkOp]) -> bool:
    """Can a task group of these operators run each over all its tiles at once
    (`PlanRunner.run_group_batched`)? One operator: element-wise (`batchable`) or
    `group_batchable`. Several: element-wise ones of one output shape and tiling, whose
    tensors that may share a byte with a written one have its layout, so that tile i of each
    operator reads and writes only elements no other tile touches."""
    if len(ops) == 1:
        return batchable(ops) or group_batchable(ops[0])
    if not ops or not all(batchable([op]) for op in ops):
        return False
    shape, unit = plan.output_shape(ops[0]), plan.unit_shape(ops[0])
    if any(plan.output_shape(op) != shape or plan.unit_shape(op) != unit for op in ops):
        return False
    written = [op.outputs[0] for op in ops]
    touched = written + [value.type for op in ops for value in op.read_tensors]
    return all(t.same_layout(w) or not overlaps(ByteRegion.of(t), ByteRegion.of(w))
               for w in written for t in touched)


@dataclass(frozen=True)
class _TileDim:
    """An operator's attributes as the semantics tables read them, for arrays with one more
    leading dim (the tiles)."""

    axis_index: int
    keeps_dim: bool
    perm: tuple[int, ...]

    @staticmethod
    def of(op: ark.ArkOp) -> _TileDim:
        if isinstance(op, ark.ReduceOp):
            return _TileDim(op.axis_index + 1, op.keeps_dim, ())
        return _TileDim(0, False, (0, *(p + 1 for p in op.perm)))


@dataclass
class _Access:
    """Shadow elements a group of tiles reads or writes, each with the tile (its position in
    the group) that accesses it."""

    value: SSAValue | None
    tensor: ark.TensorType
    spot: np.ndarray
    tile: np.ndarray


class _GroupBatch:
    """One operator over all tiles of a task group (`PlanRunner.run_group_batched`):
    `prepare` gathers and computes, `clean` makes every check the per-tile run makes, `store`
    writes values and shadow entries, logging what it overwrote."""

    def __init__(self, runner: PlanRunner, op: ark.ArkOp, slots: list[tuple[int, int]],
                 indices: np.ndarray, slot_of: np.ndarray, events: np.ndarray):
        self.runner, self.op = runner, op
        self.index = indices
        """The task index of each tile, in run order."""
        self.events = events
        """Each tile's event (that of its processor and slot)."""
        procs = np.array([proc for proc, _ in slots], dtype=np.int64)
        self.proc = procs[slot_of]
        self.slot = np.array([slot for _, slot in slots], dtype=np.int64)[slot_of]
        self.now = runner.clocks.known[self.proc, self.proc]
        self.reads: list[_Access] = []
        self.own_reads = False
        """Does each tile read all it writes first (an in-place element-wise operator)?"""
        self.writes: list[tuple[_Access, np.ndarray, np.ndarray]] = []
        """The output's elements (shadow and flat element indices) and stored values."""

    # -- gathering and computing ------------------------------------------------------------

    def prepare(self) -> bool:
        """Gather every tile's inputs and compute its values (tiles of equal extents
        together). False where the per-tile run must decide: a task index out of range or
        twice, an empty tile, an embedding index outside its table, values that do not fit
        the tile."""
        op = self.op
        shape = plan.output_shape(op)
        shape4, unit = np.array(_pad4(shape, 1)), np.array(plan.unit_shape(op))
        counts = -(-shape4 // unit)
        index = self.index
        if index.min() < 0 or index.max() >= int(np.prod(counts)) or \
                len(np.unique(index)) != len(index):
            return False
        if batchable([op]):
            return self.compute_elementwise()
        origins = np.stack(np.unravel_index(index, counts), axis=1) * unit
        lead = 4 - len(shape)
        starts = origins[:, lead:]
        stops = np.minimum(origins + unit, shape4)[:, lead:]
        regions = [(starts, stops)]
        for value, dims in zip(op.read_tensors, region_map(op), strict=True):
            if dims is not None:
                regions.append(_regions(dims, value.type.shape_list, starts, stops))
        extents = np.concatenate([hi - lo for lo, hi in regions], axis=1)
        if not extents.all():
            return False
        kinds, group = np.unique(extents, axis=0, return_inverse=True)
        for k in range(len(kinds)):
            tiles = np.flatnonzero(group.reshape(-1) == k)
            if not self.compute(tiles, [(lo[tiles], hi[tiles]) for lo, hi in regions]):
                return False
        return True

    def compute(self, tiles: np.ndarray, regions: list[tuple[np.ndarray, np.ndarray]]) -> bool:
        """Tiles `tiles` (positions), all of one extent: `regions` gives (starts, stops) of
        their output tiles, then of each read tensor's region."""
        runner, op = self.runner, self.op
        (out_lo, out_hi), inputs = regions[0], regions[1:]
        args = []
        values = list(op.read_tensors)
        for value, (lo, hi) in zip(values, inputs, strict=False):
            tensor = value.type
            flat, grid = _region_elements(tensor, lo, hi)
            self.reads.append(_Access(value, tensor, runner.shadow.flat(tensor, flat),
                                      _per_element(tiles, flat, tensor, runner)))
            args.append(dtypes.to_compute(runner.elements(tensor)[flat], tensor.data_type)
                        .reshape(len(tiles), *grid))
        with np.errstate(all="ignore"):
            if isinstance(op, ark.EmbeddingOp):
                computed = self.embed(tiles, values[1], args[0])
                if computed is None:
                    return False
            else:
                computed = ONE_INPUT[type(op)](_TileDim.of(op), args[0])
        out = op.outputs[0]
        extent = tuple(int(e) for e in out_hi[0] - out_lo[0])
        computed = np.asarray(computed)
        computed = computed.reshape(len(tiles), *_fit(computed.shape[1:], len(extent)))
        try:
            computed = np.broadcast_to(computed, (len(tiles), *extent))
        except ValueError:
            return False
        stored = dtypes.to_storage(computed, out.data_type).reshape(-1)
        flat, _ = _region_elements(out, out_lo, out_hi)
        access = _Access(None, out, runner.shadow.flat(out, flat),
                         _per_element(tiles, flat, out, runner))
        self.writes.append((access, flat, stored))
        return self.matches_model(out_lo, out_hi, stored)

    def compute_elementwise(self) -> bool:
        """Every output element of the group's tiles computed as `run_batch` computes those of
        a slot (each from the input elements it reads, as flat arrays)."""
        runner, op = self.runner, self.op
        out = op.outputs[0]
        coords, tile_of = _tile_elements(op, self.index)

        def note_read(value, tensor, flat):
            self.reads.append(_Access(value, tensor, runner.shadow.flat(tensor, flat),
                                      _per_element(tile_of, flat, tensor, runner)))

        values = _evaluate_elements(op, coords, runner.elements, note_read)
        flat = element_indices(out, coords)
        stored = dtypes.to_storage(values, out.data_type)
        self.writes.append((_Access(None, out, runner.shadow.flat(out, flat),
                                    _per_element(tile_of, flat, out, runner)), flat, stored))
        # An input of the output's layout is read by the tile that then writes it: the
        # per-slot run's write check finds its own read there, not an earlier one.
        self.own_reads = any(value.type.same_layout(out) for value in op.read_tensors)
        return self.matches_model_at(coords, stored)

    def embed(self, tiles: np.ndarray, table: SSAValue, rows: np.ndarray) -> np.ndarray | None:
        """The rows `rows` (tiles x index region) of the embedding table, reading the whole
        rows each tile selects (as `_gather_rows` does). None for an index outside it."""
        tensor = table.type
        count, width = tensor.shape_list
        if rows.size and (rows.min() < 0 or rows.max() >= count):
            return None
        picked = rows.reshape(len(tiles), -1)
        lo = np.stack([picked.reshape(-1), np.zeros(picked.size, dtype=np.int64)], axis=1)
        hi = lo + np.array([1, width])
        flat, _ = _region_elements(tensor, lo, hi)
        owner = np.repeat(tiles, picked.shape[1])
        self.reads.append(_Access(table, tensor, self.runner.shadow.flat(tensor, flat),
                                  _per_element(owner, flat, tensor, self.runner)))
        values = dtypes.to_compute(self.runner.view(tensor), tensor.data_type)
        return values[rows]

    def matches_model(self, lo: np.ndarray, hi: np.ndarray, stored: np.ndarray) -> bool:
        """Does every tile equal the model's (`compare_tile`, tile by tile)?"""
        return self.matches_model_at(_region_coordinates(lo, hi), stored)

    def matches_model_at(self, coords: np.ndarray, stored: np.ndarray) -> bool:
        """Do the stored values of output elements `coords` equal the model's?"""
        runner = self.runner
        original = runner.copies.get(self.op, self.op)
        if not original.results_types:
            return True
        result = original.results_types[0]
        expected = runner.ref.tensors.get(result.tensor_id)
        if expected is None:
            return True
        out = self.op.outputs[0]
        if list(expected.shape) != out.shape_list:
            return False
        got = dtypes.to_compute(stored, out.data_type)
        where = tuple(coords.T)
        return _close(got, expected[where], result.data_type,
                      _scales(runner.ref, result.tensor_id, where))

    # -- checking and committing ------------------------------------------------------------

    def ordered(self, events: np.ndarray, tiles: np.ndarray) -> np.ndarray:
        """`Clocks.ordered_before` of each event before the access of its tile."""
        procs, clocks, slots = self.runner.events.as_arrays()
        p, c, s = procs[events], clocks[events], slots[events]
        proc, now = self.proc[tiles], self.now[tiles]
        return np.where(p == proc, (c < now) | ((c == now) & (s == self.slot[tiles])),
                        c < self.runner.clocks.known[proc, p])

    def clean(self) -> bool:
        """Would the per-tile run report nothing? Every read finds data written before it by
        an operator it may hold, every write follows the last writer and reader."""
        runner, shadow = self.runner, self.runner.shadow
        for access in self.reads:
            buf = access.tensor.buffer_id
            writers = shadow.writer[buf][access.spot]
            written = writers >= 0
            if written.any() and not self.ordered(writers[written], access.tile[written]).all():
                return False
            expected = runner.provenance(access.value) | \
                runner.other_view_writers(self.op, access.value)
            if not np.isin(shadow.data_op[buf][access.spot], list(expected)).all():
                return False
        for access, _, _ in self.writes:
            buf = access.tensor.buffer_id
            lasts = [shadow.writer[buf][access.spot]]
            if not self.own_reads:
                lasts.append(shadow.reader[buf][access.spot])
            for last in lasts:
                seen = (last >= 0) & (last != self.events[access.tile])
                if seen.any() and not self.ordered(last[seen], access.tile[seen]).all():
                    return False
        return True

    def store(self, undo: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> None:
        """Write the values and the shadow entries; append what was there to `undo`."""
        runner, shadow = self.runner, self.runner.shadow

        def save(array: np.ndarray, where: np.ndarray) -> np.ndarray:
            undo.append((array, where, array[where]))
            return array

        for access in self.reads:     # the last reader: the latest event (events run in order)
            reader = save(shadow.reader[access.tensor.buffer_id], access.spot)
            np.maximum.at(reader, access.spot, self.events[access.tile])
        written = runner.index[runner.copies.get(self.op, self.op)]
        for access, flat, stored in self.writes:
            buf = access.tensor.buffer_id
            save(runner.elements(access.tensor), flat)[flat] = stored
            save(shadow.writer[buf], access.spot)[access.spot] = self.events[access.tile]
            save(shadow.data_op[buf], access.spot)[access.spot] = written


def _group_tiles(schedule: plan.TaskGroupSchedule
                 ) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray] | None:
    """A task group's tiles in the order `run_group` runs them: (processor, slot) of each
    non-empty slot, each tile's task index and its slot's position in that list (None: no
    tiles)."""
    slots, indices, slot_of = [], [], []
    for proc, per_slot in schedule.assignment.items():
        for slot, tiles in enumerate(per_slot):
            if tiles:
                slot_of += [len(slots)] * len(tiles)
                slots.append((proc, slot))
                indices += tiles
    if not indices:
        return None
    return slots, np.asarray(indices, dtype=np.int64), np.asarray(slot_of, dtype=np.int64)


def _tile_elements(op: ark.ArkOp, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`tile_coordinates` of tiles `indices`, and for each element its tile's position in
    `indices`."""
    coords = tile_coordinates(op, indices)
    unit = np.array(plan.unit_shape(op))
    shape4 = np.array(_pad4(plan.output_shape(op), 1))
    counts = -(-shape4 // unit)
    origins = np.stack(np.unravel_index(indices, counts), axis=1) * unit
    extents = np.minimum(origins + unit, shape4) - origins
    return coords, np.repeat(np.arange(len(indices)), np.prod(extents, axis=1))


def _regions(dims: Sequence[int], shape: Sequence[int], starts: np.ndarray,
             stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and stops (tiles x dims) of a tensor's regions, from `region_map`'s dims and the
    output tiles' starts and stops, clipped to the tensor as slicing clips."""
    lo = np.zeros((len(starts), len(shape)), dtype=np.int64)
    hi = np.zeros_like(lo)
    for j, (dim, size) in enumerate(zip(dims, shape, strict=True)):
        if dim >= 0:
            lo[:, j], hi[:, j] = np.minimum(starts[:, dim], size), np.minimum(stops[:, dim], size)
        else:
            hi[:, j] = size if dim == FULL else min(1, size)
    return lo, hi


def _region_coordinates(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Coordinates (elements x dims) of every element of regions of one extent, region by
    region, each in row-major order."""
    extent = hi[0] - lo[0]
    grid = np.indices(extent).reshape(len(extent), -1).T
    return (lo[:, None, :] + grid[None, :, :]).reshape(-1, len(extent))


def _region_elements(tensor: ark.TensorType, lo: np.ndarray, hi: np.ndarray
                     ) -> tuple[np.ndarray, tuple[int, ...]]:
    """Flat element indices of regions of one extent (see `_region_coordinates`), and that
    extent."""
    return (element_indices(tensor, _region_coordinates(lo, hi)),
            tuple(int(e) for e in hi[0] - lo[0]))


def _per_element(tiles: np.ndarray, flat: np.ndarray, tensor: ark.TensorType,
                 runner: PlanRunner) -> np.ndarray:
    """The tile of each shadow element of `flat` (regions of one extent, tile by tile)."""
    scale = tensor.element_bytes // runner.shadow.units[tensor.buffer_id]
    return np.repeat(tiles, len(flat) // max(len(tiles), 1) * scale)


def tile_coordinates(op: ark.ArkOp, indices: np.ndarray) -> np.ndarray:
    """Coordinates (elements x dims) of every output element of tiles `indices`."""
    shape = plan.output_shape(op)
    shape4 = np.array(_pad4(shape, 1))
    unit = np.array(plan.unit_shape(op))
    counts = -(-shape4 // unit)
    origins = np.stack(np.unravel_index(indices, counts), axis=1) * unit
    grid = np.stack(np.unravel_index(np.arange(int(np.prod(unit))), unit), axis=1)
    coords = (origins[:, None, :] + grid[None, :, :]).reshape(-1, 4)
    coords = coords[(coords < shape4).all(axis=1)]
    return coords[:, 4 - len(shape):]


def broadcast_coordinates(shape: Sequence[int], out_shape: Sequence[int],
                          coords: np.ndarray) -> np.ndarray:
    """The elements of a (broadcast) input that output elements `coords` read."""
    lead = len(out_shape) - len(shape)
    mapped = coords[:, max(lead, 0):].copy()
    for d, size in enumerate(shape[max(-lead, 0):]):
        if size == 1:
            mapped[:, d] = 0
    if lead < 0:
        mapped = np.concatenate([np.zeros((len(coords), -lead), dtype=mapped.dtype), mapped],
                                axis=1)
    return mapped


def element_indices(tensor: ark.TensorType, coords: np.ndarray) -> np.ndarray:
    """Flat element indices in the tensor's buffer of its elements `coords`."""
    flat = np.zeros(len(coords), dtype=np.int64)
    for d, (extent, offset) in enumerate(zip(tensor.strides_list, tensor.offsets_list,
                                             strict=True)):
        flat = flat * extent + coords[:, d] + offset
    return flat


def _first(indices: Sequence[int]) -> str:
    shown = ", ".join(map(str, list(indices)[:4]))
    return shown + (", ..." if len(indices) > 4 else "")


def _extents(tile: tuple[slice, ...], shape: Sequence[int]) -> list[int]:
    return [len(range(*s.indices(n))) for s, n in zip(tile, shape, strict=True)]


def _fit(shape: Sequence[int], ndim: int) -> tuple[int, ...]:
    shape = tuple(shape)
    while len(shape) > ndim and shape[0] == 1:
        shape = shape[1:]
    return (1,) * (ndim - len(shape)) + shape


def _close(got: np.ndarray, expected: np.ndarray, dtype: str,
           scale: np.ndarray | None = None) -> bool:
    """Do the plan's values equal the model's within `dtypes.tolerance`? With the model's
    error scales (`ModelRun.scales`), each element may differ by atol + rtol * its scale
    rather than rtol * |expected|: where a sum cancels, the plan's inputs (which differ from
    the model's within the tolerance: another summation order, an intermediate rounded the
    other way) move the result by about rtol times the root of the terms' squares, not of the
    result's. The scale is at least |expected|, so this never rejects what the plain
    comparison accepts."""
    if scale is None:
        tol = dtypes.tolerance(dtype)
        return bool(np.allclose(got, expected, rtol=tol.rtol, atol=tol.atol, equal_nan=True))
    return bool(_close_elements(got, expected, dtype, scale).all())


def _close_elements(got: np.ndarray, expected: np.ndarray, dtype: str,
                    scale: np.ndarray) -> np.ndarray:
    """`_close` element by element, with error scales `scale` (see `_close`)."""
    tol = dtypes.tolerance(dtype)
    got = np.asarray(got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    scale = np.asarray(scale, dtype=np.float64)
    # A scale that overflowed says nothing about the element: it falls back to |expected|
    # rather than accepting any value there.
    scale = np.where(np.isfinite(scale), scale, 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        bound = tol.atol + tol.rtol * np.fmax(scale, np.abs(expected))
        near = np.abs(got - expected) <= bound
    return near | (got == expected) | (np.isnan(got) & np.isnan(expected))


def _scales(run: ModelRun, tensor_id: int, where=None) -> np.ndarray | None:
    """The model's error scales of a tensor (`_close`), if it has them: all of them, or those
    at `where` (a tile's slices or an array index), where the caller compares part of it."""
    scale = run.scales.get(tensor_id)
    return scale if scale is None or where is None else scale[where]


def _max_diff(got: np.ndarray, expected: np.ndarray) -> float:
    """The largest difference; inf where one side is NaN and the other is not."""
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    if not got.size:
        return 0.0
    if np.any(np.isnan(got) != np.isnan(expected)):
        return math.inf
    with np.errstate(invalid="ignore"):
        diff = np.abs(got - expected)
    finite = diff[~np.isnan(diff)]
    return float(finite.max()) if finite.size else 0.0


# ---------------------------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------------------------


def plan_device(p: plan.PlanOp, arch: str | None = None) -> tuple[GpuDevice, str]:
    """The device to model: `arch` if given, else the plan's Architecture's, else an A100."""
    if arch:
        return gpu_device(arch), "given"
    device = gpu_for_architecture(p.arch_name)
    if device is not None:
        return device, "from the plan's Architecture"
    return gpu_device("a100"), "assumed: the plan names no known Architecture"


def memory_report(p: plan.PlanOp) -> dict[str, int]:
    """Device bytes of the plan's buffers, and how many of them hold model inputs."""
    layout = plan.buffer_layout(p)
    input_buffers = _input_buffers(p)
    held = sum(n for b, n in layout.sizes.items() if b in input_buffers)
    return {"device_bytes": layout.total_bytes, "input_bytes": held,
            "activation_bytes": layout.total_bytes - held, "buffers": len(layout.sizes)}


def _input_buffers(p: plan.PlanOp) -> set[int]:
    """Buffers holding data no operator of the plan writes (inputs and weights)."""
    written = {t.buffer_id for op in p.graph.ops if isinstance(op, ark.ArkOp)
               for t in op.outputs}
    return {r.type.buffer_id for op in p.graph.ops for r in op.results
            if isinstance(r.type, ark.TensorType) and r.type.buffer_id not in written}


FULL_RUN_TASKS = 5_000
"""Plans with more task executions than this are checked by `_sampled` (see `simulate`)."""
SAMPLED_TILES = 16
"""Tiles per TaskInfo the sampled check computes (first, last and random ones)."""


def simulate(p: plan.PlanOp, *, seed: int = 0, arch: str | None = None,
             functional: bool = True, model: ModelRun | None = None,
             full_run_tasks: int = FULL_RUN_TASKS) -> dict[str, Any]:
    """The report of `planc simulate` for plan `p` (see the module docstring).

    With `model` (a `run_model` result of the model the plan was made from), the plan runs on
    that run's inputs and its outputs are also compared with that model's, by tensor id.
    That comparison uses the model run's error scales where it has them (`run_model(...,
    error_scales=True)`; see `_close`); the plan's own tiles and outputs are always compared with
    its derived model's.

    Up to `full_run_tasks` task executions the plan runs tile by tile in ARK's order (every
    tile, every race). Beyond, what is proved is said in `proved`: the schedule facts of
    `planc check` symbolically for every task (exactly-once distribution and coverage,
    ordering of every conflicting access), and the numbers of `SAMPLED_TILES` tiles of every
    TaskInfo, computed from the model's own values of their inputs.
    """
    device, why = plan_device(p, arch)
    refuse_impossible_grid(p)
    report: dict[str, Any] = {"ok": True, "device": device.name, "device_source": why}
    executions = plan.task_executions(p)
    report["task_executions"] = executions
    if functional and executions > full_run_tasks:
        report.update(_sampled(p, seed, model))
    elif functional:
        report.update(_functional(p, seed, model))
        report["proved"] = [f"all {executions} task executions run tile by tile in ARK's order "
                            "on NaN-filled memory: every tile equals the model's, and no race, "
                            "clobbered or missing data"] if report["ok"] else []
    cost = plan_cost(p, device)
    report.update(cost.summary(p.processor_count, p.warps_per_processor))
    report.update(memory_report(p))
    return report


def _functional(p: plan.PlanOp, seed: int, model_run: ModelRun | None) -> dict[str, Any]:
    comm = [op for op in p.graph.ops if isinstance(op, ark.CommOp)]
    if comm:
        raise PlancError(f"{comm[0].ark_type} '{comm[0].label.data}': a plan of one rank "
                         "cannot run its communication without the other ranks; use "
                         "--cost-only for its modeled time and memory",
                         path=source_path(comm[0]))
    model, originals, ordering = derive_model(p)
    inputs = _inputs_from(model_run, model) if model_run is not None else None
    reference = run_model(model, inputs, seed=seed, error_scales=True)
    runner = PlanRunner(p, reference, originals)
    for message in ordering:
        runner.report("order", message)
    ran = runner.run()
    for task_id, counts in ran.items():
        missing = np.flatnonzero(counts == 0)
        if len(missing):
            shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
            runner.report("not-run", f"task {task_id} never runs task indices {shown} "
                          f"({len(missing)} of {len(counts)})",
                          p.tasks().get(task_id))
    outputs, max_abs = {}, 0.0
    output_ok = True
    for tid in reference.outputs:
        tensor = reference.types[tid]
        got = dtypes.to_compute(runner.view(tensor), tensor.data_type)
        expected = reference.tensors[tid]
        close = _close(got, expected, tensor.data_type, _scales(reference, tid))
        diff = _max_diff(got, expected)
        max_abs = max(max_abs, diff)
        output_ok &= close
        outputs[str(tid)] = {"shape": tensor.shape_list, "dtype": tensor.data_type,
                             "max_abs_error": diff, "ok": close}
    if model_run is not None:
        for tid in model_run.outputs:
            tensor = model_run.types[tid]
            got = dtypes.to_compute(runner.view(reference.types.get(tid, tensor)),
                                    tensor.data_type) if tid in reference.types else None
            if got is None:
                runner.report("model", f"the plan has no tensor {tid}, an output of the model")
                output_ok = False
                continue
            diff = _max_diff(got, model_run.tensors[tid])
            max_abs = max(max_abs, diff)
            if not _close(got, model_run.tensors[tid], tensor.data_type,
                          _scales(model_run, tid)):
                output_ok = False
                runner.report("model", f"output tensor {tid} differs from the model's "
                              f"(largest difference {diff:.3g})")
    problems = [str(pr) for pr in runner.problems]
    return {
        "ok": output_ok and not runner.counts,
        "max_abs_error": max_abs,
        "outputs": outputs,
        "problems": problems,
        "problem_counts": runner.counts,
        "tasks_run": int(sum(int(c.sum()) for c in ran.values())),
    }


def run_plan(p: plan.PlanOp, inputs: dict[int, np.ndarray]
             ) -> tuple[ModelRun, dict[int, np.ndarray]]:
    """`planc run` of a plan: every task tile by tile in ARK's order on `inputs` (by tensor
    id); returns the plan's model run on them and the plan's values of its outputs. A race,
    missing data or a plan too big to run every tile is an error."""
    executions = plan.task_executions(p)
    if executions > RUN_TASKS:
        raise PlancError(f"the plan runs {executions:,} task executions, more than the "
                         f"{RUN_TASKS:,} planc runs tile by tile; run the model it was made "
                         "from instead (planc run MODEL)")
    comm = [op for op in p.graph.ops if isinstance(op, ark.CommOp)]
    if comm:
        raise PlancError(f"{comm[0].ark_type} '{comm[0].label.data}': a plan of one rank "
                         "cannot run its communication without the other ranks",
                         path=source_path(comm[0]))
    model, originals, ordering = derive_model(p)
    reference = run_model(model, inputs, error_scales=True)
    runner = PlanRunner(p, reference, originals)
    runner.run()
    problems = [str(pr) for pr in runner.problems] + ordering
    if problems:
        raise PlancError(f"the plan does not run correctly: {problems[0]}")
    outputs = {tid: dtypes.to_compute(runner.view(reference.types[tid]),
                                      reference.types[tid].data_type)
               for tid in reference.outputs}
    return reference, outputs


RUN_TASKS = 200_000
"""The most task executions `planc run` runs tile by tile (about a minute of numpy)."""


def _sampled(p: plan.PlanOp, seed: int, model_run: ModelRun | None) -> dict[str, Any]:
    """The functional check of a large plan: its schedule decided symbolically, and a stated
    sample of tiles computed (see `simulate`)."""
    from ground.progress import progress
    from targets.ark.plan_check import check as check_schedule

    findings = check_schedule(p, None)
    errors = [f for f in findings if f.severity == "error"]
    clones: dict[Operation, Operation] = {}
    model, originals, ordering = derive_model(p, clones)
    inputs = _inputs_from(model_run, model) if model_run is not None else None
    written = {t.buffer_id for op in model.operators() for t in op.outputs}

    def stateful(value: SSAValue) -> bool:
        """A view of bytes operators write: what it held when read is kept (several
        operators may write its bytes, e.g. the two copies of an im2col table, and a later
        one may reuse them), not derived from one source's result or the final memory."""
        return isinstance(value.owner, ark.ViewOp) and value.type.buffer_id in written

    reference = run_model(model, inputs, seed=seed, keep_reads=stateful, error_scales=True)
    copies = operator_copies(p)
    reader: list[Operation | None] = [None]
    """The model's clone of the operator whose tiles are being sampled."""
    rng = np.random.default_rng(seed)
    problems = [f"{f.rule}: {f.message}" for f in errors[:MAX_ERRORS]] + ordering
    checked = total = 0
    max_abs = 0.0

    scratch = Memory(buffer_sizes([r.type for op in p.graph.ops for r in op.results
                                    if isinstance(r.type, ark.TensorType)]))

    seen: dict[SSAValue, np.ndarray] = {}
    """The views' values that the TaskInfo being sampled reads (each tile of it reads the
    same ones: made once per TaskInfo, not once per tile)."""

    def model_value(value: SSAValue) -> np.ndarray:
        """The model's value of a plan tensor: its own, or for a view (a reshape or slice of
        the plan's) its source's values seen through the view's layout."""
        values = reference.tensors.get(value.type.tensor_id)
        if values is not None:
            return values
        values = reference.reads.get((reader[0], value.type.tensor_id))
        if values is not None:
            return values
        if value in seen:
            return seen[value]
        owner = value.owner
        if isinstance(owner, ark.ViewOp) and owner.source is not None:
            scratch.write(owner.source.type, model_value(owner.source))
            values = scratch.read(value.type)
        else:
            values = reference.memory.read(value.type)     # an input, still where it was
        seen[value] = values
        return values

    def read(value: SSAValue, region, rows=None):
        values = model_value(value)
        return values if rows is not None else values[region]

    for task_id, ops in progress(list(p.task_operators().items()), "sampling tiles"):
        seen.clear()
        count = p.num_tasks(task_id)
        total += count
        picks = sorted({0, count - 1, *rng.integers(0, max(count, 1), SAMPLED_TILES - 2)}
                       ) if count else []
        for op in ops:
            if isinstance(op, (ark.NoopOp, ark.TensorOp, ark.ReshapeOp)) or not op.outputs:
                continue
            result = copies.get(op, op).results_types[0]
            reader[0] = clones.get(copies.get(op, op))
            expected_all = reference.tensors.get(result.tensor_id)
            for index in picks:
                tile, values = tile_values(op, index, read)
                if expected_all is None:
                    continue
                expected = expected_all[tile]
                got = dtypes.round_to(np.broadcast_to(values, expected.shape),
                                      result.data_type)
                diff = _max_diff(got, expected)
                max_abs = max(max_abs, diff)
                if not _close(got, expected, result.data_type,
                              _scales(reference, result.tensor_id, tile)) \
                        and len(problems) < MAX_ERRORS:
                    problems.append(f"'{op.label.data}' (task {task_id}) computes tile {index} "
                                    f"differently from the model (largest difference "
                                    f"{diff:.3g})")
            checked += len(picks)
    if model_run is not None:       # the operators the plan runs compute the given model
        for tid in model_run.outputs:
            got = reference.tensors.get(tid)
            want = model_run.tensors[tid]
            if got is None or not _close(got, want, model_run.types[tid].data_type,
                                         _scales(model_run, tid)):
                problems.append(f"output tensor {tid} of the model is not what the plan's "
                                "operators compute" + (f" (largest difference "
                                                       f"{_max_diff(got, want):.3g})"
                                                       if got is not None else ""))
    ok = not problems
    proved = []
    if not errors:
        proved.append("symbolically, for every task: each task group runs each of its tasks "
                      "exactly once, every TaskInfo's tasks and split operators' tiles are "
                      "covered, and every conflicting access is ordered (planc check's rules)")
    proved.append(f"numerically, {checked} of {total} tiles ({SAMPLED_TILES} per TaskInfo: the "
                  f"first, the last and random ones, seed {seed}), each computed from the "
                  "model's values of its inputs, "
                  + ("equal the model's" if ok else "checked (see problems)"))
    return {"ok": ok, "mode": "sampled", "max_abs_error": max_abs, "problems": problems,
            "sampled_tiles": checked, "tiles_total": total, "proved": proved}


def _inputs_from(model_run: ModelRun, model: ark.ModelOp) -> dict[int, np.ndarray]:
    """The values of a model run's inputs as every tensor of `model` on their buffers sees
    them (a plan may read an input through views of its own, e.g. split-K slices)."""
    types = [model_run.types[t] for t in model_run.inputs]
    tensors = [r.type for op in model.graph.ops for r in op.results]
    memory = Memory(buffer_sizes(types + tensors))
    for tid, values in model_run.inputs.items():
        memory.write(model_run.types[tid], values)
    held = {t.buffer_id for t in types}
    return {t.tensor_id: memory.read(t) for t in tensors if t.buffer_id in held}


def single(module: ModuleOp | plan.PlanOp) -> plan.PlanOp:
    if isinstance(module, plan.PlanOp):
        return module
    return single_root(module, plan.PlanOp)


def simulate_plan(module: ModuleOp | plan.PlanOp, options: Namespace | None = None
                  ) -> dict[str, Any]:
    """The `planc simulate` hook (and Python API) for ARK plans."""
    seed = getattr(options, "seed", 0) or 0
    arch = getattr(options, "arch", None)
    functional = not getattr(options, "cost_only", False)
    limit = getattr(options, "full_run_limit", None)
    if limit is not None and limit < 0:
        from ground.diagnostics import UsageError

        raise UsageError(f"--full-run-limit: expected a number of task executions, 0 or more, "
                         f"got {limit}")
    return simulate(single(module), seed=seed, arch=arch, functional=functional,
                    full_run_tasks=FULL_RUN_TASKS if limit is None else limit)
