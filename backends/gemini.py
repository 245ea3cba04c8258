"""`--target gemini`: Gemini scheduler IR (`*_stschedule.json`).

From a scheduler IR document the target re-emits it (import, verify, export: a lossless round
trip); from a model (Gemini's frontend layer description, or an ARK model) it runs the scheduling
pipeline (`PIPELINE`, one pass per decision) and writes the schedule. The text is JsonCpp's
StyledWriter layout, which Gemini's own tools write.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp
from xdsl.ir import Attribute

from backends.jsoncpp import styled_json
from compiler.diagnostics import PlancError, UsageError
from dialects import gemini
from dialects.gemini import Kind
from dialects.json_value import dict_value


def schedule_pipeline(options: argparse.Namespace, rebatch: bool = True) -> str:
    """The passes that schedule a `dnn` graph onto the mesh and lower it to `gemini`
    (`rebatch`: set the batch with dnn-rebatch; ARK models get it from dnn-from-ark)."""
    xlen, ylen = parse_mesh(getattr(options, "mesh", None) or "1x1")
    buffer = _option(options, "buffer_size", DEFAULT_BUFFER)
    bandwidth = _option(options, "dram_bw", DEFAULT_DRAM_BW)
    batch = getattr(options, "batch", None)
    budget = getattr(options, "l2_budget", None)
    if budget is not None and not 0 < budget <= buffer:
        raise UsageError(f"--l2-budget: expected bytes in 1..{buffer} (the buffer), got {budget}")
    if buffer <= 0:
        raise UsageError(f"--buffer-size: expected a positive number of bytes, got {buffer}")
    check_bandwidth(bandwidth)
    if batch is not None and batch <= 0:
        raise UsageError(f"--batch: expected a positive batch size, got {batch}")
    for flag, value in (("--buffer-size", buffer), ("--batch", batch or 1)):
        if value > INT64_MAX:
            raise UsageError(f"{flag} {value} is more than the 2^63-1 the IR records")
    hw = f"buffer-size={buffer} dram-bw={pass_float(bandwidth)}"
    if budget is not None:
        hw += f" l2-budget={budget}"
    passes = [f"dnn-rebatch{{batch={batch}}}"] if batch and rebatch else []
    return ",".join([
        *passes,
        f"gemini-group-layers{{{hw} mesh={xlen}x{ylen}}}",
        f"gemini-batch-cut{{{hw}}}",
        f"gemini-partition{{buffer-size={buffer}}}",
        f"gemini-workloads{{buffer-size={buffer}}}",
        "gemini-receptive-field",
        "gemini-transfer-ids",
        f"gemini-dram-order{{{hw}}}",
        f"gemini-allocate-l2{{{hw}}}",
        f"gemini-wl0{{{hw}}}",
        f"gemini-cycles{{{hw}}}",
    ])


L2_RETRY_SHRINK = 0.75
"""Each new attempt plans with this share of the previous L2 budget."""


def retry(error: Exception, options: argparse.Namespace) -> argparse.Namespace | None:
    """Options for another attempt after `error`, or None. The layer groups are chosen by an
    estimate that spreads each group's feature maps evenly over the cores; the real cut can
    need more on one core (a layer cut by rows after one cut by samples gathers every sample's
    rows), and then gemini-dram-order finds a workload whose data overflow L2. The whole
    schedule is planned again with 3/4 of the budget (ResNet-34 at batch 16 on 2x2 overflowed
    at the default 55% of L2 and fits at 41%), up to `compiler.driver.MAX_RETRIES` times. A
    budget the user gave with --l2-budget is kept: the error stands."""
    from compiler.gemini_model import GeminiHardware
    from compiler.gemini_plan import L2Overflow

    tried = getattr(options, "l2_retries", 0)
    if not isinstance(error, L2Overflow) or (tried == 0 and
                                             getattr(options, "l2_budget", None) is not None):
        return None
    buffer = _option(options, "buffer_size", DEFAULT_BUFFER)
    current = getattr(options, "l2_budget", None) or int(
        GeminiHardware(buffer_bytes=buffer).planned_l2_bytes)
    budget = max(1, int(current * L2_RETRY_SHRINK))
    return argparse.Namespace(**{**vars(options), "l2_budget": budget, "l2_retries": tried + 1,
                                 "retry_note": f"--l2-budget {budget}"})


def _option(options: argparse.Namespace, name: str, default):
    value = getattr(options, name, None)
    return default if value is None else value


DEFAULT_BUFFER = 8 * 1024 * 1024
DEFAULT_DRAM_BW = 16.0
INT64_MAX = 2**63 - 1
"""The IR records sizes and batches as i64: a larger option was an internal error."""


def check_bandwidth(bandwidth: float) -> None:
    """`--dram-bw` is a finite positive number of GB/s: NaN passed `<= 0` and then failed
    turning cycles into integers (an internal error)."""
    if not (math.isfinite(bandwidth) and bandwidth > 0):
        raise UsageError(f"--dram-bw: expected a positive bandwidth in GB/s, got {bandwidth}")


def pass_float(value: float) -> str:
    """`value` as xDSL's pass-option parser reads it back: a float needs a decimal point
    before its exponent (`1e+300` is a syntax error there and `1e-05` a string)."""
    text = repr(float(value))
    mantissa, e, exponent = text.partition("e")
    return text if not e or "." in mantissa else f"{mantissa}.0e{exponent}"


MAX_MESH_CORES = 4096
"""The largest mesh planc schedules (64x64). The scheduling passes keep state per core (the
snake order, every layer's list of cores), so `--mesh 100000x100000` filled memory."""


def parse_mesh(text: str) -> tuple[int, int]:
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() and int(p) > 0 for p in parts):
        raise UsageError(f"--mesh: expected XxY with positive integers (e.g. 2x2), got '{text}'")
    xlen, ylen = int(parts[0]), int(parts[1])
    if xlen * ylen > MAX_MESH_CORES:
        raise UsageError(f"--mesh {xlen}x{ylen} has {xlen * ylen} cores, more than the "
                         f"{MAX_MESH_CORES} planc schedules")
    return xlen, ylen


