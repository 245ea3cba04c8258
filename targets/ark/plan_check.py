"""`planc check` on ARK plans: every rule decided without running a tile.

The verifiers (`dialects.plan`) check each object of the plan; these rules need the whole
plan, and are decided on progressions, byte regions and processor sets (never per task or
element), so a 740k-task plan checks in about the time its import takes:

* `ark-plan.task-distribution` (error): a task group's tasks do not each run exactly once
  under the runtime's own distribution. ARK's `task_seq` computes a processor's position as
  `((blockIdx.x + gridDim.x - ProcCurrent) % gridDim.x) / ProcStep`: modulo the whole grid,
  while the code generator rotates `ProcCurrent` within the resource group. When a resource
  group is smaller than the grid, the processors before the rotated start get positions
  beyond the group's size, and their tasks are skipped or run twice (`--ark-runtime ark`, the
  default). `--ark-runtime planc` checks the format's intended formula instead (rotation
  within the group), which is what planc's own CUDA and CPU programs run.
* `ark-plan.task-coverage` (error): the task groups of a TaskInfo do not run its task
  indices 0 .. NumTasks-1 exactly once: tiles never computed, or computed twice (a warning
  when recomputing a tile is harmless: no operator of the task reads what it writes).
* `ark-plan.missing-producer` (error): a TaskInfo in no task group whose operators' results
  an operator that runs reads (through views too), or that computes one of the model's final
  outputs: the reader, or the user, gets whatever the buffer held. A TaskInfo in no task
  group that nothing depends on is dead and harmless (ARK's own allreduce-sm plans have
  eight): no finding.
* `ark-plan.split-coverage` (error): an operator whose output is written by several
  TaskInfos (a split by task ranges) does not cover its output's tiles exactly once.
* `ark-plan.split-k-overlap` (error): the K slices of matmuls an add chain sums overlap: one
  K range is summed twice (and, the parts' sizes fixed, another never).
* `ark-plan.unordered-access` (error): two task groups touch overlapping bytes of a buffer,
  one of them writing, and nothing orders them: no chain of grid barriers from the first one's
  processors to the second one's, and not the same processors and warps in sequence.
* `ark-plan.clobbered-value` and `ark-plan.unwritten-read` (errors): value flow. In the
  runtime's order, the last write of the bytes an operator reads is not the producer the
  plan's model names for the value it reads (a result placed over a live tensor), or that
  producer has not written them yet (see `_Sweep`).

Ordering and value flow come from one sweep over the accesses in the runtime's order, against
per-buffer entries of who last wrote which bytes and who read them since: each access is
compared with those only, so the work is linear in the plan's accesses (planc's plan of a
50k-operator model checks in about the time it takes to compile). The same rules are the
translation validation of every ARK lowering (`backends.ark_plan.validate`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from dialects import ark
from dialects import plan as pl
from dialects.findings import ERROR, WARNING, Finding, at_op, from_error
from dialects.json_value import from_attr
from dialects.utils import op_list, single_root, walk_ops
from targets.ark.byte_regions import ByteRegion, covered_by_union, covers, overlaps
from targets.ark.coverage import Progression, cover, describe
from targets.ark.model_outputs import final_outputs
from targets.ark.tensor_layouts import layout_of

RUNTIMES = ("ark", "planc")


def check(module: ModuleOp | pl.PlanOp, options: Any = None) -> list[Finding]:
    p = module if isinstance(module, pl.PlanOp) else single_root(module, pl.PlanOp)
    runtime = getattr(options, "ark_runtime", None) or "ark"
    index = PlanIndex.of(p)
    groups = list(task_groups(p, index))
    operators = index.operators
    findings = [from_error(ark.unknown_type_error(op, "ark-plan"), "ark-plan")
                for op in index.unknown]
    findings += distribution_findings(p, groups, runtime)
    findings += coverage_findings(p, groups, operators, index)
    findings += split_k_findings(p, index)
    findings += ordering_findings(p, groups, operators, index)
    return findings


@dataclass
class PlanIndex:
    """The plan's graph sorted once: the rules ask for its TaskInfos, processor groups and
    operators again and again, and each of `PlanOp`'s accessors walks the whole graph (tens
    of thousands of ops). The same answers as those accessors, for a plan nothing changes
    while the rules run."""

    tasks: dict[int, pl.TaskOp]
    """`PlanOp.tasks`."""
    processor_groups: list[pl.ProcessorGroupOp]
    """`PlanOp.processor_groups`."""
    operators: dict[int, list[ark.ArkOp]]
    """`PlanOp.task_operators`."""
    ark_ops: list[ark.ArkOp]
    """The graph's `ark` operators, in order."""
    unknown: list[ark.GenericOp]
    """`ark.unknown_operators` of the plan (operators of types ARK does not register)."""

    @staticmethod
    def of(p: pl.PlanOp) -> PlanIndex:
        tasks: dict[int, pl.TaskOp] = {}
        pgs: list[pl.ProcessorGroupOp] = []
        ark_ops: list[ark.ArkOp] = []
        unknown: list[ark.GenericOp] = []
        kinds: dict[type, int] = {}
        for op in op_list(p.graph):
            cls = type(op)
            kind = kinds.get(cls)
            if kind is None:    # (one isinstance per class: ArkOp's is an ABC check)
                kind = kinds[cls] = (1 if issubclass(cls, ark.ArkOp) else
                                     2 if issubclass(cls, pl.TaskOp) else
                                     3 if issubclass(cls, pl.ProcessorGroupOp) else 0)
            if kind == 1:
                ark_ops.append(op)
            elif kind == 2:
                tasks[op.task_id] = op
            elif kind == 3:
                pgs.append(op)
            if op.regions:      # (`ark.unknown_operators`' walk, in the same order)
                unknown += [o for o in walk_ops(op) if type(o) is ark.GenericOp]
            elif cls is ark.GenericOp:
                unknown.append(op)
        operators: dict[int, list[ark.ArkOp]] = {t: [] for t in tasks}
        for op in ark_ops:
            task = op.properties.get("task")
            if task is not None:
                operators.setdefault(task.value.data, []).append(op)
        return PlanIndex(tasks, pgs, operators, ark_ops, unknown)

    def final_outputs(self) -> list:
        """`model_outputs.final_outputs` of the operators in the plan's order (made once)."""
        found = self.__dict__.get("_final_outputs")
        if found is None:
            found = self.__dict__["_final_outputs"] = final_outputs(self.ark_ops)
        return found


