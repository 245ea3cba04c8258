"""Run Tenstorrent plans tile by tile with numpy, and check them against the model they come from.

Every core's work list is executed in order, one 32x32 output tile per work item, the way the
emitted kernels do it: operands are padded to whole tiles, a matmul tile accumulates its len_k
products A(io, k) x B(k, jo) (a transposed operand is read as the transposed stored tile), an
element-wise tile combines the matching (broadcast) input tiles, a reduction folds len_k input
tiles into the first column (row) of its output tile, a transpose gathers its elements. Tiles
are written into the output once each; the cropped result goes back into device memory (the
reference interpreter's byte buffers, so views and aliasing behave alike).

`simulate_plans` is the `planc simulate` hook for plan files: the plans' own kernels (their
ARK operators) form the reference model, which `targets.ark.model_interpreter` runs op by op on
the same random inputs; every kernel result must match within the element type's tolerance.
A plan without planc's `kernel` member (TileLang-TT's own files) is run as the GEMM its work
items describe: C[32*Mt, 32*Nt] = A[32*Mt, 32*len_k] x B[32*len_k, 32*Nt].
"""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region, SSAValue

from devices.tt import device_named
from dialects import ark, tt
from dialects.tt_kernels import (
    TILE,
    KernelGeometry,
    KernelKind,
    TileView,
    describe_op,
    kernel_buffers,
    kernel_geometry,
    reduced_keepdim_shape,
)
from ground import dtypes
from ground.diagnostics import PlancError
from targets.ark.model_interpreter import (
    MAX_MEMORY_BYTES,
    Memory,
    ModelRun,
    buffer_sizes,
    evaluate,
    run_model,
)
from targets.tt.schedule import kernel_cost

Tile = tuple[int, int]

# ---------------------------------------------------------------------------------------------
# Tensors as tiles
# ---------------------------------------------------------------------------------------------


class Tiled:
    """A tensor padded to whole tiles: [batch, Ht*32, Wt*32], tiles addressed (b, ht, wt)."""

    def __init__(self, values: np.ndarray, view: TileView):
        self.view = view
        data = np.asarray(values).reshape(view.batch_size, view.rows, view.cols)
        self.data = np.zeros((view.batch_size, view.row_tiles * TILE, view.col_tiles * TILE),
                             dtype=data.dtype)
        self.data[:, :view.rows, :view.cols] = data

    def tile(self, b: int, ht: int, wt: int) -> np.ndarray:
        return self.data[b, ht * TILE:(ht + 1) * TILE, wt * TILE:(wt + 1) * TILE]


def source_batch(out_batch: Sequence[int], flat: int, src_batch: Sequence[int]) -> int:
    """The batch (flat index) of a broadcast operand that output batch `flat` reads."""
    out_index = np.unravel_index(flat, out_batch) if out_batch else ()
    offset = len(out_batch) - len(src_batch)
    index = [0 if d == 1 or i + offset < 0 else int(out_index[i + offset])
             for i, d in enumerate(src_batch)]
    return int(np.ravel_multi_index(index, src_batch)) if src_batch else 0


def _left_pad(shape: Sequence[int], rank: int) -> list[int]:
    return [1] * (rank - len(shape)) + list(shape)


# ---------------------------------------------------------------------------------------------
# One work item, per kernel kind
# ---------------------------------------------------------------------------------------------

TileFunction = Callable[[int, int], np.ndarray]


def matmul_tiles(a: Tiled, b: Tiled, out: TileView, len_k: int, *, trans_a: bool = False,
                 trans_b: bool = False) -> TileFunction:
    def compute(io: int, jo: int) -> np.ndarray:
        batch, ht = divmod(io, out.row_tiles)
        ba = source_batch(out.batch, batch, a.view.batch)
        bb = source_batch(out.batch, batch, b.view.batch)
        acc = np.zeros((TILE, TILE), dtype=np.float32)
        for k in range(len_k):
            ta = a.tile(ba, k, ht).T if trans_a else a.tile(ba, ht, k)
            tb = b.tile(bb, jo, k).T if trans_b else b.tile(bb, k, jo)
            acc += ta.astype(np.float32) @ tb.astype(np.float32)
        return acc
    return compute


