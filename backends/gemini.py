"""`--target gemini`: Gemini scheduler IR (`*_stschedule.json`).

From a scheduler IR document the target re-emits it (import, verify, export: a lossless round
trip); from a model (Gemini's frontend layer description, or an ARK model) it runs the scheduling
pipeline (`PIPELINE`, one pass per decision) and writes the schedule. The text is JsonCpp's
StyledWriter layout, which Gemini's own tools write.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import add
from typing import Any

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    ModuleOp,
    NoneAttr,
    StringAttr,
)
from xdsl.ir import Attribute

from backends.jsoncpp import (
    INDENT,
    Styled,
    int_array_text,
    object_heads,
    string_text,
    styled_json,
    write_value,
)
from dialects import gemini
from dialects.gemini import Kind
from dialects.json_value import dict_value
from ground.diagnostics import PlancError, UnsupportedInput, UsageError
from targets.gemini.model import check_bandwidth


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
    at the default 55% of L2 and fits at 41%), up to `compiler.pipeline.MAX_RETRIES` times. A
    budget the user gave with --l2-budget is kept: the error stands."""
    from targets.gemini.model import GeminiHardware
    from targets.gemini.plan import L2Overflow

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
        from passes.gemini_partition import MAX_WORKLOADS

        return (f"dnn-from-ark{{batch={batch} max_layers={MAX_WORKLOADS}}},"
                + schedule_pipeline(options, rebatch=False))
    raise UnsupportedInput("gemini", "a Gemini schedule", source_format)


def emit(module: ModuleOp, options: argparse.Namespace | None = None) -> str:
    """The schedule's text: what `styled_json(schedule_json(...))` gives, with the records
    written straight from their attributes (`StyledRecord`) instead of through dicts."""
    try:
        return styled_json(_schedule_json(find_schedule(module), styled_record))
    finally:
        _ATTR_JSON.clear()
        _SHAPES.clear()
        _TEXTS.clear()


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


def _schedule_json(schedule: gemini.ScheduleOp, record: Callable = record_json,
                   ) -> dict[str, Any]:
    """The schedule's JSON value; `record` gives each record's (`record_json`, or
    `styled_record` when the value is only written)."""
    out: dict[str, Any] = {}
    if schedule.dram is not None:
        out["-1"] = dram_json(schedule.dram, record)
    for core in schedule.cores:
        out[str(core.id)] = [workload_json(wl, record) for wl in core.workloads]
    out.update(record_json(schedule))
    return out


def dram_json(dram: gemini.DramOp, record: Callable = record_json) -> dict[str, Any]:
    out: dict[str, Any] = {}
    keys = dram.list_keys()
    if "in" in keys or dram.stores:
        out["in"] = [record(op) for op in dram.stores]
    if "out" in keys or dram.loads:
        out["out"] = [record(op) for op in dram.loads]
    out.update(dict_value(dram.extra))
    return out


def workload_json(wl: gemini.WorkloadOp, record: Callable = record_json) -> dict[str, Any]:
    out: dict[str, Any] = {}
    lists = wl.list_keys()
    # The entries by kind in one walk of the body (what `wl.children(kind)` gives per kind).
    entries = wl.grouped()
    for key, kind in (("ifmap", gemini.IfmapOp), ("ofmap", gemini.OfmapOp),
                      ("buffer", gemini.L2TensorOp)):
        items = entries.get(kind, ())
        if key in lists or items:
            out[key] = [record(op) for op in items]
    weights = entries.get(gemini.WeightOp)
    if weights:
        out["weight"] = record(weights[0])
    wl0 = entries.get(gemini.Wl0TensorOp, ())
    if wl.wl0_key is not None or wl0:
        key = wl.wl0_key.data if wl.wl0_key is not None else "wl0_buffer"
        out[key] = None if wl.wl0_null is not None and not wl0 else \
            [record(op) for op in wl0]
    tiles = entries.get(gemini.TileOp, ())
    if "tile_info" in lists or tiles:
        out["tile_info"] = {tile_key(t, i): record(t) for i, t in enumerate(tiles)}
    # The workload's own fields, then its lists (which win a clash, as they always did).
    return record(wl, out) if record is styled_record else record_json(wl) | out


def tile_key(tile: gemini.TileOp, index: int) -> str:
    return tile.key.data if tile.key is not None else f"tile_num_{index}"



