"""The `plan` dialect: ARK plan files (microsoft/ark execution plans).

A plan says how one rank runs a model on a GPU: which operators form each task (`TaskInfos`,
each op with its `Config`), and how tasks are spread over processors (thread blocks), warps and
shared memory (`ProcessorGroups` -> `ResourceGroups` -> `TaskGroups`). Here:

* `plan.plan` holds one block: `ark.view`s for the tensors no operator produces, and for each
  TaskInfo a `plan.task` op followed by the `ark` operators of that task (each carries `task`
  and `config` properties), then the `plan.processor_group` ops. Operators stay in one flat
  block, as in `ark.model`, so SSA dataflow crosses tasks freely.
* `plan.processor_group` / `plan.resource_group` / `plan.task_group` nest like the JSON.

Ranges are `[begin, end]` or `[begin, end, step]` (end exclusive) and keep the form they were
written in. The format's rules are verifiers: local ones on each op, the ones that need the
whole plan (task ids, NumTasks, slots) on `plan.plan`, reported at the offending child.

`resource_group_schedule` is the format's task-distribution rule, i.e. what ARK's `task_seq`
executes; `task_tile` is the output region a task index computes; `barriers` where processor
groups synchronise. Simulators and code generators share them.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    DictionaryAttr,
    IntegerAttr,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, ParametrizedAttribute, Region
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.traits import HasParent, IsolatedFromAbove, NoTerminator
from xdsl.utils.exceptions import VerifyException

from dialects import ark
from dialects.utils import (
    VerifyAt,
    body_block,
    build_with_properties,
    format_on_first_use,
    i64_attr,
    init_bare,
    op_list,
    parse_int,
    verified_so_far,
    verify_first,
    verify_operation,
    walk_ops,
)

if TYPE_CHECKING:  # annotations only: the ARK path never loads xDSL's parser and printer
    import numpy as np
    from xdsl.parser import AttrParser
    from xdsl.printer import Printer

# ---------------------------------------------------------------------------------------------
# Ranges
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Range:
    """An arithmetic sequence begin, begin+step, ... < end (the format's range)."""

    begin: int
    end: int
    step: int = 1

    @staticmethod
    def of(attr: RangeAttr) -> Range:
        return attr.range

    def __len__(self) -> int:
        return max(0, math.ceil((self.end - self.begin) / self.step))

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.begin, self.end, self.step))

    def __contains__(self, value: object) -> bool:
        return (isinstance(value, int) and self.begin <= value < self.end
                and (value - self.begin) % self.step == 0)

    def within(self, other: Range) -> bool:
        """Is every value of this range one of `other`? Decided from the ends and steps:
        the values between two members are members when the step is a multiple of
        `other`'s."""
        count = len(self)
        if count == 0:
            return True
        last = self.begin + (count - 1) * self.step
        return self.begin in other and last in other and (
            count == 1 or self.step % other.step == 0)

    def __str__(self) -> str:
        return f"[{self.begin}, {self.end}]" if self.step == 1 else \
            f"[{self.begin}, {self.end}, {self.step}]"


@irdl_attr_definition
class RangeAttr(ParametrizedAttribute):
    """A range of the format, printed as it is written: `[0, 108]` or `[0, 108, 2]`."""

    name = "plan.range"

    values: DenseArrayBase

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        values = parser.parse_comma_separated_list(parser.Delimiter.SQUARE,
                                                   lambda: parse_int(parser))
        return (DenseArrayBase.from_list(i64, values),)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("[" + ", ".join(map(str, self.values.get_values())) + "]")

    @property
    def range(self) -> Range:
        """The values as a `Range`, made once and kept with the (immutable) attribute."""
        try:
            return self.__dict__["_planc_range"]
        except KeyError:
            found = self.__dict__["_planc_range"] = Range(*ark.int_values(self.values))
            return found

    def as_list(self) -> list[int]:
        return list(ark.int_values(self.values))

    def verify(self) -> None:
        values = list(self.values.get_values())
        if len(values) not in (2, 3):
            raise VerifyException(f"a range is [begin, end] or [begin, end, step], got {values}")
        r = Range(*values)
        if r.begin < 0 or r.end < r.begin or r.step < 1:
            raise VerifyException(f"range {values} must have 0 <= begin <= end and step >= 1")


@functools.lru_cache(maxsize=4096)
def range_attr(begin: int, end: int, step: int | None = None) -> RangeAttr:
    """The range attribute (shared: attributes are immutable, and planners make many)."""
    if type(begin) is int and type(end) is int and (step is None or type(step) is int):
        return _shared_range(begin, end, step)
    return _new_range(begin, end, step)


@functools.lru_cache(maxsize=4096)
def _shared_range(begin: int, end: int, step: int | None) -> RangeAttr:
    return _new_range(begin, end, step)


def _new_range(begin: int, end: int, step: int | None) -> RangeAttr:
    values = [begin, end] if step is None else [begin, end, step]
    return RangeAttr(DenseArrayBase.from_list(i64, values))


# ---------------------------------------------------------------------------------------------
# Quick verification of plan ops
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Test:
    """Is an attribute of class `cls` (subclasses are left to the generic check), and with
    `i64`, an `IntegerAttr` of type i64 (`IntegerAttr[I64]`)?"""

    cls: type
    i64: bool = False

    def __call__(self, value: Attribute) -> bool:
        return type(value) is self.cls and (
            not self.i64 or value.type is i64 or value.type == i64)


_i64 = _Test(IntegerAttr, i64=True)
"""Does a value meet `IntegerAttr[I64]`?"""


def _exactly(cls: type) -> _Test:
    """Is the value of class `cls` (subclasses are left to the generic check)?"""
    return _Test(cls)


