"""The Gemini machine model: hardware parameters, data layout, receptive fields and cycles.

Shared by the Gemini scheduling passes (which decide with it) and by the simulator (which
reports with it). The numbers describe the first-generation Gemini test chip the public
scheduler IRs were made for (jingweicai/Gemini-Compiler-IR): one core per mesh position, a
4096-MAC PE array, an 8 MB L2 per core, 16 GB/s DRAM at 1 GHz.

Where the public IRs fix a rule it is reproduced exactly (byte sizes with 8-byte channel groups,
weights with 32 bytes of BatchNorm/quantisation parameters per output channel, WL0 units, the
weight-streaming time formula). The intra-core compiler that predicts a tile's cycles is not
public: `tile_cycles` is a roofline calibrated on the ResNet-34 IR (vector-processor costs are
exact there; PE costs within a few per cent for 3x3 convolutions, see bench/).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from dialects import dnn
from ground.diagnostics import UsageError

Box = tuple[list[int], list[int]]
"""An inclusive [lower, upper] box over (N, C, H, W)."""


def check_bandwidth(bandwidth: float) -> None:
    """`--dram-bw` is a finite positive number of GB/s: NaN passed `<= 0` and then failed
    turning cycles into integers (an internal error)."""
    if not (math.isfinite(bandwidth) and bandwidth > 0):
        raise UsageError(f"--dram-bw: expected a positive bandwidth in GB/s, got {bandwidth}")


@dataclass(frozen=True)
class GeminiHardware:
    buffer_bytes: int = 8 * 1024 * 1024
    """L2 bytes per core (the IR's `buffersize`)."""
    dram_bytes_per_cycle: float = 16.0
    """DRAM bandwidth shared by all cores (GB/s at 1 GHz = bytes per cycle)."""
    clock_hz: float = 1e9
    pe_macs_per_cycle: int = 4096
    """64 output channels x 64 input lanes (8 channel groups of 8)."""
    pe_k_lanes: int = 64
    l2_to_wl0_bytes_per_cycle: int = 32
    """How fast weights stream from L2 into WL0 (the IR's WL0 unit for CORE entries)."""
    wl0_capacity_units: int = 20480
    """WL0 size in the units of `wl0_buffer` sizes (the largest end seen is ~18.8K)."""
    wl0_direct_max_units: int = 9216
    """Weights up to this many WL0 (DDR) units go straight from DRAM to WL0; bigger ones are
    staged in L2 and streamed per intra-core tile (the split seen in every public IR)."""
    stream_tile_max_units: int = 9344
    """Largest per-tile WL0 slice of a streamed weight (128 x (256*9+32) bytes / 32)."""
    min_stream_tiles: int = 4
    channel_group_bytes: int = 8
    weight_param_bytes: int = 32
    l2_fill: float = 0.9
    """Fraction of L2 that may be filled at all (first fit needs some slack)."""
    l2_plan: float = 0.55
    """Fraction of L2 the scheduler plans to use: layer groups must fit it and DRAM loads
    are prefetched into it. Loads a workload cannot run without may go beyond it, up to
    `l2_fill`. More buys earlier prefetch in weight-bound stretches; less keeps L2 free
    (see bench/README.md for the trade-off on ResNet)."""

    @property
    def wl0_resident_units(self) -> int:
        """WL0 units a segment of several batch groups may keep its weights in from the first
        group to the last: WL0 less one streamed tile, which a layer of the segment whose
        weights are staged in L2 needs beside them."""
        return self.wl0_capacity_units - self.stream_tile_max_units

    @property
    def planned_l2_bytes(self) -> float:
        return self.buffer_bytes * min(self.l2_plan, self.l2_fill)

    @property
    def fill_l2_bytes(self) -> float:
        """L2 bytes that may be filled at all: what a workload that does not fit the planned
        budget may take when nothing else must sit beside it."""
        return self.buffer_bytes * self.l2_fill

    @property
    def dram_bytes_per_second(self) -> float:
        return self.dram_bytes_per_cycle * self.clock_hz


# ---------------------------------------------------------------------------------------------
# Layout and sizes
# ---------------------------------------------------------------------------------------------


def channel_align(bits: int, hw: GeminiHardware = GeminiHardware()) -> int:
    """Channels per 8-byte group: 8 for int8, 4 for fp16 (the IR's `align`)."""
    return max(1, hw.channel_group_bytes * 8 // bits)


def box_size(box: Box) -> list[int]:
    lower, upper = box
    return [hi - lo + 1 for lo, hi in zip(lower, upper, strict=False)]


def fmap_bytes(box: Box, bits: int) -> int:
    lower, upper = box
    if len(lower) == 4 and len(upper) == 4:     # the usual case, unrolled (~18k calls)
        n, c = upper[0] - lower[0] + 1, upper[1] - lower[1] + 1
        h, w = upper[2] - lower[2] + 1, upper[3] - lower[3] + 1
    else:
        n, c, h, w = box_size(box)
    align = _ALIGN.get(bits) or channel_align(bits)
    return n * -(-c // align) * align * h * w * bits // 8


_ALIGN = {bits: channel_align(bits) for bits in (8, 16, 32)}
"""`channel_align` of the usual widths, looked up rather than computed per box."""


def whole(shape: Sequence[int]) -> Box:
    return [0] * len(shape), [d - 1 for d in shape]


def weight_geometry(layer: dnn.LayerOp) -> tuple[int, int, int] | None:
    """(K, C, R*S) of a PE layer's weights, or None when it has none."""
    ftype = _weight_type(layer)
    return None if ftype is None else _geometry(ftype)


def _weight_type(layer: dnn.LayerOp) -> dnn.FmapType | None:
    """The type of a PE layer's weights (`layer.weights[0]`), or None when it has none."""
    if layer.LAYER_TYPE != "pe" or isinstance(layer, dnn.MatmulOp):
        return None
    # `operands` is `inputs` (a layer's only operands), without xDSL's slower named accessor:
    # the models ask for the weights of a layer ~17k times on a 4x4 ResNet-34.
    inputs = layer.operands
    if len(inputs) <= layer.ACTIVATIONS:
        return None
    return inputs[layer.ACTIVATIONS].type


def _geometry(ftype: dnn.FmapType) -> tuple[int, int, int]:
    # Asked for every workload several times (cycles, WL0, L2 planning): one unpacking per type,
    # kept on the (immutable) type itself; a cache keyed by the type would hash its parameters
    # on every lookup, which cost more than the unpacking.
    found = ftype.__dict__.get("_planc_geometry")
    if found is None:
        k, c, r, s = ftype.nchw
        found = ftype.__dict__["_planc_geometry"] = (k, c, r * s)
    return found


def weight_bits(layer: dnn.LayerOp) -> int:
    return dnn.fmap(layer.weights[0]).bits


def weight_channel_bytes(layer: dnn.LayerOp) -> int:
    """Bytes per output channel: the C x R*S kernel padded to channel groups, plus the 32 bytes
    of BatchNorm/quantisation parameters."""
    ftype = _weight_type(layer)
    if ftype is None:
        k, c, rs = weight_geometry(layer)   # (fails as it always did: no weights)
    return _channel_bytes(ftype)


def _channel_bytes(ftype: dnn.FmapType) -> int:
    """`weight_channel_bytes` of a layer whose weights are of type `ftype`."""
    # Asked per workload by the L2, WL0 and cycle models: kept on the (immutable) weight type.
    found = ftype.__dict__.get("_planc_channel_bytes")
    if found is None:
        k, c, rs = _geometry(ftype)
        bits = ftype.bits
        align = channel_align(bits)
        found = ftype.__dict__["_planc_channel_bytes"] = \
            -(-c // align) * align * rs * bits // 8 + GeminiHardware.weight_param_bytes
    return found


def weight_bytes(layer: dnn.LayerOp, k_range: int | None = None) -> int:
    """`K*align8(C)*R*S + 32*K` (e.g. 64*8*49 + 64*32 = 27136 for ResNet's first conv)."""
    k = weight_geometry(layer)[0] if k_range is None else k_range
    return k * weight_channel_bytes(layer)


def wl0_direct_units(layer: dnn.LayerOp, k_range: int) -> int:
    """WL0 size of weights read straight from DRAM: K padded to 64 rows of 32-byte-aligned
    channels, in 64-byte units (Conv 27136 B -> 448, FC 1000x512 -> 8704)."""
    return _direct_units(weight_channel_bytes(layer), k_range)


def _direct_units(channel_bytes: int, k_range: int) -> int:
    """`wl0_direct_units` of `k_range` channels of `channel_bytes` bytes each."""
    per_channel = -(-channel_bytes // 32) * 32
    return -(-k_range // 64) * 64 * per_channel // 64


def wl0_stream_units(layer: dnn.LayerOp, tile_k: int, hw: GeminiHardware) -> int:
    """WL0 size of one streamed tile: its bytes / 32 (one unit per L2->WL0 cycle)."""
    return tile_k * weight_channel_bytes(layer) // hw.l2_to_wl0_bytes_per_cycle


def streams_weights(layer: dnn.LayerOp, k_range: int, hw: GeminiHardware) -> bool:
    # `weight_geometry` and `wl0_direct_units` on one look-up of the weights (asked per
    # workload by the L2 and cycle models).
    ftype = _weight_type(layer)
    return ftype is not None and \
        _direct_units(_channel_bytes(ftype), k_range) > hw.wl0_direct_max_units


def stream_tile_channels(layer: dnn.LayerOp, k_range: int, hw: GeminiHardware) -> int:
    """Output channels per intra-core tile of a weight-streaming workload: the largest multiple
    of 64 giving at least `min_stream_tiles` tiles whose WL0 slice fits (Conv 256x256x3x3: 64;
    Conv 512x256x3x3: 128; Conv 512x512x3x3: 64, as in the public IRs)."""
    best = hw.pe_k_lanes
    tile = hw.pe_k_lanes
    while tile * hw.min_stream_tiles <= k_range:
        if wl0_stream_units(layer, tile, hw) <= hw.stream_tile_max_units:
            best = tile
        tile += hw.pe_k_lanes
    return min(best, k_range)


def stream_slices(layer: dnn.LayerOp, tile_k: int, hw: GeminiHardware) -> int:
    """Input-channel slices each streamed tile's weights are cut into: 1, unless even the
    smallest tile of output channels exceeds the WL0 slice (a dense layer over a large input,
    e.g. ZFNet-512's 4096 x 18432); then the tile's reduction is split, its partial sums
    accumulating in the output buffer, so that each slice's weights fit."""
    return max(1, -(-wl0_stream_units(layer, tile_k, hw) // hw.stream_tile_max_units))


# ---------------------------------------------------------------------------------------------
# Receptive fields
# ---------------------------------------------------------------------------------------------


def _window_range(lo: int, hi: int, kernel: int, stride: int, pad_lo: int, size: int,
                  ) -> tuple[int, int, int, int]:
    """Input rows for output rows lo..hi: (first, last, padding before, padding after)."""
    first = lo * stride - pad_lo
    last = hi * stride - pad_lo + kernel - 1
    return max(first, 0), min(last, size - 1), max(0, -first), max(0, last - (size - 1))


def is_local(layer: dnn.LayerOp) -> bool:
    """Can part of the output be computed from part of the input? (Layout changes and
    unknown layers need all of it.)"""
    return not isinstance(layer, (dnn.TransposeOp, dnn.BroadcastOp, dnn.StridedSliceOp,
                                  dnn.GenericLayerOp,
                                  *dnn.VIEW_CLASSES))


def _conv_channels(c: int, g: int, k: int, k0: int, k1: int) -> tuple[int, int]:
    """Input channels output channels k0..k1 of a convolution with C = `c` inputs, K = `k`
    outputs and g groups read: all of them, or with g groups those of the groups k0..k1 fall
    in (group k // (K/g) reads channels [group * C/g, (group+1) * C/g))."""
    k_per, c_per = k // g, c // g
    return (k0 // k_per) * c_per, (k1 // k_per + 1) * c_per - 1


def _lrn_channels(before: int, after: int, channels: int, c0: int,
                  c1: int) -> tuple[int, int]:
    """Input channels an LRN's output channels c0..c1 read (reaching `before` and `after`
    channels over `channels`): their channel windows, clipped."""
    return max(0, c0 - before), min(channels - 1, c1 + after)


def _shuffled_channels(g: int, channels: int, c0: int, c1: int) -> tuple[int, int]:
    """The first and last input channel a channel shuffle's outputs c0..c1 come from, with g
    groups over `channels` input channels. Output c = j*g + i is input i*(C/g) + j: per
    residue i (at most g of them) the outputs with that residue run from j_first to j_last, so
    the bounds come from at most g residues, not from every channel of the range."""
    per = channels // g
    first, last = None, None
    for c in range(c0, min(c1, c0 + g - 1) + 1):
        i = c % g
        top = c1 - (c1 - i) % g       # the last output channel <= c1 with residue i
        low, high = i * per + c // g, i * per + top // g
        first = low if first is None else min(first, low)
        last = high if last is None else max(last, high)
    return first, last


# What `input_box` reads of a layer, by rule (the first item of `input_facts`).
_WHOLE, _WINDOW, _SHUFFLE, _LRN, _DENSE, _MATMUL, _POINTWISE = range(7)


def input_facts(layer: dnn.LayerOp) -> tuple:
    """Everything `input_box` reads of `layer`, whatever the output box, as plain values:
    (rule, input shapes, rule parameters). A pass that asks for the receptive fields of many
    boxes of one layer (every workload, every candidate split) reads them once per layer and
    passes them to `input_box`; the layer must not change in between."""
    shapes = tuple(tuple(dnn.fmap(value).nchw) for value in layer.inputs)
    if not is_local(layer):
        return _WHOLE, shapes, None
    if isinstance(layer, dnn.WindowOp):
        (r, s), (sh, sw), (pt, _, pl, _) = layer.window, layer.strides, layer.pads
        conv = (shapes[0][1], layer.group_count, layer.out_type.nchw[1]) \
            if isinstance(layer, dnn.Conv2dOp) else None
        return _WINDOW, shapes, (r, s, sh, sw, pt, pl, conv)
    if isinstance(layer, dnn.ChannelShuffleOp):
        return _SHUFFLE, shapes, (layer.group_count, shapes[0][1])
    if isinstance(layer, dnn.LrnOp):
        return _LRN, shapes, (*layer.channel_reach, shapes[0][1])
    if isinstance(layer, dnn.DenseOp):
        return _DENSE, shapes, None
    if isinstance(layer, dnn.MatmulOp):
        return _MATMUL, shapes, layer.trans_b
    return _POINTWISE, shapes, layer.axis_index if isinstance(layer, dnn.ReduceOp) else None


def input_box(layer: dnn.LayerOp, index: int, out: Box, facts: tuple | None = None,
              ) -> tuple[Box, list[int]]:
    """The box of activation input `index` that output box `out` needs, and the padding
    [top, bottom, left, right] the layer applies around it (`facts`: `input_facts(layer)`,
    when the caller has them)."""
    rule, shapes, params = input_facts(layer) if facts is None else facts
    shape = shapes[index]
    (n0, c0, h0, w0), (n1, c1, h1, w1) = out
    no_pad = [0, 0, 0, 0]
    if rule == _WHOLE:
        return whole(shape), no_pad
    if rule == _WINDOW:
        r, s, sh, sw, pt, pl, conv = params
        ha, hb, top, bottom = _window_range(h0, h1, r, sh, pt, shape[2])
        wa, wb, left, right = _window_range(w0, w1, s, sw, pl, shape[3])
        cs = _conv_channels(*conv, c0, c1) if conv is not None else (c0, c1)
        return ([n0, cs[0], ha, wa], [n1, cs[1], hb, wb]), [top, bottom, left, right]
    if rule == _SHUFFLE:
        first, last = _shuffled_channels(*params, c0, c1)
        return ([n0, first, h0, w0], [n1, last, h1, w1]), no_pad
    if rule == _LRN:
        first, last = _lrn_channels(*params, c0, c1)
        return ([n0, first, h0, w0], [n1, last, h1, w1]), no_pad
    if rule == _DENSE:
        return ([n0, 0, 0, 0], [n1, shape[1] - 1, shape[2] - 1, shape[3] - 1]), no_pad
    if rule == _MATMUL:
        if index == 0:   # a [N, K, M, 1]: all K for output rows h0..h1
            return ([n0, 0, h0, 0], [n1, shape[1] - 1, h1, 0]), no_pad
        nb = (n0, n1) if shape[0] > 1 else (0, 0)
        if params:  # trans_b: b [N, K, J, 1]
            return ([nb[0], 0, c0, 0], [nb[1], shape[1] - 1, c1, 0]), no_pad
        return ([nb[0], c0, 0, 0], [nb[1], c1, shape[2] - 1, 0]), no_pad
    lower, upper = list(out[0]), list(out[1])
    if params is not None:      # a reduction: all of its axis
        lower[params], upper[params] = 0, shape[params] - 1
    for d in range(4):  # broadcast dims
        if shape[d] == 1:
            lower[d] = upper[d] = 0
    return (lower, upper), no_pad


def intersect(a: Box, b: Box) -> Box | None:
    (al, au), (bl, bu) = a, b
    if len(al) == 4 and len(bl) == 4:   # the common case, unrolled (called per block pair)
        # Dim by dim, stopping at the first that does not overlap (most pairs do not meet).
        l0 = al[0] if al[0] > bl[0] else bl[0]
        u0 = au[0] if au[0] < bu[0] else bu[0]
        if l0 > u0:
            return None
        l1 = al[1] if al[1] > bl[1] else bl[1]
        u1 = au[1] if au[1] < bu[1] else bu[1]
        if l1 > u1:
            return None
        l2 = al[2] if al[2] > bl[2] else bl[2]
        u2 = au[2] if au[2] < bu[2] else bu[2]
        if l2 > u2:
            return None
        l3 = al[3] if al[3] > bl[3] else bl[3]
        u3 = au[3] if au[3] < bu[3] else bu[3]
        if l3 > u3:
            return None
        return [l0, l1, l2, l3], [u0, u1, u2, u3]
    lower = [max(x, y) for x, y in zip(al, bl, strict=False)]
    upper = [min(x, y) for x, y in zip(au, bu, strict=False)]
    return None if any(lo > hi for lo, hi in zip(lower, upper, strict=False)) else (lower, upper)


def meets(a: Box, b: Box) -> bool:
    """Whether `intersect(a, b)` is not None, without building the intersection."""
    (al, au), (bl, bu) = a, b
    if len(al) == 4 and len(bl) == 4:   # the common case, unrolled (called per block pair)
        # Each dim as `intersect` tests it (max of the lowers <= min of the uppers), so that an
        # empty box (lower > upper) meets nothing here either.
        return ((al[0] if al[0] > bl[0] else bl[0]) <= (au[0] if au[0] < bu[0] else bu[0])
                and (al[1] if al[1] > bl[1] else bl[1]) <= (au[1] if au[1] < bu[1] else bu[1])
                and (al[2] if al[2] > bl[2] else bl[2]) <= (au[2] if au[2] < bu[2] else bu[2])
                and (al[3] if al[3] > bl[3] else bl[3]) <= (au[3] if au[3] < bu[3] else bu[3]))
    return intersect(a, b) is not None


def union(a: Box, b: Box) -> Box:
    (al, au), (bl, bu) = a, b
    if len(al) == len(bl) == len(au) == len(bu) == 4:   # the usual case, unrolled
        return ([al[0] if al[0] < bl[0] else bl[0], al[1] if al[1] < bl[1] else bl[1],
                 al[2] if al[2] < bl[2] else bl[2], al[3] if al[3] < bl[3] else bl[3]],
                [au[0] if au[0] > bu[0] else bu[0], au[1] if au[1] > bu[1] else bu[1],
                 au[2] if au[2] > bu[2] else bu[2], au[3] if au[3] > bu[3] else bu[3]])
    return ([min(x, y) for x, y in zip(a[0], b[0], strict=True)],
            [max(x, y) for x, y in zip(a[1], b[1], strict=True)])


def relative(inner: Box, outer: Box) -> Box:
    """`inner` in coordinates relative to `outer`'s lower corner."""
    return ([a - o for a, o in zip(inner[0], outer[0], strict=False)],
            [u - o for u, o in zip(inner[1], outer[0], strict=False)])


# ---------------------------------------------------------------------------------------------
# Cycles
# ---------------------------------------------------------------------------------------------

VP_COSTS: dict[str, tuple[str, int, int]] = {
    # operation: (bytes counted, bytes per cycle, fixed cycles); exact on the ResNet-34 IR.
    "quantize": ("in", 8, 14),
    "dequantize": ("out", 32, 28),
    "element_wise_add": ("in", 32, 18),
    "max_pool2d": ("in", 32, 16),
    "avg_pool2d": ("in", 32, 21),
    "lrn": ("in", 32, 16),
    # ^ no public IR has one: priced like the other vector ops (one pass over the input, its
    # channel-window sums kept in the vector unit), with the common 16-cycle start.
}
DEFAULT_VP_COST = ("in", 32, 18)


def vp_kind(layer: dnn.LayerOp) -> str:
    """`quantize` layers that produce 16-bit data are dequantizations."""
    if isinstance(layer, dnn.QuantizeOp) and layer.out_type.bits > 8:
        return "dequantize"
    return layer.op_name


def vp_cycles(layer: dnn.LayerOp, in_bytes: int, out_bytes: int) -> float:
    basis, rate, fixed = VP_COSTS.get(vp_kind(layer), DEFAULT_VP_COST)
    return (in_bytes if basis == "in" else out_bytes) / rate + fixed


def pe_cycles(layer: dnn.LayerOp, out: Box, in_bytes: int, direct_weight_bytes: int) -> float:
    """A PE tile: MACs on the 4096-MAC array (input channels padded to 8, output channels to the
    64 K lanes) with ~1% overhead
    and 200 cycles of fill, or reading its input (88 B/cycle, twice for strided 1x1 reuse) or
    its DRAM-fed weights (96 B/cycle), whichever is slower."""
    n, k, h, w = box_size(out)
    if isinstance(layer, dnn.MatmulOp):
        depth, bits = dnn.fmap(layer.inputs[0]).nchw[1], dnn.fmap(layer.inputs[0]).bits
        reduction = -(-depth // channel_align(bits)) * channel_align(bits)
    else:
        reduction = conv_reduction(layer)
    lanes = GeminiHardware.pe_k_lanes
    macs = n * -(-k // lanes) * lanes * h * w * reduction
    compute = macs / GeminiHardware.pe_macs_per_cycle * 1.01 + 200
    weights = 2 * direct_weight_bytes / 96 if h * w >= 8 else 0.0
    return max(compute, 2 * in_bytes / 88, weights)


def conv_reduction(layer: dnn.LayerOp) -> int:
    """MACs per output element on the PE array: the input channels padded to channel groups
    times R*S, divided by the groups of a grouped convolution (each output channel reduces
    over its own group only: cost scaled by 1/g, the padding taken over all channels)."""
    ftype = _weight_type(layer)
    if ftype is None:
        _, c, rs = weight_geometry(layer)   # (fails as it always did: no weights)
    _, c, rs = _geometry(ftype)
    groups = layer.group_count if isinstance(layer, dnn.Conv2dOp) else 1
    # Asked per PE workload by the cycle model: kept on the (immutable) weight type, per group
    # count (the only input not on the type).
    found = ftype.__dict__.get("_planc_reductions")
    if found is None:
        found = ftype.__dict__["_planc_reductions"] = {}
    reduction = found.get(groups)
    if reduction is None:
        align = channel_align(ftype.bits)
        reduction = found[groups] = -(-(-(-c * groups // align) * align * rs) // groups)
    return reduction


def stream_time(tile_cycles: Sequence[float], tile_units: int) -> float:
    """A weight-streaming workload (WL0 fed from L2 one tile ahead): the first tile's weights
    load (L cycles), then each tile computes while the next one's weights load, so the time is
    `L + sum(max(c_i, L) for all but the last) + c_last` (exact on all public IRs)."""
    if not tile_cycles:
        return 0.0
    return tile_units + sum(max(c, tile_units) for c in tile_cycles[:-1]) + tile_cycles[-1]


def dt_cycles(in_bytes: int) -> float:
    """A layout change on the data-transfer engine: one pass over the data at 32 B/cycle."""
    return in_bytes / 32 + 16
