"""`tt-to-metalium`: turn scheduled TT plans into a TT-Metalium host program and kernels.

For every plan (kernel) three kernels are generated, each a `metalium.source`:

* reader (RISCV_1, NoC 1): for each of the core's work items, fetches the input tiles through
  TensorAccessors into input circular buffers. A matmul keeps the K strip of one operand (the
  one `targets.tt.schedule.held_operand` picks) while consecutive work items share it, and
  streams the other tile by tile;
* compute: the tile protocol of the current API: `tile_regs_acquire`, the FPU / SFPU ops on DST
  (`matmul_tiles` accumulating over the K loop; `transpose` only ever means "transpose B"
  and is given once to `mm_init`), `tile_regs_commit`, `tile_regs_wait`, `pack_tile`,
  `tile_regs_release`;
* writer (RISCV_0, NoC 0): drains the output circular buffer to the output tile each work item
  names.

The host program (`main.cpp`) creates one buffer per ARK buffer (L1 or DRAM as the layouts say,
tile pages, interleaved or as one page), writes the model inputs, and launches the kernels in
order, one program each, on the plan's core ranges (converted once to tt-metal's inclusive
CoreRange). Circular buffers of host and kernels come from one table
(`targets.tt.schedule.circular_buffers`). Runtime args carry each core's work list: packed
items `(io << 16) | jo`, or just a start tile when every core's tiles are a contiguous row-major
run (any row_major partition), which keeps large work lists under tt-metal's 341-argument limit.

What the emitter cannot express yet is a clear error naming the plan: transposed A operands,
reductions, transposes, Rope, Div and casts, partially broadcast batches, and buffers whose
kernels view them with different tile shapes (a reshape that changes the last two dims would
need re-tiling on the device).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.builder import ImplicitBuilder
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from devices.tt import TTDevice, device_named
from dialects import ark, tt
from dialects import metalium as mt
from dialects.locations import source_path
from dialects.metalium_builder import (
    Decoder,
    add,
    call,
    const,
    differs,
    div,
    float_bits,
    loop,
    mul,
    named,
    rem,
    when,
)
from dialects.tt_kernels import (
    KernelGeometry,
    KernelKind,
    TileView,
    describe_op,
    kernel_buffers,
    kernel_geometry,
)
from ground.diagnostics import PlancError
from targets.tt.schedule import (
    CircularBuffer,
    b_has_batches,
    circular_buffers,
    held_operand,
    tile_bytes,
)

DATA_FORMATS = {"FP16": "Float16", "BF16": "Float16_b", "FP32": "Float32", "INT32": "Int32",
                "UINT32": "UInt32", "INT8": "Int8", "UINT8": "UInt8", "BYTE": "UInt8"}
"""tt::DataFormat of each ARK element type."""
ELEMENT_TYPES = {"FP16": "uint16_t", "BF16": "uint16_t", "FP32": "float", "INT32": "int32_t",
                 "UINT32": "uint32_t", "INT8": "int8_t", "UINT8": "uint8_t", "BYTE": "uint8_t"}
"""The C++ type the host uses for one stored element (16-bit floats as their bits)."""
FLOAT_TYPES = ("FP16", "BF16", "FP32")

BINARY_FUNCTIONS = {ark.AddOp: ("add", "ELWADD"), ark.SubOp: ("sub", "ELWSUB"),
                    ark.MulOp: ("mul", "ELWMUL")}
SFPU_FUNCTIONS = {ark.ExpOp: "exp", ark.GeluOp: "gelu", ark.ReluOp: "relu",
                  ark.RsqrtOp: "rsqrt", ark.SigmoidOp: "sigmoid", ark.SqrtOp: "sqrt"}
SCALAR_FUNCTIONS = {ark.ScalarAddOp: "add_unary_tile", ark.ScalarMulOp: "mul_unary_tile"}
NO_ITEM = 0xFFFFFFFF
"""A tile index no work item has: 'no strip held yet'."""
ITEM_BITS = 16


# ---------------------------------------------------------------------------------------------
# What one plan needs, checked
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Operand:
    """A kernel input as its reader fetches it."""

    name: str
    tensor: ark.TensorType
    view: TileView
    row_bcast: bool = False
    col_bcast: bool = False
    batch_bcast: bool = False
    """The whole operand is one batch, shared by every output batch."""
    transposed: bool = False


@dataclass
class KernelPlan:
    index: int
    plan: tt.PlanOp
    op: ark.ArkOp
    geometry: KernelGeometry
    buffers: dict[str, ark.TensorType]
    in_l1: dict[str, bool]
    interleaved: dict[str, bool]
    work: dict[tuple[int, int], list[tuple[int, int]]]
    held: str | None
    cbs: list[CircularBuffer]
    operands: list[Operand]
    contiguous: bool
    """Every core's tiles are a run of consecutive row-major tile numbers."""
    directory: str = ""
    ranges: list[tuple[int, int, int, int]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return describe_op(self.op)

    def cb(self, buffer: str) -> CircularBuffer:
        return next(cb for cb in self.cbs if cb.buffer == buffer)

    def page(self, name: str) -> int:
        """Page size of a kernel buffer: one tile, or the whole buffer if not interleaved."""
        tensor = self.buffers[name]
        tile = tile_bytes(tensor.data_type)
        return tile if self.interleaved[name] else tile * TileView.of(tensor.shape_list).num_tiles


def _fail(plan: tt.PlanOp, message: str) -> PlancError:
    return PlancError(f"tt-metal: {plan.label()}: {message}", path=source_path(plan))


def _operands(plan: tt.PlanOp, op: ark.ArkOp, geometry: KernelGeometry) -> list[Operand]:
    out = geometry.output
    if isinstance(op, ark.MatmulOp):
        if op.trans_input:
            raise _fail(plan, "TransposeInput is not supported (matmul_tiles transposes only "
                              "its second operand)")
        a, b = op.inputs
        return [_batch_operand(plan, "A", a, out), _batch_operand(plan, "B", b, out,
                                                                   transposed=op.trans_other)]
    operands = []
    rank = max([len(out.batch) + 2, *(len(t.shape_list) for t in op.inputs)])
    full = TileView.of([1] * (rank - len(out.batch) - 2) + [*out.batch, out.rows, out.cols])
    for name, tensor in zip(("A", "B"), op.inputs, strict=False):
        shape = [1] * (rank - len(tensor.shape_list)) + tensor.shape_list
        view = TileView.of(shape)
        operand = _batch_operand(plan, name, tensor, full, view=view)
        operands.append(Operand(name, tensor, view, view.rows == 1 < out.rows,
                                view.cols == 1 < out.cols, operand.batch_bcast))
    return operands


def _batch_operand(plan: tt.PlanOp, name: str, tensor: ark.TensorType, out: TileView, *,
                   view: TileView | None = None, transposed: bool = False) -> Operand:
    view = view or TileView.of(tensor.shape_list)
    if view.batch_size not in (1, out.batch_size):
        raise _fail(plan, f"operand {name} {tensor.shape_list} broadcasts over part of the "
                          f"batch {list(out.batch)}; only whole-batch broadcasting is supported")
    return Operand(name, tensor, view, batch_bcast=view.batch_size == 1 < out.batch_size,
                   transposed=transposed)


def _check_supported(plan: tt.PlanOp, op: ark.ArkOp, geometry: KernelGeometry,
                     operands: list[Operand]) -> None:
    dtypes = {t.data_type for t in (*op.inputs, *op.outputs)}
    if len(dtypes) > 1:
        raise _fail(plan, f"mixed element types {sorted(dtypes)} are not supported")
    if geometry.kind is KernelKind.MATMUL:
        if dtypes - set(FLOAT_TYPES):
            raise _fail(plan, f"matmul on {dtypes.pop()} is not supported")
        return
    if geometry.kind is not KernelKind.ELTWISE or not isinstance(
            op, tuple(BINARY_FUNCTIONS) + tuple(SFPU_FUNCTIONS) + tuple(SCALAR_FUNCTIONS)
            + (ark.CopyOp,)):
        raise _fail(plan, f"{op.ark_type} has no TT-Metalium kernel in planc yet (supported: "
                          "Matmul, Add, Sub, Mul, Exp, Gelu, Relu, Rsqrt, Sigmoid, Sqrt, Copy, "
                          "ScalarAdd, ScalarMul)")
    if not isinstance(op, ark.CopyOp) and dtypes - set(FLOAT_TYPES):
        raise _fail(plan, f"{op.ark_type} on {dtypes.pop()} is not supported")
    if any(o.row_bcast or o.col_bcast for o in operands[:1]):
        raise _fail(plan, "the first operand is broadcast; TT broadcasts only the second "
                          "(swap the operands of a commutative op)")
    if len(operands) == 1 and (operands[0].row_bcast or operands[0].col_bcast):
        raise _fail(plan, "a unary operator cannot broadcast its input inside tiles")


def _work(plan: tt.PlanOp) -> dict[tuple[int, int], list[tuple[int, int]]]:
    work = {core.coordinates: list(core.tiles()) for core in plan.work_partition.cores()}
    for items in work.values():
        for io, jo in items:
            if max(io, jo) >= 1 << ITEM_BITS:
                raise _fail(plan, f"tile ({io},{jo}) does not fit the {ITEM_BITS}-bit fields of "
                                  "a packed work item")
    return work


def _contiguous(work: dict, columns: int) -> bool:
    """Is every core's work list a run of consecutive row-major tile numbers?"""
    for items in work.values():
        numbers = [io * columns + jo for io, jo in items]
        if numbers != list(range(numbers[0], numbers[0] + len(numbers)) if numbers else []):
            return False
    return True


def kernel_plan(index: int, plan: tt.PlanOp, device: TTDevice) -> KernelPlan:
    op = plan.kernel.operator
    geometry = kernel_geometry(op)
    buffers = kernel_buffers(op)
    for name, tensor in buffers.items():
        if tensor.offsets_list != [0] * len(tensor.shape_list) or \
                tensor.strides_list != tensor.shape_list:
            raise _fail(plan, f"buffer {name} is a strided view (shape {tensor.shape_list}, "
                              f"strides {tensor.strides_list}); kernels read whole buffers")
    operands = _operands(plan, op, geometry)
    _check_supported(plan, op, geometry, operands)
    layouts = plan.layouts.by_buffer() if plan.layouts is not None else {}
    in_l1 = {n: n in layouts and layouts[n].shard_value == "L1" for n in buffers}
    interleaved = {n: n not in layouts or layouts[n].interleaved is not False for n in buffers}
    work = _work(plan)
    held = (held_operand(work, geometry, buffers, device)
            if geometry.kind is KernelKind.MATMUL else None)
    cbs = circular_buffers(geometry, buffers, held)
    kernel = KernelPlan(index, plan, op, geometry, buffers, in_l1, interleaved, work, held, cbs,
                        operands, _contiguous(work, geometry.grid_tiles[1]))
    kernel.directory = f"kernels/{index:02d}_{_identifier(op.label.data)}"
    kernel.ranges = [(r.start[0], r.start[1], r.start[0] + r.extent[0] - 1,
                      r.start[1] + r.extent[1] - 1) for r in plan.core_ranges()]
    _check_ranges_on_device(plan, kernel.ranges, device)
    _check_argument_count(kernel)
    return kernel


def _check_ranges_on_device(plan: tt.PlanOp, ranges, device: TTDevice) -> None:
    """The host program creates the kernels on each core range and sets every core's runtime
    arguments: a range beyond the device's worker grid is one CreateKernel rejects, and its
    cores would be enumerated one by one (a 2^31 x 2^31 range filled memory)."""
    gx, gy = device.compute_grid
    for x0, y0, x1, y1 in ranges:
        if x1 >= gx or y1 >= gy:
            raise _fail(plan, f"core range ({x0},{y0})-({x1},{y1}) reaches beyond the "
                              f"{gx}x{gy} compute grid of {device.name}")


def _identifier(text: str) -> str:
    return re.sub(r"\W+", "_", text).strip("_") or "kernel"


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------


class KernelWriter:
    """Builds the three kernels of one plan."""

    def __init__(self, k: KernelPlan):
        self.k = k
        self.mt, self.nt = k.geometry.grid_tiles
        self.out_rows = k.geometry.output.row_tiles

    # -- shared pieces -------------------------------------------------------------------

    def declare_cbs(self, buffers: Sequence[str] | None = None) -> dict[str, SSAValue]:
        """The CB ids of `buffers` (all of the kernel's by default), from the one CB table."""
        return {cb.buffer or cb.name: mt.CBOp(cb.name, cb.index).result for cb in self.k.cbs
                if buffers is None or cb.buffer in buffers}

    def work_items(self, first_arg: int) -> tuple[SSAValue, Decoder]:
        """(number of items, i -> (io, jo)) read from the runtime args at `first_arg`."""
        count = mt.ArgOp("num_items", const(first_arg)).result
        if self.k.contiguous:
            start = mt.ArgOp("start_tile", const(first_arg + 1)).result
            columns = mt.ConstOp("Nt", self.nt).result

            def decode(i: SSAValue) -> tuple[SSAValue, SSAValue]:
                tile = named(add(start, i), "tile")
                return named(div(tile, columns), "io"), named(rem(tile, columns), "jo")
        else:
            def decode(i: SSAValue) -> tuple[SSAValue, SSAValue]:
                item = mt.ArgOp("item", add(const(first_arg + 1), i)).result
                io = named(arith.ShRUIOp(item, const(ITEM_BITS)).result, "io")
                jo = named(arith.AndIOp(item, const((1 << ITEM_BITS) - 1)).result, "jo")
                return io, jo
        return count, decode

    def accessors(self, names: Sequence[str], first_arg: int) -> dict[str, SSAValue]:
        found: dict[str, SSAValue] = {}
        previous = None
        for offset, name in enumerate(names):
            address = mt.ArgOp(f"{name.lower()}_addr", const(first_arg + offset)).result
            previous = found[name] = mt.AccessorOp(name.lower(), address,
                                                   const(self.k.page(name)), previous).result
        return found

    def transfer(self, name: str, accessor: SSAValue, tile: SSAValue, l1: SSAValue,
                 read: bool) -> None:
        """One tile between a buffer and L1: by page id, or at an offset of a one-page
        (non-interleaved) buffer."""
        if self.k.interleaved[name]:
            call("noc_async_read_tile" if read else "noc_async_write_tile", tile, accessor, l1)
            return
        size = const(tile_bytes(self.k.buffers[name].data_type))
        address = mt.NocAddrOp(accessor, const(0), mul(tile, size)).result
        if read:
            call("noc_async_read", address, l1, size)
        else:
            call("noc_async_write", l1, address, size)

    def operand_tile(self, operand: Operand, io: SSAValue, jo: SSAValue,
                     k: SSAValue | None) -> SSAValue:
        """Tile id of `operand` for output tile (io, jo) (and K step k of a matmul)."""
        view = operand.view
        per_batch = view.row_tiles * view.col_tiles
        single = self.k.geometry.output.batch_size == 1
        batch = const(0) if single or operand.batch_bcast else div(io, const(self.out_rows))
        row = io if single else rem(io, const(self.out_rows))
        if k is not None:
            # A is [M, K]: tile (row, k); B is [K, N]: tile (k, jo), or [N, K] when transposed.
            if operand.name == "A":
                inner = add(mul(row, const(view.col_tiles)), k)
            elif operand.transposed:
                inner = add(mul(jo, const(view.col_tiles)), k)
            else:
                inner = add(mul(k, const(view.col_tiles)), jo)
        else:
            r = const(0) if operand.row_bcast else row
            c = const(0) if operand.col_bcast else jo
            inner = add(mul(r, const(view.col_tiles)), c)
        return named(add(mul(batch, const(per_batch)), inner), f"{operand.name.lower()}_tile")

    def fetch(self, operand: Operand, accessor: SSAValue, cb: SSAValue,
              tiles: Sequence[SSAValue]) -> None:
        """Reserve len(tiles) pages of `cb`, read the tiles into them, and push them."""
        count = const(len(tiles))
        call("cb_reserve_back", cb, count)
        l1 = named(call("get_write_ptr", cb), "l1_addr")
        for i, tile in enumerate(tiles):
            page = const(tile_bytes(operand.tensor.data_type) * i)
            self.transfer(operand.name, accessor, tile, add(l1, page) if i else l1, read=True)
        call("noc_async_read_barrier")
        call("cb_push_back", cb, count)

    def strip_index(self, io: SSAValue, jo: SSAValue) -> SSAValue:
        """The held operand's strip for output tile (io, jo), as `tt_schedule.strip_index`
        defines it: A's tile row io; B's tile column jo, within the batch if B has batches."""
        if self.k.held == "A":
            return io
        if not b_has_batches(self.k.buffers):
            return jo
        batch = div(io, const(self.out_rows))
        return named(add(mul(batch, const(self.nt)), jo), "b_strip")

    # -- reader --------------------------------------------------------------------------

    def reader(self) -> Block:
        block = Block()
        names = [o.name for o in self.k.operands]
        with ImplicitBuilder(block):
            accessors = self.accessors(names, 0)
            cbs = self.declare_cbs(names)
            count, decode = self.work_items(len(names))
            if self.k.geometry.kind is KernelKind.MATMUL:
                self.matmul_reader(accessors, cbs, count, decode)
            else:
                with loop(count, "i") as body:
                    io, jo = decode(body.index)
                    for operand in self.k.operands:
                        tile = self.operand_tile(operand, io, jo, None)
                        self.fetch(operand, accessors[operand.name], cbs[operand.name], [tile])
        return block

    def matmul_reader(self, accessors, cbs, count, decode) -> None:
        len_k = mt.ConstOp("Kt", self.k.geometry.len_k).result
        held = self.k.held
        operands = {o.name: o for o in self.k.operands}
        with loop(count, "i", [named(const(NO_ITEM), "held_index")]) as body:
            io, jo = decode(body.index)
            if held is not None:
                index = self.strip_index(io, jo)
                with when(differs(index, body.carried[0])), loop(len_k, "k") as strip:
                    tile = self.operand_tile(operands[held], io, jo, strip.index)
                    self.fetch(operands[held], accessors[held], cbs[held], [tile])
                body.carried = [index]
            with loop(len_k, "k") as step:
                for name in ("A", "B"):
                    if name != held:
                        tile = self.operand_tile(operands[name], io, jo, step.index)
                        self.fetch(operands[name], accessors[name], cbs[name], [tile])

    # -- compute -------------------------------------------------------------------------

    def compute(self) -> Block:
        block = Block()
        with ImplicitBuilder(block):
            cbs = self.declare_cbs()
            if self.k.geometry.kind is KernelKind.MATMUL:
                self.matmul_compute(cbs)
            else:
                self.eltwise_compute(cbs)
        return block

    def pack_output(self, out: SSAValue) -> None:
        one = const(1)
        call("tile_regs_commit")
        call("tile_regs_wait")
        call("cb_reserve_back", out, one)
        call("pack_tile", const(0), out)
        call("cb_push_back", out, one)
        call("tile_regs_release")

    def matmul_compute(self, cbs: dict[str, SSAValue]) -> None:
        held = self.k.held
        transpose = const(1 if self.k.operands[1].transposed else 0)
        call("mm_init", cbs["A"], cbs["B"], cbs["C"], transpose)
        len_k = mt.ConstOp("Kt", self.k.geometry.len_k).result
        if held is None:
            count = mt.ArgOp("num_items", const(0)).result
            decode = None
        else:
            count, decode = self.work_items(0)
        one, zero = const(1), const(0)
        with loop(count, "i", [named(const(NO_ITEM), "held_index")]) as body:
            if held is not None:
                io, jo = decode(body.index)
                index = self.strip_index(io, jo)
                with when(differs(index, body.carried[0])):
                    with when(differs(body.index, zero)):
                        call("cb_pop_front", cbs[held], len_k)
                    call("cb_wait_front", cbs[held], len_k)
                body.carried = [index]
            call("tile_regs_acquire")
            with loop(len_k, "k") as step:
                streamed = [n for n in ("A", "B") if n != held]
                for name in streamed:
                    call("cb_wait_front", cbs[name], one)
                tile_a = step.index if held == "A" else zero
                tile_b = step.index if held == "B" else zero
                # DST accumulates across the K loop; no flag for that (the 6th argument of the
                # old API was `transpose`, never "accumulate").
                call("matmul_tiles", cbs["A"], cbs["B"], tile_a, tile_b, zero)
                for name in streamed:
                    call("cb_pop_front", cbs[name], one)
            self.pack_output(cbs["C"])
        if held is not None:
            with when(differs(count, zero)):
                call("cb_pop_front", cbs[held], len_k)

    def eltwise_compute(self, cbs: dict[str, SSAValue]) -> None:
        zero, one = const(0), const(1)
        operands = self.k.operands
        count = mt.ArgOp("num_items", const(0)).result
        apply = self.eltwise_init(cbs)
        with loop(count, "i"):
            for operand in operands:
                call("cb_wait_front", cbs[operand.name], one)
            call("tile_regs_acquire")
            apply(zero)
            self.pack_output(cbs["C"])
            for operand in operands:
                call("cb_pop_front", cbs[operand.name], one)

    def eltwise_init(self, cbs: dict[str, SSAValue]):
        """Emit the init calls; return the per-tile body (given DST index 0)."""
        op, a = self.k.op, cbs["A"]
        if type(op) in BINARY_FUNCTIONS:
            prefix, binary = BINARY_FUNCTIONS[type(op)]
            b = cbs["B"]
            bcast = self.bcast_kind(self.k.operands[1])
            if bcast is None:
                call("binary_op_init_common", a, b, cbs["C"])
                call(f"{prefix}_tiles_init", a, b)
                return lambda dst: call(f"{prefix}_tiles", a, b, const(0), const(0), dst)
            call("init_bcast", a, b, cbs["C"],
                 template=(f"EltwiseBinaryType::{binary}", f"BroadcastType::{bcast}"))
            return lambda dst: call(f"{prefix}_tiles_bcast", a, b, const(0), const(0), dst,
                                    template=(f"BroadcastType::{bcast}",))
        call("init_sfpu", a, cbs["C"])
        if type(op) in SFPU_FUNCTIONS:
            name = SFPU_FUNCTIONS[type(op)]
            call(f"{name}_tile_init")

            def unary(dst):
                call("copy_tile", a, const(0), dst)
                call(f"{name}_tile", dst)
            return unary
        if type(op) in SCALAR_FUNCTIONS:
            call("binop_with_scalar_tile_init")
            bits = float_bits(op.factor.value.data)

            def scalar(dst):
                call("copy_tile", a, const(0), dst)
                call(SCALAR_FUNCTIONS[type(op)], dst, const(bits))
            return scalar
        return lambda dst: call("copy_tile", a, const(0), dst)

    @staticmethod
    def bcast_kind(operand: Operand) -> str | None:
        if operand.row_bcast and operand.col_bcast:
            return "SCALAR"
        if operand.row_bcast:
            return "ROW"
        if operand.col_bcast:
            return "COL"
        return None

    # -- writer --------------------------------------------------------------------------

    def writer(self) -> Block:
        block = Block()
        with ImplicitBuilder(block):
            accessors = self.accessors(["C"], 0)
            cbs = self.declare_cbs(["C"])
            count, decode = self.work_items(1)
            one = const(1)
            with loop(count, "i") as body:
                io, jo = decode(body.index)
                tile = named(add(mul(io, const(self.nt)), jo), "c_tile")
                call("cb_wait_front", cbs["C"], one)
                l1 = named(call("get_read_ptr", cbs["C"]), "l1_addr")
                self.transfer("C", accessors["C"], tile, l1, read=False)
                call("noc_async_write_barrier")
                call("cb_pop_front", cbs["C"], one)
        return block


# ---------------------------------------------------------------------------------------------
# The host program
# ---------------------------------------------------------------------------------------------


@dataclass
class HostBuffer:
    buffer_id: int
    tensor: ark.TensorType
    in_l1: bool
    interleaved: bool
    value: SSAValue | None = None

    @property
    def name(self) -> str:
        return f"buffer_{self.buffer_id}"

    @property
    def view(self) -> TileView:
        return TileView.of(self.tensor.shape_list)

    def shape(self) -> list[int]:
        return [self.view.batch_size, self.view.rows, self.view.cols]


def host_buffers(kernels: Sequence[KernelPlan]) -> dict[int, HostBuffer]:
    found: dict[int, HostBuffer] = {}
    for k in kernels:
        for name, tensor in k.buffers.items():
            known = found.setdefault(tensor.buffer_id, HostBuffer(
                tensor.buffer_id, tensor, k.in_l1[name], k.interleaved[name]))
            if TileView.of(known.tensor.shape_list).grid != TileView.of(tensor.shape_list).grid \
                    or known.tensor.data_type != tensor.data_type:
                raise _fail(k.plan, f"buffer {name} (ARK buffer {tensor.buffer_id}) is "
                                    f"{tensor.data_type} {tensor.shape_list} here but "
                                    f"{known.tensor.data_type} {known.tensor.shape_list} in "
                                    "another kernel; tiles would need re-tiling on the device")
            if (known.in_l1, known.interleaved) != (k.in_l1[name], k.interleaved[name]):
                raise _fail(k.plan, f"buffer {name} (ARK buffer {tensor.buffer_id}) has another "
                                    "layout in another plan")
    return found


def _inputs_and_outputs(kernels: Sequence[KernelPlan]) -> tuple[list[ark.TensorType],
                                                                 list[ark.TensorType]]:
    """Tensors read before any kernel wrote their buffer; results no later kernel reads."""
    written: set[int] = set()
    inputs: dict[int, ark.TensorType] = {}
    for k in kernels:
        for tensor in k.op.inputs:
            if tensor.buffer_id not in written:
                inputs.setdefault(tensor.buffer_id, tensor)
        written.add(k.op.outputs[0].buffer_id)
    outputs = []
    for position, k in enumerate(kernels):
        result = k.op.results_types[0] if k.op.results_types else k.op.outputs[0]
        later = {t.buffer_id for other in kernels[position + 1:] for t in other.op.inputs}
        if result.buffer_id not in later:
            outputs.append(result)
    return list(inputs.values()), outputs


def host_source(kernels: Sequence[KernelPlan]) -> mt.SourceOp:
    buffers = host_buffers(kernels)
    inputs, outputs = _inputs_and_outputs(kernels)
    block = Block()
    with ImplicitBuilder(block):
        mt.MeshDeviceOp()
        for buffer in buffers.values():
            tile = tile_bytes(buffer.tensor.data_type)
            size = buffer.view.num_tiles * tile
            buffer.value = mt.BufferOp(buffer.name, size, tile if buffer.interleaved else size,
                                       buffer.in_l1).result
        for tensor in inputs:
            mt.WriteInputOp(buffers[tensor.buffer_id].value, f"in_t{tensor.tensor_id}.bin",
                            ELEMENT_TYPES[tensor.data_type],
                            buffers[tensor.buffer_id].shape())
        for k in kernels:
            mt.ProgramOp(f"kernel {k.index}: {k.label}", program_body(k, buffers))
        for tensor in outputs:
            mt.ReadOutputOp(buffers[tensor.buffer_id].value, f"out_t{tensor.tensor_id}.bin",
                            ELEMENT_TYPES[tensor.data_type], buffers[tensor.buffer_id].shape())
        mt.FinishOp()
    return mt.SourceOp("main.cpp", "host", block,
                       f"TT-Metalium host program for {len(kernels)} kernel(s)")


def _runtime_values(k: KernelPlan, items: list[tuple[int, int]]) -> list[int]:
    if k.contiguous:
        return [len(items), items[0][0] * k.geometry.grid_tiles[1] + items[0][1] if items else 0]
    return [len(items), *((io << ITEM_BITS) | jo for io, jo in items)]


def _range_cores(ranges: Sequence[tuple[int, int, int, int]]) -> list[tuple[int, int]]:
    return [(x, y) for x0, y0, x1, y1 in ranges for x in range(x0, x1 + 1)
            for y in range(y0, y1 + 1)]


def _check_argument_count(k: KernelPlan) -> None:
    """The reader takes the most arguments: its input addresses and the work list."""
    for core, items in k.work.items():
        count = len(k.operands) + len(_runtime_values(k, items))
        if count > mt.RuntimeArgsOp.MAX_ARGS:
            raise _fail(k.plan, f"core ({core[0]},{core[1]}) has {len(items)} work items; its "
                                f"reader would take {count} runtime args, more than tt-metal's "
                                f"{mt.RuntimeArgsOp.MAX_ARGS} (a row_major partition passes each "
                                "core's tiles as one contiguous run; more cores also help)")


def program_body(k: KernelPlan, buffers: dict[int, HostBuffer]) -> Block:
    block = Block()
    inputs = [buffers[o.tensor.buffer_id].value for o in k.operands]
    output = buffers[k.buffers["C"].buffer_id].value
    with ImplicitBuilder(block):
        cores = mt.CoreRangesOp("cores", k.ranges).result
        for cb in k.cbs:
            mt.CircularBufferOp(cores, cb.index, cb.pages, cb.page_bytes, DATA_FORMATS[cb.dtype])
        reader = mt.CreateKernelOp("reader", "reader", f"{k.directory}/reader.cpp", cores,
                                   inputs).result
        writer = mt.CreateKernelOp("writer", "writer", f"{k.directory}/writer.cpp", cores,
                                   [output]).result
        compute = mt.CreateKernelOp("compute", "compute", f"{k.directory}/compute.cpp",
                                    cores).result
        compute_gets_items = k.geometry.kind is KernelKind.MATMUL and k.held is not None
        for core in _range_cores(k.ranges):
            # Every core a kernel is created on gets its args; idle cores get no work items.
            values = _runtime_values(k, k.work.get(core, []))
            mt.RuntimeArgsOp(reader, core, inputs, values)
            mt.RuntimeArgsOp(compute, core, [], values if compute_gets_items else values[:1])
            mt.RuntimeArgsOp(writer, core, [output], values)
    return block


# ---------------------------------------------------------------------------------------------
# Plans without a kernel member: the GEMM their work items describe
# ---------------------------------------------------------------------------------------------


def implied_kernel(plan: tt.PlanOp) -> tt.KernelOp:
    """A BF16 GEMM C = A x B sized by the plan's tiles and len_k (TileLang-TT's plans)."""
    tiles = [tile for core in plan.work_partition.cores() for tile in core.tiles()]
    if not tiles:
        raise _fail(plan, "the plan assigns no work")
    mt_, nt = max(t[0] for t in tiles) + 1, max(t[1] for t in tiles) + 1
    len_k = next((item.len_k_value for core in plan.work_partition.cores()
                  for item in core.runs() if item.len_k), 1)
    m, n, k = mt_ * 32, nt * 32, len_k * 32
    shapes = {"A": [m, k], "B": [k, n], "C": [m, n]}
    block = Block()
    views = {}
    for buffer_id, (name, shape) in enumerate(shapes.items()):
        views[name] = ark.ViewOp(ark.TensorType.get(buffer_id, "BF16", shape,
                                                    ark.BufferAttr.get(buffer_id)))
        block.add_op(views[name])
    result = ark.TensorType.get(3, "BF16", shapes["C"], ark.BufferAttr.get(2))
    args = {"transpose_input": ark.int_arg(ark.ArgKind.BOOL, False),
            "transpose_other": ark.int_arg(ark.ArgKind.BOOL, False)}
    block.add_op(ark.MatmulOp("matmul", [views["A"].result, views["B"].result],
                              [views["C"].result], [result], args=args))
    return tt.KernelOp((mt_, nt), len_k, block)


# ---------------------------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------------------------


def lower_plans(plans: Sequence[tt.PlanOp], device: TTDevice) -> list[mt.SourceOp]:
    kernels = []
    for index, plan in enumerate(plans):
        if plan.work_partition is None or plan.grid is None:
            raise _fail(plan, "the plan is not partitioned yet (run tt-partition)")
        if plan.kernel is None:
            plan.body.block.add_op(implied_kernel(plan))
        kernels.append(kernel_plan(index, plan, device))
    sources = [host_source(kernels)]
    for k in kernels:
        writer = KernelWriter(k)
        for kind, build in (("reader", writer.reader), ("compute", writer.compute),
                            ("writer", writer.writer)):
            sources.append(mt.SourceOp(f"{k.directory}/{kind}.cpp", kind, build(),
                                       f"{kind} kernel of {k.label}"))
    return sources


@dataclass(frozen=True)
class TtToMetaliumPass(ModulePass):
    name = "tt-to-metalium"

    arch: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        device = device_named(self.arch)
        for document in [p for p in op.ops if isinstance(p, tt.PlansOp)]:
            sources = lower_plans(document.plans(), device)
            Rewriter.replace_op(document, sources)
