"""Operators' remembered verdicts (`ArkOp.verify_quickly`, `verdict_key`), views' direct tests
(`ViewOp.verify_quickly`) and the walks the verifiers share decide as xDSL's own verification
does, with its messages.

Each op of generated, imported and planned models is verified the quick way first (so its
verdict is remembered), then broken in a way its key may or may not see (another buffer for a
result, another axis, shape or data type for an operand, a property dropped or retyped) and
judged again: the quick way (or, where it is unsure, `verify_op`) must say what
`op.verify_()` (xDSL's generic checks, then the op's rules) says. A key that left out what a
rule reads would let a broken op through on a remembered verdict: one test leaves the layouts
out of the key and watches the comparison fail.
"""

from __future__ import annotations

import random

import pytest
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import Block, Operation, Region
from xdsl.utils.exceptions import VerifyException

from compiler.pipeline import import_file, run_pipeline
from dialects import ark
from dialects.fast_verify import verify_op
from dialects.locations import verify_module
from dialects.utils import walk_ops
from frontends.model_zoo import generated
from tests.conftest import EXAMPLES


def outcome(check, op: Operation) -> str:
    try:
        check(op)
    except VerifyException as e:
        return f"error: {str(e).splitlines()[0]}"
    return "ok"


def quick_or_full(op: Operation) -> None:
    """What `dialects.locations.verify_module` runs for one op."""
    if not op.verify_quickly():
        verify_op(op)


def modules():
    yield generated(40)
    yield import_file(str(EXAMPLES / "attention.json"))[1]
    for example, device in (("ffn.json", "a100"), ("attention_nodes.json", "mi300x")):
        _, planned = import_file(str(EXAMPLES / example))
        run_pipeline(planned, f"ark-plan{{device={device}}}")
        yield planned
    stack = generated(30)
    run_pipeline(stack, "ark-default-plan{device=h100 partial-tiles=true}")
    yield stack


def _retensor(value, **changes):
    """`value`'s tensor with some parameters changed."""
    t = value.type
    fields = {"tensor_id": t.tensor_id, "dtype": t.data_type, "shape": t.shape_list,
              "buffer": t.buffer, "strides": t.strides_list, "offsets": t.offsets_list}
    fields.update(changes)
    return ark.TensorType.get(fields.pop("tensor_id"), fields.pop("dtype"),
                              fields.pop("shape"), fields.pop("buffer"), **fields)


def mutations(op: Operation, rng: random.Random):
    """(name, break it, undo it): each changes `op` in place."""
    results = list(op.results)
    if results:
        result, old_type = results[0], results[0].type
        other = ark.BufferAttr.get(old_type.buffer_id + 1000)
        yield "result on another buffer", \
            lambda: result.__setattr__("_type", _retensor(result, buffer=other)), \
            lambda: result.__setattr__("_type", old_type)
        shape = [d + 1 for d in old_type.shape_list]
        yield "result of another shape", \
            lambda: result.__setattr__("_type", _retensor(
                result, shape=shape, strides=shape, offsets=[0] * len(shape))), \
            lambda: result.__setattr__("_type", old_type)
    operands = list(op.operands)
    if operands:
        value = rng.choice(operands)
        old = value.type
        dtype = "FP32" if old.data_type != "FP32" else "FP16"
        yield "operand of another data type", \
            lambda: value.__setattr__("_type", _retensor(value, dtype=dtype)), \
            lambda: value.__setattr__("_type", old)
        yield "operand one dim shorter", \
            lambda: value.__setattr__("_type", _retensor(
                value, shape=old.shape_list[1:] or [2], strides=old.shape_list[1:] or [2],
                offsets=[0] * max(len(old.shape_list) - 1, 1))), \
            lambda: value.__setattr__("_type", old)
    props = op.properties
    for name in sorted(props):
        saved = props[name]
        yield f"drop {name}", lambda name=name: props.pop(name), \
            lambda name=name, saved=saved: props.__setitem__(name, saved)
        yield f"retype {name}", lambda name=name: props.__setitem__(name, StringAttr("x")), \
            lambda name=name, saved=saved: props.__setitem__(name, saved)
    for name, arg in (("axis", IntegerAttr(7, i64)), ("axis", IntegerAttr(0, i64)),
                      ("keep_dim", IntegerAttr(0, 1)), ("transpose_other", IntegerAttr(1, 1))):
        if name in type(op).get_irdl_definition().properties:
            saved = props.get(name)
            yield f"{name} {arg.value.data}", \
                lambda name=name, arg=arg: props.__setitem__(name, arg), \
                lambda name=name, saved=saved: props.pop(name) if saved is None \
                else props.__setitem__(name, saved)
    yield "attribute", lambda: op.attributes.__setitem__("note", StringAttr("x")), \
        lambda: op.attributes.pop("note")


