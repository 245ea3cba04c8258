"""`planc check` on ARK plans: every rule decided without running a tile.

The verifiers (`dialects.plan`) check each object of the plan; these rules need the whole
plan, and are decided on progressions, intervals and processor sets, so a 740k-task plan
checks in about the time its import takes:

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
* `ark-plan.unordered-access` (error): two task groups touch overlapping bytes of a buffer,
  one of them writing, and nothing orders them: no chain of grid barriers from the first one's
  processors to the second one's, and not the same processors and warps in sequence.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from dialects import ark
from dialects import plan as pl
from dialects.findings import ERROR, WARNING, Finding, at_op, from_error
from dialects.utils import single_root
from targets.ark.coverage import Progression, cover, describe
from targets.ark.model_outputs import final_outputs

RUNTIMES = ("ark", "planc")


def check(module: ModuleOp | pl.PlanOp, options: Any = None) -> list[Finding]:
    p = module if isinstance(module, pl.PlanOp) else single_root(module, pl.PlanOp)
    runtime = getattr(options, "ark_runtime", None) or "ark"
    groups = list(task_groups(p))
    findings = [from_error(ark.unknown_type_error(op, "ark-plan"), "ark-plan")
                for op in ark.unknown_operators(p)]
    findings += distribution_findings(p, groups, runtime)
    findings += coverage_findings(p, groups)
    findings += ordering_findings(p, groups)
    return findings


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
    reads: list[Region] = field(default_factory=list)
    writes: list[Region] = field(default_factory=list)


def task_groups(p: pl.PlanOp) -> Iterator[Group]:
    tasks = p.tasks()
    operators = p.task_operators()
    index = 0
    for pg_index, pg in enumerate(p.processor_groups()):
        for rg in pg.resource_groups():
            for tg, first in pl.task_group_starts(rg):
                task = tasks.get(tg.task)
                group = Group(index, pg_index, pg, rg, tg, first,
                              pl.slot_layout(rg, task) if task is not None else None)
                for op in operators.get(tg.task, []):
                    group.reads += [region(t) for t in op.inputs]
                    group.writes += [region(t) for t in op.outputs]
                index += 1
                yield group


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
    for g in groups:
        n_tasks, gran = len(g.tg.tasks), max(g.tg.gran, 1)
        if not n_tasks or not len(g.rg.processors):
            continue
        blocks = -(-n_tasks // gran)
        result = cover(runtime_blocks(g.rg.processors, g.first, grid, blocks, runtime), blocks)
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


def coverage_findings(p: pl.PlanOp, groups: list[Group]) -> list[Finding]:
    findings: list[Finding] = []
    ranges: dict[int, list[Progression]] = defaultdict(list)
    for g in groups:
        r = g.tg.tasks
        ranges[g.tg.task].append(Progression(r.begin, r.end, r.step))
    operators = p.task_operators()
    tasks = p.tasks()
    split = _split_tasks(operators)
    runs = _runs(operators)
    outputs = _model_outputs(p) if any(
        ops and t in tasks and t not in ranges for t, ops in operators.items()) else set()
    for task_id, ops in operators.items():
        if not ops or task_id not in tasks:
            continue
        num_tasks = p.num_tasks(task_id)
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
    findings += _split_findings(p, ranges)
    return findings


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
        key = (op.ark_type, op.label.data, _view_key(op.outputs[0])) if op.outputs else None
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


def _model_outputs(p: pl.PlanOp) -> set[int]:
    """ids of the model's final outputs (`targets.ark.model_outputs`, over the operators in
    the plan's order), but those of barriers and no-ops, whose result is their input."""
    ops = [op for op in p.graph.ops if isinstance(op, ark.ArkOp)]
    return {id(v) for v in final_outputs(ops)
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
    writes = [region(t) for t in op.outputs]
    return any(w.overlaps(region(t)) for w in writes for t in op.inputs)


def _runs(operators: dict[int, list[ark.ArkOp]]) -> dict[tuple, list[ark.ArkOp]]:
    """Each operator (type, name, output view) with every TaskInfo copy that runs it."""
    runs: dict[tuple, list[ark.ArkOp]] = defaultdict(list)
    for ops in operators.values():
        for op in ops:
            if op.outputs:
                runs[(op.ark_type, op.label.data, _view_key(op.outputs[0]))].append(op)
    return runs


def _split_tasks(operators: dict[int, list[ark.ArkOp]]) -> set[int]:
    """TaskInfos all of whose operators other TaskInfos run too: a split operator, whose
    coverage `_split_findings` decides over all its parts."""
    shared = {op.task_id for ops in _runs(operators).values()
              if len({o.task_id for o in ops}) > 1 for op in ops}
    return {t for t, ops in operators.items() if ops and t in shared}


def _split_findings(p: pl.PlanOp, ranges: dict[int, list[Progression]]) -> list[Finding]:
    """An operator that several TaskInfos run (ARK plans split one operator by task ranges,
    or recompute it inside fused tasks): unless one of them computes all its tiles, together
    they must."""
    findings = []
    for ops in _runs(p.task_operators()).values():
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


def _tile_count(op: ark.ArkOp) -> int:
    shape = pl._pad4(pl.output_shape(op))
    return math.prod(-(-s // u) for s, u in zip(shape, pl.unit_shape(op), strict=True))


def _view_key(t: ark.TensorType) -> tuple:
    return (t.buffer_id, tuple(t.shape_list), tuple(t.strides_list), tuple(t.offsets_list),
            t.data_type)


# ---------------------------------------------------------------------------------------------
# Byte regions
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Region:
    """The bytes a tensor view touches: a box of elements in its strides' layout, and the
    interval hull of its bytes in its buffer."""

    buffer: int
    strides: tuple[int, ...]
    lo: tuple[int, ...]
    hi: tuple[int, ...]
    """Per dimension, the element interval [lo, hi) of the view (in `strides` coordinates)."""
    element_bytes: int
    start: int
    end: int

    def overlaps(self, other: Region) -> bool:
        if self.buffer != other.buffer or self.end <= other.start or other.end <= self.start:
            return False
        if self.strides == other.strides and self.element_bytes == other.element_bytes:
            # Two boxes of one layout: they meet only if they meet in every dimension.
            return all(a < d and c < b for a, b, c, d in
                       zip(self.lo, self.hi, other.lo, other.hi, strict=True))
        return True   # different layouts: the byte intervals decide (conservatively)

    def describe(self) -> str:
        return f"buffer {self.buffer} bytes [{self.start}, {self.end})"


def region(t: ark.TensorType) -> Region:
    strides = tuple(t.strides_list)
    offsets, shape = list(t.offsets_list), list(t.shape_list)
    lo = tuple(offsets)
    hi = tuple(o + s for o, s in zip(offsets, shape, strict=True))
    suffix = [math.prod(strides[i + 1:]) for i in range(len(strides))]
    first = sum(o * m for o, m in zip(lo, suffix, strict=True))
    last = sum((h - 1) * m for h, m in zip(hi, suffix, strict=True))
    size = t.element_bytes
    return Region(t.buffer_id, strides, lo, hi, size, first * size, (last + 1) * size)


# ---------------------------------------------------------------------------------------------
# Ordering of conflicting accesses
# ---------------------------------------------------------------------------------------------


def conflicts(groups: list[Group]) -> Iterator[tuple[Group, Group, str, Region]]:
    """Pairs (earlier, later) of task groups whose accesses conflict, with the kind and the
    later group's region concerned. Regions are indexed by buffer and sorted by start, so only
    groups whose byte intervals meet are compared."""
    accesses: dict[int, list[tuple[int, int, int, bool, Region]]] = defaultdict(list)
    for g in groups:
        for kind, regions in (("w", g.writes), ("r", g.reads)):
            for r in regions:
                accesses[r.buffer].append((r.start, r.end, g.index, kind == "w", r))
    seen: set[tuple[int, int]] = set()
    for entries in accesses.values():
        entries.sort(key=lambda e: e[0])
        active: list[tuple[int, int, int, bool, Region]] = []
        for entry in entries:
            start = entry[0]
            active = [a for a in active if a[1] > start]
            for other in active:
                if other[2] == entry[2] or not (other[3] or entry[3]):
                    continue
                if groups[other[2]].tg.task == groups[entry[2]].tg.task:
                    continue    # parts of one task split by task ranges: task coverage

                if not other[4].overlaps(entry[4]):
                    continue
                a, b = sorted((other, entry), key=lambda e: e[2])
                if (a[2], b[2]) in seen:
                    continue
                seen.add((a[2], b[2]))
                kind = {(True, False): "read after write", (False, True): "write after read",
                        (True, True): "write after write"}[(a[3], b[3])]
                yield groups[a[2]], groups[b[2]], kind, b[4]
            active.append(entry)


def ordering_findings(p: pl.PlanOp, groups: list[Group]) -> list[Finding]:
    pgs = p.processor_groups()
    syncs = pl.barriers(pgs)
    findings = []
    for first, second, kind, where in conflicts(groups):
        if ordered(first, second, syncs):
            continue
        findings.append(at_op(second.tg, "ark-plan.unordered-access", ERROR,
                              f"{kind} on {where.describe()}: task {second.tg.task} "
                              f"(processor group {second.pg_index}) and task {first.tg.task} "
                              f"(processor group {first.pg_index}) touch the same bytes and "
                              f"nothing orders them ({_why_unordered(first, second)})"))
        if len(findings) >= 50:
            break
    return findings


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
