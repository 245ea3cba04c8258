"""`sched-tile`: choose each kernel's tiling for the schedule's device, with the cost model.

For every kernel the pass enumerates the tilings its kind allows on the device and keeps the
one `targets.ark.cost_model.kernel_estimate` finds fastest when the kernel has the device to
itself:

* matmul kernels: the matmul kernel configurations the device's runtime supports for the data
  type (`matmul_kernels` in the device file: tile M x N x K, warps, shared memory); epilogue
  operators take the matmul's M x N tile and warps; tiles whose K step does not divide the
  problem's K are used only when no other fits;
* rows kernels: blocks of 1 to 256 whole rows per tile with 1 to 8 warps; reductions are
  warp-wise with a `[rows, 1]` tile and 256 bytes of shared memory per warp;
* element-wise and transpose kernels: 2-D output tiles from 1 x 64 up to 256 x 4096 elements with
  1 to 8 warps (rotary embeddings keep whole element pairs);
* single operators (embedding, other reductions, communication): ARK's default configuration.

A matmul tiling within `COST_SLACK` of the cost model's best wins when the product of its time
ratios under both models (the cost model and the static-distribution roofline) is smaller
(`robust_choice`).

Each candidate runs as many concurrent tiles per processor as the device's plan width
(`plan_warps_per_processor`) and shared memory allow. Operators get their `config` (ARK's
Config keys: NumWarps, SramBytes, NumTasks and TileShapeMNK / Tile / ImplType) and the kernel
its tile count, warps and shared memory. Kernels with equal structure share one search.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property

from xdsl.context import Context
from xdsl.dialects.builtin import DictionaryAttr, ModuleOp
from xdsl.passes import ModulePass

from devices.hardware import GpuDevice, gpu_device
from dialects import ark, sched
from dialects.json_value import dict_attr
from dialects.locations import source_path
from ground.diagnostics import PlancError
from passes.ark_default_plan import default_config
from passes.sched_graph import Operands, shape4
from passes.sched_tables import ScheduleTables, Signatures
from targets.ark import static_roofline
from targets.ark.cost_model import kernel_estimate
from targets.ark.tensor_layouts import layout_of

ROW_BLOCKS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
TILE_WIDTHS = (64, 256, 1024, 4096)
TILE_HEIGHTS = (1, 4, 16, 64, 256)
WARPS = (1, 2, 4, 8)
REDUCE_SRAM_PER_WARP = 256
"""ARK's warp-wise reduction asks 256 bytes of shared memory for one warp."""


@dataclass(frozen=True)
class Tiling:
    configs: tuple[dict, ...]
    tiles: int
    warps: int
    sram: int
    seconds: float

    @cached_property
    def attributes(self) -> tuple[DictionaryAttr, ...]:
        """The configs as attributes, built once for all kernels that share the tiling."""
        return tuple(dict_attr(config) for config in self.configs)