def judged_alike(sample: int = 40, seed: int = 0) -> tuple[int, int]:
    """Compare the quick and generic verdicts on real ops and their mutations; return
    (ops compared, comparisons where the op was broken)."""
    rng = random.Random(seed)
    compared = broken = 0
    for module in modules():
        ops = [op for op in walk_ops(module) if isinstance(op, ark.ArkOp | ark.ViewOp)]
        for op in ops:
            assert outcome(quick_or_full, op) == outcome(lambda o: o.verify_(), op) == "ok"
        for op in rng.sample(ops, min(sample, len(ops))):
            quick_or_full(op)  # its verdict is remembered
            for name, break_it, undo in list(mutations(op, rng)):
                break_it()
                try:
                    expected = outcome(lambda o: o.verify_(), op)
                    assert outcome(quick_or_full, op) == expected, (op.name, name)
                finally:
                    undo()
                compared += 1
                broken += expected != "ok"
            assert outcome(quick_or_full, op) == "ok"
    return compared, broken


def test_remembered_verdicts_judge_real_and_broken_ops_as_xdsl():
    compared, broken = judged_alike()
    assert compared > 500 and broken > 300


def test_the_comparison_fails_when_the_key_misses_what_a_rule_reads(monkeypatch):
    """Layouts left out of the key: an operand of another shape or data type passes on
    the verdict of the op it was (the comparison must catch it)."""
    real = ark.verdict_key

    def without_layouts(op):
        found = real(op)
        if found is None:
            return None
        key, objects, types = found
        return key[:5], objects, types

    monkeypatch.setattr(ark, "verdict_key", without_layouts)
    ark._PASSED.clear()  # noqa: SLF001
    with pytest.raises(AssertionError):
        judged_alike(sample=10)
    ark._PASSED.clear()  # noqa: SLF001


def _binary(reads, out, *, cls=ark.AddOp):
    return cls("op", [v.result for v in reads], [out.result], [out.result.type])


def test_checks_still_fire_on_hand_built_ops_after_good_ones():
    """Two operators alike in everything the key holds but their result's buffer: the
    remembered verdict of the first does not let the second through."""
    def tensor(tid, buffer, shape=(4, 8)):
        return ark.TensorType.get(tid, "FP16", list(shape), ark.BufferAttr.get(buffer))

    a, b, out = ark.ViewOp(tensor(0, 0)), ark.ViewOp(tensor(1, 1)), ark.ViewOp(tensor(2, 2))
    good = _binary([a, b], out)
    bad = ark.AddOp("bad", [a.result, b.result], [out.result], [tensor(3, 9)])
    block = Block([a, b, out, good, bad])
    ModuleOp([ark.ModelOp(-1, 1, Region(block))])
    assert good.verify_quickly()
    assert ark.verdict_key(good)[0] == ark.verdict_key(bad)[0]
    with pytest.raises(VerifyException, match="must alias write tensor 2"):
        bad.verify_quickly()

    # a reduction like a verified one but for its axis (the key holds the axis itself)
    def reduce(axis):
        return ark.ReduceSumOp("r", [a.result], [out.result], [out.result.type],
                               args={"axis": IntegerAttr(axis, i64),
                                     "keep_dim": IntegerAttr(1, 1)})
    x = ark.ViewOp(tensor(4, 4, (4, 1)))
    fine = ark.ReduceSumOp("r", [a.result], [x.result], [x.result.type],
                           args={"axis": IntegerAttr(1, i64), "keep_dim": IntegerAttr(1, 1)})
    Block([fine])
    assert fine.verify_quickly()
    wrong = reduce(0)
    with pytest.raises(VerifyException, match="expected"):
        quick_or_full(wrong)


