"""The `sched` dialect: a target-neutral schedule of a model on a device's processing units.

A schedule says which operators run together, how their work is cut into tiles, which units
run which tiles when, and where tensors live in device memory:

* `sched.schedule` holds the model graph (the `ark` operators and views, in one flat block as in
  `ark.model`) and the schedule ops below; `device` names the hardware description
  (`devices.hardware`) that tiling and partitioning were done for.
* A *kernel* is a group of fused operators that run tile by tile: for every tile index, each of
  its operators computes its own tile of output, in block order. `sched.kernel` declares one
  (`kind`: matmul, rows, elementwise, transpose or single); its operators are the `ark` ops whose
  `task` property is the kernel id. Tiling adds the tile count, the warps and scratchpad bytes
  one tile needs, and each operator's tile shape (its `config`).
* A `sched.phase` starts when every unit has finished everything before it (a barrier), then
  runs its `sched.launch`es: launch k runs tiles `tiles` of a kernel on units `units`, each unit
  using `warps` and `sram` of its resources for concurrent tiles (slots), `granularity`
  consecutive tiles per unit at a time. Launches on overlapping units run in order, launches on
  disjoint units concurrently.
* `sched.region` records the memory plan: physical buffer `buffer` at byte `offset` of the
  device arena, `size` bytes, holding the logical buffers `holds` one after another (buffers whose
  lifetimes do not overlap share a region; tensors moved there name the physical buffer).

Passes build it up: `ark-to-sched`, `sched-fuse`, `sched-tile`, `sched-partition`,
`sched-allocate`, then `sched-to-plan` lowers it to an ARK plan.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from xdsl.dialects.builtin import I64, BytesAttr, DenseArrayBase, IntegerAttr, StringAttr, i64
from xdsl.ir import Block, Dialect, Operation, Region
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
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
from dialects.plan import Range, RangeAttr, range_attr
from dialects.utils import (
    VerifyAt,
    body_block,
    build_with_properties,
    built,
    format_on_first_use,
    i64_attr,
    op_list,
)

KERNEL_KINDS = ("matmul", "rows", "elementwise", "transpose", "single")


@functools.lru_cache(maxsize=1 << 16)
def int_attr(value: int) -> IntegerAttr:
    """An i64 integer attribute (shared: attributes are immutable, and passes make many)."""
    return i64_attr(value)


_int = int_attr


def i64_array(values: Sequence[int]) -> DenseArrayBase:
    """`DenseArrayBase.from_list(i64, values)`; for values in the signed range (which that
    normalizes to themselves) without the per-value normalization."""
    values = tuple(values)
    if all(type(v) is int and _I64_MIN <= v <= _I64_MAX for v in values):
        return built(DenseArrayBase, i64, BytesAttr(i64.pack(values)))
    return DenseArrayBase.from_list(i64, values)


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


@functools.lru_cache(maxsize=64)
def _string(value: str) -> StringAttr:
    """A string attribute (shared: kernels repeat a few kinds)."""
    return StringAttr(value)


@irdl_op_definition
@format_on_first_use
class KernelOp(IRDLOperation):
    """A kernel: the `ark` operators whose `task` is `id`, run tile by tile.

    `kind` says how its tiles are shaped: `matmul` (output tiles of one or more matmuls with
    element-wise epilogues), `rows` (blocks of whole rows: reductions along the last axis and
    the element-wise work around them), `elementwise` and `transpose` (output tiles), `single`
    (an operator with its own fixed tiling). After tiling, `num_tiles` tiles of `num_warps`
    warps and `sram_bytes` scratchpad bytes each.
    """

    name = "sched.kernel"
    id = prop_def(IntegerAttr[I64])
    kind = prop_def(StringAttr)
    num_tiles = opt_prop_def(IntegerAttr[I64])
    num_warps = opt_prop_def(IntegerAttr[I64])
    sram_bytes = opt_prop_def(IntegerAttr[I64])
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("$id $kind (`tiles` $num_tiles^ `warps` $num_warps `sram` $sram_bytes)? "
                       "attr-dict")

    def __init__(self, kernel_id: int, kind: str):
        build_with_properties(self, {"id": _int(kernel_id), "kind": _string(kind)})

    @property
    def kernel_id(self) -> int:
        return self.id.value.data

    @property
    def kind_name(self) -> str:
        return self.kind.data

    @property
    def tiled(self) -> bool:
        return self.num_tiles is not None

    @property
    def tiles(self) -> int:
        return self.num_tiles.value.data if self.num_tiles is not None else 0

    @property
    def warps(self) -> int:
        return self.num_warps.value.data if self.num_warps is not None else 0

    @property
    def sram(self) -> int:
        return self.sram_bytes.value.data if self.sram_bytes is not None else 0

    def set_tiling(self, tiles: int, warps: int, sram: int) -> None:
        self.num_tiles, self.num_warps, self.sram_bytes = _int(tiles), _int(warps), _int(sram)

    def verify_(self) -> None:
        if self.kind_name not in KERNEL_KINDS:
            raise VerifyException(f"kernel {self.kernel_id}: unknown kind '{self.kind_name}' "
                                  f"(expected one of {', '.join(KERNEL_KINDS)})")
        if self.tiled and (self.tiles < 0 or self.warps < 1 or self.sram < 0):
            raise VerifyException(f"kernel {self.kernel_id}: needs tiles >= 0, warps >= 1 and "
                                  "sram >= 0")


@irdl_op_definition
@format_on_first_use
class LaunchOp(IRDLOperation):
    """Runs tiles `tiles` of kernel `kernel` on units `units`, with `warps` and `sram` of each
    unit (as many concurrent tiles as fit), `granularity` consecutive tiles per unit at a
    time."""

    name = "sched.launch"
    kernel = prop_def(IntegerAttr[I64])
    tiles = prop_def(RangeAttr)
    units = prop_def(RangeAttr)
    warps = prop_def(RangeAttr)
    sram = prop_def(RangeAttr)
    granularity = prop_def(IntegerAttr[I64])
    traits = lazy_traits_def(lambda: (HasParent(PhaseOp),))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("$kernel `tiles` $tiles `units` $units `warps` $warps `sram` $sram "
                       "`granularity` $granularity attr-dict")

    def __init__(self, kernel: int, tiles: Range, units: Range, warps: Range, sram: Range,
                 granularity: int = 1):
        def attr(r: Range) -> RangeAttr:
            return range_attr(r.begin, r.end, None if r.step == 1 else r.step)

        build_with_properties(self, {
            "kernel": _int(kernel), "tiles": attr(tiles), "units": attr(units),
            "warps": attr(warps), "sram": attr(sram), "granularity": _int(granularity)})

    @property
    def kernel_id(self) -> int:
        return self.kernel.value.data

    @property
    def tile_range(self) -> Range:
        return self.tiles.range

    @property
    def unit_range(self) -> Range:
        return self.units.range

    @property
    def warp_range(self) -> Range:
        return self.warps.range

    @property
    def sram_range(self) -> Range:
        return self.sram.range

    @property
    def gran(self) -> int:
        return self.granularity.value.data

    def verify_(self) -> None:
        if self.gran < 1:
            raise VerifyException(f"granularity must be positive, got {self.gran}")
        if self.sram_range.step != 1:
            raise VerifyException(f"sram range {self.sram_range} must have step 1")


@irdl_op_definition
@format_on_first_use
class PhaseOp(IRDLOperation):
    """A barrier on every unit, then the launches of the body (see the module docstring)."""

    name = "sched.phase"
    body = region_def()
    traits = lazy_traits_def(lambda: (NoTerminator(), HasParent(ScheduleOp)))
    assembly_format = "attr-dict-with-keyword $body"

    def __init__(self, launches: Sequence[LaunchOp] = ()):
        super().__init__(regions=[Region(Block(launches))])

    def launches(self) -> list[LaunchOp]:
        return [op for op in op_list(body_block(self.body)) if isinstance(op, LaunchOp)]


@irdl_op_definition
@format_on_first_use
class RegionOp(IRDLOperation):
    """Physical buffer `buffer`: `size` bytes at `offset` of the device arena, holding the
    logical buffers `holds` (whose lifetimes do not overlap)."""

    name = "sched.region"
    buffer = prop_def(IntegerAttr[I64])
    offset = prop_def(IntegerAttr[I64])
    size = prop_def(IntegerAttr[I64])
    holds = prop_def(DenseArrayBase)
    traits = lazy_traits_def(lambda: (HasParent(ScheduleOp),))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$buffer `offset` $offset `size` $size attr-dict"

    def __init__(self, buffer: int, offset: int, size: int, holds: Sequence[int]):
        build_with_properties(self, {
            "buffer": _int(buffer), "offset": _int(offset), "size": _int(size),
            "holds": i64_array(holds)})

    @property
    def bytes(self) -> int:
        return self.size.value.data


@irdl_op_definition
@format_on_first_use
class ScheduleOp(IRDLOperation):
    """A model scheduled on device `device` (see the module docstring)."""

    name = "sched.schedule"
    rank = prop_def(IntegerAttr[I64])
    world_size = prop_def(IntegerAttr[I64])
    device = prop_def(StringAttr)
    body = region_def()
    traits = traits_def(NoTerminator(), IsolatedFromAbove())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("`rank` $rank `of` $world_size `device` $device "
                       "attr-dict-with-keyword $body")

    def __init__(self, rank: int, world_size: int, device: str, body: Region):
        super().__init__(properties={"rank": _int(rank), "world_size": _int(world_size),
                                     "device": StringAttr(device)}, regions=[body])

    @property
    def graph(self) -> Block:
        return body_block(self.body)

    @property
    def device_name(self) -> str:
        return self.device.data

    def _of_kind(self, kind: type) -> list:
        """The ops of the graph that are `kind`s, in block order. Passes ask for them on
        graphs of tens of thousands of ops: the class test is decided once per op class
        (`isinstance` on xDSL's abstract classes costs more than the walk itself)."""
        return [op for op in op_list(self.graph) if _is_a(type(op), kind)]

    def operators(self) -> list[ark.ArkOp]:
        return self._of_kind(ark.ArkOp)

    def kernels(self) -> dict[int, KernelOp]:
        return {op.kernel_id: op for op in self._of_kind(KernelOp)}

    def kernel_operators(self) -> dict[int, list[ark.ArkOp]]:
        grouped: dict[int, list[ark.ArkOp]] = {}
        operators: list[ark.ArkOp] = []
        for op in op_list(self.graph):  # one walk for both kinds
            cls = type(op)
            if _is_a(cls, KernelOp):
                grouped[op.kernel_id] = []
            elif _is_a(cls, ark.ArkOp):
                operators.append(op)
        for op in operators:
            if op.task_id is not None:
                grouped.setdefault(op.task_id, []).append(op)
        return grouped

    def phases(self) -> list[PhaseOp]:
        return self._of_kind(PhaseOp)

    def memory_regions(self) -> list[RegionOp]:
        return self._of_kind(RegionOp)

    def verify_(self) -> None:
        kernels: dict[int, KernelOp] = {}
        for kernel in self._of_kind(KernelOp):
            if kernel.kernel_id in kernels:
                raise VerifyAt(f"kernel id {kernel.kernel_id} is used twice", kernel)
            kernels[kernel.kernel_id] = kernel
        for op in self.operators():
            if op.is_virtual:
                continue
            if op.task_id is None:
                raise VerifyAt(f"{op.ark_type} '{op.label.data}' belongs to no kernel", op)
            if op.task_id not in kernels:
                raise VerifyAt(f"{op.ark_type} '{op.label.data}' belongs to kernel "
                                    f"{op.task_id}, which is not declared", op)
        for phase in self.phases():
            for launch in phase.launches():
                kernel = kernels.get(launch.kernel_id)
                if kernel is None:
                    raise VerifyAt(f"launch of kernel {launch.kernel_id}, which is not "
                                        "declared", launch)
                if kernel.tiled and launch.tile_range.end > kernel.tiles:
                    raise VerifyAt(f"tiles {launch.tile_range} are not inside the "
                                        f"{kernel.tiles} tiles of kernel {kernel.kernel_id}",
                                        launch)


@functools.cache
def _is_a(cls: type, kind: type) -> bool:
    return issubclass(cls, kind)


def schedules(module: Operation) -> list[ScheduleOp]:
    """The schedules in `module`, in walk order (pre-order). Only ops with regions are
    descended into: the thousands of region-less ops of a graph are passed over in one loop
    instead of one generator each, as `Operation.walk` makes, and each block is listed by
    following its op list (`op_list`)."""
    found: list[ScheduleOp] = []
    stack = [module]
    while stack:
        op = stack.pop()
        if _is_a(type(op), ScheduleOp):
            found.append(op)
        for region in reversed(op.regions):
            for block in reversed(region.blocks):
                stack.extend(reversed([child for child in op_list(block) if child.regions
                                       or _is_a(type(child), ScheduleOp)]))
    return found


Sched = Dialect(
    "sched",
    [ScheduleOp, KernelOp, PhaseOp, LaunchOp, RegionOp],
    [],
)