def slots(warps: int, sram: int, device: GpuDevice) -> int:
    """Concurrent tiles one processor holds within the plan's width and shared memory."""
    count = device.plan_warps_per_processor // warps
    if sram:
        count = min(count, device.sram_per_processor // sram)
    return count


def _elementwise(warps: int, tile: Sequence[int], tiles: int) -> dict:
    return {"NumWarps": warps, "SramBytes": 0, "Tile": list(tile), "NumTasks": tiles}


def matmul_candidates(ops: Sequence[ark.ArkOp], space: tuple[int, ...],
                      device: GpuDevice) -> Iterator[tuple[list[dict], int, int, int]]:
    matmuls = [op for op in ops if isinstance(op, ark.MatmulOp)]
    dtype = matmuls[0].outputs[0].data_type
    kernels = device.matmul_kernels.get(dtype, ())
    if not kernels:
        raise PlancError(f"Matmul '{matmuls[0].label.data}': {device.name} has no {dtype} "
                         "matmul kernel", path=source_path(matmuls[0]))
    fitting = [k for k in kernels if k.warps <= device.plan_warps_per_processor
               and k.sram <= device.sram_per_processor]
    divides = [k for k in fitting if all(op.problem_mnk()[2] % k.tile[2] == 0
                                         for op in matmuls)]
    batch, rows, cols = space[0] * space[1], space[2], space[3]
    for kernel in divides or fitting:
        tm, tn, tk = kernel.tile
        tiles = batch * math.ceil(rows / tm) * math.ceil(cols / tn)
        configs = [{"NumWarps": kernel.warps, "SramBytes": kernel.sram,
                    "TileShapeMNK": [tm, tn, tk], "NumTasks": tiles}
                   if isinstance(op, ark.MatmulOp) else _elementwise(kernel.warps, [tm, tn],
                                                                      tiles)
                   for op in ops]
        yield configs, tiles, kernel.warps, kernel.sram


def rows_candidates(ops: Sequence[ark.ArkOp], space: tuple[int, ...],
                    device: GpuDevice) -> Iterator[tuple[list[dict], int, int, int]]:
    batch, rows, width = space[0] * space[1], space[2], space[3]
    for block in ROW_BLOCKS:
        if block > rows and block != ROW_BLOCKS[0]:
            break
        tiles = batch * math.ceil(rows / block)
        for warps in WARPS:
            if warps > device.plan_warps_per_processor:
                continue
            configs = []
            for op in ops:
                if isinstance(op, ark.ReduceOp):
                    configs.append({"NumWarps": warps, "ImplType": "WarpWise",
                                    "SramBytes": REDUCE_SRAM_PER_WARP * warps,
                                    "Tile": [block, 1], "NumTasks": tiles})
                else:
                    full = shape4(op.outputs[0].shape_list)[3] == width
                    configs.append(_elementwise(warps, [block, width if full else 1], tiles))
            sram = max(c["SramBytes"] for c in configs)
            yield configs, tiles, warps, sram


def elementwise_candidates(ops: Sequence[ark.ArkOp], space: tuple[int, ...],
                           device: GpuDevice) -> Iterator[tuple[list[dict], int, int, int]]:
    height, width = space[2], space[3]
    pairs = any(isinstance(op, ark.RopeOp) for op in ops)
    widths = sorted({min(w, width) for w in TILE_WIDTHS} | {width})
    heights = sorted({min(h, height) for h in TILE_HEIGHTS})
    for tw in widths:
        if pairs and tw % 2 and tw != width:
            continue
        for th in heights:
            tiles = space[0] * space[1] * math.ceil(height / th) * math.ceil(width / tw)
            for warps in WARPS:
                if warps > device.plan_warps_per_processor or (
                        th * tw < warps * 32 // 4 and not _whole_plane(warps, th, tw, space)):
                    continue
                configs = [_elementwise(warps, [th, tw], tiles) for _ in ops]
                yield configs, tiles, warps, 0


def _whole_plane(warps: int, th: int, tw: int, space: tuple[int, ...]) -> bool:
    """Is this one warp over a whole plane? Always a candidate, however few elements the plane
    has (a scalar, `[1]` or `[1, 1, 1, 1]`, has no other tiling); planes of 8 or more elements
    already pass the size rule, so their candidates are unchanged."""
    return warps == 1 and (th, tw) == (space[2], space[3])


CANDIDATES = {"matmul": matmul_candidates, "rows": rows_candidates,
              "elementwise": elementwise_candidates, "transpose": elementwise_candidates}


def kernel_space(kind: str, ops: Sequence[ark.ArkOp]) -> tuple[int, ...]:
    """The shape a kernel's tiles cut (for rows kernels: the rows its reductions read)."""
    if kind == "rows":
        return next(shape4(op.inputs[0].shape_list) for op in ops
                    if isinstance(op, ark.ReduceOp))
    if kind == "matmul":
        return next(shape4(op.outputs[0].shape_list) for op in ops
                    if isinstance(op, ark.MatmulOp))
    return shape4(ops[0].outputs[0].shape_list)


def _layout(tensor: ark.TensorType) -> tuple:
    """Shape, strides and data type (kept with the tensor's `Layout`)."""
    return (tensor.__dict__.get("_planc_pass_layout") or layout_of(tensor)).tile_key


def signature(kind: str, ops: Sequence[ark.ArkOp],
              operands: Sequence[Operands] | None = None) -> tuple:
    """What a kernel's cost depends on: structurally equal kernels share their tiling.
    (`operands`: the ops' `Operands`, when known.)"""
    position: dict[int, int] = {}  # by `id` of value
    parts = []
    for i, op in enumerate(ops):
        if operands is None:
            read_values, write_values = op.operand_groups()
            read_layouts = [_layout(v.type) for v in read_values]
            outs = tuple([_layout(v.type) for v in write_values])
        else:
            read_values, _, read_regions, write_regions, _ = operands[i]
            read_layouts = [r.layout.tile_key for r in read_regions]
            outs = tuple([r.layout.tile_key for r in write_regions])
        reads = tuple([(layout, position.get(id(v), -1))
                       for layout, v in zip(read_layouts, read_values, strict=True)])
        # (`arg_attrs` is empty for an operator of a class without arguments and without
        # extra ones: most element-wise operators)
        args = (tuple(op.arg_attrs().items()) if type(op).ARGS or "extra_args" in op.properties
                else ())
        parts.append((type(op).__name__, reads, outs, args))
        for value in op.results:  # (an operator's results are its result tensors)
            position[id(value)] = i
    return kind, tuple(parts)


def choose_tiling(kind: str, ops: Sequence[ark.ArkOp], device: GpuDevice) -> Tiling:
    """The fastest tiling of a kernel (see the module docstring)."""
    if kind == "single":
        (op,) = ops
        config = default_config(op, device, partial_tiles=True)
        return Tiling((config,), config["NumTasks"], config["NumWarps"], config["SramBytes"],
                      0.0)
    space = kernel_space(kind, ops)
    candidates: list[tuple[Tiling, int]] = []
    memo: dict = {}  # task 0's work, shared by candidates of one tile shape (`kernel_estimate`)
    for configs, tiles, warps, sram in CANDIDATES[kind](ops, space, device):
        count = slots(warps, sram, device)
        if count < 1:
            continue
        estimate = kernel_estimate(ops, configs, tiles, warps, count, device, memo)
        candidates.append((Tiling(tuple(configs), tiles, warps, sram, estimate.seconds), count))
    if not candidates:
        raise PlancError(f"no tiling of kernel '{ops[0].label.data}' fits one processor of "
                         f"{device.name}", path=source_path(ops[0]))
    if kind != "matmul":
        return min((t for t, _ in candidates), key=lambda t: (t.seconds, t.tiles))
    return robust_choice(ops, candidates, device)


COST_SLACK = 1.15
"""How much slower under the cost model than its best a matmul tiling may be and still be
chosen for being faster under the static-distribution roofline (`robust_choice`)."""


def robust_choice(ops: Sequence[ark.ArkOp], candidates: Sequence[tuple[Tiling, int]],
                  device: GpuDevice) -> Tiling:
    """The matmul tiling with the smallest product of its time ratios to the cost model's best
    tiling under both models, planc's cost model and the static-distribution roofline, among
    those within `COST_SLACK` of that best under the cost model. Under the roofline a kernel's
    compulsory work is the same for every tiling and waves are quantised, so a tile count just
    above a multiple of the processors costs a whole wave; a tiling that saves more of that
    than the cost model's per-task terms charge for it wins (the Llama layer's 2048 x 4096
    projections on a100: 1024 tiles of 128 x 64 instead of 256 of 128 x 256, 1.13x the cost
    model's time, 0.83x the roofline's).

    Only for kernels whose cost-model best has a tile for every processor: one with fewer tiles
    is what split-K (`sched-partition`) cuts to fill the device, and comparing it uncut would
    favour smaller tiles that the cut beats under both models."""
    best, best_count = min(candidates, key=lambda c: (c[0].seconds, c[0].tiles))
    if best.tiles < device.processors or best.seconds <= 0:
        return best
    work = static_roofline.ops_work(ops)
    dtype = static_roofline.dtype_of(ops)

    def static(tiling: Tiling, count: int) -> float:
        return static_roofline.launch_seconds(
            tiling.tiles, work.scaled(1 / max(tiling.tiles, 1)), device.processors, count,
            tiling.warps, device, dtype)

    reference = static(best, best_count)
    if reference <= 0:
        return best

    def rank(candidate: tuple[Tiling, int]) -> tuple:
        tiling, count = candidate
        product = tiling.seconds / best.seconds * static(tiling, count) / reference
        return (product, tiling.seconds, tiling.tiles)

    return min((c for c in candidates if c[0].seconds <= COST_SLACK * best.seconds
                and c[0].tiles >= device.processors), key=rank)[0]


def cached_signature(kind: str, ops: Sequence[ark.ArkOp], cache: Signatures | None,
                     operands: Sequence[Operands] | None = None) -> tuple | int:
    """`signature(kind, ops, operands)`, or with `cache` (see `ScheduleTables.signatures`) a
    number standing for it: equal signatures get equal numbers (cheap keys for the caches of
    tilings and estimates), remembered per kernel."""
    if cache is None:
        return signature(kind, ops, operands)
    # (By `id`s of the operators: the entry keeps them, so no other op has their `id`s.)
    key = (kind, *map(id, ops))
    found = cache.by_kernel.get(key)
    now = [op._operands for op in ops]  # noqa: SLF001 -- replaced, never mutated
    if found is None or any(a is not b for a, b in zip(found[1], now, strict=True)):
        # (an operator whose operands were replaced may read other layouts now)
        numbers = cache.numbers
        number = numbers.setdefault(signature(kind, ops, operands), len(numbers))
        found = cache.by_kernel[key] = (ops, now, number)
    return found[2]


class Tiler:
    def __init__(self, device: GpuDevice, signatures: Signatures | None = None):
        self.device = device
        self.cache: dict[tuple, Tiling] = {}
        self.signatures = signatures

    def tile(self, kernel: sched.KernelOp, ops: Sequence[ark.ArkOp],
             operands: Sequence[Operands] | None = None) -> Tiling:
        """Choose the kernel's tiling (`operands`: the ops' `Operands`, when known)."""
        kind = kernel.kind_name
        key = cached_signature(kind, ops, self.signatures, operands)
        tiling = self.cache.get(key)
        if tiling is None:
            tiling = self.cache[key] = choose_tiling(kind, ops, self.device)
        for op, config in zip(ops, tiling.attributes, strict=True):
            op.properties["config"] = config  # (`op.config = config`, without the descriptor)
        kernel.set_tiling(tiling.tiles, tiling.warps, tiling.sram)
        return tiling


@dataclass(frozen=True)
class SchedTilePass(ModulePass):
    name = "sched-tile"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for schedule in sched.schedules(op):
            self.run(schedule, ScheduleTables(schedule))

    def run(self, schedule: sched.ScheduleOp, tables: ScheduleTables) -> None:
        tiler = Tiler(gpu_device(schedule.device_name), tables.signatures)
        operators = tables.kernel_operators()
        table, position = tables.operands(), tables.positions()
        for kernel_id, kernel in tables.kernels().items():
            ops = operators[kernel_id]
            tiler.tile(kernel, ops, [table[position[id(op)]] for op in ops])