# ---------------------------------------------------------------------------------------------
# The task groups, in execution order
# ---------------------------------------------------------------------------------------------


@dataclass
class Group:
    """One TaskGroup where it runs: processor group, resource group, its rotation."""

    index: int
    pg_index: int
    pg: pl.ProcessorGroupOp
    rg: pl.ResourceGroupOp
    tg: pl.TaskGroupOp
    first: int
    """The rotated first processor number (`ProcCurrent` relative to the group)."""
    layout: pl.SlotLayout | None
    task: int = -1
    """`tg.task`, the TaskInfo it runs (read at every access of the sweep)."""

    def __post_init__(self) -> None:
        self.task = self.tg.task


def task_groups(p: pl.PlanOp, plan: PlanIndex | None = None) -> Iterator[Group]:
    tasks = plan.tasks if plan is not None else p.tasks()
    index = 0
    for pg_index, pg in enumerate(plan.processor_groups if plan is not None
                                  else p.processor_groups()):
        for rg in pg.resource_groups():
            for tg, first in pl.task_group_starts(rg):
                task = tasks.get(tg.task)
                yield Group(index, pg_index, pg, rg, tg, first,
                            pl.slot_layout(rg, task) if task is not None else None)
                index += 1


# ---------------------------------------------------------------------------------------------
# Distribution under the runtime
# ---------------------------------------------------------------------------------------------


