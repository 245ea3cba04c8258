"""ARK operators as Tenstorrent tile kernels: which operators become kernels, and their tiles.

Tenstorrent cores compute on 32x32 tiles. A kernel's work items are the tiles of its output:
a tensor of shape [..., H, W] is seen as `prod(...)` batches of ceil(H/32) x ceil(W/32) tiles
(ragged edges padded), and a work item (io, jo) names output tile row `io` (batch-major: batch
`io // Ht`, tile row `io % Ht`) and tile column `jo`. `len_k` is the number of tiles a work item
reduces over: the K tiles of a matmul, the tiles a row (or column) reduction reads; element-wise
and data-movement kernels have none.

This module is pure geometry over ARK tensor shapes, shared by the `tt` dialect's verifiers,
the lowering passes, the numpy tile simulator and the TT-Metalium emitter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from dialects import ark

TILE = 32
"""Tenstorrent tile height and width, in elements."""


def tile_count(n: int) -> int:
    """Tiles needed for `n` elements (a ragged edge is padded to a whole tile)."""
    return -(-n // TILE)


@dataclass(frozen=True)
class TileView:
    """A tensor seen as tiles: `batch` leading dims of `rows` x `cols` matrices."""

    batch: tuple[int, ...]
    rows: int
    cols: int

    @staticmethod
    def of(shape: Sequence[int]) -> TileView:
        shape = list(shape)
        if len(shape) == 1:
            return TileView((), 1, shape[0])
        return TileView(tuple(shape[:-2]), shape[-2], shape[-1])

    @property
    def batch_size(self) -> int:
        return math.prod(self.batch)

    @property
    def row_tiles(self) -> int:
        return tile_count(self.rows)

    @property
    def col_tiles(self) -> int:
        return tile_count(self.cols)

    @property
    def grid(self) -> tuple[int, int]:
        """(Mt, Nt): tile rows over all batches, and tile columns."""
        return self.batch_size * self.row_tiles, self.col_tiles

    @property
    def num_tiles(self) -> int:
        mt, nt = self.grid
        return mt * nt

    def padded_elements(self) -> int:
        return self.num_tiles * TILE * TILE


class KernelKind(Enum):
    """What one work item of a kernel does."""

    MATMUL = "matmul"
    """Output tile (io, jo) = sum over k of A tile (io, k) x B tile (k, jo)."""
    ELTWISE = "eltwise"
    """Output tile = f(the matching, possibly broadcast, tiles of each input)."""
    REDUCE = "reduce"
    """Output tile = reduction over len_k input tiles along the last or second-to-last axis."""
    TRANSPOSE = "transpose"
    """Output tile gathered from the input by a permutation of dims (data movement only)."""
    GATHER = "gather"
    """Output tile (io, jo): the rows of table B that the indices A of its 32 rows name,
    columns of tile jo (an embedding lookup; data movement only)."""


ELTWISE_OPS: tuple[type[ark.ArkOp], ...] = (
    ark.AddOp, ark.SubOp, ark.MulOp, ark.DivOp, ark.RopeOp, ark.ExpOp, ark.GeluOp, ark.ReluOp,
    ark.RsqrtOp, ark.SigmoidOp, ark.SqrtOp, ark.CopyOp, ark.CastOp, ark.ScalarAddOp,
    ark.ScalarMulOp, ark.ScalarAssignOp,
)
REDUCE_OPS: tuple[type[ark.ArkOp], ...] = (ark.ReduceSumOp, ark.ReduceMaxOp, ark.ReduceMeanOp)
NO_KERNEL_OPS: tuple[type[ark.ArkOp], ...] = (ark.TensorOp, ark.ReshapeOp, ark.NoopOp)
"""Operators that compute nothing (views and ordering): they become no kernel."""

INPUT_NAMES = ("A", "B")
OUTPUT_NAME = "C"
"""Kernel buffers are named like TileLang-TT's GEMM parameters: inputs A, B and output C."""


class NotAKernel(Exception):
    """The operator cannot run as a Tenstorrent tile kernel; the message says why."""


