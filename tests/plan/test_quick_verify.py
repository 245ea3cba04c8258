"""Plan ops' quick verification (`verify_quickly`), the plan's tables and processor-group
trees against the generic ways: xDSL's own verification of each op, `walk_ops`, and the
`PlanOp` queries, on plans broken in every way a generated mutation can break them."""

from __future__ import annotations

import json

import pytest
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, i32, i64
from xdsl.ir import Block, Region
from xdsl.utils.exceptions import VerifyException

from dialects import plan
from dialects.locations import verify_module
from dialects.utils import walk_ops
from frontends.ark_plan import import_document
from ground.diagnostics import PlancError
from ground.json_reader import JsonNode
from tests.plan.fixtures import small_plan_doc


def small_plan() -> ModuleOp:
    module = import_document(JsonNode(small_plan_doc()))
    verify_module(module)
    return module


KINDS = (plan.TaskOp, plan.TaskGroupOp, plan.ResourceGroupOp, plan.ProcessorGroupOp)


def _set(name, value):
    def mutate(op):
        op.properties[name] = value
        return True
    return mutate


def _drop_first(op):
    name = next(iter(op.properties))
    del op.properties[name]
    return True


def _unknown_property(op):
    op.properties["unknown"] = IntegerAttr(1, i64)
    return True


def _attribute(op):
    op.attributes["note"] = StringAttr("x")
    return True


def _block_argument(op):
    if not op.regions:
        return False
    op.regions[0].block.insert_arg(i64, 0)
    return True


def _second_block(op):
    if not op.regions:
        return False
    op.regions[0].add_block(Block())
    return True


def _extra_region(op):
    op.add_region(Region(Block()))
    return True


def _bad_own_rule(op):
    """A value the op's own rules refuse (its class's)."""
    if isinstance(op, plan.TaskOp):
        op.properties["num_warps"] = IntegerAttr(0, i64)
    elif isinstance(op, plan.TaskGroupOp):
        op.properties["granularity"] = IntegerAttr(0, i64)
    elif isinstance(op, plan.ResourceGroupOp):
        op.properties["sram_range"] = plan.range_attr(0, 10, 2)
    else:
        op.properties["processor_range"] = plan.range_attr(0, 1)
    return True


GENERAL = {
    "none": lambda op: True,
    "extra dict": lambda op: op.properties.update(extra=DictionaryAttr({})) or True,
    "missing property": _drop_first,
    "unknown property": _unknown_property,
    "attribute": _attribute,
    "extra region": _extra_region,
    "own rule": _bad_own_rule,
}
REGIONS = {"block argument": _block_argument, "second block": _second_block}


def mutations(kind: type) -> dict:
    """What can go wrong with an op of `kind`: each property of another type (a string, an
    i32 integer, an i64 integer), the general mutations, and for containers their body."""
    found = dict(GENERAL)
    for name in kind.get_irdl_definition().properties:
        for label, value in (("string", StringAttr("x")), ("i32", IntegerAttr(1, i32)),
                             ("i64", IntegerAttr(1, i64))):
            found[f"{label} {name}"] = _set(name, value)
    if kind in (plan.ResourceGroupOp, plan.ProcessorGroupOp):
        found.update(REGIONS)
    return found


CASES = [pytest.param(kind, name, id=f"{kind.name}-{name}")
         for kind in KINDS for name in mutations(kind)]


def outcome(check) -> str:
    try:
        result = check()
    except VerifyException as e:
        return f"error: {str(e).splitlines()[0]}"
    return "ok" if result in (None, True) else "unsure"


@pytest.mark.parametrize("kind, mutation", CASES)
def test_quick_verification_agrees_with_xdsl(kind, mutation):
    module = small_plan()
    op = next(o for o in walk_ops(module) if type(o) is kind)
    assert mutations(kind)[mutation](op)
    quick = outcome(op.verify_quickly)
    generic = outcome(op.verify_)  # xDSL's generic checks, then the op's own rules
    if quick != "unsure":  # unsure: the caller asks xDSL (below, quick == "ok" is needed)
        assert quick == generic
    if mutation in ("none", "extra dict"):
        assert quick == "ok"  # the quick path is taken where nothing is unusual


def test_a_wrong_parent_is_left_to_xdsl():
    module = small_plan()
    tg = next(o for o in walk_ops(module) if isinstance(o, plan.TaskGroupOp))
    pg = next(o for o in walk_ops(module) if isinstance(o, plan.ProcessorGroupOp))
    tg.detach()
    pg.body.block.add_op(tg)
    assert outcome(tg.verify_quickly) == "unsure"
    assert outcome(tg.verify_) == "error: 'plan.task_group' expects parent op " \
        "'plan.resource_group'"


