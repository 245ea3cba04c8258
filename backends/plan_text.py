"""A plan's "denser JSON" text written straight from the IR.

`plan_text(p)` is exactly `denser_json(plan_json(p), PLAN_DEPTH)` (the current format), but the
document is never built: every member's text is made from the op's attributes where the layout
puts it. Above the depth limit the layout is fixed (a tensor, an argument, a Config member or a
task group per line), so each level is one object or array of texts made below it. Texts of
things the plan shares are made once: a tensor type (the result of one operator, read by
others), a Config (operators with one tiling share the attribute), an argument, a range.
Members the format does not model (`extra`) and anything unusual (a tensor or buffer with
extra keys) take the generic path, `json_format`'s, so the bytes are the same by
construction; `tests/plan/test_plan_text.py` compares both on every plan it can make.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import NoneAttr

from backends.ark_model import arg_json, buffer_json, tensor_json
from backends.json_format import (
    PLAN_DEPTH,
    DenseWriter,
    compact,
    dense_array,
    dense_object,
    quoted,
)
from backends.json_format import _key as json_key
from dialects import ark, plan
from dialects.ark import int_values
from dialects.json_value import dict_value
from dialects.utils import body_block, op_list


def _ints(values: tuple[int, ...]) -> str:
    """A list of ints as compact JSON (what `json.dumps` writes for Python ints)."""
    return "[" + ",".join(map(str, values)) + "]"


def _pairs(values: tuple[int, ...]) -> str:
    """Flat (rank, tag) values as the list of pairs the format writes."""
    return "[" + ",".join(f"[{values[i]},{values[i + 1]}]"
                          for i in range(0, len(values), 2)) + "]"


_NO_TAGS = ark._NO_INTS  # noqa: SLF001 -- the shared empty array of untagged buffers
_I4, _I5, _I6 = "  " * 4, "  " * 5, "  " * 6
_VIRTUAL = f',\n{_I5}"IsVirtual": true,\n{_I5}"ReadTensors": '
_NOT_VIRTUAL = f',\n{_I5}"IsVirtual": false,\n{_I5}"ReadTensors": '
_WRITES = f',\n{_I5}"WriteTensors": '
_RESULTS = f',\n{_I5}"ResultTensors": '
_ARGS = f',\n{_I5}"Args": '
_CONFIG = f',\n{_I5}"Config": '
_CLOSE4 = f"\n{_I4}}}"
_END5 = f"\n{_I5}]"
_I1, _I2, _I3 = "  ", "  " * 2, "  " * 3
_NEXT4 = ",\n" + "  " * 4
_END3 = f"\n{_I3}]"
_CLOSE2 = f"\n{_I2}}}"
"""The fixed text between an operator's members (depth 4, members at depth 5)."""


_ITEM = tuple.__getitem__
_TENSOR = ark.TensorType
_TYPE_OF = operator.attrgetter("_type")
"""`value.type`, without the property."""


def _lines5(lines: list[str]) -> str:
    """An array at depth 5 (an operator's tensors, a resource group's task groups) of
    lines made with their indentation."""
    if len(lines) == 1:
        return "[\n" + lines[0] + _END5
    return "[\n" + ",\n".join(lines) + "\n" + _I5 + "]" if lines else "[]"


def _children(op, cls: type) -> list:
    """`op.task_groups()` / `op.resource_groups()`: the ops of class `cls` in the body
    (its first region's block, made when missing as `body_block` does), in order."""
    region = op.regions[0]
    block = region._first_block  # noqa: SLF001 -- `region.blocks`, followed directly
    if block is None:
        return [child for child in op_list(body_block(region)) if isinstance(child, cls)]
    found = []
    child = block._first_op  # noqa: SLF001
    while child is not None:
        if type(child) is cls or isinstance(child, cls):
            found.append(child)
        child = child._next_op  # noqa: SLF001
    return found


