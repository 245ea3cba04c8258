"""Import Gemini scheduler IR documents (`*_stschedule.json`) into the `gemini` dialect.

The importer is driven by the dialects' field tables (`gemini.Field`): each JSON object becomes
one record op stamped with its JSON path, typed members become properties, and members the
tables do not name are kept in `extra`. Shapes and types are checked here (with the JSON path);
the rules that relate fields to each other are the ops' verifiers.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import ArrayAttr, ModuleOp, NoneAttr, StringAttr
from xdsl.ir import Attribute, Block, Operation, Region
from xdsl.utils.exceptions import VerifyException

from dialects import gemini
from dialects.gemini import Field, Kind
from dialects.json_value import dict_attr
from dialects.locations import json_location
from ground.json_reader import JsonNode

DRAM_KEY = "-1"


def import_document(doc: JsonNode) -> ModuleOp:
    doc.as_dict()
    body: list[Operation] = []
    for key, node in doc.items():
        if key == DRAM_KEY:
            body.append(read_dram(node))
        elif is_core_key(key):
            body.append(read_core(int(key), node))
    skip = {k for k in doc.as_dict() if k == DRAM_KEY or is_core_key(k)}
    props, extra = read_fields(doc, gemini.ScheduleOp.FIELDS, skip)
    schedule = gemini.ScheduleOp.build(extra, **props)
    schedule.add_region(Region(Block(body)))
    schedule.location = json_location(doc.path)
    return ModuleOp([schedule])


def is_core_key(key: str) -> bool:
    """Core ids are the canonical decimal keys "0", "1", ... ("-1" is DRAM)."""
    return key.isdigit() and str(int(key)) == key


# ---------------------------------------------------------------------------------------------
# Fields
# ---------------------------------------------------------------------------------------------


def read_fields(node: JsonNode, fields: tuple[Field, ...], skip: set[str] | frozenset[str] = (),
                ) -> tuple[dict[str, Attribute], Any]:
    """The typed properties of `fields` found in `node`, and its other members (for `extra`)."""
    props: dict[str, Attribute] = {}
    for field in fields:
        member = node.get(field.key)
        if member is None:
            if field.required:
                raise node.error(f"missing required key '{field.key}'")
            continue
        props[field.prop] = read_value(member, field.kind)
    known = {f.key for f in fields} | set(skip)
    return props, dict_attr(node.unknown_members(known))


def read_value(node: JsonNode, kind: Kind) -> Attribute:
    match kind:
        case Kind.INT:
            return gemini.int_attr(node.as_int())
        case Kind.INTS:
            return gemini.ints_attr(node.as_int_list())
        case Kind.ROWS:
            node.as_list()
            return gemini.rows_attr([row.as_int_list() for row in node.elements()])
        case Kind.STR:
            return StringAttr(node.as_str())
        case Kind.BOOL:
            return gemini.bool_attr(node.as_bool())
        case Kind.NUMBER:
            return gemini.number_attr(node.as_number())
        case Kind.ORDER:
            return NoneAttr() if node.value is None else gemini.int_attr(node.as_int())
        case Kind.DESTS:
            return ArrayAttr([read_record_attr(e, gemini.DestinationAttr)
                              for e in node.elements()])
        case Kind.SOURCES:
            return ArrayAttr([read_record_attr(e, gemini.SourceAttr) for e in node.elements()])
    raise AssertionError(kind)


def read_record_attr(node: JsonNode, cls: type[gemini.RecordAttr]) -> gemini.RecordAttr:
    props, extra = read_fields(node, cls.FIELDS)
    try:
        return cls.from_fields(props, extra)
    except VerifyException as e:
        raise node.error(str(e)) from None


def read_record(node: JsonNode, cls: type[gemini.RecordOp], **more: Attribute) -> Operation:
    props, extra = read_fields(node, cls.FIELDS)
    op = cls.build(extra, **props, **more)
    op.location = json_location(node.path)
    return op


# ---------------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------------


def read_dram(node: JsonNode) -> gemini.DramOp:
    node.as_dict()
    ops: list[Operation] = []
    lists = []
    for key, cls in (("in", gemini.DramStoreOp), ("out", gemini.DramLoadOp)):
        member = node.get(key)
        if member is not None:
            lists.append(StringAttr(key))
            ops += [read_record(e, cls) for e in member.elements()]
    dram = gemini.DramOp.create(properties={"lists": ArrayAttr(lists)},
                                regions=[Region(Block(ops))])
    extra = dict_attr(node.unknown_members({"in", "out"}))
    if extra is not None:
        dram.extra = extra
    dram.location = json_location(node.path)
    return dram


def read_core(core_id: int, node: JsonNode) -> gemini.CoreOp:
    core = gemini.CoreOp.new(core_id, [read_workload(e) for e in node.elements()])
    core.location = json_location(node.path)
    return core


WORKLOAD_CHILDREN = frozenset({*gemini.WORKLOAD_LISTS, "weight", *gemini.WL0_KEYS})


def read_workload(node: JsonNode) -> gemini.WorkloadOp:
    props, extra = read_fields(node, gemini.WorkloadOp.FIELDS, WORKLOAD_CHILDREN)
    children: list[Operation] = []
    lists: list[str] = []

    def each(key: str):
        member = node.get(key)
        if member is None:
            return []
        lists.append(key)
        return member.elements()

    children += [read_record(e, gemini.IfmapOp) for e in each("ifmap")]
    children += [read_record(e, gemini.OfmapOp) for e in each("ofmap")]
    weight = node.get("weight")
    if weight is not None:
        children.append(read_record(weight, gemini.WeightOp))
    children += [read_record(e, gemini.L2TensorOp) for e in each("buffer")]
    wl0_keys = [k for k in gemini.WL0_KEYS if node.has(k)]
    if len(wl0_keys) > 1:
        raise node.error("a workload has one WL0 list, got both wl0_buffer and wl1_buffer")
    if wl0_keys:
        key = wl0_keys[0]
        props["wl0_key"] = StringAttr(key)
        if node[key].value is None:
            props["wl0_null"] = gemini.bool_attr(True)
        else:
            children += [read_record(e, gemini.Wl0TensorOp) for e in each(key)]
    tiles = node.get("tile_info")
    if tiles is not None:
        lists.append("tile_info")
        children += [read_record(t, gemini.TileOp, key=StringAttr(k)) for k, t in tiles.items()]
    props["lists"] = ArrayAttr([StringAttr(k) for k in lists if k in gemini.WORKLOAD_LISTS])
    op = gemini.WorkloadOp.build(extra, **props)
    op.add_region(Region(Block(children)))
    op.location = json_location(node.path)
    return op


def describe(module: ModuleOp) -> str:
    """One line for `planc check`: cores, workloads, DRAM traffic."""
    schedule = next(op for op in module.ops if isinstance(op, gemini.ScheduleOp))
    workloads = list(schedule.workloads())
    dram = schedule.dram
    stores, loads = (len(dram.stores), len(dram.loads)) if dram else (0, 0)
    mesh = f"{schedule.value('xlen')}x{schedule.value('ylen')}"
    return (f"{len(schedule.cores)} core(s) on a {mesh} mesh, {len(workloads)} workloads, "
            f"DRAM {stores} block{'s' * (stores != 1)} in / {loads} block{'s' * (loads != 1)} "
            "out")