def pipeline(source_format: str, options: argparse.Namespace) -> str:
    if source_format == "gemini-ir":
        return ""
    if source_format == "gemini-layers":
        return schedule_pipeline(options)
    if source_format == "ark-model":
        batch = getattr(options, "batch", None) or 1
        return f"dnn-from-ark{{batch={batch}}}," + schedule_pipeline(options, rebatch=False)
    raise PlancError(f"--target gemini cannot start from a {source_format or 'synthesized'} "
                     f"document (it takes Gemini scheduler IR, Gemini layer descriptions and "
                     f"ARK models)")


def emit(module: ModuleOp, options: argparse.Namespace | None = None) -> str:
    return styled_json(schedule_json(find_schedule(module)))


def find_schedule(module: ModuleOp) -> gemini.ScheduleOp:
    for op in module.ops:
        if isinstance(op, gemini.ScheduleOp):
            return op
    raise PlancError("the IR holds no gemini.schedule to emit (run the scheduling pipeline "
                     "first)")


# ---------------------------------------------------------------------------------------------
# IR -> JSON values
# ---------------------------------------------------------------------------------------------


def field_value(attr: Attribute, kind: Kind) -> Any:
    return _CONVERT[kind](attr)


def _records(attr: ArrayAttr) -> list[dict[str, Any]]:
    return [record_attr_json(a) for a in attr.data]


_CONVERT: dict[Kind, Callable[[Attribute], Any]] = {
    Kind.INT: lambda attr: attr.value.data,
    Kind.BOOL: lambda attr: bool(attr.value.data),
    Kind.INTS: gemini.ints,
    Kind.ROWS: gemini.rows,
    Kind.STR: lambda attr: attr.data,
    Kind.NUMBER: lambda attr: attr.value.data,
    Kind.ORDER: lambda attr: attr.value.data if isinstance(attr, IntegerAttr) else None,
    Kind.DESTS: _records,
    Kind.SOURCES: _records,
}
"""Each field kind's JSON value from its attribute."""


