"""gemini-cycles: intra-core tiles (`tile_info`) and the predicted `time` of every workload.

A PE workload whose weights are staged in L2 streams them to WL0 one intra-core tile of output
channels at a time (`stream_tile_channels`; a tile whose weights exceed the WL0 slice is cut
along its input channels too, `stream_slices`); while tile i computes, tile i+1's weights load,
so its time is `L + sum(max(c_i, L)) + c_last` with L the tile's WL0 load cycles. Every other
workload is one tile. Tile cycles come from the calibrated roofline of
`targets.gemini.model`; DRAM stalls are not part of `time` (as in Gemini's IR; the simulator
adds them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import FloatAttr, ModuleOp, StringAttr

from dialects import dnn, gemini
from targets.gemini import model
from targets.gemini.l2 import weight_in_l2
from targets.gemini.model import Box, GeminiHardware
from targets.gemini.plan import OPERAND, HardwarePass, graph_of, layer_table, schedule_of


@dataclass
class TilePlan:
    ofmap: Box
    cycles: float


@dataclass
class WorkloadPlan:
    tiles: list[TilePlan]
    time: float
    stream_units: int | None
    """WL0 units of one streamed weight tile (None: weights not streamed from L2)."""


def plan_workload(layer: dnn.LayerOp, wl: gemini.WorkloadOp, hw: GeminiHardware,
                  kids: dict[type, list] | None = None) -> WorkloadPlan:
    """The tiles and time of `wl` (`kids`: `wl.grouped()`, when the caller has it)."""
    box = wl.box
    if kids is None:
        kids = wl.grouped()
    ifmaps = kids.get(gemini.IfmapOp, [])
    weights = kids.get(gemini.WeightOp)
    weight = weights[0] if weights else None
    in_bytes = sum(ifmap.value("size") for ifmap in ifmaps)
    if layer.LAYER_TYPE == "vp":
        # The vector processor streams its operands side by side: the first one sets the pace.
        out_bytes = model.fmap_bytes(box, layer.out_type.bits)
        first_input = sum(ifmap.value("size") for ifmap in operands_of(ifmaps, 0))
        cycles = model.vp_cycles(layer, first_input, out_bytes)
        return WorkloadPlan([TilePlan(box, cycles)], cycles, None)
    if layer.LAYER_TYPE != "pe":
        cycles = model.dt_cycles(in_bytes)
        return WorkloadPlan([TilePlan(box, cycles)], cycles, None)
    k0, k1 = box[0][1], box[1][1]
    if weight is None or not weight_in_l2(layer, k1 - k0 + 1, hw):
        direct = weight.value("size") if weight is not None else 0
        cycles = model.pe_cycles(layer, box, in_bytes, direct)
        return WorkloadPlan([TilePlan(box, cycles)], cycles, None)
    tile_k = model.stream_tile_channels(layer, k1 - k0 + 1, hw)
    slices = model.stream_slices(layer, tile_k, hw)
    tiles = []
    for start in range(k0, k1 + 1, tile_k):
        lower, upper = list(box[0]), list(box[1])
        lower[1], upper[1] = start, min(start + tile_k - 1, k1)
        cycles = model.pe_cycles(layer, (lower, upper), in_bytes, 0) / slices
        tiles.extend(TilePlan((lower, upper), cycles) for _ in range(slices))
    units = -(-model.wl0_stream_units(layer, tile_k, hw) // slices)
    return WorkloadPlan(tiles, model.stream_time([t.cycles for t in tiles], units), units)


def operand_ifmaps(wl: gemini.WorkloadOp, index: int) -> list[gemini.IfmapOp]:
    """The ifmaps that deliver activation `index` (several when it is a concatenation, read at
    the channel offset of each input); without `gemini.operand` (an imported IR), the
    index-th ifmap."""
    return operands_of(wl.ifmaps, index)


def operands_of(ifmaps: list[gemini.IfmapOp], index: int) -> list[gemini.IfmapOp]:
    """`operand_ifmaps` of a workload whose ifmaps are `ifmaps`."""
    if all(OPERAND not in f.attributes for f in ifmaps):
        return ifmaps[index: index + 1]
    return [f for f in ifmaps if OPERAND in f.attributes and
            f.attributes[OPERAND].value.data == index]


def cut_mode(layer: dnn.LayerOp) -> str:
    """How the PE array's two axes are shared: K with C (most convolutions), K with H (thin
    or strided 1x1 inputs), or K with K (fully connected)."""
    _, _, h, w = layer.out_type.nchw
    if h * w == 1:
        return "KK"
    c = dnn.fmap(layer.inputs[0]).nchw[1]
    strided_1x1 = isinstance(layer, dnn.Conv2dOp) and layer.window == [1, 1] and \
        max(layer.strides) > 1
    return "KH" if c < 8 or strided_1x1 else "KC"


def tile_op(index: int, tile: TilePlan, layer: dnn.LayerOp, wl: gemini.WorkloadOp,
            ifmaps: list[gemini.IfmapOp] | None = None,
            pe_props: dict[str, StringAttr] | None = None) -> gemini.TileOp:
    """Tile `index` of `wl` (`ifmaps`: `wl.ifmaps`; `pe_props`: `pe_tile_props(layer)` of a PE
    layer; either when the caller has them)."""
    props = {"key": gemini.str_attr(f"tile_num_{index}"),
             "ofmap_lower": gemini.ints_attr(tile.ofmap[0]),
             "ofmap_upper": gemini.ints_attr(tile.ofmap[1]),
             "single_tile_time_pred": _time_attr(float(round(tile.cycles, 3)))}
    if ifmaps is None:
        ifmaps = wl.ifmaps
    firsts = [f for f in (next(iter(operands_of(ifmaps, i)), None) for i in (0, 1)) if f]
    for suffix, ifmap in zip(("", "2"), firsts, strict=False):
        props[f"ifmap_lower{suffix}"] = gemini.ints_attr(ifmap.ints_of("lower"))
        props[f"ifmap_upper{suffix}"] = gemini.ints_attr(ifmap.ints_of("upper"))
    if layer.LAYER_TYPE == "pe":
        props.update(pe_tile_props(layer) if pe_props is None else pe_props)
        props["tile_padding_tblr"] = wl.tile_padding_tblr or gemini.ints_attr([0, 0, 0, 0])
    else:
        props["tile_padding_tblr"] = gemini.ints_attr([0, 0, 0, 0])
    return gemini.TileOp.build(**props)


def pe_tile_props(layer: dnn.LayerOp) -> dict[str, StringAttr]:
    """What every tile of a PE layer says of the layer (the same for all its workloads)."""
    return {"layer_name": StringAttr(layer.name_), "cut_mode": StringAttr(cut_mode(layer)),
            "loop_order": StringAttr("KNHW")}


_TIMES: dict[tuple[float, bool], FloatAttr] = {}


def _time_attr(cycles: float) -> FloatAttr:
    """`gemini.number_attr(cycles)` of a float, one attribute per value: the parts of a layer
    cut evenly take the same time. Keyed with the sign, as 0.0 == -0.0 but prints apart."""
    key = (cycles, math.copysign(1.0, cycles) > 0)
    found = _TIMES.get(key)
    if found is None:
        found = gemini.number_attr(cycles)
        if len(_TIMES) < 1 << 16:
            _TIMES[key] = found
    return found


@dataclass(frozen=True)
class GeminiCyclesPass(HardwarePass):
    """Fill every workload's tile_info and time from the cycle model."""

    name = "gemini-cycles"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        graph = graph_of(op, self.name)
        schedule = schedule_of(op, self.name)
        layers = layer_table(graph)
        hw = self.hw
        pe_props: dict[str, dict[str, StringAttr]] = {}
        for wl in schedule.workloads():
            layer = layers[wl.layer]
            kids = wl.grouped()
            plan = plan_workload(layer, wl, hw, kids)
            for tile in kids.get(gemini.TileOp, ()):
                tile.detach()
                tile.erase()
            props = None
            if layer.LAYER_TYPE == "pe":
                props = pe_props.get(layer.name_)
                if props is None:
                    props = pe_props[layer.name_] = pe_tile_props(layer)
            ifmaps = kids.get(gemini.IfmapOp, [])
            for i, tile in enumerate(plan.tiles):
                wl.append(tile_op(i, tile, layer, wl, ifmaps, props))
            wl.add_list("tile_info")
            wl.time = gemini.int_attr(math.floor(plan.time))