def eltwise_tiles(op: ark.ArkOp, inputs: Sequence[np.ndarray], out_shape: Sequence[int]
                  ) -> TileFunction:
    rank = max([len(out_shape), *(x.ndim for x in inputs), 2])
    out = TileView.of(_left_pad(out_shape, rank))
    operands = []
    for x in inputs:
        view = TileView.of(_left_pad(x.shape, rank))
        operands.append((Tiled(x, view), view.rows == 1 < out.rows, view.cols == 1 < out.cols))

    def compute(io: int, jo: int) -> np.ndarray:
        if isinstance(op, ark.ScalarAssignOp):
            return np.full((TILE, TILE), op.value.value.data, dtype=np.float32)
        batch, ht = divmod(io, out.row_tiles)
        tiles = []
        for tiled, row_bcast, col_bcast in operands:
            b = source_batch(out.batch, batch, tiled.view.batch)
            t = tiled.tile(b, 0 if row_bcast else ht, 0 if col_bcast else jo)
            # Broadcasting inside a tile uses its first row / column, like TT's bcast ops.
            tiles.append(t[:1 if row_bcast else TILE, :1 if col_bcast else TILE])
        return np.broadcast_to(evaluate(op, tiles), (TILE, TILE))
    return compute


REDUCERS: dict[type[ark.ArkOp], Callable[[np.ndarray, int, int], np.ndarray]] = {
    ark.ReduceSumOp: lambda x, axis, n: x.sum(axis=axis),
    ark.ReduceMaxOp: lambda x, axis, n: x.max(axis=axis),
    ark.ReduceMeanOp: lambda x, axis, n: x.sum(axis=axis) / np.float32(n),
}


def reduce_tiles(op: ark.ReduceOp, x: np.ndarray, geometry: KernelGeometry) -> TileFunction:
    source = Tiled(x, TileView.of(x.shape))
    out, len_k = geometry.output, geometry.len_k
    reducer = REDUCERS[type(op)]

    def compute(io: int, jo: int) -> np.ndarray:
        batch, ht = divmod(io, out.row_tiles)
        tile = np.zeros((TILE, TILE), dtype=source.data.dtype)
        if geometry.reduce_axis == "row":
            strip = np.concatenate([source.tile(batch, ht, k) for k in range(len_k)], axis=1)
            tile[:, 0] = reducer(strip[:, :source.view.cols], 1, source.view.cols)
        else:
            strip = np.concatenate([source.tile(batch, k, jo) for k in range(len_k)], axis=0)
            tile[0, :] = reducer(strip[:source.view.rows, :], 0, source.view.rows)
        return tile
    return compute


def transpose_tiles(op: ark.TransposeOp, x: np.ndarray, out: TileView) -> TileFunction:
    inverse = np.argsort(op.perm)

    def compute(io: int, jo: int) -> np.ndarray:
        batch, ht = divmod(io, out.row_tiles)
        tile = np.zeros((TILE, TILE), dtype=x.dtype)
        rows = np.arange(ht * TILE, min((ht + 1) * TILE, out.rows))
        cols = np.arange(jo * TILE, min((jo + 1) * TILE, out.cols))
        lead = np.unravel_index(batch, out.batch) if out.batch else ()
        r, c = np.meshgrid(rows, cols, indexing="ij")
        out_index = [np.full_like(r, i) for i in lead] + [r, c]
        if x.ndim == 1:
            out_index = out_index[-1:]
        tile[:len(rows), :len(cols)] = x[tuple(out_index[p] for p in inverse)]
        return tile
    return compute


def gather_tiles(indices: np.ndarray, table: np.ndarray, out: TileView) -> TileFunction:
    """Output row r (over all batches) is table row indices[r]; a tile takes 32 of them."""
    rows_of = indices.reshape(-1)

    def compute(io: int, jo: int) -> np.ndarray:
        batch, ht = divmod(io, out.row_tiles)
        tile = np.zeros((TILE, TILE), dtype=table.dtype)
        first = batch * out.rows + ht * TILE
        rows = rows_of[first:first + min(TILE, out.rows - ht * TILE)]
        cols = slice(jo * TILE, min((jo + 1) * TILE, out.cols))
        tile[:len(rows), :cols.stop - cols.start] = table[rows, cols]
        return tile
    return compute