# ---------------------------------------------------------------------------------------------
# Records written straight from their attributes
# ---------------------------------------------------------------------------------------------


_INT, _STR, _CACHED, _MORE, _RECORDS = range(5)
"""How `StyledRecord` writes a member: an i64's digits, a string's JSON text, a text kept per
attribute (arrays, booleans, numbers: the same few thousand attributes are listed again and
again), a value given with the record (a workload's lists), or a list of destinations or
sources (a text kept per list, else per destination or source: planc shares them)."""


@dataclass
class _Shape:
    """The members of records of one op class with one set of properties (and given values):
    their sorted keys, and per key how it is written."""

    keys: tuple[str, ...]
    members: list[tuple[str | None, int, Callable | None]]
    """(property or given key, how, converter) per key."""
    by_indent: dict[str, list[tuple]] = field(default_factory=dict)

    def at(self, indent: str) -> list[tuple]:
        """(head, property or key, how, converter, text per attribute id) per member."""
        rows = self.by_indent.get(indent)
        if rows is None:
            inner = indent + INDENT
            rows = self.by_indent[indent] = [
                (head, prop, how, convert,
                 _TEXTS.setdefault((convert, inner), {}) if how in (_CACHED, _RECORDS)
                 else None)
                for head, (prop, how, convert) in zip(object_heads(indent, self.keys),
                                                      self.members, strict=True)]
        return rows


_SHAPES: dict[tuple, _Shape | None] = {}
"""Per (op class, property names, given keys), the running `emit`'s record shape (None: write
the record through `record_json`)."""

_TEXTS: dict[tuple[Callable, str], dict[int, str]] = {}
"""Per (converter, indentation), the text of each attribute (by identity: the IR keeps every
attribute alive, unchanged, while `emit` runs) that the running `emit` wrote."""

_HOW = {Kind.INT: _INT, Kind.STR: _STR, Kind.DESTS: _RECORDS, Kind.SOURCES: _RECORDS}


def _shape(cls: type, props: tuple[str, ...], given: tuple[str, ...]) -> _Shape | None:
    """The shape of `cls` records with these properties and given keys; None when
    `record_json` must write them (extra members, a given key clashing with a field, or
    nothing to write)."""
    if "extra" in props:
        return None
    present = set(props)
    members = {f.key: (f.prop, _HOW.get(f.kind, _CACHED), _CONVERT[f.kind])
               for f in cls.FIELDS if f.prop in present}
    if not (members or given) or any(key in members for key in given):
        return None
    members |= {key: (key, _MORE, None) for key in given}
    keys = tuple(sorted(members))
    return _Shape(keys, [members[key] for key in keys])


class StyledRecord(Styled):
    """A record op (and the values given with it) that writes its JSON object itself."""

    __slots__ = ("op", "given", "shape")

    def __init__(self, op: gemini.RecordOp, given: dict[str, Any] | None, shape: _Shape):
        self.op, self.given, self.shape = op, given, shape

    def write(self, indent: str, out: list[str]) -> None:
        properties = self.op.properties
        inner = indent + INDENT
        append = out.append
        shape = self.shape
        rows = shape.by_indent.get(indent) or shape.at(indent)
        for head, prop, how, convert, texts in rows:
            append(head)
            if texts is not None:     # a text kept per attribute
                attr = properties[prop]
                text = texts.get(id(attr))
                if text is None:
                    start = len(out)
                    if how == _CACHED or not _write_records(attr.data, inner, out):
                        write_value(convert(attr), inner, out)
                    texts[id(attr)] = "".join(out[start:])
                else:
                    append(text)
            elif how == _INT:
                value = properties[prop].value.data
                if type(value) is int:
                    append(str(value))
                else:
                    write_value(value, inner, out)
            elif how == _STR:
                value = properties[prop].data
                if type(value) is str:
                    append(string_text(value))
                else:
                    write_value(value, inner, out)
            else:
                write_value(self.given[prop], inner, out)
        append("\n" + indent + "}")


def _write_records(items: tuple, indent: str, out: list[str]) -> bool:
    """Write a non-empty list of destinations or sources at `indent` (one per line, as the
    writer puts non-empty objects); False (nothing written) if the list is empty or one of
    them is not written straight (`_record_attr_text`)."""
    inner = indent + INDENT
    known = _TEXTS.get((_record_attr_text, inner))
    if known is None:
        known = _TEXTS[(_record_attr_text, inner)] = {}
    texts = [known.get(id(item)) or _record_attr_text(item, inner, known) for item in items]
    if not texts or None in texts:
        return False
    out.append("[\n" + inner + (",\n" + inner).join(texts) + "\n" + indent + "]")
    return True


