"""The `tt` dialect: Tenstorrent runtime plans (`tt.plan.json`, TileLang-TT's format) 1:1.

A plan says which cores of a Tensix core grid run a kernel and which output tiles each core
computes, and where the kernel's buffers live:

    tt.plans {                                   the file: one plan, or a list of plans
      tt.plan grid 4 x 4 attributes {schema_version = 1 : i64} {   core_grid, versions
        tt.core_range start [0, 0] extent [4, 4] core_ranges[i]
        tt.kernel grid_tiles [4, 4] len_k 4 {    kernel (planc's extension): the ARK operator
          ... ark.view / ark.matmul ...           the plan computes, so the plan is complete
        }
        tt.work_partition {                      work_partition
          tt.core "(0,0)" {                      one core, keyed "(x,y)"
            tt.work io 0 jo 0 len_k 4 tile_order "row_major"
          }
        }
        tt.layouts {                             layouts
          tt.layout "A" shard "DRAM" interleave false tile_id_order "row_major"
        }
      }
    }

Conventions (TileLang-TT's, made precise): core_grid is [gx, gy] and a core key "(x,y)" has
0 <= x < gx, 0 <= y < gy; core ranges are start + extent (not tt-metal's inclusive end);
`len_k` counts K *tiles* (32 elements each); tiles are 32x32.

Every rule of the format is a verifier here, including the ones TileLang-TT documents but never
checks: ranges inside the grid and not overlapping (unless both are marked "replicated"),
every working core inside an active range, every output tile assigned exactly once (twice or
more only to cores of replicated ranges), valid shard / tile-order values, layout names that
are buffers of the kernel, and len_k equal to the kernel's K tiles. Fields the dialect does not
model are kept in `extra`, the file's key order in `key_order` when it is unusual, so import
followed by export gives the document back.
"""

from __future__ import annotations

import functools
import re
import sys
from array import array
from collections.abc import Iterator, Sequence

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    BoolAttr,
    BytesAttr,
    DenseArrayBase,
    DictionaryAttr,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.traits import IsolatedFromAbove, NoTerminator
from xdsl.utils.exceptions import VerifyException

from dialects import ark
from dialects.fast_verify import verify_generic, verify_op
from dialects.json_value import bool_attr
from dialects.utils import (
    VerifyAt,
    built,
    i64_attr,
    init_bare,
    op_list,
    verified_so_far,
    warn,
)

SHARDS = ("DRAM", "L1")
"""Where a buffer lives: device DRAM or the cores' L1 SRAM."""
TILE_ORDERS = ("row_major", "column_major", "match_shard", "z_order")
"""How a core walks its tiles (work items) or how a buffer numbers its tiles (layouts)."""

_CORE_KEY = re.compile(r"\(\s*(-?\d+)\s*,\s*(-?\d+)\s*\)", re.ASCII)
"""A core key "(x,y)" in ASCII digits: `\\d` alone took "(٠,٠)" (Arabic-Indic digits), which
only Python reads as a number."""

MAX_LEN_K = (2**63 - 1) // 32
"""The most K tiles a work item may reduce over: K = len_k x 32 elements is a 64-bit size
(the lowering to TT-Metalium sizes its buffers so; 2^62 was an internal error there)."""


def _int(value: int) -> IntegerAttr:
    return i64_attr(value)   # shared per value, without xDSL's generic checks


def _value(attr: IntegerAttr | None) -> int | None:
    return None if attr is None else attr.value.data


def _bool(attr: BoolAttr | None) -> bool | None:
    return None if attr is None else bool(attr.value.data)


def _quoted(text: str) -> str:
    return '"' + text + '"'


class TTOp(IRDLOperation):
    """A `tt` op: its rules are `check()`, which a plan runs on its nested ops first."""

    def check(self) -> None:
        """The op's own rules (beyond IRDL's constraints)."""

    def verify_(self) -> None:
        self.check()


class JsonObjectOp(TTOp):
    """An op standing for one JSON object: unknown members in `extra`, key order kept."""

    extra = opt_prop_def(DictionaryAttr)
    key_order = opt_prop_def(ArrayAttr[StringAttr])

    @property
    def key_order_list(self) -> list[str] | None:
        return None if self.key_order is None else [k.data for k in self.key_order.data]


def _optional_props(**values: Attribute | None) -> dict[str, Attribute]:
    return {k: v for k, v in values.items() if v is not None}


def _key_order_attr(keys: Sequence[str] | None) -> ArrayAttr | None:
    return None if keys is None else ArrayAttr([StringAttr(k) for k in keys])


def _nested(op: Operation, found: list[Operation] | None = None) -> list[Operation]:
    """The ops nested in `op`, innermost first (post-order)."""
    found = [] if found is None else found
    for region in op.regions:
        for block in region.blocks:
            for child in op_list(block):
                if child.regions:
                    _nested(child, found)
                found.append(child)
    return found