@dataclass(frozen=True)
class KernelGeometry:
    kind: KernelKind
    output: TileView
    """The output as tiles: one work item per tile."""
    len_k: int | None
    reduce_axis: str | None = None
    """For REDUCE kernels: "row" (reduce along the last axis) or "col" (second-to-last)."""

    @property
    def grid_tiles(self) -> tuple[int, int]:
        return self.output.grid


def reduced_keepdim_shape(op: ark.ReduceOp) -> list[int]:
    shape = op.inputs[0].shape_list
    return [1 if i == op.axis_index else d for i, d in enumerate(shape)]


def kernel_geometry(op: ark.ArkOp) -> KernelGeometry:
    """The tile geometry of `op` as a kernel; raises `NotAKernel` for other operators."""
    if isinstance(op, ark.MatmulOp):
        m, n, k = op.problem_mnk()
        out = TileView.of(op.outputs[0].shape_list)
        if (out.rows, out.cols) != (m, n):
            raise NotAKernel(f"output {op.outputs[0].shape_list} is not [..., {m}, {n}]")
        return KernelGeometry(KernelKind.MATMUL, out, tile_count(k))
    if isinstance(op, ELTWISE_OPS):
        return KernelGeometry(KernelKind.ELTWISE, TileView.of(op.outputs[0].shape_list), None)
    if isinstance(op, REDUCE_OPS):
        return _reduce_geometry(op)
    if isinstance(op, ark.TransposeOp):
        return KernelGeometry(KernelKind.TRANSPOSE, TileView.of(op.outputs[0].shape_list),
                              None)
    if isinstance(op, ark.EmbeddingOp):
        return KernelGeometry(KernelKind.GATHER, TileView.of(op.outputs[0].shape_list), None)
    raise NotAKernel(_why_not(op))


def _reduce_geometry(op: ark.ReduceOp) -> KernelGeometry:
    shape = op.inputs[0].shape_list
    axis = op.axis_index
    source = TileView.of(shape)
    out = TileView.of(reduced_keepdim_shape(op))
    if axis == len(shape) - 1:
        return KernelGeometry(KernelKind.REDUCE, out, source.col_tiles, "row")
    if axis == len(shape) - 2:
        return KernelGeometry(KernelKind.REDUCE, out, source.row_tiles, "col")
    raise NotAKernel(f"reduces axis {axis} of {shape}, a batch axis; tile kernels reduce "
                     "along the last two axes only")


def _why_not(op: ark.ArkOp) -> str:
    if isinstance(op, ark.CommOp):
        return "communication operators have no Tenstorrent plan (plans run on one device)"
    if isinstance(op, NO_KERNEL_OPS):
        return "computes nothing, so it is no kernel"
    if isinstance(op, ark.GenericOp):
        return f"operator type '{op.ark_type}' is unknown to planc"
    return f"operator type '{op.ark_type}' has no Tenstorrent tile kernel in planc yet"


def kernel_buffers(op: ark.ArkOp) -> dict[str, ark.TensorType]:
    """The kernel's buffers by name: inputs A, B (in read order) and output C."""
    names = {name: t for name, t in zip(INPUT_NAMES, op.inputs, strict=False)}
    names[OUTPUT_NAME] = op.outputs[0]
    return names


def describe_op(op: ark.ArkOp) -> str:
    return f"{op.ark_type} '{op.label.data}'"


class TileList(Sequence[tuple[int, int]]):
    """A core's output tiles in work order, held as two integer arrays (tile rows `io`, tile
    columns `jo`) instead of one tuple per tile: a planned kernel of a real model has up to
    hundreds of thousands of tiles, which the partitioner, placement and the cost model read
    as whole arrays (numpy) and only the plan's text lists one by one."""

    __slots__ = ("io", "jo")

    def __init__(self, io, jo):
        self.io = io
        """numpy int64 array of tile rows."""
        self.jo = jo
        """numpy int64 array of tile columns, as long as `io`."""

    def __len__(self) -> int:
        return len(self.io)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return TileList(self.io[index], self.jo[index])
        return int(self.io[index]), int(self.jo[index])

    def __iter__(self):
        return zip(self.io.tolist(), self.jo.tolist(), strict=True)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == [tuple(t) for t in other]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TileList({list(self)!r})"