def _record_attr_text(item: gemini.RecordAttr, indent: str, known: dict[int, str],
                      ) -> str | None:
    """The text of a destination or source at `indent`, written straight from its fields and
    kept in `known` for the next list naming it (planc shares them); None when
    `record_attr_json` and the writer must do it (extra members, no members, other kinds of
    fields)."""
    table = _ATTR_TABLES.get(type(item), _MISSING)
    if table is _MISSING:
        table = _attr_table(type(item))
    if table is None or item.extra.data:
        return None
    inner = indent + INDENT
    arrays = _TEXTS.get((gemini.ints, inner))
    if arrays is None:
        arrays = _TEXTS[(gemini.ints, inner)] = {}
    keys, values = [], []
    for key, prop, how, cls in table:
        # `item.field(prop)`, with the attribute class the kind holds tested first (an
        # isinstance test of NoneAttr per field was a tenth of the time)
        attr = getattr(item, prop)
        if type(attr) is not cls:
            if isinstance(attr, NoneAttr):
                continue
            return None
        if how == _INT:
            value = attr.value.data
            if type(value) is not int:
                return None
            text = str(value)
        elif how == _STR:
            value = attr.data
            if type(value) is not str:
                return None
            text = string_text(value)
        else:       # an int array, as `StyledRecord` keeps it
            text = arrays.get(id(attr))
            if text is None:
                text = arrays[id(attr)] = int_array_text(gemini.ints(attr), inner)
        keys.append(key)
        values.append(text)
    if not keys:
        return None
    shape = _ATTR_SHAPES.get((indent, tuple(keys)))
    if shape is None:
        shape = _attr_shape(indent, keys)
    heads, order = shape
    if order is not None:
        values = [values[i] for i in order]
    text = known[id(item)] = "".join(map(add, heads, values)) + "\n" + indent + "}"
    return text


_ATTR_SHAPES: dict[tuple[str, tuple[str, ...]], tuple[list[str], list[int] | None]] = {}
"""Per (indentation, keys present in field order), the member heads in key order and the
order of the members (None: the field order is the key order, as planc's classes have)."""


def _attr_shape(indent: str, keys: list[str]) -> tuple[list[str], list[int] | None]:
    order = sorted(range(len(keys)), key=keys.__getitem__)
    shape = _ATTR_SHAPES[(indent, tuple(keys))] = (
        object_heads(indent, tuple(keys[i] for i in order)),
        None if order == list(range(len(keys))) else order)
    return shape


_ATTR_TABLES: dict[type, tuple | None] = {}
_ATTR_CLASS = {_INT: IntegerAttr, _STR: StringAttr, _CACHED: DenseArrayBase}


def _attr_table(cls: type) -> tuple | None:
    """(key, property, how, attribute class) per field of a destination or source class; None
    if one of its kinds is not an integer, a string or an integer array, or two fields share
    a key."""
    table = _ATTR_TABLES.get(cls, _MISSING)
    if table is _MISSING:
        how = {Kind.INT: _INT, Kind.STR: _STR, Kind.INTS: _CACHED}
        table = tuple((f.key, f.prop, how.get(f.kind), _ATTR_CLASS.get(how.get(f.kind)))
                      for f in cls.FIELDS)
        if any(h is None for _, _, h, _ in table) or \
                len({k for k, *_ in table}) < len(table):
            table = None
        _ATTR_TABLES[cls] = table
    return table


def styled_record(op: gemini.RecordOp, given: dict[str, Any] | None = None,
                  ) -> StyledRecord | dict[str, Any]:
    """What `record_json(op) | given` writes as: a `StyledRecord`, or that dict itself when
    the record has extra members, a given key is also a field, or it is empty."""
    key = (type(op), tuple(op.properties), tuple(given) if given else ())
    shape = _SHAPES.get(key, _MISSING)
    if shape is _MISSING:
        shape = _SHAPES[key] = _shape(*key)
    if shape is None:
        return record_json(op) | given if given else record_json(op)
    return StyledRecord(op, given, shape)


_MISSING = object()