def _verify_first(op: Operation) -> list[Operation]:
    """Verify the ops nested in `op`, innermost first, before `op` checks rules spanning them,
    so that the first error a user sees is the most local one, at its own JSON path. Returns
    those ops (for `_verified_in_full`)."""
    nested = _nested(op)
    for child in nested:
        try:
            # IRDL constraints of `tt` ops are verified once, after `op`'s own rules (see
            # `_verified_in_full`); here only rules. Other ops (a kernel's ARK operator and
            # views) are verified in full, as the module walk does (`verify_quickly` first).
            if isinstance(child, TTOp):
                child.check()
            else:
                quick = getattr(type(child), "verify_quickly", None)
                if quick is None or not quick(child):
                    verify_op(child)
        except VerifyAt as e:
            raise VerifyAt(str(e), e.op or child, *e.steps) from None
        except VerifyException as e:
            raise VerifyAt(str(e), child) from None
    return nested


def _verified_in_full(nested: list[Operation]) -> None:
    """Within a module walk (`verifying_once`), remember the ops `_verify_first` verified
    whose IRDL constraints hold too, so that the walk does not check each one a second time
    (their rules ran twice: a third of compiling a model to `tt`). An op whose constraints
    fail is left to the walk, which reports it as before."""
    done = verified_so_far()
    if done is None:
        return
    for child in nested:
        if isinstance(child, TTOp):
            try:
                verify_generic(child)
            except VerifyException:
                continue
        done.add(id(child))


# ---------------------------------------------------------------------------------------------
# Core ranges
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class CoreRangeOp(JsonObjectOp):
    """An active rectangle of cores: x in [start_x, start_x + extent_x), y likewise.

    `replicated` (planc's reading of the spec's "unless intentionally replicated") allows this
    range to overlap other replicated ranges and its cores to share output tiles.
    """

    name = "tt.core_range"
    start_x = prop_def(IntegerAttr[I64])
    start_y = prop_def(IntegerAttr[I64])
    extent_x = prop_def(IntegerAttr[I64])
    extent_y = prop_def(IntegerAttr[I64])
    replicated = opt_prop_def(BoolAttr)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("`start` ` ` `[` $start_x `,` $start_y `]` `extent` ` ` `[` $extent_x "
                       "`,` $extent_y `]` attr-dict")

    def __init__(self, start: Sequence[int], extent: Sequence[int], *,
                 replicated: bool | None = None, extra: DictionaryAttr | None = None,
                 key_order: Sequence[str] | None = None):
        init_bare(self, {
            "start_x": _int(start[0]), "start_y": _int(start[1]),
            "extent_x": _int(extent[0]), "extent_y": _int(extent[1]),
            **_optional_props(
                replicated=None if replicated is None else bool_attr(replicated),
                extra=extra, key_order=_key_order_attr(key_order))})

    @property
    def start(self) -> tuple[int, int]:
        return self.start_x.value.data, self.start_y.value.data

    @property
    def extent(self) -> tuple[int, int]:
        return self.extent_x.value.data, self.extent_y.value.data

    @property
    def is_replicated(self) -> bool:
        return bool(_bool(self.replicated))

    def contains(self, core: tuple[int, int]) -> bool:
        (sx, sy), (ex, ey) = self.start, self.extent
        return sx <= core[0] < sx + ex and sy <= core[1] < sy + ey

    def cores(self) -> Iterator[tuple[int, int]]:
        (sx, sy), (ex, ey) = self.start, self.extent
        for x in range(sx, sx + ex):
            for y in range(sy, sy + ey):
                yield x, y

    def describe(self) -> str:
        return f"start {list(self.start)} extent {list(self.extent)}"

    def check(self) -> None:
        (sx, sy), (ex, ey) = self.start, self.extent
        if sx < 0 or sy < 0:
            raise VerifyAt(f"core range has a negative start {[sx, sy]}", None, "start")
        if ex < 1 or ey < 1:
            raise VerifyAt(f"core range extent {[ex, ey]} must be at least [1, 1]", None,
                           "extent")
        plan = self.parent_op()
        grid = plan.grid if isinstance(plan, PlanOp) else None
        if grid is not None and (sx + ex > grid[0] or sy + ey > grid[1]):
            raise VerifyAt(f"core range {self.describe()} exceeds grid bounds: it reaches "
                           f"core ({sx + ex - 1},{sy + ey - 1}) of a {grid[0]}x{grid[1]} grid")


