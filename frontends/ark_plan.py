"""Import ARK plan files into the `plan` dialect.

Operators are read with the model importer's machinery (`read_operator`), so tensors, arguments
and unknown fields behave exactly as in model files; each operator keeps its `Config` and the id
of its TaskInfo. A tensor no operator produced becomes an `ark.view` aliasing the newest result
on its buffer, which is how a plan expresses an in-place write. An operator repeated in several
TaskInfos (with other Configs) is imported once per TaskInfo; its copies' results do not shadow
the first.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import Block, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from dialects import ark, plan
from dialects.json_value import dict_attr
from dialects.locations import json_location
from dialects.utils import single_root
from frontends.ark_model import TensorTable, read_operator
from ground.json_reader import JsonNode

PLAN_KEYS = frozenset(plan.PlanOp.HEADER_KEYS)
TASK_KEYS = frozenset({"Id", "NumWarps", "SramBytes", "Ops"})
PROCESSOR_GROUP_KEYS = frozenset({"ProcessorRange", "ResourceGroups"})
RESOURCE_GROUP_KEYS = frozenset({"ProcessorRange", "WarpRange", "SramRange", "TaskGroups"})
TASK_GROUP_KEYS = frozenset({"TaskId", "TaskRange", "Granularity"})


def read_range(node: JsonNode) -> plan.RangeAttr:
    values = node.as_int_list(2, 3, min_value=0)
    try:
        return plan.range_attr(*values)
    except VerifyException as e:
        raise node.error(str(e)) from None


def _located(op, node: JsonNode):
    op.location = json_location(node.path)
    return op


class _PlanImporter:
    def __init__(self, doc: JsonNode):
        self.doc = doc
        self.block = Block()
        self.table = TensorTable(self.block)
        self.newest_on_buffer: dict[int, SSAValue] = {}
        self.first_op: dict[tuple[int, ...], dict] = {}

    def view_source(self, tensor: ark.TensorType) -> SSAValue | None:
        return self.newest_on_buffer.get(tensor.buffer_id)

    def run(self) -> ModuleOp:
        doc = self.doc
        for task in doc["TaskInfos"].elements():
            self.read_task(task)
        groups = [self.read_processor_group(pg) for pg in doc["ProcessorGroups"].elements()]
        self.block.add_ops(groups)
        architecture = doc.get("Architecture")
        result = plan.PlanOp(
            doc["Rank"].as_int(), doc["WorldSize"].as_int(lo=1),
            doc["NumProcessors"].as_int(), doc["NumWarpsPerProcessor"].as_int(),
            Region(self.block),
            architecture=None if architecture is None else architecture.as_str(),
            extra=dict_attr(doc.unknown_members(PLAN_KEYS)))
        order = [k for k in doc.as_dict() if k in PLAN_KEYS]
        if order != [k for k in plan.PlanOp.HEADER_KEYS if k in order]:
            result.key_order = ArrayAttr([StringAttr(k) for k in order])
        return ModuleOp([_located(result, doc)])

    def read_task(self, node: JsonNode) -> None:
        task_id = node["Id"].as_int()
        self.block.add_op(_located(plan.TaskOp(
            task_id, node["NumWarps"].as_int(), node["SramBytes"].as_int(),
            dict_attr(node.unknown_members(TASK_KEYS))), node))
        for op_node in node["Ops"].elements():
            repeat = self._is_repeat(op_node)
            op = read_operator(op_node, self.table, self.view_source,
                               extra_keys=frozenset({"Config"}), config_key="Config",
                               task_id=task_id, repeat=repeat)
            if not repeat:
                for value in op.result_tensors:
                    self.newest_on_buffer[value.type.buffer_id] = value

    def _is_repeat(self, op_node: JsonNode) -> bool:
        """Is this operator one an earlier TaskInfo already holds (results and all)?"""
        results = op_node.get("ResultTensors")
        if results is None or not isinstance(results.value, list) or not results.value:
            return False
        try:
            key = tuple(t["Id"] for t in results.value)
            hash(key)   # an Id of the wrong type is not a repeat: the operator's reader says why
        except (TypeError, KeyError):
            return False
        first = self.first_op.setdefault(key, op_node.as_dict())
        return first is not op_node.value and _without_config(first) == _without_config(
            op_node.value)

    def read_processor_group(self, node: JsonNode) -> plan.ProcessorGroupOp:
        plain = _plain_processor_group(node.value, node.path)
        if plain is not None:
            return plain
        groups = [self.read_resource_group(rg) for rg in node["ResourceGroups"].elements()]
        return _located(plan.ProcessorGroupOp(
            read_range(node["ProcessorRange"]), groups,
            dict_attr(node.unknown_members(PROCESSOR_GROUP_KEYS))), node)

    def read_resource_group(self, node: JsonNode) -> plan.ResourceGroupOp:
        task_groups = [_located(plan.TaskGroupOp(
            tg["TaskId"].as_int(), read_range(tg["TaskRange"]), tg["Granularity"].as_int(),
            dict_attr(tg.unknown_members(TASK_GROUP_KEYS))), tg)
            for tg in node["TaskGroups"].elements()]
        return _located(plan.ResourceGroupOp(
            read_range(node["ProcessorRange"]), read_range(node["WarpRange"]),
            read_range(node["SramRange"]), task_groups,
            dict_attr(node.unknown_members(RESOURCE_GROUP_KEYS))), node)


# A plan may hold a million processor groups. The usual group (exactly the known members,
# ranges of two or three non-negative integers, 64-bit task ids and granularities) is read
# here straight from the parsed JSON, without a checked node per member; anything else, every
# error included, returns None and takes the checked reader above, for the same ops or the
# same message. `tests/plan/test_plain_plan_import.py` compares the two op by op.

_I64 = (-(1 << 63), 1 << 63)


def _plain_range(value) -> plan.RangeAttr | None:
    if type(value) is not list or not 2 <= len(value) <= 3:
        return None
    for v in value:
        if type(v) is not int or not 0 <= v < _I64[1]:
            return None
    try:
        return plan.range_attr(*value)
    except (VerifyException, ValueError, OverflowError):
        return None


def _at(op, path: str):
    op.location = json_location(path)
    return op


def _plain_task_groups(value, path: str) -> list[plan.TaskGroupOp] | None:
    if type(value) is not list:
        return None
    groups = []
    for j, tg in enumerate(value):
        if type(tg) is not dict or tg.keys() != TASK_GROUP_KEYS:
            return None
        task, granularity = tg["TaskId"], tg["Granularity"]
        tasks = _plain_range(tg["TaskRange"])
        if (tasks is None or type(task) is not int or type(granularity) is not int
                or not _I64[0] <= task < _I64[1] or not _I64[0] <= granularity < _I64[1]):
            return None
        groups.append(_at(plan.TaskGroupOp(task, tasks, granularity),
                          f"{path}.TaskGroups[{j}]"))
    return groups


def _plain_processor_group(value, path: str) -> plan.ProcessorGroupOp | None:
    """The processor group `value` at `path`, or None where the checked reader must decide."""
    if type(value) is not dict or value.keys() != PROCESSOR_GROUP_KEYS:
        return None
    processors, listed = _plain_range(value["ProcessorRange"]), value["ResourceGroups"]
    if processors is None or type(listed) is not list:
        return None
    groups = []
    for i, rg in enumerate(listed):
        if type(rg) is not dict or rg.keys() != RESOURCE_GROUP_KEYS:
            return None
        rg_path = f"{path}.ResourceGroups[{i}]"
        ranges = [_plain_range(rg[key]) for key in ("ProcessorRange", "WarpRange", "SramRange")]
        tasks = _plain_task_groups(rg["TaskGroups"], rg_path)
        if None in ranges or tasks is None:
            return None
        groups.append(_at(plan.ResourceGroupOp(*ranges, tasks), rg_path))
    return _at(plan.ProcessorGroupOp(processors, groups), path)


def _without_config(op: dict) -> dict:
    return {k: v for k, v in op.items() if k != "Config"}


def import_document(doc: JsonNode) -> ModuleOp:
    if not isinstance(doc.value, dict):
        raise doc.expected("an ARK plan object")
    return _PlanImporter(doc).run()


def describe(module: ModuleOp) -> str:
    p = single_root(module, plan.PlanOp)
    operators = sum(len(ops) for ops in p.task_operators().values())
    return (f"rank {p.rank.value.data} of {p.world_size.value.data}, "
            f"{p.processor_count} processors x {p.warps_per_processor} warps, "
            f"{len(p.tasks())} tasks, {operators} operators, "
            f"{len(p.processor_groups())} processor groups")