_FIELD_CONVERTERS: dict[int, tuple[tuple, list[tuple[str, str, Callable]]]] = {}
"""Per `FIELDS` tuple (by identity, kept alongside), each field's key, property and converter:
looking the converter up by `Kind` per record hashes the enum in Python ~100k times."""


def _converters(fields: tuple) -> list[tuple[str, str, Callable]]:
    known = _FIELD_CONVERTERS.get(id(fields))
    if known is None or known[0] is not fields:
        known = _FIELD_CONVERTERS[id(fields)] = (
            fields, [(f.key, f.prop, _CONVERT[f.kind]) for f in fields])
    return known[1]


def record_json(op: gemini.RecordOp) -> dict[str, Any]:
    properties = op.properties
    out = {key: convert(properties[prop]) for key, prop, convert in _converters(op.FIELDS)
           if prop in properties}
    extra = properties.get("extra")
    if extra is not None:
        out.update(dict_value(extra))
    return out


_ATTR_JSON: dict[int, tuple[gemini.RecordAttr, dict[str, Any]]] = {}
"""Destinations and sources already converted by the running `schedule_json`, by identity:
planc shares one attribute per value, so a schedule names the same few thousand many times.
(The attribute is kept with its JSON so that its id cannot be reused meanwhile.)"""


def record_attr_json(attr: gemini.RecordAttr) -> dict[str, Any]:
    known = _ATTR_JSON.get(id(attr))
    if known is not None:
        return known[1]
    out = {key: convert(value) for key, prop, convert in _converters(attr.FIELDS)
           if (value := attr.field(prop)) is not None}
    out.update(dict_value(attr.extra))
    _ATTR_JSON[id(attr)] = (attr, out)
    return out


def schedule_json(schedule: gemini.ScheduleOp) -> dict[str, Any]:
    try:
        return _schedule_json(schedule)
    finally:
        _ATTR_JSON.clear()


def _schedule_json(schedule: gemini.ScheduleOp) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if schedule.dram is not None:
        out["-1"] = dram_json(schedule.dram)
    for core in schedule.cores:
        out[str(core.id)] = [workload_json(wl) for wl in core.workloads]
    out.update(record_json(schedule))
    return out


def dram_json(dram: gemini.DramOp) -> dict[str, Any]:
    out: dict[str, Any] = {}
    keys = dram.list_keys()
    if "in" in keys or dram.stores:
        out["in"] = [record_json(op) for op in dram.stores]
    if "out" in keys or dram.loads:
        out["out"] = [record_json(op) for op in dram.loads]
    out.update(dict_value(dram.extra))
    return out


def workload_json(wl: gemini.WorkloadOp) -> dict[str, Any]:
    out = record_json(wl)
    lists = wl.list_keys()
    # The entries by kind in one walk of the body (what `wl.children(kind)` gives per kind).
    entries: dict[type, list] = {gemini.IfmapOp: [], gemini.OfmapOp: [], gemini.L2TensorOp: [],
                                 gemini.WeightOp: [], gemini.Wl0TensorOp: [], gemini.TileOp: []}
    for op in wl.body.block.ops:
        found = entries.get(type(op))
        if found is not None:
            found.append(op)
    for key, kind in (("ifmap", gemini.IfmapOp), ("ofmap", gemini.OfmapOp),
                      ("buffer", gemini.L2TensorOp)):
        items = entries[kind]
        if key in lists or items:
            out[key] = [record_json(op) for op in items]
    weights = entries[gemini.WeightOp]
    if weights:
        out["weight"] = record_json(weights[0])
    wl0 = entries[gemini.Wl0TensorOp]
    if wl.wl0_key is not None or wl0:
        key = wl.wl0_key.data if wl.wl0_key is not None else "wl0_buffer"
        out[key] = None if wl.wl0_null is not None and not wl0 else \
            [record_json(op) for op in wl0]
    tiles = entries[gemini.TileOp]
    if "tile_info" in lists or tiles:
        out["tile_info"] = {tile_key(t, i): record_json(t) for i, t in enumerate(tiles)}
    return out


def tile_key(tile: gemini.TileOp, index: int) -> str:
    return tile.key.data if tile.key is not None else f"tile_num_{index}"