@dataclass(frozen=True)
class _Form:
    """What xDSL's generic verification checks of a plan op, as plain tests: no operands,
    results or successors; the properties (each required or optional one meets its test,
    and there are no others); `regions` regions of one block without arguments at most (the
    `NoTerminator` trait, the region definitions); a parent of class `parent` when attached
    (`HasParent`). `holds` says False also where it is unsure (attributes, subclasses):
    the generic verification then decides, in its own words."""

    required: tuple[tuple[str, Callable[[Attribute], bool]], ...]
    optional: tuple[tuple[str, Callable[[Attribute], bool]], ...] = (
        ("extra", _exactly(DictionaryAttr)),)
    regions: int = 0
    parent: type | None = None

    def holds(self, op: Operation) -> bool:
        if op._operands or op.results or op._successors or op.attributes \
                or len(op.regions) != self.regions:  # noqa: SLF001 (`successors`, a view)
            return False
        props = op.properties
        count = len(self.required)
        for name, test in self.required:
            value = props.get(name)
            if type(test) is _Test:  # its test, written out
                if type(value) is not test.cls or (test.i64 and value.type is not i64
                                                   and value.type != i64):
                    return False
            elif value is None or not test(value):
                return False
        for name, test in self.optional:
            value = props.get(name)
            if value is not None:
                if not test(value):
                    return False
                count += 1
        if len(props) != count:
            return False
        for region in op.regions:
            first = region._first_block  # noqa: SLF001 (`blocks` is a view made per call)
            if first is not region._last_block or (first is not None and first._args):  # noqa: SLF001
                return False
        if self.parent is not None:
            block = op.parent
            parent = None if block is None or block.parent is None else block.parent.parent
            if parent is not None and not isinstance(parent, self.parent):
                return False
        return True


class _QuickVerify:
    """Plan ops verify themselves at a fraction of the generic cost: `verify_quickly()` checks
    the op's `FORM` and, when it holds, runs the op's own rules (`own_rules`, which `verify_`
    runs too) and says True; it says False, having checked nothing, when the generic
    verification must decide (`dialects.locations.verify_module` and `verify_children` then
    run it). A plan of 10k operators has 12k of these ops."""

    FORM: ClassVar[_Form]

    def verify_quickly(self) -> bool:
        if not self.FORM.holds(self):
            return False
        self.own_rules()
        return True

    def own_rules(self) -> None:
        pass


def verify_children(ops: Sequence[Operation]) -> None:
    """`verify_first(ops)`, taking `verify_quickly` where the op has it."""
    done = verified_so_far()
    for op in ops:
        if done is not None and id(op) in done:
            continue
        quick = getattr(op, "verify_quickly", None)
        try:
            verified = quick is not None and quick()
        except VerifyAt:
            raise
        except VerifyException as e:
            raise VerifyAt(str(e), op) from None
        if not verified:
            verify_first((op,))
        elif done is not None:
            done.add(id(op))


# ---------------------------------------------------------------------------------------------
# Ops
# ---------------------------------------------------------------------------------------------

ARCHITECTURE = re.compile(r"ANY|CUDA(_\d+)?|ROCM(_\w+)?")