# ---------------------------------------------------------------------------------------------
# Work partition
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class WorkOp(JsonObjectOp):
    """A work item: compute output tile (io, jo), reducing over `len_k` K tiles.

    `tile_order` is the traversal order the core follows. An explicit `null` for len_k or
    tile_order is kept in `extra` (it means the same as an absent member).
    """

    name = "tt.work"
    io = prop_def(IntegerAttr[I64])
    jo = prop_def(IntegerAttr[I64])
    len_k = opt_prop_def(IntegerAttr[I64])
    tile_order = opt_prop_def(StringAttr)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("`io` $io `jo` $jo (`len_k` $len_k^)? (`tile_order` $tile_order^)? "
                       "attr-dict")

    def __init__(self, io: int, jo: int, len_k: int | None = None,
                 tile_order: str | None = None, *, extra: DictionaryAttr | None = None,
                 key_order: Sequence[str] | None = None):
        init_bare(self, {"io": _int(io), "jo": _int(jo), **_optional_props(
            len_k=None if len_k is None else _int(len_k),
            tile_order=None if tile_order is None else StringAttr(tile_order),
            extra=extra, key_order=_key_order_attr(key_order))})

    @property
    def tile(self) -> tuple[int, int]:
        return self.io.value.data, self.jo.value.data

    @property
    def len_k_value(self) -> int | None:
        return _value(self.len_k)

    def check(self) -> None:
        _check_kinds(self, io=IntegerAttr, jo=IntegerAttr)
        for field in ("io", "jo"):
            if getattr(self, field).value.data < 0:
                raise VerifyAt(f"{field} must be >= 0, got {getattr(self, field).value.data}",
                               None, field)
        self.check_members(self)

    @staticmethod
    def check_members(self: WorkOp | WorkListOp) -> None:
        """The rules on len_k and tile_order, shared by `tt.work` and `tt.work_list`."""
        _check_kinds(self, len_k=IntegerAttr, tile_order=StringAttr)
        if self.len_k is not None and self.len_k.value.data < 0:
            raise VerifyAt(f"len_k must be >= 0, got {self.len_k.value.data}", None, "len_k")
        if self.len_k is not None and self.len_k.value.data > MAX_LEN_K:
            raise VerifyAt(f"len_k {self.len_k.value.data} K tiles are more than 2^63-1 "
                           "elements of K (32 per tile): no buffer holds such a K", None,
                           "len_k")
        if self.tile_order is not None and self.tile_order.data not in TILE_ORDERS:
            raise VerifyAt(f"tile_order must be one of {', '.join(TILE_ORDERS)}, got "
                           f"{_quoted(self.tile_order.data)}", None, "tile_order")


@irdl_op_definition
class WorkListOp(TTOp):
    """A run of work items in one op: item n computes output tile (io[n], jo[n]), each with
    the same `len_k` and `tile_order` (absent: the members are absent). It stands for exactly
    the JSON objects `{"io", "jo", "len_k", "tile_order"}` that `tt.work` ops would, in that
    key order. Planners write it: a kernel of a real model has hundreds of thousands of tiles,
    and one op per tile made planning a Llama layer take minutes."""

    name = "tt.work_list"
    io = prop_def(DenseArrayBase[I64])
    jo = prop_def(DenseArrayBase[I64])
    len_k = opt_prop_def(IntegerAttr[I64])
    tile_order = opt_prop_def(StringAttr)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("`io` $io `jo` $jo (`len_k` $len_k^)? (`tile_order` $tile_order^)? "
                       "attr-dict")

    def __init__(self, io, jo, len_k: int | None = None, tile_order: str | None = None):
        """`io`, `jo`: integer sequences (numpy arrays or lists) of the same length."""
        init_bare(self, properties={"io": _i64_array(io), "jo": _i64_array(jo),
                                    **_optional_props(
            len_k=None if len_k is None else _int(len_k),
            tile_order=None if tile_order is None else StringAttr(tile_order))})

    @staticmethod
    def with_properties(properties: dict[str, Attribute]) -> WorkListOp:
        """A `tt.work_list` of the properties of another one (attributes are immutable, so
        the ops may share them: the partitioner lays out equal kernels alike)."""
        op = WorkListOp.__new__(WorkListOp)
        init_bare(op, dict(properties))
        return op

    def pairs(self) -> Iterator[tuple[int, int]]:
        """The tiles (io, jo), unpacked without numpy."""
        return zip(_int64s(self.io), _int64s(self.jo), strict=True)

    def tiles(self):
        """The tiles: a `TileList` (numpy arrays over the op's own bytes), or a list of
        tuples for a few tiles while nothing has imported numpy (compiling a small model
        imports no numpy: 0.07 s of start-up)."""
        if len(self) <= SMALL_LIST and "numpy" not in sys.modules:
            return list(self.pairs())   # the same tiles; only the reading differs
        import numpy as np

        from dialects.tt_kernels import TileList

        return TileList(np.frombuffer(self.io.data.data, "<i8"),
                        np.frombuffer(self.jo.data.data, "<i8"))

    def __len__(self) -> int:
        return len(self.io)

    @property
    def len_k_value(self) -> int | None:
        return _value(self.len_k)

    def check(self) -> None:
        _check_kinds(self, io=DenseArrayBase, jo=DenseArrayBase)
        if len(self.io) != len(self.jo):
            raise VerifyException(f"io has {len(self.io)} tiles but jo has {len(self.jo)}")
        for field in ("io", "jo"):
            values = _int64s(getattr(self, field))
            if values and min(values) < 0:
                raise VerifyAt(f"{field} must be >= 0, got {min(values)}", None, field)
        WorkOp.check_members(self)


_KIND_NAMES = {IntegerAttr: "an integer", StringAttr: "a string",
               DenseArrayBase: "an array of integers"}


def _check_kinds(op: Operation, **kinds: type) -> None:
    """Each present property of `op` named in `kinds` is of its kind. The rules run before
    xDSL's own constraint check of nested ops (see `_verify_first`), and the MLIR parser takes
    any attribute where a property stands (`tile_order ui64`)."""
    for name, kind in kinds.items():
        value = op.properties.get(name)
        if value is not None and not isinstance(value, kind):
            raise VerifyAt(f"{name} must be {_KIND_NAMES[kind]}, got {value}", None, name)


SMALL_LIST = 4096
"""Up to this many tiles a `tt.work_list` reads as plain tuples, not numpy arrays."""