def runtime_blocks(processors: pl.Range, first: int, grid: int, blocks: int,
                   runtime: str) -> list[Progression]:
    """The blocks (of `granularity` tasks) each processor of a resource group runs.

    ARK: processor b has position ((b + G - c) % G) // step with c = begin + first*step, and
    runs blocks position, position+n, ... (n processors). planc: the positions are the
    processor numbers counted from `first`, wrapping within the group: 0 .. n-1.
    """
    n = len(processors)
    if runtime == "planc":
        return [Progression(k, blocks, n) for k in range(n)]
    current = processors.begin + first * processors.step
    return [Progression(((b + grid - current) % grid) // processors.step, blocks, n)
            for b in processors]


def distribution_findings(p: pl.PlanOp, groups: list[Group], runtime: str
                          ) -> Iterator[Finding]:
    grid = p.processor_count
    memo: dict[tuple, Any] = {}
    for g in groups:
        n_tasks, gran = len(g.tg.tasks), max(g.tg.gran, 1)
        if not n_tasks or not len(g.rg.processors):
            continue
        blocks = -(-n_tasks // gran)
        procs = g.rg.processors
        if runtime == "planc" or (len(procs) == grid and procs.step == 1):
            continue    # positions 0 .. n-1, each once: every block runs exactly once
        key = (procs.begin, procs.end, procs.step, g.first, blocks)
        result = memo.get(key)
        if result is None:
            result = memo[key] = cover(runtime_blocks(procs, g.first, grid, blocks, runtime),
                                       blocks)
        if result.missing == 0 and result.repeated == 0:
            continue
        missed = min(n_tasks, result.missing * gran)
        parts = []
        if result.missing:
            first = g.tg.tasks.begin + g.tg.tasks.step * result.first_missing * gran
            parts.append(f"{missed} task{'s' * (missed != 1)} never run (the first is task "
                         f"{first})")
        if result.repeated:
            first = g.tg.tasks.begin + g.tg.tasks.step * result.first_repeated * gran
            parts.append(f"{min(n_tasks, result.repeated * gran)} run more than once (the "
                         f"first is task {first})")
        text = "; ".join(parts)
        why = ""
        if runtime == "ark" and len(g.rg.processors) < grid and g.first:
            why = (f" (ARK's task_seq takes the rotation modulo the grid of {grid} processors, "
                   f"not the resource group's {len(g.rg.processors)}; the group starts at "
                   f"processor {g.rg.processors.begin + g.first * g.rg.processors.step})")
        yield at_op(g.tg, "ark-plan.task-distribution", ERROR,
                    f"task group of task {g.tg.task} runs {n_tasks - missed} of its {n_tasks} "
                    f"tasks {g.tg.tasks} under the {runtime} runtime: {text}{why}")


# ---------------------------------------------------------------------------------------------
# Coverage of task indices and tiles
# ---------------------------------------------------------------------------------------------


def coverage_findings(p: pl.PlanOp, groups: list[Group],
                      operators: dict[int, list[ark.ArkOp]] | None = None,
                      plan: PlanIndex | None = None) -> list[Finding]:
    findings: list[Finding] = []
    ranges: dict[int, list[Progression]] = defaultdict(list)
    for g in groups:
        r = g.tg.tasks
        ranges[g.tg.task].append(Progression(r.begin, r.end, r.step))
    plan = plan if plan is not None else PlanIndex.of(p)
    operators = operators if operators is not None else plan.operators
    tasks = plan.tasks
    runs = _runs(operators)
    split = _split_tasks(operators, runs)
    outputs = _model_outputs(plan) if any(
        ops and t in tasks and t not in ranges for t, ops in operators.items()) else set()
    for task_id, ops in operators.items():
        if not ops or task_id not in tasks:
            continue
        num_tasks = _num_tasks(ops[0])     # `PlanOp.num_tasks`
        if task_id not in ranges:
            findings += _unscheduled(tasks[task_id], task_id, ops, ranges, runs, outputs)
            continue
        result = cover(ranges[task_id], num_tasks)
        if not result.decided:
            findings.append(at_op(tasks[task_id], "ark-plan.task-coverage", WARNING,
                                  f"coverage of task {task_id} not decided: its task ranges' "
                                  "steps have too large a common multiple"))
            continue
        if (result.missing and task_id not in split) or result.outside:
            findings.append(at_op(tasks[task_id], "ark-plan.task-coverage", ERROR,
                                  f"task {task_id} ({_labels(ops)}) has NumTasks {num_tasks}, "
                                  f"but its task groups run: {describe(result, 'tasks')}"))
        elif result.repeated:
            findings.append(_repeated(tasks[task_id], "ark-plan.task-coverage", ops,
                                      f"task {task_id} ({_labels(ops)}): "
                                      f"{describe(result, 'tasks')}"))
    findings += _split_findings(runs, ranges)
    return findings


def _num_tasks(op: ark.ArkOp) -> int:
    """NumTasks of the Config of a TaskInfo's first operator (`PlanOp.num_tasks`), converting
    that member only."""
    config = op.config
    found = config.data.get("NumTasks") if config is not None else None
    return int(from_attr(found)) if found is not None else 0


def _unscheduled(task: pl.TaskOp, task_id: int, ops: list[ark.ArkOp],
                 ranges: dict[int, list[Progression]], runs: dict[tuple, list[ark.ArkOp]],
                 outputs: set[int]) -> list[Finding]:
    """A TaskInfo in no task group: its operators never run. An error when an operator that
    does run reads what they produce, or when they produce one of the model's final outputs
    (and no other TaskInfo that runs computes the same operator): the reader, or the user,
    sees whatever the buffer held before. Otherwise nothing depends on them and the plan
    computes its model all the same: no finding (ARK's own allreduce-sm plans define seven
    receive tasks and a barrier that they never schedule)."""
    for op in ops:
        key = op_key(op) if op.outputs else None
        if key is not None and any(o.task_id in ranges for o in runs.get(key, [])):
            continue
        if any(id(v) in outputs for v in op.results):
            return [at_op(task, "ark-plan.missing-producer", ERROR,
                          f"task {task_id} ({_labels(ops)}) is in no task group, but "
                          f"'{op.label.data}' computes an output of the model: it is never "
                          "computed")]
        reader = next((r for r in _readers(op) if r.task_id in ranges), None)
        if reader is not None:
            return [at_op(task, "ark-plan.missing-producer", ERROR,
                          f"task {task_id} ({_labels(ops)}) is in no task group, but "
                          f"'{reader.label.data}' (task {reader.task_id}) reads what "
                          f"'{op.label.data}' produces: it reads data nothing wrote")]
    return []


def _model_outputs(plan: PlanIndex) -> set[int]:
    """ids of the model's final outputs (`targets.ark.model_outputs`, over the operators in
    the plan's order), but those of barriers and no-ops, whose result is their input."""
    return {id(v) for v in plan.final_outputs()
            if not isinstance(v.owner, (ark.DeviceSyncOp, ark.NoopOp))}


def _readers(op: ark.ArkOp) -> Iterator[ark.ArkOp]:
    """The operators that read a result of `op`, directly or through views of it."""
    values = list(op.results)
    seen: set[int] = set()
    while values:
        value = values.pop()
        for use in value.uses:
            user = use.operation
            if id(user) in seen:
                continue
            if isinstance(user, ark.ViewOp):
                seen.add(id(user))
                values.extend(user.results)
            elif isinstance(user, ark.ArkOp) and \
                    use.index < len(user.operand_groups()[0]):
                seen.add(id(user))
                yield user


def _repeated(where, rule: str, ops: list[ark.ArkOp], text: str) -> Finding:
    """Work done twice: wrong when an operator updates data in place, else only wasted."""
    if any(_overlaps_any(op) for op in ops):
        return at_op(where, rule, ERROR, text + ", and its operators update data in place, so "
                     "the result is wrong")
    return at_op(where, rule, WARNING, text + " (wasted work)")


def _labels(ops: list[ark.ArkOp]) -> str:
    return ", ".join(f"'{op.label.data}'" for op in ops[:3]) + (" ..." if len(ops) > 3 else "")


def _overlaps_any(op: ark.ArkOp) -> bool:
    """Does `op` write bytes it also reads (an in-place update)?"""
    writes = [ByteRegion.of(t) for t in op.outputs]
    return any(overlaps(w, ByteRegion.of(t)) for w in writes for t in op.inputs)


def _runs(operators: dict[int, list[ark.ArkOp]]) -> dict[tuple, list[ark.ArkOp]]:
    """Each operator (type, name, output view) with every TaskInfo copy that runs it."""
    runs: dict[tuple, list[ark.ArkOp]] = defaultdict(list)
    for ops in operators.values():
        for op in ops:
            if op.operand_groups()[1]:
                runs[op_key(op)].append(op)     # (the key the sweep asks for: made once)
    return runs


def _split_tasks(operators: dict[int, list[ark.ArkOp]],
                 runs: dict[tuple, list[ark.ArkOp]]) -> set[int]:
    """TaskInfos all of whose operators other TaskInfos run too: a split operator, whose
    coverage `_split_findings` decides over all its parts."""
    shared = {op.task_id for ops in runs.values()
              if len(ops) > 1 and len({o.task_id for o in ops}) > 1 for op in ops}
    return {t for t, ops in operators.items() if ops and t in shared}


def _split_findings(runs: dict[tuple, list[ark.ArkOp]], ranges: dict[int, list[Progression]]
                    ) -> list[Finding]:
    """An operator that several TaskInfos run (ARK plans split one operator by task ranges,
    or recompute it inside fused tasks): unless one of them computes all its tiles, together
    they must."""
    findings = []
    for ops in runs.values():
        if len(ops) < 2:
            continue    # (one copy, one TaskInfo: its own coverage decides)
        task_ids = sorted({op.task_id for op in ops})
        if len(task_ids) < 2:
            continue
        tilings = {(tuple(pl.unit_shape(op)), _tile_count(op)) for op in ops}
        first = ops[0]
        if len(tilings) > 1:
            findings.append(at_op(first, "ark-plan.split-coverage", WARNING,
                                  f"'{first.label.data}' runs in tasks {task_ids} with "
                                  "different tilings; planc does not decide whether they cover "
                                  "its output"))
            continue
        tiles = next(iter(tilings))[1]
        if any(cover(ranges.get(t, []), tiles).exact for t in task_ids):
            continue        # one task computes it all; the others recompute it (fusion)
        result = cover([r for t in task_ids for r in ranges.get(t, [])], tiles)
        if not result.decided:
            continue
        text = (f"the output of '{first.label.data}' ({tiles} tiles) is split over tasks "
                f"{task_ids}, which together leave {describe(result, 'tiles')}")
        if result.missing or result.outside:
            findings.append(at_op(first, "ark-plan.split-coverage", ERROR, text))
        elif result.repeated:
            findings.append(_repeated(first, "ark-plan.split-coverage", ops, text))
    return findings


# ---------------------------------------------------------------------------------------------
# Split-K: the parts of a matmul summed into one output cover K exactly once
# ---------------------------------------------------------------------------------------------


def split_k_findings(p: pl.PlanOp, plan: PlanIndex | None = None) -> list[Finding]:
    """`ark-plan.split-k-overlap` (error): matmuls whose results an add chain sums (a matmul
    split along K, planc's `split-k` or ARK's tutorial split-K plan) read K slices of the same
    operands that overlap: that K range is summed twice, and, the parts' lengths being fixed,
    another is never summed. The output is wrong by the overlapping partial products. Decided
    on the slices' index intervals (one per part), at the later part."""
    findings: list[Finding] = []
    parts: dict[int, list[ark.MatmulOp]] = {}
    kinds: dict[type, int] = {}
    for op in (plan.ark_ops if plan is not None else p.graph.ops):
        kind = kinds.get(type(op))
        if kind is None:    # (once per class: ArkOp's isinstance is an ABC check)
            kind = kinds[type(op)] = (1 if isinstance(op, ark.MatmulOp) else
                                      2 if isinstance(op, ark.AddOp) else 0)
        if kind == 1:
            parts[id(op)] = [op]
        elif kind == 2:
            a, b = (_summed(v, parts) for v in op.operand_groups()[0][:2])
            if a and b:
                parts[id(op)] = a + b
                findings += _k_overlaps(a, b)
    return findings[:MAX_FINDINGS]


def _summed(value, parts: dict[int, list]) -> list:
    """The matmuls an add chain has summed into `value` (through views)."""
    return parts.get(id(_root_owner(value)), [])


def _root_owner(value):
    """The op owning the value `value` views (through views), or owning `value` itself."""
    owner = value.owner
    while type(owner) is ark.ViewOp:    # (no class derives from ViewOp)
        source = owner.source_value()
        if source is None:
            break
        owner = source.owner
    return owner


def _k_overlaps(left: list[ark.MatmulOp], right: list[ark.MatmulOp]) -> list[Finding]:
    found = []
    for m2 in right:
        for m1 in left:
            k1, k2 = _k_range(m1), _k_range(m2)
            if k1 is None or k2 is None or k1[0] != k2[0]:
                continue        # not slices of the same operands: not a split of one matmul
            (lo1, hi1), (lo2, hi2) = k1[1], k2[1]
            if lo1 < hi2 and lo2 < hi1:
                found.append(at_op(m2, "ark-plan.split-k-overlap", ERROR,
                                   f"'{m2.label.data}' sums K [{lo2}, {hi2}) and "
                                   f"'{m1.label.data}' K [{lo1}, {hi1}) into one output: K "
                                   f"[{max(lo1, lo2)}, {min(hi1, hi2)}) is summed twice"))
    return found


def _k_range(mm: ark.MatmulOp) -> tuple[tuple, tuple[int, int]] | None:
    """(what identifies the operands' rows and columns but K, K's interval) of a matmul whose
    operands are K slices of larger tensors; None when neither operand is sliced along K."""
    a, b = (ByteRegion.of(v.type) for v in mm.operand_groups()[0][:2])
    ka = 2 if mm.trans_input else 3
    kb = 3 if mm.trans_other else 2
    ia, ib = a._intervals[ka], b._intervals[kb]
    if ia[1] - ia[0] == a.extents[ka] and ib[1] - ib[0] == b.extents[kb]:
        return None
    if ia != ib:
        return None
    rest = tuple(x for d, x in enumerate(a._intervals) if d != ka)
    rest += tuple(x for d, x in enumerate(b._intervals) if d != kb)
    return ((a.buffer, a.extents, b.buffer, b.extents, rest), ia)


def _tile_count(op: ark.ArkOp) -> int:
    shape = pl._pad4(pl.output_shape(op))
    return math.prod(-(-s // u) for s, u in zip(shape, pl.unit_shape(op), strict=True))


def _view_key(t: ark.TensorType) -> tuple:
    """(buffer, shape, strides, offsets, data type) of a tensor, from its `Layout` (which the
    passes made for every tensor of a plan they planned)."""
    layout = t.__dict__.get("_planc_pass_layout") or layout_of(t)
    return (t.buffer.id.data, layout.shape, layout.strides, layout.offsets, layout.data_type)


# ---------------------------------------------------------------------------------------------
# Ordering and value flow: one sweep over the accesses in the runtime's order
# ---------------------------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class Access:
    """One operator of a task group reading or writing one tensor value."""

    group: Group
    op: ark.ArkOp
    value: Any


class Entry:
    """Bytes of a buffer as the sweep last left them: who wrote them (None: nobody yet, the
    bytes the plan was given), who read them since, and the later writes that cover part of
    them (`cut`: the entry is then only partly what its writer left). (A class with slots,
    not a dataclass: the sweep makes one per write.)"""

    __slots__ = ("region", "writer", "readers", "cut", "replaced")

    def __init__(self, region: ByteRegion, writer: Access | None,
                 readers: list[tuple[Access, ByteRegion]] | None = None,
                 replaced: list[tuple[Access, ByteRegion, Access]] | None = None):
        self.region = region
        self.writer = writer
        self.readers = readers if readers is not None else []
        self.cut: list[ByteRegion] = []
        self.replaced = replaced if replaced is not None else []
        """The earlier writes (writer, region) this entry's bytes went through, each with
        the write that first went over it (this entry's, or one before it)."""


ALIASES = (ark.DeviceSyncOp, ark.NoopOp)
"""Operators whose result is their input (they order, they do not write data)."""

_ARK_CLASSES: dict[type, bool] = {}


def _is_ark(op: Any) -> bool:
    """`isinstance(op, ark.ArkOp)`, answered once per class (ArkOp's is an ABC check, and the
    sweep asks it of every value it follows)."""
    cls = type(op)
    found = _ARK_CLASSES.get(cls)
    if found is None:
        found = _ARK_CLASSES[cls] = issubclass(cls, ark.ArkOp)
    return found

MAX_FINDINGS = 50
MAX_REPLACED = 16
"""The most earlier writes an entry remembers having gone over (a bound on memory; beyond,
an overwrite of a live value may go unreported, never reported wrongly)."""
MAX_WALK = 512
"""The most values `_Flow.ancestors` walks back from one value (an in-place chain longer than
that is taken as allowed: not decided, no finding)."""


class _Sweep:
    """The accesses of every task group, in the order ARK's runtime runs them (processor
    groups in plan order, their resource groups, each one's task groups in order: a linear
    extension of the runtime's order once every conflict is ordered), against per-buffer
    entries of what each byte region holds.

    Each access is compared only with the last write of the bytes it touches and the reads
    since that write: every earlier access of those bytes was ordered before that write when
    it was made, and the runtime's order is transitive (a chain of grid barriers, or one
    warp's sequence). So the number of comparisons is linear in the plan's accesses, not in
    the pairs of task groups that touch a buffer.

    Three rules come out of it:

    * `ark-plan.unordered-access` (error): a conflicting pair nothing orders (a race on the
      device: the reader sees either value, or two writes land in either order);
    * `ark-plan.clobbered-value` (error): an operator reads bytes whose last write (in the
      runtime's order) is not the producer the plan's model names for the value it reads,
      through views and in-place updates: another result was placed over a live value
      before its last read, so the reader computes on the wrong data. Reported at the
      overwriting operator, naming the reader;
    * `ark-plan.unwritten-read` (error): an operator reads a value whose producer runs but has
      not written those bytes before the read (it runs later, or on other bytes): the reader
      sees whatever the buffer held.
    """

    def __init__(self, p: pl.PlanOp, groups: list[Group], operators: dict[int, list],
                 plan: PlanIndex | None = None):
        self.groups = groups
        self.operators = operators
        self.entries: dict[int, list[Entry]] = defaultdict(list)
        self.order = _Order(p, plan)
        self.unordered: list[Finding] = []
        self.flow: list[Finding] = []
        self.seen_pairs: set[tuple[int, int]] = set()
        self.seen_flow: set[tuple[int, int]] = set()
        self.keys = _Keys()
        self.scheduled = {op_key(op) for task in {g.task for g in groups}
                          for op in operators.get(task, []) if op.operand_groups()[1]}

    def run(self) -> None:
        accesses: dict[int, list] = {}     # per TaskInfo: (op, reads, writes), made once
        read, write = self.read, self.write
        for g in self.groups:
            steps = accesses.get(g.task)
            if steps is None:
                steps = accesses[g.task] = [
                    (op, *_reads_writes(op)) for op in self.operators.get(g.task, [])]
            for op, reads, writes in steps:
                for value, r in reads:
                    read(Access(g, op, value), r)
                for value, r in writes:
                    write(Access(g, op, value), r)

    # -- the two kinds of access ---------------------------------------------------------------

    def read(self, x: Access, r: ByteRegion) -> None:
        """`x` reads `r` (its value's bytes, not empty)."""
        entries = self.entries[r.buffer]
        group = x.group
        task = group.task
        if len(entries) == 1:
            # The commonest read, decided as below in a few tests: the buffer's one entry is
            # exactly these bytes, last written whole by an operator of the same TaskInfo
            # that the model names for the value (no ordering to ask, nothing to report).
            e = entries[0]
            w = e.writer
            if e.region is r and w is not None and not e.cut and w.group.task == task \
                    and r.in_grid and self.keys.allowed(x.value, w.op):
                e.readers.append((x, r))
                return
        near = [e for e in entries if overlaps(e.region, r)]
        produced = clobbered = False
        for e in near:
            w = e.writer
            if w is not None:
                if w.group.task != task and not self.order.before(w.group, group):
                    self.ordered(w, x, "read after write", r)   # (the finding)
                elif not e.cut or _visible(e, r):
                    if self.keys.allowed(x.value, w.op):
                        produced = True
                    else:
                        by = self.over_live(e, x, r)
                        if by is not None:
                            self.clobbered(by, x, r)
                            clobbered = True
            e.readers.append((x, r))
        if not produced and not clobbered:     # (an overwrite is the mistake, not the read)
            self.unwritten(x, r, near)
        if not (r.in_grid and any(e.region is r for e in near)) and \
                not covered_by_union(r, [e.region for e in near]):
            entries.append(Entry(r, None, [(x, r)]))     # (an entry of r's layout covers r)

    def over_live(self, e: Entry, x: Access, r: ByteRegion) -> Access | None:
        """The write that went over bytes of `r` holding what `x` should read, on the way to
        `e`, if one did. (A writer the model does not name for `x`'s value that wrote other
        bytes of its view is a part of it the model's views do not record, e.g. slices
        written into one buffer: no finding.)"""
        return next((by for old, old_r, by in e.replaced
                     if overlaps(old_r, r) and self.keys.allowed(x.value, old.op)), None)

    def write(self, x: Access, r: ByteRegion) -> None:
        """`x` writes `r` (its value's bytes, not empty)."""
        entries = self.entries[r.buffer]
        task = x.group.task
        kept = []
        replaced = []
        for e in entries:
            if not overlaps(e.region, r):
                kept.append(e)
                continue
            w = e.writer
            if w is not None:
                if w.group.task != task:
                    self.ordered(w, x, "write after write", r)
                if len(replaced) < MAX_REPLACED:
                    replaced.append((w, e.region, x))
            if e.replaced:
                replaced += e.replaced[:MAX_REPLACED - len(replaced)]
            for reader, where in e.readers:
                if reader.group.task != task and overlaps(where, r):
                    self.ordered(reader, x, "write after read", r)
            if not covers(r, e.region):
                e.cut.append(r)
                kept.append(e)
        kept.append(Entry(r, x, None, replaced))
        self.entries[r.buffer] = kept

    # -- findings ----------------------------------------------------------------------------

    def ordered(self, first: Access, second: Access, kind: str, where: ByteRegion) -> bool:
        a, b = first.group, second.group
        if self.order.before(a, b):
            return True
        if _first(self.seen_pairs, self.unordered, (a.index, b.index)):
            lo, hi = where.hull
            self.unordered.append(at_op(
                b.tg, "ark-plan.unordered-access", ERROR,
                f"{kind} on buffer {where.buffer} bytes [{lo}, {hi}): task {b.tg.task} "
                f"(processor group {b.pg_index}) and task {a.tg.task} (processor group "
                f"{a.pg_index}) touch the same bytes and nothing orders them "
                f"({_why_unordered(a, b)})"))
        return False

    def clobbered(self, writer: Access, reader: Access, r: ByteRegion) -> None:
        if not _first(self.seen_flow, self.flow, (id(writer.op), id(reader.op))):
            return
        lo, hi = r.hull
        producer = self.keys.producer_label(reader.value)
        self.flow.append(at_op(
            writer.op, "ark-plan.clobbered-value", ERROR,
            f"'{writer.op.label.data}' (task {writer.group.tg.task}) writes buffer "
            f"{r.buffer} bytes [{lo}, {hi}) while they still hold {producer}, which "
            f"'{reader.op.label.data}' (task {reader.group.tg.task}, processor group "
            f"{reader.group.pg_index}) reads afterwards: it reads the wrong data"))

    def unwritten(self, x: Access, r: ByteRegion, near: list[Entry]) -> None:
        producer = self.keys.producer(x.value)
        if producer is None or isinstance(producer, ALIASES) or \
                op_key(producer) not in self.scheduled:
            return      # a model input, or a producer no task group runs (missing-producer)
        if not any(overlaps(ByteRegion.of(t), r) for t in producer.outputs):
            return      # it reads other bytes than its producer writes (views of a buffer)
        if not _first(self.seen_flow, self.flow, (id(producer), id(x.op))):
            return
        lo, hi = r.hull
        self.flow.append(at_op(
            x.op, "ark-plan.unwritten-read", ERROR,
            f"'{x.op.label.data}' (task {x.group.tg.task}, processor group "
            f"{x.group.pg_index}) reads buffer {r.buffer} bytes [{lo}, {hi}) before "
            f"'{producer.label.data}' (its producer) wrote them: it reads whatever the buffer "
            "held"))

    def outputs(self, values: list) -> None:
        """The model's final outputs: their bytes' last writer, at the end, is the producer
        the model names (nothing overwrote them after)."""
        for value in values:
            r = ByteRegion.of(value.type)
            for e in self.entries.get(r.buffer, ()):
                w = e.writer
                if w is None or not overlaps(e.region, r) or not _visible(e, r) or \
                        self.keys.allowed(value, w.op):
                    continue
                x = Access(w.group, value.owner, value)
                by = self.over_live(e, x, r)
                if by is not None:
                    self.clobbered(by, x, r)


def _reads_writes(op: ark.ArkOp) -> tuple[list, list]:
    """What an operator reads and writes, each value with its bytes, those of no byte left
    out (an alias writes nothing: its result is its input)."""
    reads, writes = op.operand_groups()
    of = ByteRegion.of
    return ([(v, r) for v in reads if not (r := of(v._type)).empty],  # noqa: SLF001 (`type`)
            [] if _is_alias(op) else
            [(v, r) for v in writes if not (r := of(v._type)).empty])  # noqa: SLF001


_ALIAS_CLASSES: dict[type, bool] = {}


def _is_alias(op: ark.ArkOp) -> bool:
    """`isinstance(op, ALIASES)`, answered once per class."""
    cls = type(op)
    found = _ALIAS_CLASSES.get(cls)
    if found is None:
        found = _ALIAS_CLASSES[cls] = issubclass(cls, ALIASES)
    return found


def _visible(e: Entry, r: ByteRegion) -> bool:
    """May `r` see bytes that `e`'s writer left (not all covered by later writes)?"""
    return not e.cut or not (covered_by_union(r, e.cut) or covered_by_union(e.region, e.cut))


def op_key(op: ark.ArkOp) -> tuple:
    """An operator as the plan computes it: the copies a plan runs in several TaskInfos (a
    split by task ranges, a recomputation in a fused task) are one. A copy is the same
    computation (type, arguments, the tensors it reads) into the same output: one whose
    arguments or reads differ computes its tiles otherwise, so it is another operator, whose
    own coverage and value flow decide it (else half a split could run another permutation
    and the plan would pass). (Kept with the op: the sweep and coverage ask for it at every
    access; kept while the op's name, output tensor and operands are the ones it was made
    of.)"""
    reads, writes = op.operand_groups()
    out = writes[0]._type if writes else None   # noqa: SLF001 -- `SSAValue.type`'s field
    label = op.properties["label"]
    operands = op._operands     # noqa: SLF001 -- its identity: the operands it was made of
    cached = op.__dict__.get("_planc_op_key")
    if cached is not None and cached[0] is label and cached[1] is out and cached[2] is operands:
        return cached[3]
    key = (op.ark_type, label.data, _view_key(out) if out is not None else None,
           tuple(op.arg_attrs().items()),
           tuple(_view_key(v._type) for v in reads))     # noqa: SLF001
    op.__dict__["_planc_op_key"] = (label, out, operands, key)
    return key


class _Keys:
    """Which operators the plan's model says a value's bytes come from: its producer, and
    through views, in-place updates and aliases, the producers of the values it updates."""

    def __init__(self) -> None:
        self.memo: dict[int, frozenset | None] = {}
        self.producers: dict[int, ark.ArkOp | None] = {}

    def producer(self, value) -> ark.ArkOp | None:
        """The operator whose result `value` is, through views (None: a model input)."""
        found = self.producers.get(id(value), self)
        if found is self:   # (asked at every access: made once per value)
            owner = _root_owner(value)
            found = self.producers[id(value)] = owner if _is_ark(owner) else None
        return found

    def producer_label(self, value) -> str:
        p = self.producer(value)
        return "a model input" if p is None else f"what '{p.label.data}' produced"

    def allowed(self, value, writer: ark.ArkOp) -> bool:
        """Is `writer` one of the operators whose data `value` holds? Only its producer, when
        that writes all of the value's bytes; else (an in-place update of part of a tensor, a
        view wider than what its producer wrote) also the producers of what it updates. (A
        plan's importer links an operator's output to the buffer's previous result whether
        it updates it or only reuses its memory, so the link alone does not decide.)"""
        direct = self.producer(value)
        if direct is writer and direct is not None:
            return True
        key = op_key(writer)
        if direct is not None and op_key(direct) == key:
            return True
        if direct is not None and not isinstance(direct, ALIASES):
            r = ByteRegion.of(value.type)
            if any(covers(ByteRegion.of(w.type), r) for w in direct.operand_groups()[1]):
                return False
        found = self.memo.get(id(value), self)
        if found is self:
            found = self.memo[id(value)] = self._walk(value)
        return found is None or key in found

    @staticmethod
    def _walk(value) -> frozenset | None:
        keys: set[tuple] = set()
        stack, seen = [value], set()
        while stack:
            v = stack.pop()
            if id(v) in seen:
                continue
            seen.add(id(v))
            if len(seen) > MAX_WALK:
                return None
            owner = v.owner
            if isinstance(owner, ark.ViewOp):
                stack.extend(owner.operands)
            elif isinstance(owner, ark.ArkOp):
                keys.add(op_key(owner))
                reads, writes = owner.operand_groups()
                stack.extend(writes)
                if isinstance(owner, ALIASES):
                    stack.extend(reads)
        return frozenset(keys)


class _Order:
    """The runtime's happens-before between task groups: in one processor group only the same
    resource group's task groups task by task (`_same_slots`); across processor groups a
    chain of grid barriers that carries the first one's processors' completion to every
    processor of the second. A barrier over a range holding both groups' processors decides
    it at once (`covering`); otherwise the barriers in between are followed (memoised)."""

    def __init__(self, p: pl.PlanOp, plan: PlanIndex | None = None):
        pgs = plan.processor_groups if plan is not None else p.processor_groups()
        self.syncs = pl.barriers(pgs)
        self.memo: dict[tuple, bool] = {}
        # For each processor group, the next one (inclusive) with a barrier over a range
        # holding all processors: everything before it is ordered before everything after.
        grid = p.processor_count
        nxt = [len(pgs)] * (len(pgs) + 1)
        for k in range(len(pgs) - 1, -1, -1):
            full = any(len(s) >= grid and _holds_grid(s, grid) for s in self.syncs[k])
            nxt[k] = k if full else nxt[k + 1]
        self.next_full = nxt

    def before(self, a: Group, b: Group) -> bool:
        if a.pg_index == b.pg_index:
            return a.rg is b.rg and _same_slots(a, b)
        if a.pg_index > b.pg_index:
            return False
        if self.next_full[a.pg_index + 1] <= b.pg_index:
            return True
        key = (a.pg_index, id(a.rg), b.pg_index, id(b.rg))
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = ordered(a, b, self.syncs)
        return found


def _holds_grid(r: pl.Range, n: int) -> bool:
    """Does `r` hold every processor 0 .. n-1? (Two neighbours are in a range of step 1 only.)"""
    if r.step == 1:
        return n == 0 or (r.begin <= 0 and r.end >= n)
    return set(range(n)) <= set(r)


def ordering_findings(p: pl.PlanOp, groups: list[Group],
                      operators: dict[int, list] | None = None,
                      plan: PlanIndex | None = None) -> list[Finding]:
    """`ark-plan.unordered-access`, `ark-plan.clobbered-value` and `ark-plan.unwritten-read`
    (see `_Sweep`)."""
    plan = plan if plan is not None else PlanIndex.of(p)
    operators = operators if operators is not None else plan.operators
    sweep = _Sweep(p, groups, operators, plan)
    sweep.run()
    sweep.outputs([v for v in plan.final_outputs() if not isinstance(v.owner, ALIASES)])
    return sweep.unordered + sweep.flow


def _why_unordered(first: Group, second: Group) -> str:
    if first.pg_index == second.pg_index and first.rg is not second.rg:
        return "their resource groups run concurrently"
    if first.rg is second.rg:
        return ("they run one after the other in one resource group, but on other processors "
                "or warps")
    return "no chain of grid barriers leads from the first one's processors to the second's"


def ordered(first: Group, second: Group, syncs: list[list[pl.Range]]) -> bool:
    if first.pg_index == second.pg_index:
        return first.rg is second.rg and _same_slots(first, second)
    done = {x: 1 << i for i, x in enumerate(first.rg.processors)}   # who knows whose part
    everyone = (1 << len(first.rg.processors)) - 1
    for pg_index in range(first.pg_index + 1, second.pg_index + 1):
        for sync in syncs[pg_index]:
            members = list(sync)
            known = 0
            for x in members:
                known |= done.get(x, 0)
            if known:
                for x in members:
                    done[x] = known
    return all(done.get(x, 0) == everyone for x in second.rg.processors)


def _same_slots(first: Group, second: Group) -> bool:
    """Two task groups one after the other in a resource group are ordered only task by task:
    a warp runs its slot's tasks of the first group, then of the second. That orders every
    conflict when both groups give each task index to the same processor and slot and their
    tasks touch the same tiles (equal task ranges, rotation, granularity and slots)."""
    a, b = first, second
    return (a.tg.tasks == b.tg.tasks and a.first == b.first and a.tg.gran == b.tg.gran
            and a.layout == b.layout)


def _first(seen: set[tuple[int, int]], found: list[Finding], key: tuple[int, int]) -> bool:
    """Whether a finding for this pair (of task groups, or of writer or producer and reader)
    is new and `found` has room for it: each pair is reported once, at most MAX_FINDINGS in
    all; marks the pair seen."""
    if key in seen or len(found) >= MAX_FINDINGS:
        return False
    seen.add(key)
    return True