def tile_function(op: ark.ArkOp, geometry: KernelGeometry, inputs: Sequence[np.ndarray]
                  ) -> TileFunction:
    match geometry.kind:
        case KernelKind.MATMUL:
            a, b = (Tiled(x, TileView.of(x.shape if x.ndim > 1 else (1, *x.shape)))
                    for x in inputs)
            return matmul_tiles(a, b, geometry.output, geometry.len_k,
                                trans_a=op.trans_input, trans_b=op.trans_other)
        case KernelKind.ELTWISE:
            return eltwise_tiles(op, inputs, op.outputs[0].shape_list)
        case KernelKind.REDUCE:
            return reduce_tiles(op, inputs[0], geometry)
        case KernelKind.TRANSPOSE:
            return transpose_tiles(op, inputs[0], geometry.output)
        case KernelKind.GATHER:
            return gather_tiles(inputs[0], inputs[1], geometry.output)
    raise AssertionError(geometry.kind)


# ---------------------------------------------------------------------------------------------
# Executing a partition
# ---------------------------------------------------------------------------------------------


def run_partition(compute: TileFunction, out: TileView, work: Sequence[Sequence[Tile]],
                  dtype: np.dtype) -> np.ndarray:
    """Every work item of every core, in order; each output tile must be written once.
    Returns the cropped output, [batch, rows, cols]."""
    data = np.zeros((out.batch_size, out.row_tiles * TILE, out.col_tiles * TILE), dtype=dtype)
    written = np.zeros(out.grid, dtype=np.int64)
    with np.errstate(all="ignore"):  # padded lanes may divide by zero; they are cropped
        for items in work:
            for io, jo in items:
                batch, ht = divmod(io, out.row_tiles)
                data[batch, ht * TILE:(ht + 1) * TILE, jo * TILE:(jo + 1) * TILE] = \
                    compute(io, jo)
                written[io, jo] += 1
    if (written != 1).any():
        io, jo = np.argwhere(written != 1)[0]
        raise PlancError(f"output tile ({io},{jo}) was written {written[io, jo]} times")
    return data[:, :out.rows, :out.cols]


def work_lists(plan: tt.PlanOp) -> list[list[Tile]]:
    return [list(core.tiles()) for core in plan.work_partition.cores()]


def output_shape(op: ark.ArkOp) -> list[int]:
    """The output as its kernel tiles it (a reduction keeps its reduced axis)."""
    if isinstance(op, ark.ReduceOp):
        return reduced_keepdim_shape(op)
    return op.outputs[0].shape_list


def execute_kernel(op: ark.ArkOp, work: Sequence[Sequence[Tile]], memory: Memory) -> None:
    """Run `op` as a tile kernel over `work`, reading and writing `memory`."""
    geometry = kernel_geometry(op)
    inputs = [memory.read(t) for t in op.inputs]
    compute = tile_function(op, geometry, inputs)
    # the element type of the values computed: a gather's are its table's, not its indices'
    source = inputs[1] if geometry.kind is KernelKind.GATHER else inputs[0] if inputs else None
    dtype = source.dtype if source is not None else np.dtype(np.float32)
    values = run_partition(compute, TileView.of(output_shape(op)), work, dtype)
    memory.write(op.outputs[0], values.reshape(op.outputs[0].shape_list))


# ---------------------------------------------------------------------------------------------
# Whole documents
# ---------------------------------------------------------------------------------------------


def reference_model(plans: Sequence[tt.PlanOp]) -> ark.ModelOp:
    """The plans' kernels, in order, as one ARK model (what the plans must compute)."""
    block = Block()
    for plan in plans:
        mapping: dict[SSAValue, SSAValue] = {}
        for op in plan.kernel.body.block.ops:
            copy = op.clone(value_mapper=mapping)
            block.add_op(copy)
    return ark.ModelOp(0, 1, Region(block))


@dataclass
class KernelReport:
    name: str
    tiles: int
    cores: int
    max_tiles_per_core: int
    modeled_time_s: float
    max_abs_error: float
    ok: bool

    def json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class SimulationReport:
    kernels: list[KernelReport] = field(default_factory=list)
    device_bytes: int = 0
    l1_bytes: int = 0

    @property
    def ok(self) -> bool:
        return all(k.ok for k in self.kernels)

    def json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "modeled_time_s": sum(k.modeled_time_s for k in self.kernels),
            "device_bytes": self.device_bytes,
            "l1_bytes": self.l1_bytes,
            "max_abs_error": max((k.max_abs_error for k in self.kernels), default=0.0),
            "tiles": sum(k.tiles for k in self.kernels),
            "kernels": [k.json() for k in self.kernels],
        }