@irdl_op_definition
@format_on_first_use
class TaskOp(_QuickVerify, IRDLOperation):
    """A TaskInfo: a sequence of operators run together per task index.

    `num_warps` and `sram_bytes` are what one task needs on a processor; the operators are the
    `ark` ops whose `task` property is this `id`, in block order.
    """

    name = "plan.task"
    id = prop_def(IntegerAttr[I64])
    num_warps = prop_def(IntegerAttr[I64])
    sram_bytes = prop_def(IntegerAttr[I64])
    extra = opt_prop_def(DictionaryAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$id `warps` $num_warps `sram` $sram_bytes attr-dict"

    def __init__(self, task_id: int, num_warps: int, sram_bytes: int,
                 extra: DictionaryAttr | None = None):
        properties: dict[str, Attribute] = {
            "id": i64_attr(task_id), "num_warps": i64_attr(num_warps),
            "sram_bytes": i64_attr(sram_bytes)}
        if extra is not None:
            properties["extra"] = extra
        build_with_properties(self, properties)

    @property
    def task_id(self) -> int:
        return self.id.value.data

    @property
    def warps(self) -> int:
        return self.num_warps.value.data

    @property
    def sram(self) -> int:
        return self.sram_bytes.value.data

    def verify_(self) -> None:
        self.own_rules()

    def own_rules(self) -> None:
        if self.warps < 1:
            raise VerifyException(f"task {self.task_id}: NumWarps must be >= 1, got {self.warps}")
        if self.sram < 0:
            raise VerifyException(f"task {self.task_id}: SramBytes must be >= 0, got {self.sram}")


@irdl_op_definition
@format_on_first_use
class TaskGroupOp(_QuickVerify, IRDLOperation):
    """Runs task indices `task_range` of TaskInfo `task_id`, `granularity` consecutive task
    indices per processor at a time (1: round-robin)."""

    name = "plan.task_group"
    task_id = prop_def(IntegerAttr[I64])
    task_range = prop_def(RangeAttr)
    granularity = prop_def(IntegerAttr[I64])
    extra = opt_prop_def(DictionaryAttr)
    traits = lazy_traits_def(lambda: (HasParent(ResourceGroupOp),))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$task_id `tasks` $task_range `granularity` $granularity attr-dict"

    def __init__(self, task_id: int, task_range: RangeAttr, granularity: int = 1,
                 extra: DictionaryAttr | None = None):
        properties: dict[str, Attribute] = {
            "task_id": i64_attr(task_id), "task_range": task_range,
            "granularity": i64_attr(granularity)}
        if extra is not None:
            properties["extra"] = extra
        build_with_properties(self, properties)

    @property
    def task(self) -> int:
        return self.task_id.value.data

    @property
    def tasks(self) -> Range:
        return Range.of(self.task_range)

    @property
    def gran(self) -> int:
        return self.granularity.value.data

    def verify_(self) -> None:
        self.own_rules()

    def own_rules(self) -> None:
        if self.gran < 1:
            raise VerifyException(f"Granularity must be a positive integer, got {self.gran}")


@irdl_op_definition
@format_on_first_use
class ResourceGroupOp(_QuickVerify, IRDLOperation):
    """Processors, warps (per processor) and shared-memory bytes (per processor) that run the
    task groups of the body, one after another."""

    name = "plan.resource_group"
    processor_range = prop_def(RangeAttr)
    warp_range = prop_def(RangeAttr)
    sram_range = prop_def(RangeAttr)
    extra = opt_prop_def(DictionaryAttr)
    body = region_def()
    traits = lazy_traits_def(lambda: (NoTerminator(), HasParent(ProcessorGroupOp)))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("`processors` $processor_range `warps` $warp_range `sram` $sram_range "
                       "attr-dict-with-keyword $body")

    def __init__(self, processors: RangeAttr, warps: RangeAttr, sram: RangeAttr,
                 task_groups: Sequence[TaskGroupOp] = (), extra: DictionaryAttr | None = None):
        properties: dict[str, Attribute] = {
            "processor_range": processors, "warp_range": warps, "sram_range": sram}
        if extra is not None:
            properties["extra"] = extra
        init_bare(self, properties, [Region(Block(task_groups))])

    @property
    def processors(self) -> Range:
        return Range.of(self.processor_range)

    @property
    def warps(self) -> Range:
        return Range.of(self.warp_range)

    @property
    def sram(self) -> Range:
        return Range.of(self.sram_range)

    def task_groups(self) -> list[TaskGroupOp]:
        return [op for op in op_list(body_block(self.body)) if isinstance(op, TaskGroupOp)]

    def verify_(self) -> None:
        self.own_rules()

    def own_rules(self) -> None:
        sram = self.sram
        if sram.step != 1:
            raise VerifyException(f"SramRange {sram} must have step 1")


@irdl_op_definition
@format_on_first_use
class ProcessorGroupOp(_QuickVerify, IRDLOperation):
    """Processors whose resource groups run next; a later group that shares processors with an
    earlier one waits for it at a barrier, a disjoint one runs concurrently."""

    name = "plan.processor_group"
    processor_range = prop_def(RangeAttr)
    extra = opt_prop_def(DictionaryAttr)
    body = region_def()
    traits = lazy_traits_def(lambda: (NoTerminator(), HasParent(PlanOp)))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "`processors` $processor_range attr-dict-with-keyword $body"

    def __init__(self, processors: RangeAttr,
                 resource_groups: Sequence[ResourceGroupOp] = (),
                 extra: DictionaryAttr | None = None):
        properties: dict[str, Attribute] = {"processor_range": processors}
        if extra is not None:
            properties["extra"] = extra
        init_bare(self, properties, [Region(Block(resource_groups))])

    @property
    def processors(self) -> Range:
        return Range.of(self.processor_range)

    def resource_groups(self) -> list[ResourceGroupOp]:
        return [op for op in op_list(body_block(self.body)) if isinstance(op, ResourceGroupOp)]

    def verify_(self) -> None:
        self.own_rules()

    def own_rules(self) -> None:
        processors = self.processors
        for rg in self.resource_groups():
            if not rg.processors.within(processors):
                raise VerifyAt(
                    f"resource group processors {rg.processors} are not inside the processor "
                    f"group's {processors}", rg)


_RANGE = _exactly(RangeAttr)
TaskOp.FORM = _Form((("id", _i64), ("num_warps", _i64), ("sram_bytes", _i64)))
TaskGroupOp.FORM = _Form((("task_id", _i64), ("task_range", _RANGE), ("granularity", _i64)),
                         parent=ResourceGroupOp)
ResourceGroupOp.FORM = _Form((("processor_range", _RANGE), ("warp_range", _RANGE),
                              ("sram_range", _RANGE)), regions=1, parent=ProcessorGroupOp)


REQUIRED_CONFIG: dict[type[ark.ArkOp], tuple[str, ...]] = {
    ark.MatmulOp: ("TileShapeMNK",),
    ark.ReduceSumOp: ("ImplType",), ark.ReduceMaxOp: ("ImplType",),
    ark.ReduceMeanOp: ("ImplType",),
    ark.SendOp: ("ChannelType",), ark.RecvOp: ("ChannelType",),
    ark.SendDoneOp: ("ChannelType",), ark.DeviceSyncOp: ("ChannelType",),
    ark.SendPacketOp: ("PacketType", "Tile"), ark.RecvPacketOp: ("PacketType", "Tile"),
    ark.RecvReduceSendPacketOp: ("PacketType", "Tile"), ark.RecvReduceSendOp: ("Tile",),
    ark.TransposeOp: ("Tile",), ark.ScalarAssignOp: ("Tile",),
}
"""Config keys each op type's kernel needs beyond NumWarps, SramBytes and NumTasks."""

TILED_ELEMENTWISE = (ark.UnaryOp, ark.BinaryOp)
"""Op families whose default config is a `Tile` over the output (ARK's Broadcast1/2)."""


def required_config(op: ark.ArkOp) -> tuple[str, ...]:
    keys = REQUIRED_CONFIG.get(type(op))
    if keys is None and isinstance(op, TILED_ELEMENTWISE):
        keys = ("Tile",)
    return ("NumWarps", "SramBytes", "NumTasks", *(keys or ()))


def output_tile_count(shape: Sequence[int], tile: Sequence[int]) -> int:
    """Tiles of `tile` (aligned to the innermost dims, ARK's rule) needed to cover `shape`."""
    shape4 = [1] * (4 - len(shape)) + list(shape)
    tile4 = [1] * (4 - len(tile)) + list(tile)
    return math.prod(math.ceil(s / t) for s, t in zip(shape4, tile4, strict=True))


def matmul_task_count(op: ark.MatmulOp, tile_mnk: Sequence[int]) -> int:
    m, n, _ = op.problem_mnk()
    out = op.outputs[0].shape_list
    batch = math.prod(out[:-2]) if len(out) > 2 else 1
    return batch * math.ceil(m / tile_mnk[0]) * math.ceil(n / tile_mnk[1])


@irdl_op_definition
@format_on_first_use
class PlanOp(IRDLOperation):
    """An ARK plan file: one rank's tasks and their placement on `num_processors` processors
    of `num_warps_per_processor` warps. `architecture` is kept only when the file has one;
    `key_order` records an unusual order of the top-level keys, for a faithful export."""

    name = "plan.plan"
    rank = prop_def(IntegerAttr[I64])
    world_size = prop_def(IntegerAttr[I64])
    num_processors = prop_def(IntegerAttr[I64])
    num_warps_per_processor = prop_def(IntegerAttr[I64])
    architecture = opt_prop_def(StringAttr)
    extra = opt_prop_def(DictionaryAttr)
    key_order = opt_prop_def(Attribute)
    body = region_def()
    traits = traits_def(NoTerminator(), IsolatedFromAbove())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("`rank` $rank `of` $world_size `processors` $num_processors `warps` "
                       "$num_warps_per_processor attr-dict-with-keyword $body")

    HEADER_KEYS: ClassVar[tuple[str, ...]] = (
        "Rank", "WorldSize", "Architecture", "NumProcessors", "NumWarpsPerProcessor",
        "TaskInfos", "ProcessorGroups")

    def __init__(self, rank: int, world_size: int, num_processors: int,
                 num_warps_per_processor: int, body: Region, *,
                 architecture: str | None = None, extra: DictionaryAttr | None = None):
        properties: dict[str, Attribute] = {
            "rank": i64_attr(rank), "world_size": i64_attr(world_size),
            "num_processors": i64_attr(num_processors),
            "num_warps_per_processor": i64_attr(num_warps_per_processor)}
        if architecture is not None:
            properties["architecture"] = StringAttr(architecture)
        if extra is not None:
            properties["extra"] = extra
        super().__init__(properties=properties, regions=[body])

    # -- structure -------------------------------------------------------------------------

    @property
    def graph(self) -> Block:
        """The block holding views, tasks, operators and processor groups."""
        return body_block(self.body)

    @property
    def processor_count(self) -> int:
        return self.num_processors.value.data

    @property
    def warps_per_processor(self) -> int:
        return self.num_warps_per_processor.value.data

    @property
    def arch_name(self) -> str | None:
        return None if self.architecture is None else self.architecture.data

    def tasks(self) -> dict[int, TaskOp]:
        return {op.task_id: op for op in op_list(self.graph) if isinstance(op, TaskOp)}

    def task_operators(self) -> dict[int, list[ark.ArkOp]]:
        """The operators of each TaskInfo, in order."""
        grouped: dict[int, list[ark.ArkOp]] = {t: [] for t in self.tasks()}
        for op in op_list(self.graph):
            if isinstance(op, ark.ArkOp) and op.task_id is not None:
                grouped.setdefault(op.task_id, []).append(op)
        return grouped

    def processor_groups(self) -> list[ProcessorGroupOp]:
        return [op for op in op_list(self.graph) if isinstance(op, ProcessorGroupOp)]

    def num_tasks(self, task_id: int) -> int:
        """NumTasks of a TaskInfo (its first operator's, as ARK's planner takes it)."""
        ops = self.task_operators().get(task_id, [])
        return int(ops[0].config_value().get("NumTasks", 0)) if ops else 0

    # -- verification ----------------------------------------------------------------------

    def verify_(self) -> None:
        if self.processor_count < 1 or self.warps_per_processor < 1:
            raise VerifyException("NumProcessors and NumWarpsPerProcessor must be >= 1")
        rank, world = self.rank.value.data, self.world_size.value.data
        if not 0 <= rank < world:
            # ARK starts WorldSize processes numbered 0..WorldSize-1 and binds each to its
            # GPU by rank: a plan for any other rank is never run, and its peers wait forever.
            raise VerifyException(f"Rank {rank} is not one of the WorldSize {world} ranks "
                                  f"(0 to {world - 1})")
        if self.arch_name is not None and not ARCHITECTURE.fullmatch(self.arch_name):
            raise VerifyException(f"unknown Architecture '{self.arch_name}' (expected ANY, "
                                  "CUDA, CUDA_<sm>, ROCM or ROCM_<gfx>)")
        limits = self._architecture_limits()
        if limits is not None and self.warps_per_processor > limits.max_warps:
            raise VerifyException(
                f"NumWarpsPerProcessor {self.warps_per_processor} exceeds the {limits.max_warps} "
                f"warps one processor of {self.arch_name} can hold")
        if limits is not None and self.processor_count > limits.max_processors:
            raise VerifyException(self._too_many_processors(limits.max_processors))
        ark.check_buffers_consistent(self.graph)
        contents = plan_contents(self)
        tasks = self._verify_tasks(contents)
        for pg in contents.groups:
            tree = _group_tree(pg)
            self._verify_processor_group(pg, tree, tasks)
            if limits is not None:
                _verify_sram_limit(tree, limits.max_sram, self.arch_name)

    def _too_many_processors(self, most: int) -> str:
        """ARK's loop kernel is persistent: all NumProcessors blocks grid-sync with each other,
        and each takes a whole processor (`__launch_bounds__(threads, 1)` and all of its
        shared memory). With more blocks than the device has processors, the resident ones
        wait at the first barrier for blocks that can never start: the plan hangs."""
        return (f"NumProcessors {self.processor_count} exceeds the {most} processors of the "
                f"largest {self.arch_name} device; ARK's persistent kernel would wait for "
                "ever at its first grid barrier")

    def _architecture_limits(self):
        """What one processor of the plan's Architecture offers (None when unknown)."""
        if self.arch_name is None:
            return None
        from devices.hardware import architecture_limits

        return architecture_limits(self.arch_name)

    def _verify_tasks(self, contents: PlanContents | None = None
                      ) -> dict[int, tuple[TaskOp, int]]:
        """Check every TaskInfo; return (task op, NumTasks) by id."""
        contents = contents or plan_contents(self)
        tasks: dict[int, tuple[TaskOp, int]] = {}
        verify_children(contents.task_ops)  # slots divide by NumWarps
        for task in contents.task_ops:
            if task.task_id in tasks:
                raise VerifyAt(f"TaskInfo id {task.task_id} is used twice", task)
            tasks[task.task_id] = (task, -1)
        configs = _Configs()
        for task_id, ops in contents.task_operators().items():
            if task_id not in tasks:
                raise VerifyAt(f"operator belongs to TaskInfo {task_id}, which does not "
                                    "exist", ops[0])
            task = tasks[task_id][0]
            configs.task_limits = (task.warps, task.sram)
            num_tasks = None
            for op in ops:
                count = _verify_operator_config(op, task, configs)
                if num_tasks is not None and count != num_tasks:
                    raise VerifyAt(
                        f"all operators of task {task_id} must have the same NumTasks; "
                        f"'{op.label.data}' has {count}, an earlier one {num_tasks}", op)
                num_tasks = count
            tasks[task_id] = (task, num_tasks if num_tasks is not None else 0)
        return tasks

    def _verify_processor_group(self, pg: ProcessorGroupOp, tree: _GroupTree,
                                tasks: dict[int, tuple[TaskOp, int]]) -> None:
        # The checks below rely on each group's own rules (SramRange step 1, ...).
        verify_children(tree.descendants)
        if type(pg.properties.get("processor_range")) is not RangeAttr:
            # Only MLIR text can say so; the group's generic rules report it (rather than
            # a crash below), before its own turn in the walk.
            verify_children([pg])
        count, warps = self.processor_count, self.warps_per_processor
        if not pg.processors.within(Range(0, count)):
            raise VerifyAt(f"ProcessorRange {pg.processors} is not inside [0, "
                                f"NumProcessors {count})", pg)
        for rg, task_groups in tree.groups:
            rg_warps = rg.warps
            if not rg_warps.within(Range(0, warps)):
                raise VerifyAt(f"WarpRange {rg_warps} is not inside [0, "
                                    f"NumWarpsPerProcessor {warps})", rg)
            for tg in task_groups:
                if tg.task not in tasks:
                    raise VerifyAt(f"TaskId {tg.task} names no TaskInfo", tg)
                task, num_tasks = tasks[tg.task]
                if tg.tasks.end > num_tasks:
                    raise VerifyAt(f"TaskRange {tg.tasks} is not inside [0, NumTasks "
                                        f"{num_tasks}) of task {tg.task}", tg,
                                   rule="ark-plan.task-range")
                if slot_count(rg, task) < 1:
                    raise VerifyAt(
                        f"task {tg.task} needs {task.warps} warps and {task.sram} SRAM bytes, "
                        f"but the resource group has {len(rg.warps)} warps and "
                        f"{len(rg.sram)} SRAM bytes: no slot fits", tg, rule="ark-plan.slots")


ProcessorGroupOp.FORM = _Form((("processor_range", _RANGE),), regions=1, parent=PlanOp)


class _GroupTree:
    """A processor group's ops: every op nested in it (`walk_ops` order, without the group)
    and, once those passed their own verification, its resource groups with their task
    groups."""

    def __init__(self, pg: ProcessorGroupOp, descendants: list[Operation],
                 groups: list[tuple[ResourceGroupOp, list[TaskGroupOp]]] | None):
        self.pg = pg
        self.descendants = descendants
        self._groups = groups

    @property
    def groups(self) -> list[tuple[ResourceGroupOp, list[TaskGroupOp]]]:
        if self._groups is None:  # an unusual tree, read the usual way once it verified
            self._groups = [(rg, rg.task_groups()) for rg in self.pg.resource_groups()]
        return self._groups


def _one_block(op: Operation) -> bool:
    """Is `op`'s only region its body, of one block at most?"""
    return len(op.regions) == 1 and \
        op.regions[0]._first_block is op.regions[0]._last_block  # noqa: SLF001


def _body_ops(op: Operation) -> list[Operation]:
    """The ops of the first block of `op`'s first region (none without a block)."""
    first = op.regions[0]._first_block  # noqa: SLF001
    return [] if first is None else op_list(first)


def _group_tree(pg: ProcessorGroupOp) -> _GroupTree:
    """`pg`'s tree, read once: the usual two levels (resource groups of one block holding
    ops without regions) in one pass; anything else, which the generic verification
    rejects, by `walk_ops`."""
    if not _one_block(pg):
        return _GroupTree(pg, walk_ops(pg)[1:], None)
    descendants: list[Operation] = []
    groups: list[tuple[ResourceGroupOp, list[TaskGroupOp]]] = []
    for rg in _body_ops(pg):
        descendants.append(rg)
        if not isinstance(rg, ResourceGroupOp):
            if rg.regions:
                return _GroupTree(pg, walk_ops(pg)[1:], None)
            continue
        if not _one_block(rg):
            return _GroupTree(pg, walk_ops(pg)[1:], None)
        task_groups = _body_ops(rg)
        if any(tg.regions for tg in task_groups):
            return _GroupTree(pg, walk_ops(pg)[1:], None)
        descendants += task_groups
        groups.append((rg, [tg for tg in task_groups if isinstance(tg, TaskGroupOp)]))
    return _GroupTree(pg, descendants, groups)


@dataclass
class PlanContents:
    """What a plan's block holds, by kind, found in one walk: the TaskInfos, the operators
    that belong to a TaskInfo (in block order) and the processor groups."""

    task_ops: list[TaskOp]
    operators: list[ark.ArkOp]
    groups: list[ProcessorGroupOp]

    def task_operators(self) -> dict[int, list[ark.ArkOp]]:
        """`PlanOp.task_operators()`: the operators of each TaskInfo id, the TaskInfos' ids
        first (in their order), then ids that name no TaskInfo."""
        grouped: dict[int, list[ark.ArkOp]] = {t.task_id: [] for t in self.task_ops}
        for op in self.operators:
            task_id = op.properties["task"].value.data
            found = grouped.get(task_id)
            if found is None:
                grouped[task_id] = [op]
            else:
                found.append(op)
        return grouped


_KINDS: dict[type, type | None] = {}


def _kind(cls: type) -> type | None:
    """Which of TaskOp, ProcessorGroupOp and ArkOp ops of class `cls` are, decided once per
    class (`isinstance` against the abstract ArkOp is slow)."""
    found = _KINDS.get(cls, _KINDS)
    if found is _KINDS:
        found = _KINDS[cls] = next((kind for kind in (TaskOp, ProcessorGroupOp, ark.ArkOp)
                                    if issubclass(cls, kind)), None)
    return found


def plan_contents(p: PlanOp) -> PlanContents:
    contents = PlanContents([], [], [])
    operators, task_ops, groups = contents.operators, contents.task_ops, contents.groups
    kinds = _KINDS
    op = p.graph._first_op  # noqa: SLF001 -- `op_list`, without the list
    while op is not None:
        kind = kinds.get(type(op), kinds)
        if kind is kinds:
            kind = _kind(type(op))
        if kind is ark.ArkOp:
            if op.properties.get("task") is not None:
                operators.append(op)
        elif kind is TaskOp:
            task_ops.append(op)
        elif kind is ProcessorGroupOp:
            groups.append(op)
        op = op._next_op  # noqa: SLF001
    return contents


def _verify_sram_limit(tree: _GroupTree, max_sram: int, arch: str | None) -> None:
    for rg, _ in tree.groups:
        if rg.sram.end > max_sram:
            raise VerifyAt(f"SramRange {rg.sram} exceeds the {max_sram} bytes of shared "
                                f"memory a plan may use on one processor of {arch}", rg,
                           rule="ark-plan.sram")


class _Configs:
    """The Config values of a plan's operators, by the identity of the attribute (operators
    that share a tiling share it; the table keeps it alive), and the (operator class,
    Config) pairs whose checks that depend on nothing else passed, and tile counts by
    (Config, output shape)."""

    def __init__(self) -> None:
        self.values: dict[int, tuple[Attribute, dict]] = {}
        self.passed: set[tuple[type, int]] = set()
        self.tile_counts: dict[tuple[int, tuple[int, ...]], int] = {}
        self.matmul_counts: dict[tuple[int, ...], int] = {}
        """Matmul task counts by the identities of the Config, the three tensors' shapes
        and the two transpose flags (attributes the IR keeps alive while it is verified)."""
        self.tiled: set[tuple[tuple, int]] = set()
        """(verdict key, Config identity) of operators whose tiling passed."""
        self.task_limits: tuple[int, int] | None = None
        """(NumWarps, SramBytes) of the task whose operators are being checked."""

    def value(self, attr: DictionaryAttr) -> dict:
        found = self.values.get(id(attr))
        if found is None:
            found = self.values[id(attr)] = (attr, _config_value(attr))
        return found[1]


def _config_value(attr: DictionaryAttr) -> dict:
    from dialects.json_value import dict_value

    return dict_value(attr)


def _verify_operator_config(op: ark.ArkOp, task: TaskOp, configs: _Configs | None = None
                            ) -> int:
    """Check an operator's Config against its type and task; return its NumTasks."""
    attr = op.properties.get("config")
    if attr is None:
        raise VerifyException(f"{op.ark_type} '{op.label.data}' in a plan needs a Config")
    try:
        # The operator's own rules first: the plan's rules below use its shapes and operands.
        verdict = verify_operation(op)
    except VerifyException as e:
        raise VerifyAt(str(e), op) from None
    configs = configs or _Configs()
    found = configs.values.get(id(attr))
    config = found[1] if found is not None else configs.value(attr)
    key = (type(op), id(attr))
    if key not in configs.passed:
        _verify_config_keys(op, config)
        configs.passed.add(key)
    warps, sram = configs.task_limits or (task.warps, task.sram)
    if config["NumWarps"] > warps or config["SramBytes"] > sram:
        raise VerifyAt(
            f"'{op.label.data}' needs {config['NumWarps']} warps and {config['SramBytes']} SRAM "
            f"bytes, more than its task {task.task_id} reserves ({task.warps}, {task.sram})", op)
    if verdict is None:
        _verify_tiling(op, config, configs)
    else:
        # The tiling rules read the operator's class, shapes and arguments (all in its
        # verdict key) and its Config: an operator alike in those passes them too.
        tiled = (verdict, id(attr))
        if tiled not in configs.tiled:
            _verify_tiling(op, config, configs)
            configs.tiled.add(tiled)
    return config["NumTasks"]


def _verify_config_keys(op: ark.ArkOp, config: dict) -> None:
    """The rules of a Config that depend on the operator's class alone."""
    for key in required_config(op):
        if key not in config:
            raise VerifyAt(f"Config of {op.ark_type} '{op.label.data}' lacks '{key}'", op)
    for key in ("NumWarps", "SramBytes", "NumTasks"):
        if not isinstance(config[key], int) or isinstance(config[key], bool) or config[key] < 0:
            raise VerifyAt(f"Config {key} of '{op.label.data}' must be a non-negative "
                                f"integer, got {config[key]!r}", op)


_TILINGS: dict[type, str | None] = {}


def _tiling(cls: type) -> str | None:
    """How NumTasks of an operator class is counted: "matmul" (M x N tiles), "tile" (`Tile`s
    over the output), "reduce" (ImplType decides) or None; decided once per class."""
    if cls not in _TILINGS:
        _TILINGS[cls] = (
            "matmul" if issubclass(cls, ark.MatmulOp) else "reduce"
            if issubclass(cls, ark.ReduceOp) else "tile"
            if issubclass(cls, (*TILED_ELEMENTWISE, ark.TransposeOp, ark.ScalarAssignOp))
            else None)
    return _TILINGS[cls]


def _verify_tiling(op: ark.ArkOp, config: dict, configs: _Configs | None = None) -> None:
    """NumTasks must be the number of output tiles, or tiles are skipped or run twice."""
    expected = None
    tiling = _tiling(type(op))
    if tiling == "matmul":
        tile = config["TileShapeMNK"]
        if not (isinstance(tile, list) and len(tile) == 3 and all(
                isinstance(v, int) and v > 0 for v in tile)):
            raise VerifyAt(f"TileShapeMNK of '{op.label.data}' must be 3 positive "
                                f"integers, got {tile!r}", op)
        expected = _matmul_count(op, tile, configs or _Configs())
    elif tiling == "reduce":
        if config["ImplType"] not in ("WarpWise", "ElementWise"):
            raise VerifyAt(f"ImplType of '{op.label.data}' must be WarpWise or "
                                f"ElementWise, got {config['ImplType']!r}", op)
        last_axis = len(op.inputs[0].shape_list) - 1
        if config["ImplType"] == "WarpWise" and op.axis_index != last_axis:
            raise VerifyAt(f"ImplType WarpWise of '{op.label.data}' needs the last axis, "
                                f"but Axis is {op.axis_index}", op)
    elif tiling == "tile":
        expected = _tile_count(op, config, configs or _Configs())
    if expected is not None and config["NumTasks"] != expected:
        raise VerifyAt(f"NumTasks of '{op.label.data}' is {config['NumTasks']}, but its "
                            f"tiling covers the output with {expected} tiles", op,
                       rule="ark-plan.num-tasks")


def _matmul_count(op: ark.MatmulOp, tile: list[int], configs: _Configs) -> int:
    """`matmul_task_count(op, tile)` once per (Config, shapes, transposes): it reads the
    three tensors' shapes and the transpose flags, and `tile` comes from the Config."""
    props = op.properties
    (a, b), (out,) = op.operand_groups()
    key = (id(props["config"]), id(a.type.shape), id(b.type.shape), id(out.type.shape),
           id(props.get("transpose_input")), id(props.get("transpose_other")))
    found = configs.matmul_counts.get(key)
    if found is None:
        found = configs.matmul_counts[key] = matmul_task_count(op, tile)
    return found


def _tile_count(op: ark.ArkOp, config: dict, configs: _Configs) -> int:
    """`output_tile_count` of the op's output and Tile, once per (Config, output shape)."""
    shape = op.operand_groups()[1][0].type.shape_tuple
    key = (id(op.config), shape)
    found = configs.tile_counts.get(key)
    if found is None:
        tile = config["Tile"]
        if not (isinstance(tile, list) and 1 <= len(tile) <= 4 and all(
                isinstance(v, int) and v > 0 for v in tile)):
            raise VerifyAt(f"Tile of '{op.label.data}' must be 1 to 4 positive integers, "
                                f"got {tile!r}", op)
        found = configs.tile_counts[key] = output_tile_count(shape, tile)
    return found


# ---------------------------------------------------------------------------------------------
# Task distribution (what ARK's task_seq executes)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlotLayout:
    """How a task group shares a resource group: `num_slots` concurrent tasks per processor,
    each on `slot_warps` warps and `slot_sram` bytes of shared memory."""

    num_slots: int
    slot_warps: int
    slot_sram: int


def slot_count(rg: ResourceGroupOp, task: TaskOp) -> int:
    """How many tasks of `task` a processor of `rg` runs at once (`slot_layout`'s)."""
    slots = len(rg.warps) // task.warps
    if task.sram > 0:
        slots = min(slots, len(rg.sram) // task.sram)
    return slots


def slot_layout(rg: ResourceGroupOp, task: TaskOp) -> SlotLayout:
    warps, sram = len(rg.warps), len(rg.sram)
    slots = warps // task.warps
    if task.sram > 0:
        slots = min(slots, sram // task.sram)
    return SlotLayout(slots, task.warps, sram // slots if slots else 0)


@dataclass(frozen=True)
class TaskGroupSchedule:
    """Which task indices each processor and slot of a resource group runs, in order."""

    task_group: TaskGroupOp
    layout: SlotLayout
    assignment: dict[int, list[list[int]]]
    """processor id -> slot -> task indices."""


def distribute(processors: Range, tasks: Range, granularity: int, num_slots: int,
               first: int = 0) -> dict[int, list[list[int]]]:
    """The format's distribution of `tasks` over `processors` and slots.

    Processor number p counted from `first` (wrapping around the range) takes, for
    t = 0, 1, 2, ..., task index  begin + step * (p*g + t%g + (t//g)*g*P)  while it is below the
    end; its t-th task goes to slot t % num_slots. g = granularity (1: round-robin), P = the
    number of processors.
    """
    procs = list(processors)
    count = len(procs)
    out: dict[int, list[list[int]]] = {p: [[] for _ in range(num_slots)] for p in procs}
    for p in range(count):
        proc = procs[(first + p) % count]
        t = 0
        while True:
            index = p * granularity + t % granularity + (t // granularity) * granularity * count
            task = tasks.begin + tasks.step * index
            if task >= tasks.end:
                break
            out[proc][t % num_slots].append(task)
            t += 1
    return out


@dataclass(frozen=True)
class TaskAssignment:
    """`distribute` as arrays, one entry per task of the range (in range order): the
    processor and slot running it and its position in that processor's sequence. Cost models
    use it for task groups of millions of tasks."""

    tasks: np.ndarray
    processors: np.ndarray
    slots: np.ndarray
    positions: np.ndarray


def task_assignment(processors: Range, tasks: Range, granularity: int, num_slots: int,
                    first: int = 0) -> TaskAssignment:
    """Where every task of `tasks` runs, by inverting `distribute`'s formula: the j-th task of
    the range is block j // g; block b goes to processor number b % P, where it is task
    (b // P) * g + j % g of that processor."""
    import numpy as np

    procs = np.fromiter(processors, dtype=np.int64)
    count = len(procs)
    index = np.arange(len(tasks), dtype=np.int64)
    block, within = np.divmod(index, granularity)
    number = block % count if count else block
    position = (block // max(count, 1)) * granularity + within
    return TaskAssignment(
        tasks=tasks.begin + tasks.step * index,
        processors=procs[(first + number) % count] if count else number,
        slots=position % max(num_slots, 1),
        positions=position)


def task_group_starts(rg: ResourceGroupOp) -> Iterator[tuple[TaskGroupOp, int]]:
    """Each task group of `rg` with the processor number it starts from: the first processor
    rotates from one task group to the next so that a group starts where the last stopped."""
    first = 0
    count = max(len(rg.processors), 1)
    for tg in rg.task_groups():
        yield tg, first
        first = (first + math.ceil(len(tg.tasks) / tg.gran)) % count


def resource_group_schedule(rg: ResourceGroupOp, tasks: dict[int, TaskOp]
                            ) -> list[TaskGroupSchedule]:
    """Every task group of `rg` with its distribution (see `task_group_starts`)."""
    schedules = []
    for tg, first in task_group_starts(rg):
        layout = slot_layout(rg, tasks[tg.task])
        schedules.append(TaskGroupSchedule(
            tg, layout, distribute(rg.processors, tg.tasks, tg.gran, layout.num_slots, first)))
    return schedules


def resource_group_assignments(rg: ResourceGroupOp, tasks: dict[int, TaskOp]
                               ) -> Iterator[tuple[TaskGroupOp, SlotLayout, TaskAssignment]]:
    """`resource_group_schedule` as arrays (`task_assignment`), for large task groups."""
    for tg, first in task_group_starts(rg):
        layout = slot_layout(rg, tasks[tg.task])
        yield tg, layout, task_assignment(rg.processors, tg.tasks, tg.gran,
                                          max(layout.num_slots, 1), first)


def _pad4(values: Sequence[int]) -> list[int]:
    return [1] * (4 - len(values)) + list(values)


def output_shape(op: ark.ArkOp) -> list[int]:
    """The shape task tiles cover: the written tensor's (the result's for ops writing none)."""
    return op.outputs[0].shape_list if op.outputs else op.results_types[0].shape_list


def unit_shape(op: ark.ArkOp, config: dict | None = None) -> list[int]:
    """The output region (4 dims, NCHW) that one task index of `op` computes.

    Matmul tiles are TileShapeMNK's M x N, element-wise and transpose tiles are `Tile`, an
    embedding task is one row, a reduction task one output element (or its `Tile`), and an op
    without a tiling computes its whole output in one task. `config` replaces the op's own
    Config (planners try configurations before they set one).
    """
    config = op.config_value() if config is None else config
    out = _pad4(output_shape(op))
    if isinstance(op, ark.MatmulOp):
        tile_m, tile_n = config["TileShapeMNK"][:2]
        return [1, 1, tile_m, tile_n]
    if isinstance(op, ark.EmbeddingOp):
        return [1, 1, 1, out[3]]
    if "Tile" in config:
        return _pad4(config["Tile"])
    if isinstance(op, ark.ReduceOp):
        return [1, 1, 1, 1]
    return out


def task_tile(op: ark.ArkOp, index: int) -> tuple[slice, ...]:
    """The part of `op`'s output that task `index` computes, as slices over the output's dims.

    Task indices enumerate the tiles in row-major order (N, C, H, W; W fastest), the order of
    ARK's `UnitOp`; tiles at the edges are clipped to the shape.
    """
    shape = output_shape(op)
    shape4, unit = _pad4(shape), unit_shape(op)
    counts = [math.ceil(s / u) for s, u in zip(shape4, unit, strict=True)]
    if not 0 <= index < math.prod(counts):
        raise ValueError(f"task index {index} is outside the {math.prod(counts)} tiles of "
                         f"'{op.label.data}'")
    coords = []
    for count in reversed(counts):
        coords.append(index % count)
        index //= count
    coords.reverse()
    slices = [slice(c * u, min((c + 1) * u, s)) for c, u, s in zip(coords, unit, shape4,
                                                                   strict=True)]
    return tuple(slices[4 - len(shape):])


@dataclass(frozen=True)
class BufferLayout:
    """Where each local buffer lives in the one device allocation of a plan."""

    offsets: dict[int, int]
    sizes: dict[int, int]
    total_bytes: int


def buffer_layout(p: PlanOp) -> BufferLayout:
    """ARK's executor layout: every local buffer (Rank -1 or this rank) is as large as the
    largest layout of any tensor on it, placed back to back in ascending id order.

    A memory plan is therefore expressed in the plan itself: tensors whose lifetimes do not
    overlap share a buffer (as ARK's own hand-tuned plans do), and the layout shrinks.
    """
    sizes: dict[int, int] = {}
    rank = p.rank.value.data
    for op in p.graph.ops:
        for value in op.results:
            tensor = value.type
            if isinstance(tensor, ark.TensorType) and tensor.buffer.rank.data in (-1, rank):
                sizes[tensor.buffer_id] = max(sizes.get(tensor.buffer_id, 0), tensor.span_bytes)
    offsets, total = {}, 0
    for buffer_id in sorted(sizes):
        offsets[buffer_id] = total
        total += sizes[buffer_id]
    return BufferLayout(offsets, sizes, total)


def barriers(groups: Sequence[ProcessorGroupOp]) -> list[list[Range]]:
    """The processor ranges synchronised right before each processor group.

    ARK keeps the ranges of the groups that ran since their last barrier. A new group that
    overlaps such a range must wait for it: the old range is synchronised by itself when the new
    group covers only part of it, and the new group's own range is synchronised when it
    overlaps an old range (partly or wholly) beyond what was synchronised already. Disjoint
    groups get no barrier and run concurrently. Empty groups are skipped.
    """
    unsynced: list[Range] = []
    out: list[list[Range]] = []
    for index, group in enumerate(groups):
        current = group.processors
        syncs: list[Range] = []
        if len(current) == 0:
            out.append(syncs)
            continue
        if index > 0:
            need_sync = False
            kept = []
            for old in unsynced:
                common = _common(old, current)
                if common == 0:
                    kept.append(old)
                    continue
                if common < len(old):
                    syncs.append(old)
                    need_sync = need_sync or common < len(current)
                else:
                    need_sync = True
            unsynced = kept
            if need_sync:
                syncs.append(current)
        out.append(syncs)
        unsynced.append(current)
    return out


def _common(a: Range, b: Range) -> int:
    """How many processors two ranges share: by their ends for ranges of step 1 (planc's and
    most of ARK's), else by sets (ranges of processors, at most a grid's)."""
    if a.step == 1 and b.step == 1:
        return max(0, min(a.end, b.end) - max(a.begin, b.begin))
    return len(set(a) & set(b))


MAX_TASK_EXECUTIONS = 1 << 26
"""The most task executions planc models or emits code for (the cost model holds one entry
per task; a plan beyond it could not run in any time a user would wait for either)."""


def task_executions(p: PlanOp) -> int:
    """How many task indices the plan's task groups run, in all."""
    return sum(len(tg.tasks) for pg in p.processor_groups() for rg in pg.resource_groups()
               for tg in rg.task_groups())


def refuse_too_many_tasks(p: PlanOp, what: str) -> None:
    count = task_executions(p)
    if count > MAX_TASK_EXECUTIONS:
        from ground.diagnostics import PlancError

        raise PlancError(f"the plan runs {count:,} tasks, more than the {MAX_TASK_EXECUTIONS:,} "
                         f"{what} handles (planc check decides its rules symbolically at any "
                         "size)")


def plan_of(op: Operation) -> PlanOp | None:
    current = op.parent_op()
    while current is not None and not isinstance(current, PlanOp):
        current = current.parent_op()
    return current


Plan = Dialect(
    "plan",
    [PlanOp, TaskOp, ProcessorGroupOp, ResourceGroupOp, TaskGroupOp],
    [RangeAttr],
)