@dataclass(frozen=True)
class _Kind:
    """What an operator class writes the same way every time: the text up to its Name, its
    usual IsVirtual, and its arguments' (key, property) in ARK's (alphabetical) order."""

    head: str
    virtual: bool
    args: tuple[tuple[str, str], ...]

    @staticmethod
    def of(cls: type[ark.ArkOp]) -> _Kind:
        return _Kind(f'{{\n{_I5}"Type": {quoted(cls.TYPE)},\n{_I5}"Name": ', cls.IS_VIRTUAL,
                     tuple(sorted((spec.key, spec.prop) for spec in cls.ARGS)))


class _PlanText:
    """The writer of one plan: memos of shared texts, by the identity of attributes the IR
    keeps alive while the text is made."""

    def __init__(self) -> None:
        self.tensors: dict[int, str] = {}
        self.arrays: dict[int, str] = {}
        self.layouts: dict[tuple[int, ...], str] = {}
        self.shared_layouts: dict[int, str] = {}
        self.tails: dict[tuple[str, int], str] = {}
        self.arg_objects: dict[tuple, str] = {}
        self.kinds: dict[type, _Kind] = {}
        self.buffers: dict[int, str] = {}
        self.args: dict[int, str] = {}
        self.configs: dict[int, str] = {}
        self.ranges: dict[int, str] = {}

    # -- depth 6 and below: compact texts ------------------------------------------------------

    def tensor_line(self, t: ark.TensorType) -> str:
        """A tensor's compact text as an element of an operator's tensor array (depth 6)."""
        found = self.tensors.get(id(t))
        if found is not None:
            return found
        fields = t.__dict__
        shared = fields.get("_planc_layout")
        layout = None if shared is None else self.shared_layouts.get(id(shared))
        if layout is not None and type(t) is _TENSOR:  # `_tensor`'s usual case, written out
            buffer = fields["buffer"]
            text = self.buffers.get(id(buffer)) or self.buffer(buffer)
            found = f'{_I6}{{"Id":{fields["id"].data},{layout},"Buffer":{text}}}'
        else:
            found = _I6 + self._tensor(t)
        self.tensors[id(t)] = found
        return found

    def _tensor(self, t: ark.TensorType) -> str:
        fields = t.__dict__
        shared = fields.get("_planc_layout")
        if shared is not None and type(t) is ark.TensorType:
            # The tuple of the tensor's data type, arrays and extra that tensors of one
            # layout share (`ark._layout_of`, kept with the immutable tensor).
            layout = self.shared_layouts.get(id(shared))
            if layout is None:
                if shared[-1].data:  # extra members
                    return compact(tensor_json(t))
                layout = self.shared_layouts[id(shared)] = self._layout(t)
        else:
            if t.extra.data:
                return compact(tensor_json(t))
            key = (id(t.dtype), id(t.shape), id(t.strides), id(t.offsets),
                   id(t.padded_shape), id(t.pads))
            layout = self.layouts.get(key)
            if layout is None:
                layout = self.layouts[key] = self._layout(t)
        buffer = fields["buffer"]
        text = self.buffers.get(id(buffer))
        if text is None:
            text = self.buffer(buffer)
        return f'{{"Id":{fields["id"].data},{layout},"Buffer":{text}}}'

    def _layout(self, t: ark.TensorType) -> str:
        """The members between a tensor's Id and Buffer, which tensors of one layout share
        (their attributes are shared: the memo is by their identity)."""
        ints = self.ints
        text = (f'"DataType":{quoted(t.dtype.data)},"Shape":{ints(t.shape)},'
                f'"Strides":{ints(t.strides)},"Offsets":{ints(t.offsets)}')
        if not isinstance(t.padded_shape, NoneAttr):
            text += f',"PaddedShape":{ints(t.padded_shape)}'
        if not isinstance(t.pads, NoneAttr):
            text += f',"Pads":{compact(list(t.pads.get_values()))}'
        return text

    def ints(self, array) -> str:
        """An integer array attribute's compact text (tensor types share their arrays)."""
        found = self.arrays.get(id(array))
        if found is None:
            found = self.arrays[id(array)] = _ints(int_values(array))
        return found

    def buffer(self, b: ark.BufferAttr) -> str:
        found = self.buffers.get(id(b))
        if found is None:
            if b.extra.data or not isinstance(b.is_external, NoneAttr):
                found = compact(buffer_json(b))
            elif b.send_tags is _NO_TAGS and b.recv_tags is _NO_TAGS:
                found = f'{{"Id":{b.id.data},"Rank":{b.rank.data},"SendTags":[],"RecvTags":[]}}'
            else:
                found = (f'{{"Id":{b.id.data},"Rank":{b.rank.data},'
                         f'"SendTags":{_pairs(int_values(b.send_tags))},'
                         f'"RecvTags":{_pairs(int_values(b.recv_tags))}}}')
            self.buffers[id(b)] = found
        return found

    def arg(self, attr) -> str:
        found = self.args.get(id(attr))
        if found is None:
            found = self.args[id(attr)] = compact(arg_json(attr))
        return found

    def range(self, attr: plan.RangeAttr) -> str:
        """A range's compact text."""
        found = self.ranges.get(id(attr))
        if found is None:
            found = self.ranges[id(attr)] = self.ints(attr.values)
        return found

    def task_group(self, tg: plan.TaskGroupOp) -> str:
        """A task group's line (depth 6)."""
        props = tg.properties
        extra = props.get("extra")
        if extra is not None and extra.data:
            from backends.plan_json import task_group_json

            return _I6 + compact(task_group_json(tg))
        return (f'{_I6}{{"TaskId":{props["task_id"].value.data},"TaskRange":'
                f'{self.range(props["task_range"])},"Granularity":'
                f'{props["granularity"].value.data}}}')

    # -- the levels above: objects and arrays of texts -----------------------------------------

    def config(self, op: ark.ArkOp) -> str:
        found = self.configs.get(id(op.config))
        if found is None:
            found = self.configs[id(op.config)] = dense_object(
                {k: compact(v) for k, v in dict_value(op.config).items()}, 5)
        return found

    def operator(self, op: ark.ArkOp) -> str:
        """An operator object (depth 4), as `operator_json` builds it."""
        props = op.properties
        extra = props.get("extra")
        if (extra is not None and extra.data) or props.get("extra_args") is not None:
            return self._operator(op)
        kind = self.kinds.get(type(op))
        if kind is None:
            kind = self.kinds[type(op)] = _Kind.of(type(op))
        reads, writes = op.operand_groups()
        virtual = props.get("virtual")
        is_virtual = kind.virtual if virtual is None else bool(virtual.value.data)
        args = self.arguments(kind, props) if kind.args else "{}"
        config = props.get("config")
        tail_key = (args, id(config))  # the Config attribute is kept alive by the IR
        tail = self.tails.get(tail_key)
        if tail is None:
            tail = _ARGS + args + _CLOSE4 if config is None else \
                _ARGS + args + _CONFIG + self.config(op) + _CLOSE4
            self.tails[tail_key] = tail
        tensors = self.tensors
        line = self.tensor_line
        if len(reads) == 1:  # the usual cases, `_lines5` of one or two lines, written out
            t = reads[0]._type  # noqa: SLF001 -- `value.type`, without the property
            read_text = "[\n" + (tensors.get(id(t)) or line(t)) + _END5
        elif len(reads) == 2:
            t, u = reads[0]._type, reads[1]._type  # noqa: SLF001
            read_text = "[\n" + (tensors.get(id(t)) or line(t)) + ",\n" + \
                (tensors.get(id(u)) or line(u)) + _END5
        else:
            read_text = _lines5([tensors.get(id(t)) or line(t) for t in map(_TYPE_OF, reads)])
        if len(writes) == 1:
            t = writes[0]._type  # noqa: SLF001
            write_text = "[\n" + (tensors.get(id(t)) or line(t)) + _END5
        else:
            write_text = _lines5([tensors.get(id(t)) or line(t)
                                  for t in map(_TYPE_OF, writes)])
        results = op.results
        if len(results) == 1:
            t = _ITEM(results, 0)._type  # noqa: SLF001 -- (`SSAValues` indexes in Python)
            result_text = "[\n" + (tensors.get(id(t)) or line(t)) + _END5
        else:
            result_text = _lines5([tensors.get(id(t)) or line(t)
                                   for t in map(_TYPE_OF, results)])
        return (f"{kind.head}{quoted(props['label'].data)}"
                f"{_VIRTUAL if is_virtual else _NOT_VIRTUAL}{read_text}{_WRITES}{write_text}"
                f"{_RESULTS}{result_text}{tail}")

    def arguments(self, kind: _Kind, props: dict) -> str:
        """The Args object (depth 5) of an operator of `kind` without unknown arguments:
        operators repeat the same few (shared) argument attributes, so the object's text is
        remembered by their identities."""
        attrs = tuple(props.get(name) for _, name in kind.args)
        key = (id(kind), *map(id, attrs))
        found = self.arg_objects.get(key)
        if found is None:
            arg = self.arg
            found = self.arg_objects[key] = dense_object(
                {key: arg(attr) for (key, _), attr in zip(kind.args, attrs, strict=True)
                 if attr is not None}, 5)
        return found

    def _operator(self, op: ark.ArkOp) -> str:
        """`operator` for any operator (one with extra members, too)."""
        reads, writes = op.operand_groups()
        line = self.tensor_line
        items = {
            "Type": quoted(op.ark_type),
            "Name": quoted(op.label.data),
            "IsVirtual": "true" if op.is_virtual else "false",
            "ReadTensors": _lines5([line(v.type) for v in reads]),
            "WriteTensors": _lines5([line(v.type) for v in writes]),
            "ResultTensors": _lines5([line(v.type) for v in op.results]),
            "Args": dense_object({key: self.arg(attr) for key, attr in op.arg_attrs().items()},
                                 5),
        }
        if op.config is not None:
            items["Config"] = self.config(op)
        self.add_extra(items, op.extra, 5)
        return dense_object(items, 4)

    def task(self, task: plan.TaskOp, ops: list[ark.ArkOp]) -> str:
        return "".join(self.task_pieces(task, ops))

    def task_pieces(self, task: plan.TaskOp, ops: list[ark.ArkOp]) -> list[str]:
        """A TaskInfo's text (depth 2) in pieces, for one join of the whole document (the
        operators' texts are most of a plan's bytes: copied once, not at every level)."""
        props = task.properties
        operator = self.operator
        extra = props.get("extra")
        if extra is None or not extra.data:
            # `dense_object` of the four members below, written out.
            pieces = [f'{{\n{_I3}"Id": {props["id"].value.data},\n{_I3}"NumWarps": '
                      f'{props["num_warps"].value.data},\n{_I3}"SramBytes": '
                      f'{props["sram_bytes"].value.data},\n{_I3}"Ops": ']
            if not ops:
                pieces.append("[]" + _CLOSE2)
                return pieces
            separator = "[\n" + _I4
            for op in ops:
                pieces += (separator, operator(op))
                separator = _NEXT4
            pieces.append(_END3 + _CLOSE2)
            return pieces
        texts = [_I4 + operator(op) for op in ops]
        items = {"Id": str(task.task_id), "NumWarps": str(task.warps),
                 "SramBytes": str(task.sram),
                 "Ops": "[\n" + ",\n".join(texts) + _END3 if texts else "[]"}
        self.add_extra(items, task.extra, 3)
        return [dense_object(items, 2)]

    def resource_group(self, rg: plan.ResourceGroupOp) -> str:
        props = rg.properties
        task_group = self.task_group
        ranges = self.ranges
        texts = []
        for name in ("processor_range", "warp_range", "sram_range"):
            attr = props[name]
            found = ranges.get(id(attr))
            texts.append(found if found is not None else self.range(attr))
        groups = _lines5([task_group(tg) for tg in _children(rg, plan.TaskGroupOp)])
        extra = props.get("extra")
        if extra is None or not extra.data:
            # `dense_object` of the four members below, written out.
            return (f'{{\n{_I5}"ProcessorRange": {texts[0]},\n{_I5}"WarpRange": {texts[1]},'
                    f'\n{_I5}"SramRange": {texts[2]},\n{_I5}"TaskGroups": {groups}{_CLOSE4}')
        items = {"ProcessorRange": texts[0], "WarpRange": texts[1], "SramRange": texts[2],
                 "TaskGroups": groups}
        self.add_extra(items, extra, 5)
        return dense_object(items, 4)

    def processor_group(self, pg: plan.ProcessorGroupOp) -> str:
        props = pg.properties
        texts = [_I4 + self.resource_group(rg)
                 for rg in _children(pg, plan.ResourceGroupOp)]
        groups = "[\n" + ",\n".join(texts) + _END3 if texts else "[]"
        processors = self.range(props["processor_range"])
        extra = props.get("extra")
        if extra is None or not extra.data:
            # `dense_object` of the two members below, written out.
            return (f'{{\n{_I3}"ProcessorRange": {processors},\n{_I3}"ResourceGroups": '
                    f'{groups}{_CLOSE2}')
        items = {"ProcessorRange": processors, "ResourceGroups": groups}
        self.add_extra(items, extra, 3)
        return dense_object(items, 2)

    def add_extra(self, items: dict[str, str], extra, depth: int) -> None:
        """`items.update(extra)` as the document does it (a key already there keeps its
        place and takes the new value), each value's text at `depth`."""
        if extra is None or not extra.data:
            return
        values = dict_value(extra)
        # A writer per call: its memo holds the texts of containers by identity, which
        # holds only while `values` is alive.
        dense = DenseWriter(PLAN_DEPTH)
        for key, value in values.items():
            items[key] = dense.text(value, depth)

    def plan(self, p: plan.PlanOp, legacy: bool) -> str:
        contents = plan.plan_contents(p)
        tasks = {task.task_id: task for task in contents.task_ops}  # as `p.tasks()`
        operators = contents.task_operators()
        task_infos: list[str] = []  # `dense_array` of the TaskInfos at depth 1, in pieces
        for task in tasks.values():
            task_infos.append(",\n" + _I2 if task_infos else "[\n" + _I2)
            task_infos += self.task_pieces(task, operators.get(task.task_id, []))
        task_infos.append("\n" + _I1 + "]" if task_infos else "[]")
        header: dict[str, Any] = {
            "Rank": compact(p.rank.value.data), "WorldSize": compact(p.world_size.value.data),
            "Architecture": None if p.arch_name is None else quoted(p.arch_name),
            "NumProcessors": str(p.processor_count),
            "NumWarpsPerProcessor": str(p.warps_per_processor),
            "TaskInfos": task_infos,
            "ProcessorGroups": dense_array(
                [self.processor_group(pg) for pg in contents.groups], 1),
        }
        if p.arch_name is None:
            del header["Architecture"]
        order = ([a.data for a in p.key_order.data] if p.key_order is not None
                 else list(plan.PlanOp.HEADER_KEYS))
        items = {key: header[key] for key in order if key in header}
        self.add_extra(items, p.extra, 1)
        if legacy:
            items.pop("Architecture", None)
        if not items:
            return "{}\n"
        # `dense_object(items, 0) + "\n"`, joined once (a member may be a list of pieces).
        pieces = ["{\n"]
        for key, value in items.items():
            if len(pieces) > 1:
                pieces.append(",\n")
            pieces.append(f"{_I1}{json_key(key)}: ")
            if type(value) is list:
                pieces += value
            else:
                pieces.append(value)
        pieces.append("\n}\n")
        return "".join(pieces)


def plan_text(p: plan.PlanOp, legacy: bool = False) -> str:
    """`denser_json(in_ark_format(plan_json(p), "current" or "legacy"), PLAN_DEPTH)`."""
    return _PlanText().plan(p, legacy)