def compare(actual: np.ndarray, expected: np.ndarray, dtype: str) -> tuple[float, bool]:
    """(max |actual - expected| over finite values, within the dtype's tolerance)."""
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    tol = dtypes.tolerance(dtype)
    ok = bool(np.allclose(actual, expected, rtol=tol.rtol, atol=tol.atol, equal_nan=True))
    finite = np.isfinite(actual) & np.isfinite(expected)
    error = float(np.abs(actual - expected)[finite].max()) if finite.any() else 0.0
    return error, ok


def simulate_against(plans: Sequence[tt.PlanOp], reference: ModelRun,
                     device_name: str | None = None) -> SimulationReport:
    """Run the plans on `reference`'s inputs and compare each kernel's result with it."""
    device = device_named(device_name)
    tensors = [t for plan in plans for t in _kernel_tensors(plan.kernel)]
    memory = Memory(buffer_sizes(tensors))
    for tensor_id, values in reference.inputs.items():
        memory.write(reference.types[tensor_id], values)
    report = SimulationReport()
    for plan in plans:
        op = plan.kernel.operator
        work = work_lists(plan)
        execute_kernel(op, work, memory)
        result = op.results_types[0] if op.results_types else op.outputs[0]
        error, ok = compare(memory.read(result), reference.tensors[result.tensor_id],
                            result.data_type)
        report.kernels.append(_kernel_report(plan, op, work, device, error, ok))
    _account_bytes(plans, report)
    return report


def run_plans(plans: Sequence[tt.PlanOp], inputs: dict[int, np.ndarray]
              ) -> tuple[ModelRun, dict[int, np.ndarray]]:
    """`planc run` of TT plans: their kernels' model run on `inputs` (by tensor id), and the
    values the plans compute tile by tile of its outputs."""
    reference = run_model(reference_model(plans), inputs)
    tensors = [t for plan in plans for t in _kernel_tensors(plan.kernel)]
    memory = Memory(buffer_sizes(tensors))
    for tensor_id, values in reference.inputs.items():
        memory.write(reference.types[tensor_id], values)
    for plan in plans:
        execute_kernel(plan.kernel.operator, work_lists(plan), memory)
    return reference, {tid: memory.read(reference.types[tid]) for tid in reference.outputs}


def cost_only(plans: Sequence[tt.PlanOp], device_name: str | None = None) -> SimulationReport:
    """The cost model's figures of `plans` without running any tile (`--cost-only`)."""
    device = device_named(device_name)
    report = SimulationReport()
    for plan in plans:
        op = plan.kernel.operator
        report.kernels.append(_kernel_report(plan, op, work_lists(plan), device, 0.0, True))
    _account_bytes(plans, report)
    return report


def _kernel_tensors(kernel: tt.KernelOp) -> list[ark.TensorType]:
    return [r.type for op in kernel.body.block.ops for r in op.results]


def in_dram(plan: tt.PlanOp) -> dict[str, bool]:
    """Per operand of the plan's kernel (A, B, C): whether it lives in DRAM (else in L1)."""
    layouts = plan.layouts.by_buffer() if plan.layouts is not None else {}
    return {name: layouts[name].shard_value == "DRAM" if name in layouts else True
            for name in kernel_buffers(plan.kernel.operator)}


def _kernel_report(plan: tt.PlanOp, op: ark.ArkOp, work, device, error: float,
                   ok: bool) -> KernelReport:
    geometry = kernel_geometry(op)
    lists = {core.coordinates: items
             for core, items in zip(plan.work_partition.cores(), work, strict=True)}
    cost = kernel_cost(geometry, op, lists, kernel_buffers(op), device, in_dram(plan))
    return KernelReport(describe_op(op), sum(len(w) for w in work), sum(1 for w in work if w),
                        cost.max_tiles_per_core, cost.seconds, error, ok)