def test_views_quick_tests_agree_with_xdsl():
    tensor = ark.TensorType.get(0, "FP16", [4], ark.BufferAttr.get(0))
    source = ark.ViewOp(tensor)
    cases = {
        "declared": ark.ViewOp(tensor),
        "of a source": ark.ViewOp(tensor, source.result),
        "after": ark.ViewOp(tensor, source.result, [source.result]),
    }
    for view in list(cases.values()):
        for name, change in (
                ("no source but segments say one", lambda v: v.__setattr__("operands", [])),
                ("two sources", lambda v: v.__setattr__("operands",
                                                       [source.result, source.result])),
                ("extra property", lambda v: v.properties.__setitem__("x", StringAttr("x"))),
                ("attribute", lambda v: v.attributes.__setitem__("x", StringAttr("x"))),
                ("no segments", lambda v: v.properties.pop("operandSegmentSizes"))):
            copy = view.clone()
            change(copy)
            cases[f"{name}"] = copy
    for name, view in cases.items():
        quick = outcome(lambda v: v.verify_quickly() or verify_op(v), view)
        assert quick == outcome(lambda v: v.verify_(), view), name
    assert cases["declared"].verify_quickly() and cases["of a source"].verify_quickly()


def test_buffers_described_differently_are_found_past_shared_objects():
    """`check_buffers_consistent` skips buffer objects it has seen; an equal description in
    another object passes, a different one is refused, naming the first tensor."""
    plain, same, tagged = (ark.BufferAttr.get(5), ark.BufferAttr.get(5),
                           ark.BufferAttr.get(5, rank=1))
    def views(*buffers):
        return Block([ark.ViewOp(ark.TensorType.get(i, "FP16", [4], b))
                      for i, b in enumerate(buffers)])

    ark.check_buffers_consistent(views(plain, plain, same, same, plain))
    with pytest.raises(VerifyException,
                       match="buffer 5 is described differently by tensor 0 and tensor 4"):
        ark.check_buffers_consistent(views(plain, plain, same, same, tagged))


def test_walk_ops_is_operation_walk():
    module = generated(20)
    run_pipeline(module, "ark-plan{device=a100}")
    assert walk_ops(module) == list(module.walk())
    deep = ModuleOp([])
    current = deep
    for _ in range(80):  # past the depth where the walk takes a stack
        inner = ModuleOp([])
        current.body.block.add_op(inner)
        current = inner
    assert walk_ops(deep) == list(deep.walk())


def test_a_planned_model_verifies_and_keeps_its_verdicts_bounded():
    module = generated(200)
    verify_module(module)
    run_pipeline(module, "ark-plan{device=h100}")
    verify_module(module)
    assert 0 < len(ark._PASSED) <= 4096  # noqa: SLF001


@pytest.mark.parametrize("key", ["NumTasks", "NumWarps"])
def test_config_checks_fire_on_the_last_of_many_alike_operators(key):
    """A planned stack of alike blocks: its operators share verdict keys and Configs, so
    all but the first pass on remembered verdicts. The last operator of a tiled kind, given
    a Config that differs in one number, is still refused."""
    from dialects import plan
    from dialects.json_value import dict_attr, dict_value
    from ground.diagnostics import PlancError

    module = generated(30)
    run_pipeline(module, "ark-plan{device=a100}")
    verify_module(module)
    operators = [op for op in walk_ops(module) if isinstance(op, ark.ArkOp)
                 and op.properties.get("config") is not None
                 and plan._tiling(type(op)) == "tile"]  # noqa: SLF001
    last = operators[-1]
    config = dict_value(last.properties["config"])
    config[key] = config[key] + (1 if key == "NumTasks" else 64)
    last.properties["config"] = dict_attr(config)
    with pytest.raises(PlancError, match="tiling covers" if key == "NumTasks"
                       else "more than its task"):
        verify_module(module)