def _int64s(attr: DenseArrayBase) -> array:
    """The values of an i64 dense array, unpacked at C speed (no numpy for a few tiles)."""
    values = array("q", attr.data.data)
    if sys.byteorder != "little":
        values.byteswap()
    return values


def _i64_array(values) -> DenseArrayBase:
    """An i64 dense array of `values`, packed in one call (no attribute per element)."""
    if isinstance(values, list | tuple):
        data = array("q", values).tobytes() if sys.byteorder == "little" else None
    else:
        data = None
    if data is None:
        import numpy as np

        data = np.asarray(values, dtype="<i8").tobytes()
    return built(DenseArrayBase, i64, BytesAttr(data))


@functools.lru_cache(maxsize=4096)
def _coordinates(key: str) -> tuple[int, int] | None:
    """(x, y) of a core key "(x,y)", or None (read once per key: each plan names its cores
    again, and verification reads each key several times)."""
    match = _CORE_KEY.fullmatch(key)
    return None if match is None else (int(match.group(1)), int(match.group(2)))


@irdl_op_definition
class CoreOp(TTOp):
    """The ordered work items of one core, keyed "(x,y)" as in the file."""

    name = "tt.core"
    key = prop_def(StringAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$key attr-dict-with-keyword $body"

    def __init__(self, key: str, items: Sequence[WorkOp] = ()):
        init_bare(self, {"key": StringAttr(key)}, [Region(Block(items))])

    @staticmethod
    def key_of(core: tuple[int, int]) -> str:
        """TileLang-TT's spelling of a core key: "(x,y)" without spaces."""
        return f"({core[0]},{core[1]})"

    @property
    def coordinates(self) -> tuple[int, int] | None:
        return _coordinates(self.key.data)

    def items(self) -> list[WorkOp]:
        """The `tt.work` ops (not the items of `tt.work_list`s: see `tiles`, `len_ks`)."""
        return [op for op in self.body.block.ops if isinstance(op, WorkOp)]

    def runs(self) -> list[WorkOp | WorkListOp]:
        """The ops holding the core's work items, in order."""
        return [op for op in op_list(self.body.block) if type(op) in _WORK_OPS
                or isinstance(op, (WorkOp, WorkListOp))]

    def tiles(self) -> Sequence[tuple[int, int]]:
        """Every work item's output tile, in order: a `TileList` when the core holds only
        `tt.work_list`s, else a list of tuples."""
        runs = self.runs()
        if runs and all(isinstance(op, WorkListOp) for op in runs):
            if len(runs) == 1:
                return runs[0].tiles()
            import numpy as np

            from dialects.tt_kernels import TileList

            parts = [op.tiles() for op in runs]
            if not all(isinstance(t, TileList) for t in parts):
                return [tile for t in parts for tile in t]
            return TileList(np.concatenate([t.io for t in parts]),
                            np.concatenate([t.jo for t in parts]))
        return [t for op in runs for t in ([op.tile] if isinstance(op, WorkOp) else op.tiles())]

    def len_ks(self) -> list[int | None]:
        """Every work item's len_k (None where absent), in order."""
        return [k for op in self.runs()
                for k in ([op.len_k_value] if isinstance(op, WorkOp) else
                          [op.len_k_value] * len(op))]

    def item_count(self) -> int:
        return sum(1 if isinstance(op, WorkOp) else len(op) for op in self.runs())

    def check(self) -> None:
        if self.coordinates is None:
            raise VerifyException(f"core key {_quoted(self.key.data)} is not of the form "
                                  '"(x,y)" with integers x and y')
        for op in self.body.block.ops:
            if not isinstance(op, WorkOp | WorkListOp):
                raise VerifyException(f"a core holds only tt.work items, not {op.name}")


@irdl_op_definition
class WorkPartitionOp(TTOp):
    """The plan's `work_partition`: which cores compute which output tiles, in order."""

    name = "tt.work_partition"
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    assembly_format = "attr-dict-with-keyword $body"

    def __init__(self, cores: Sequence[CoreOp] = ()):
        init_bare(self, {}, [Region(Block(cores))])

    def cores(self) -> list[CoreOp]:
        return [op for op in self.body.block.ops if isinstance(op, CoreOp)]

    def check(self) -> None:
        seen: dict[tuple[int, int], str] = {}
        for op in self.body.block.ops:
            if not isinstance(op, CoreOp):
                raise VerifyException(f"work_partition holds only tt.core ops, not {op.name}")
            core = op.coordinates
            if core in seen:
                raise VerifyAt(f"core key {_quoted(op.key.data)} names core ({core[0]},"
                               f"{core[1]}) again (also key {_quoted(seen[core])})", op)
            if core is not None:
                seen[core] = op.key.data


# ---------------------------------------------------------------------------------------------
# Layouts
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class LayoutOp(JsonObjectOp):
    """Where buffer `buffer` lives (`shard`: DRAM or L1), whether its pages are interleaved
    across banks, optional strides, and how its tiles are numbered (`tile_id_order`)."""

    name = "tt.layout"
    buffer = prop_def(StringAttr)
    shard = prop_def(StringAttr)
    interleave = opt_prop_def(BoolAttr)
    stride_0 = opt_prop_def(IntegerAttr[I64])
    stride_1 = opt_prop_def(IntegerAttr[I64])
    tile_id_order = opt_prop_def(StringAttr)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("$buffer `shard` $shard (`interleave` $interleave^)? "
                       "(`stride` ` ` `[` $stride_0^ `,` $stride_1 `]`)? "
                       "(`tile_id_order` $tile_id_order^)? attr-dict")

    def __init__(self, buffer: str, shard: str, *, interleave: bool | None = None,
                 stride: Sequence[int] | None = None, tile_id_order: str | None = None,
                 extra: DictionaryAttr | None = None, key_order: Sequence[str] | None = None):
        init_bare(self, {
            "buffer": StringAttr(buffer), "shard": StringAttr(shard), **_optional_props(
                interleave=None if interleave is None else bool_attr(interleave),
                stride_0=None if stride is None else _int(stride[0]),
                stride_1=None if stride is None else _int(stride[1]),
                tile_id_order=None if tile_id_order is None else StringAttr(tile_id_order),
                extra=extra, key_order=_key_order_attr(key_order))})

    @staticmethod
    def with_properties(properties: dict[str, Attribute]) -> LayoutOp:
        """A `tt.layout` of the properties of another one (see `WorkListOp.with_properties`)."""
        op = LayoutOp.__new__(LayoutOp)
        init_bare(op, dict(properties))
        return op

    @property
    def buffer_name(self) -> str:
        return self.buffer.data

    @property
    def shard_value(self) -> str:
        return self.shard.data

    @property
    def interleaved(self) -> bool | None:
        return _bool(self.interleave)

    @property
    def stride(self) -> list[int] | None:
        if self.stride_0 is None:
            return None
        return [self.stride_0.value.data, _value(self.stride_1)]

    def check(self) -> None:
        if self.shard.data not in SHARDS:
            raise VerifyAt(f'shard must be "DRAM" or "L1", got {_quoted(self.shard.data)}',
                           None, "shard")
        if (self.stride_0 is None) != (self.stride_1 is None):
            raise VerifyException("stride needs two integers")
        if self.stride is not None and min(self.stride) < 1:
            raise VerifyAt(f"stride {self.stride} must be positive", None, "stride")
        if self.tile_id_order is not None and self.tile_id_order.data not in TILE_ORDERS:
            raise VerifyAt(f"tile_id_order must be one of {', '.join(TILE_ORDERS)}, got "
                           f"{_quoted(self.tile_id_order.data)}", None, "tile_id_order")


@irdl_op_definition
class LayoutsOp(TTOp):
    """The plan's `layouts`: one tt.layout per buffer."""

    name = "tt.layouts"
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    assembly_format = "attr-dict-with-keyword $body"

    def __init__(self, layouts: Sequence[LayoutOp] = ()):
        init_bare(self, {}, [Region(Block(layouts))])

    def layouts(self) -> list[LayoutOp]:
        return [op for op in self.body.block.ops if isinstance(op, LayoutOp)]

    def by_buffer(self) -> dict[str, LayoutOp]:
        return {op.buffer_name: op for op in self.layouts()}

    def check(self) -> None:
        seen: set[str] = set()
        for op in self.body.block.ops:
            if not isinstance(op, LayoutOp):
                raise VerifyException(f"layouts holds only tt.layout ops, not {op.name}")
            if op.buffer_name in seen:
                raise VerifyAt(f"buffer {_quoted(op.buffer_name)} has two layouts", op)
            seen.add(op.buffer_name)


# ---------------------------------------------------------------------------------------------
# The kernel
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class KernelOp(JsonObjectOp):
    """The computation a plan schedules (planc's `kernel` member): one ARK operator, with
    `ark.view`s for its tensors, seen as `grid_tiles` = [Mt, Nt] output tiles reducing over
    `len_k` K tiles each. Buffers are named A, B (inputs) and C (output)."""

    name = "tt.kernel"
    tiles_m = prop_def(IntegerAttr[I64])
    tiles_n = prop_def(IntegerAttr[I64])
    len_k = opt_prop_def(IntegerAttr[I64])
    body = region_def("single_block")
    traits = traits_def(NoTerminator(), IsolatedFromAbove())

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("`grid_tiles` ` ` `[` $tiles_m `,` $tiles_n `]` (`len_k` $len_k^)? "
                       "attr-dict-with-keyword $body")

    def __init__(self, grid_tiles: Sequence[int], len_k: int | None, body: Block, *,
                 extra: DictionaryAttr | None = None, key_order: Sequence[str] | None = None):
        init_bare(
            self, {"tiles_m": _int(grid_tiles[0]), "tiles_n": _int(grid_tiles[1]),
                   **_optional_props(len_k=None if len_k is None else _int(len_k),
                                     extra=extra, key_order=_key_order_attr(key_order))},
            [Region(body)])

    @property
    def grid_tiles(self) -> tuple[int, int]:
        return self.tiles_m.value.data, self.tiles_n.value.data

    @property
    def len_k_value(self) -> int | None:
        return _value(self.len_k)

    @property
    def operator(self) -> ark.ArkOp:
        return next(op for op in self.body.block.ops if isinstance(op, ark.ArkOp))

    def buffer_names(self) -> list[str]:
        from dialects.tt_kernels import kernel_buffers

        return list(kernel_buffers(self.operator))

    def describe(self) -> str:
        op = self.operator
        return f"{op.ark_type} '{op.label.data}'"

    def check(self) -> None:
        from dialects.tt_kernels import NotAKernel, kernel_geometry

        operators = [op for op in self.body.block.ops if isinstance(op, ark.ArkOp)]
        others = [op for op in self.body.block.ops
                  if not isinstance(op, ark.ArkOp | ark.ViewOp)]
        if len(operators) != 1 or others:
            raise VerifyException("a kernel holds one ARK operator and the views of its "
                                  f"tensors, got {len(operators)} operators")
        op = operators[0]
        try:
            geometry = kernel_geometry(op)
        except NotAKernel as e:
            raise VerifyAt(f"{self.describe()}: {e}", None, "operator") from None
        if geometry.grid_tiles != self.grid_tiles:
            mt, nt = geometry.grid_tiles
            raise VerifyAt(f"grid_tiles is {list(self.grid_tiles)}, but the output "
                           f"{op.outputs[0].shape_list} of {self.describe()} has {mt}x{nt} "
                           "tiles of 32x32", None, "grid_tiles")
        if geometry.len_k != self.len_k_value:
            raise VerifyAt(_len_k_mismatch(self.len_k_value, geometry.len_k, self.describe()),
                           None, "len_k")


_WORK_OPS = frozenset({WorkOp, WorkListOp})


def _idle_placeholder(core_op: CoreOp) -> bool:
    """TileLang-TT's partitioners give a core with no tiles the item {io:0, jo:0, len_k:0}."""
    runs = [op for op in core_op.runs() if isinstance(op, WorkOp) or len(op)]
    if len(runs) != 1 or runs[0].len_k_value != 0:
        return False
    op = runs[0]
    if isinstance(op, WorkOp):
        return op.tile == (0, 0)
    return len(op) == 1 and _int64s(op.io)[0] == 0 and _int64s(op.jo)[0] == 0


def _located_tiles(core_op: CoreOp) -> Iterator[tuple[tuple[int, int], Operation, tuple]]:
    """Each work item's tile with where an error about it points: the item's op, or its
    `tt.work_list` and the item's index in it."""
    for op in core_op.runs():
        if isinstance(op, WorkOp):
            yield op.tile, op, ()
        else:
            for index, tile in enumerate(op.tiles()):
                yield tile, op, (index,)


def _first(op: WorkOp | WorkListOp) -> tuple:
    """The path steps from `op` to its first item: none for a `tt.work`, index 0 of a list
    (whose items share their len_k and tile_order)."""
    return () if isinstance(op, WorkOp) else (0,)


def _len_k_mismatch(given: int | None, expected: int | None, what: str) -> str:
    if expected is None:
        return f"len_k is {given}, but {what} has no K dimension (it reduces over nothing)"
    if given is None:
        return f"len_k is missing, but {what} reduces over {expected} K tiles"
    return f"len_k is {given}, but {what} reduces over {expected} K tiles"


# ---------------------------------------------------------------------------------------------
# The plan and the file
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class PlanOp(JsonObjectOp):
    """One `tt.plan.json` plan: the core grid (gx x gy) and the ops standing for its
    members. A plan under construction (between lowering passes) may lack its grid, work
    partition or layouts; an imported plan has them all."""

    name = "tt.plan"
    grid_x = opt_prop_def(IntegerAttr[I64])
    grid_y = opt_prop_def(IntegerAttr[I64])
    schema_version = opt_prop_def(IntegerAttr[I64])
    backend_version = opt_prop_def(StringAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator(), IsolatedFromAbove())

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "(`grid` $grid_x^ `x` $grid_y)? attr-dict-with-keyword $body"

    def __init__(self, body: Sequence[Operation] = (), *, grid: Sequence[int] | None = None,
                 schema_version: int | None = None, backend_version: str | None = None,
                 extra: DictionaryAttr | None = None, key_order: Sequence[str] | None = None):
        init_bare(
            self, _optional_props(
                grid_x=None if grid is None else _int(grid[0]),
                grid_y=None if grid is None else _int(grid[1]),
                schema_version=None if schema_version is None else _int(schema_version),
                backend_version=None if backend_version is None else StringAttr(
                    backend_version),
                extra=extra, key_order=_key_order_attr(key_order)),
            [Region(Block(body))])

    # -- members -------------------------------------------------------------------------

    @property
    def grid(self) -> tuple[int, int] | None:
        if self.grid_x is None or self.grid_y is None:
            return None
        return self.grid_x.value.data, self.grid_y.value.data

    def set_grid(self, grid: Sequence[int]) -> None:
        self.grid_x, self.grid_y = _int(grid[0]), _int(grid[1])

    def _first(self, cls: type[Operation]) -> Operation | None:
        op = self.body.block._first_op  # noqa: SLF001 -- `block.ops` without an iterator
        while op is not None:
            if isinstance(op, cls):
                return op
            op = op._next_op  # noqa: SLF001
        return None

    def core_ranges(self) -> list[CoreRangeOp]:
        return [op for op in op_list(self.body.block) if isinstance(op, CoreRangeOp)]

    @property
    def kernel(self) -> KernelOp | None:
        return self._first(KernelOp)

    @property
    def work_partition(self) -> WorkPartitionOp | None:
        return self._first(WorkPartitionOp)

    @property
    def layouts(self) -> LayoutsOp | None:
        return self._first(LayoutsOp)

    def label(self) -> str:
        kernel = self.kernel
        return kernel.describe() if kernel is not None else "plan"

    # -- verification --------------------------------------------------------------------

    def check(self) -> None:
        if (self.grid_x is None) != (self.grid_y is None):
            raise VerifyException("core_grid needs both gx and gy")
        grid = self.grid
        if grid is not None and min(grid) < 1:
            raise VerifyAt(f"core_grid {list(grid)} must be at least [1, 1]", None,
                           "core_grid")
        if self.schema_version is not None and self.schema_version.value.data < 1:
            raise VerifyAt(f"schema_version must be >= 1, got "
                           f"{self.schema_version.value.data}", None, "schema_version")
        nested = _verify_first(self)
        for op in self.body.block.ops:
            if not isinstance(op, CoreRangeOp | KernelOp | WorkPartitionOp | LayoutsOp):
                raise VerifyException(f"a plan does not hold {op.name}")
        self._verify_ranges_disjoint()
        partition = self.work_partition
        if partition is not None:
            if grid is None:
                raise VerifyException("a plan with a work_partition needs its core_grid")
            self._verify_cores(partition, grid)
            self._verify_tiles(partition)
        if self.layouts is not None and self.kernel is not None:
            self._verify_layout_names(self.layouts, self.kernel)
        _verified_in_full(nested)

    def _verify_ranges_disjoint(self) -> None:
        ranges = self.core_ranges()
        for i, later in enumerate(ranges):
            for j, earlier in enumerate(ranges[:i]):
                shared = next((c for c in later.cores() if earlier.contains(c)), None)
                if shared is None or (later.is_replicated and earlier.is_replicated):
                    continue
                raise VerifyAt(f"core range {i} ({later.describe()}) overlaps core range {j} "
                               f"({earlier.describe()}) at core ({shared[0]},{shared[1]}); "
                               'ranges may overlap only when both are "replicated": true',
                               later)

    def _verify_cores(self, partition: WorkPartitionOp, grid: tuple[int, int]) -> None:
        ranges = self.core_ranges()
        for core_op in partition.cores():
            x, y = core_op.coordinates
            if not (0 <= x < grid[0] and 0 <= y < grid[1]):
                raise VerifyAt(f"core ({x},{y}) is outside the {grid[0]}x{grid[1]} core grid",
                               core_op)
            if not any(r.contains((x, y)) for r in ranges):
                raise VerifyAt(f"core ({x},{y}) is in the work partition but in no core range",
                               core_op)

    def _replicated(self, core: tuple[int, int]) -> bool:
        return any(r.is_replicated and r.contains(core) for r in self.core_ranges())

    def _verify_tiles(self, partition: WorkPartitionOp) -> None:
        kernel = self.kernel
        bounds = kernel.grid_tiles if kernel is not None else None
        if not self._tiles_partition_quickly(partition, bounds):
            self._verify_tiles_one_by_one(partition, bounds, kernel)
        self._verify_len_k(partition, kernel)

    def _tiles_partition_quickly(self, partition: WorkPartitionOp,
                                 bounds: tuple[int, int] | None) -> bool:
        """True when the cores hold only `tt.work_list`s whose tiles are, together, every
        output tile exactly once: what the one-by-one rules below accept then, without a
        Python step per tile (numpy for large kernels). False decides nothing: the rules run
        and say what is wrong."""
        if bounds is None or any(r.is_replicated for r in self.core_ranges()):
            return False
        lists = []
        for core_op in partition.cores():
            ops = op_list(core_op.body.block)
            if not ops or any(type(op) is not WorkListOp for op in ops):
                return False
            if len(ops) == 1 and ops[0].len_k_value == 0 and len(ops[0]) == 1:
                return False                     # perhaps an idle placeholder
            lists += ops
        mt, nt = bounds
        if not lists or sum(len(op) for op in lists) != mt * nt:
            return False
        if mt * nt <= 4096:
            # the arrays hold no negative value (each list's own rule): io < mt and jo < nt
            # make io * nt + jo number the tiles 0 .. mt*nt-1, so as many distinct numbers as
            # tiles means each tile once
            io, jo = array("q"), array("q")
            for op in lists:
                io += _int64s(op.io)
                jo += _int64s(op.jo)
            if (io and max(io) >= mt) or (jo and max(jo) >= nt):
                return False
            return len({i * nt + j for i, j in zip(io, jo, strict=True)}) == mt * nt
        import numpy as np

        io = np.concatenate([np.frombuffer(op.io.data.data, "<i8") for op in lists])
        jo = np.concatenate([np.frombuffer(op.jo.data.data, "<i8") for op in lists])
        if io.max() >= mt or jo.max() >= nt:
            return False
        covered = np.zeros(mt * nt, dtype=bool)
        covered[io * nt + jo] = True
        return bool(covered.all())

    def _verify_tiles_one_by_one(self, partition: WorkPartitionOp,
                                 bounds: tuple[int, int] | None, kernel) -> None:
        owner: dict[tuple[int, int], CoreOp] = {}
        for core_op in partition.cores():
            core = core_op.coordinates
            listed: set[tuple[int, int]] = set()
            if _idle_placeholder(core_op):
                warn("tt.idle-placeholder", f"core {core_op.key.data} has only the placeholder "
                     "item {io: 0, jo: 0, len_k: 0} that TileLang-TT's partitioners give idle "
                     "cores; it is not counted as an assignment of tile (0,0), but a runtime "
                     "that executes it writes tile (0,0) after an empty K loop", core_op)
                continue
            for tile, item, at in _located_tiles(core_op):
                if bounds is not None and not (tile[0] < bounds[0] and tile[1] < bounds[1]):
                    raise VerifyAt(f"tile ({tile[0]},{tile[1]}) is outside the "
                                   f"{bounds[0]}x{bounds[1]} output tiles of "
                                   f"{kernel.describe()}", item, *at)
                if tile in listed:
                    raise VerifyAt(f"tile ({tile[0]},{tile[1]}) is listed twice by core "
                                   f"{core_op.key.data}", item, *at)
                listed.add(tile)
                first = owner.setdefault(tile, core_op)
                if first is not core_op and not (self._replicated(core)
                                                 and self._replicated(first.coordinates)):
                    raise VerifyAt(f"tile ({tile[0]},{tile[1]}) is assigned twice: to core "
                                   f"{first.key.data} and to core {core_op.key.data}; a tile "
                                   "is computed once unless both cores are in replicated "
                                   "core ranges", item, *at)
        self._verify_coverage(partition, owner, bounds, kernel)

    def _verify_coverage(self, partition: WorkPartitionOp, owner: dict, bounds, kernel) -> None:
        """Every output tile is some core's: decided on the sorted assigned tiles (their count
        is the file's), never by walking a grid whose size the file only states."""
        if bounds is None:
            if not owner:
                return
            bounds = (max(t[0] for t in owner) + 1, max(t[1] for t in owner) + 1)
            whose = f"the {bounds[0]}x{bounds[1]} tiles the partition spans"
        else:
            whose = f"the {bounds[0]}x{bounds[1]} output tiles of {kernel.describe()}"
        total = bounds[0] * bounds[1]
        assigned = sorted(i * bounds[1] + j for i, j in owner
                          if i < bounds[0] and j < bounds[1])
        missing = total - len(assigned)
        if missing:
            first = next((k for k, index in enumerate(assigned) if index != k), len(assigned))
            i, j = divmod(first, bounds[1])
            raise VerifyAt(f"tile ({i},{j}) is assigned to no core ({missing} of {whose} "
                           "are unassigned)", partition, rule="tt.coverage")

    def _verify_len_k(self, partition: WorkPartitionOp, kernel: KernelOp | None) -> None:
        items = [item for core_op in partition.cores() if not _idle_placeholder(core_op)
                 for item in core_op.runs()
                 if item.len_k is not None and (isinstance(item, WorkOp) or len(item))]
        if kernel is not None:
            expected = kernel.len_k_value
            for item in items:
                if item.len_k_value != expected:
                    raise VerifyAt(_len_k_mismatch(item.len_k_value, expected,
                                                   kernel.describe()), item, *_first(item),
                                   "len_k")
            return
        if items:
            first = items[0].len_k_value
            for item in items:
                if item.len_k_value != first:
                    raise VerifyAt(f"len_k is {item.len_k_value}, but other work items have "
                                   f"len_k {first}; a plan's kernel has one K extent", item,
                                   *_first(item), "len_k")

    def _verify_layout_names(self, layouts: LayoutsOp, kernel: KernelOp) -> None:
        names = kernel.buffer_names()
        for layout in layouts.layouts():
            if layout.buffer_name not in names:
                listing = ", ".join(names)
                raise VerifyAt(f"layout {_quoted(layout.buffer_name)} names no buffer of "
                               f"{kernel.describe()} (its buffers: {listing})", layout)


@irdl_op_definition
class PlansOp(TTOp):
    """A `tt.plan.json` document: one plan (a JSON object), or with `listed` a JSON array of
    plans, which is how planc writes a model of several kernels (in execution order)."""

    name = "tt.plans"
    listed = opt_prop_def(UnitAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator(), IsolatedFromAbove())

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "(`listed` $listed^)? attr-dict-with-keyword $body"

    def __init__(self, plans: Sequence[PlanOp] = (), *, listed: bool = False):
        init_bare(self, {"listed": UnitAttr()} if listed else {}, [Region(Block(plans))])

    @property
    def is_listed(self) -> bool:
        return self.listed is not None

    def plans(self) -> list[PlanOp]:
        return [op for op in self.body.block.ops if isinstance(op, PlanOp)]

    def check(self) -> None:
        for op in self.body.block.ops:
            if not isinstance(op, PlanOp):
                raise VerifyException(f"tt.plans holds only tt.plan ops, not {op.name}")


TT = Dialect(
    "tt",
    [PlansOp, PlanOp, CoreRangeOp, KernelOp, WorkPartitionOp, CoreOp, WorkOp, WorkListOp,
     LayoutsOp, LayoutOp],
    [],
)