def _account_bytes(plans: Sequence[tt.PlanOp], report: SimulationReport) -> None:
    from targets.tt.schedule import tile_bytes

    sizes: dict[int, tuple[int, bool]] = {}
    for plan in plans:
        dram = in_dram(plan)
        for name, tensor in kernel_buffers(plan.kernel.operator).items():
            size = TileView.of(tensor.shape_list).num_tiles * tile_bytes(tensor.data_type)
            previous = sizes.get(tensor.buffer_id, (0, False))
            sizes[tensor.buffer_id] = (max(previous[0], size),
                                       previous[1] or not dram[name])
    report.device_bytes = sum(size for size, _ in sizes.values())
    report.l1_bytes = sum(size for size, l1 in sizes.values() if l1)


# ---------------------------------------------------------------------------------------------
# Plans without a kernel: the GEMM their work items describe
# ---------------------------------------------------------------------------------------------


def simulate_implied_gemm(plan: tt.PlanOp, seed: int = 0) -> dict[str, Any]:
    work = work_lists(plan)
    tiles = [t for items in work for t in items]
    if not tiles:
        return {"ok": True, "tiles": 0, "kernel": "none (the plan assigns no work)"}
    mt, nt = (max(t[0] for t in tiles) + 1, max(t[1] for t in tiles) + 1)
    len_k = next((item.len_k_value for core in plan.work_partition.cores()
                  for item in core.runs() if item.len_k is not None), 1) or 1
    need = 4 * TILE * TILE * (mt * len_k + len_k * nt + mt * nt)
    if need > MAX_MEMORY_BYTES:
        raise PlancError(f"the GEMM the work items imply ({mt}x{nt} output tiles, {len_k} K "
                         f"tiles) needs {need / 1e9:.3g} GB, more than the "
                         f"{MAX_MEMORY_BYTES / 1e9:.3g} GB planc's numpy interpreter runs")
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (mt * TILE, len_k * TILE)).astype(np.float32)
    b = rng.uniform(-1, 1, (len_k * TILE, nt * TILE)).astype(np.float32)
    out = TileView((), mt * TILE, nt * TILE)
    compute = matmul_tiles(Tiled(a, TileView.of(a.shape)), Tiled(b, TileView.of(b.shape)),
                           out, len_k)
    result = run_partition(compute, out, work, np.dtype(np.float32))[0]
    error, ok = compare(result, a @ b, "FP32")
    return {"ok": ok, "max_abs_error": error, "tiles": len(tiles),
            "kernel": f"implied GEMM {mt * TILE}x{nt * TILE}x{len_k * TILE} (FP32), from the "
                      "work items (the plan has no kernel member)"}


def simulate_plans(module: ModuleOp, options: Namespace) -> dict[str, Any]:
    """`planc simulate` on a TT plan document."""
    plans = [p for op in module.ops if isinstance(op, tt.PlansOp) for p in op.plans()]
    seed = getattr(options, "seed", 0) or 0
    with_kernel = [p for p in plans if p.kernel is not None]
    if not with_kernel:
        reports = [simulate_implied_gemm(p, seed) for p in plans]
        return {"ok": all(r["ok"] for r in reports),
                "max_abs_error": max((r.get("max_abs_error", 0.0) for r in reports),
                                     default=0.0),
                "tiles": sum(r["tiles"] for r in reports),
                "plans": reports}
    if len(with_kernel) != len(plans):
        raise PlancError("some plans have a kernel member and others do not; planc simulates "
                         "either all kernels or the implied GEMMs of kernel-less plans")
    arch = getattr(options, "arch", None)
    # Which device timed the plans: a tt.plan.json does not name it, so a plan made for
    # blackhole was timed as a wormhole_b0 without a word.
    device = {"device": device_named(arch).name,
              "device_source": "from --arch" if arch else
              "the default (a TT plan does not name its device: --arch)"}
    if getattr(options, "cost_only", False):
        report = cost_only(plans, arch).json()
        del report["max_abs_error"]
        for kernel in report["kernels"]:
            # Nothing was computed: each kernel read `max abs error 0, ok yes`.
            del kernel["max_abs_error"], kernel["ok"]
        return {**device, **report, "ok": True, "functional_check": "skipped (--cost-only)"}
    reference = run_model(reference_model(plans), seed=seed)
    return {**device, **simulate_against(plans, reference, arch).json()}