def errors_both_ways(module: ModuleOp, monkeypatch) -> tuple[str, str]:
    def message() -> str:
        try:
            verify_module(module)
        except PlancError as e:
            return str(e)
        except Exception as e:  # noqa: BLE001 (a malformed MLIR plan can crash both ways)
            return f"{type(e).__name__}: {e}"
        return "ok"

    quick = message()
    with monkeypatch.context() as m:
        m.setattr(plan._QuickVerify, "verify_quickly", lambda self: False)  # noqa: SLF001
        import dialects.locations as locations

        m.setattr(locations, "_QUICK", {})
        generic = message()
    return quick, generic


@pytest.mark.parametrize("kind, mutation", CASES)
def test_verify_module_reports_as_the_generic_way(kind, mutation, monkeypatch):
    """The first error of a broken plan (or the crash of one broken the way only MLIR can
    break it) is the same with the quick path."""
    module = small_plan()
    op = [o for o in walk_ops(module) if type(o) is kind][-1]
    assert mutations(kind)[mutation](op)
    quick, generic = errors_both_ways(module, monkeypatch)
    assert quick == generic


def test_the_comparison_can_fail(monkeypatch):
    """A quick path that accepted what xDSL refuses would show in the test above."""
    module = small_plan()
    op = next(o for o in walk_ops(module) if type(o) is plan.TaskGroupOp)
    _set("granularity", IntegerAttr(1, i32))(op)
    with monkeypatch.context() as m:
        m.setattr(plan.TaskGroupOp, "FORM", plan._Form(()))  # noqa: SLF001 (accepts anything)
        m.setattr(plan._Form, "holds", lambda self, op: True)  # noqa: SLF001
        quick, generic = errors_both_ways(module, monkeypatch)
    assert quick != generic


def test_tables_match_the_plan_queries():
    doc = small_plan_doc()
    copy = json.loads(json.dumps(doc["TaskInfos"][0]))
    copy["Id"] = 7
    copy["Ops"][0]["Config"]["NumWarps"] = 2
    doc["TaskInfos"].insert(1, copy)
    module = import_document(JsonNode(doc))
    p = module.ops.first
    contents = plan.plan_contents(p)
    assert contents.task_operators() == p.task_operators()
    assert contents.task_ops == list(p.tasks().values())
    assert contents.groups == p.processor_groups()


@pytest.mark.parametrize("odd", ["none", "op in processor group", "nested op",
                                 "op in resource group", "second block"])
def test_group_tree_lists_what_walk_ops_lists(odd):
    module = small_plan()
    pg = next(o for o in walk_ops(module) if isinstance(o, plan.ProcessorGroupOp))
    rg = pg.resource_groups()[0]
    if odd == "op in processor group":
        pg.body.block.add_op(plan.TaskOp(9, 1, 0))
    elif odd == "nested op":
        rg.body.block.add_op(plan.ResourceGroupOp(
            plan.range_attr(0, 1), plan.range_attr(0, 1), plan.range_attr(0, 1),
            [plan.TaskGroupOp(0, plan.range_attr(0, 1))]))
    elif odd == "op in resource group":
        rg.body.block.add_op(plan.TaskOp(9, 1, 0))
    elif odd == "second block":
        rg.body.add_block(Block([plan.TaskGroupOp(0, plan.range_attr(0, 1))]))
    tree = plan._group_tree(pg)  # noqa: SLF001
    assert tree.descendants == walk_ops(pg)[1:]
    if odd != "second block":  # (a region of two blocks has no `block` to list)
        assert tree.groups == [(r, r.task_groups()) for r in pg.resource_groups()]


@pytest.mark.parametrize("value", [StringAttr("x"), IntegerAttr(1, i64), None])
def test_a_processor_group_without_a_range_is_an_error_not_a_crash(value):
    """(Before, `planc check` of such an MLIR plan was a traceback.)"""
    module = small_plan()
    pg = [o for o in walk_ops(module) if isinstance(o, plan.ProcessorGroupOp)][-1]
    if value is None:
        del pg.properties["processor_range"]
    else:
        pg.properties["processor_range"] = value
    with pytest.raises(PlancError) as info:
        verify_module(module)
    assert "processor_range" in str(info.value) or "plan.range" in str(info.value)
    assert str(info.value).startswith("$.ProcessorGroups[2]: ")
