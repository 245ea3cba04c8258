"""`dialects.fast_verify.verify_op` decides as xDSL's `op.verify_()` does, with its message (and
`dialects.utils.verify_operation` as `op.verify()`).

Ops come from real modules (imported examples, planned ARK, TT and MLIR inputs of the lit
suite) and from random mutations of them that break the generic rules: a property removed or
added, an operand dropped or duplicated, a result type swapped, segment sizes rewritten.
"""

from __future__ import annotations

import random

import pytest
from xdsl.dialects.builtin import DenseArrayBase, IntAttr, IntegerAttr, StringAttr, i32
from xdsl.ir import Block, Operation
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from compiler.pipeline import import_file, run_pipeline
from dialects.fast_verify import verify_op
from dialects.utils import verify_operation
from frontends.model_zoo import generated
from tests.conftest import EXAMPLES


def outcome(check, op: Operation) -> str | None:
    try:
        check(op)
    except (VerifyException, DiagnosticException) as e:
        return f"{type(e).__name__}: {e}"
    return None


def modules():
    for name in ("ffn.json", "attention.json", "allreduce_rank0.json"):
        yield import_file(str(EXAMPLES / name))[1]
    _, planned = import_file(str(EXAMPLES / "ffn.json"))
    run_pipeline(planned, "ark-plan{device=a100}")
    yield planned
    _, scheduled = import_file(str(EXAMPLES / "attention.json"))
    run_pipeline(scheduled, "ark-to-sched{device=h100},sched-fuse,sched-tile")
    yield scheduled
    stack = generated(60)
    run_pipeline(stack, "ark-plan{device=mi300x}")
    yield stack
    tiled = generated(20)   # tt ops: IntegerAttr[I64] / DenseArrayBase[I64], single blocks
    run_pipeline(tiled, "tt-tile,tt-partition,tt-place")
    yield tiled


def mutations(op: Operation, rng: random.Random):
    """Ways to break `op`, each applied to the op in place and undone after the check."""
    if op.properties:
        name = rng.choice(sorted(op.properties))
        yield "drop property", lambda: op.properties.pop(name), \
            lambda value: op.properties.__setitem__(name, value)
        old = op.properties[name]
        yield "retype property", lambda: op.properties.__setitem__(name, StringAttr("x")), \
            lambda _: op.properties.__setitem__(name, old)
        if isinstance(old, DenseArrayBase) and name.endswith("SegmentSizes"):
            sizes = list(old.get_values())
            sizes[rng.randrange(len(sizes))] += rng.choice([-1, 1, 2])
            yield "resize segments", \
                lambda: op.properties.__setitem__(name, DenseArrayBase.from_list(i32, sizes)), \
                lambda _: op.properties.__setitem__(name, old)
    yield "extra property", lambda: op.properties.__setitem__("zz_extra", IntAttr(1)), \
        lambda _: op.properties.pop("zz_extra")
    integers = sorted(n for n, v in op.properties.items() if isinstance(v, IntegerAttr))
    if integers:   # the right class, a parameter wrong: an i32 where an i64 is declared
        name, old_int = integers[0], op.properties[integers[0]]
        yield "i32 integer", \
            lambda: op.properties.__setitem__(name, IntegerAttr(old_int.value.data, i32)), \
            lambda _: op.properties.__setitem__(name, old_int)
    if len(op.regions) == 1 and len(op.regions[0].blocks) == 1:
        region = op.regions[0]
        yield "second block", lambda: region.add_block(Block()), \
            lambda _: region.detach_block(region.blocks[1])
    if op.operands:
        operands = list(op.operands)
        yield "drop operand", lambda: op.__setattr__("operands", operands[1:]), \
            lambda _: op.__setattr__("operands", operands)
        yield "repeat operand", lambda: op.__setattr__("operands", operands + operands[:1]), \
            lambda _: op.__setattr__("operands", operands)


def test_real_and_mutated_ops_are_judged_alike():
    rng = random.Random(0)
    checked = broken = whole = 0
    for module in modules():
        ops = list(module.walk())
        for op in ops:
            assert outcome(verify_op, op) == outcome(lambda o: o.verify_(), op), op.name
            assert outcome(verify_operation, op) == outcome(lambda o: o.verify(), op)
            checked += 1
        for op in rng.sample(ops, min(len(ops), 60)):
            for _, break_it, restore in mutations(op, rng):
                saved = break_it()
                expected = outcome(lambda o: o.verify_(), op)
                assert outcome(verify_op, op) == expected, op.name
                if whole < 120:  # a failing op.verify() prints the whole module: a sample
                    assert outcome(verify_operation, op) == outcome(lambda o: o.verify(), op)
                    whole += 1
                broken += expected is not None
                restore(saved)
    assert checked > 400 and broken > 300


@pytest.mark.parametrize("name", ["ffn.json", "attention.json"])
def test_segment_sizes_cached_on_the_attribute_do_not_leak_between_ops(name):
    # Two ops may share one segment-sizes attribute; the cached counts belong to its values.
    _, module = import_file(str(EXAMPLES / name))
    for op in module.walk():
        sizes = op.properties.get("operandSegmentSizes")
        if sizes is not None:
            verify_op(op)
            assert sizes.__dict__["_planc_counts"] == tuple(sizes.get_values())


def test_isolated_from_above_as_xdsl_decides():
    """`_isolated` stands for xDSL's IsolatedFromAbove walk: an operand defined outside the
    model (in another model, or the model's own result) is refused with xDSL's message."""
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Block, Region
    from xdsl.traits import IsolatedFromAbove

    from dialects import ark
    from dialects.fast_verify import _isolated

    tensor = ark.TensorType.get(0, "FP16", [4], ark.BufferAttr.get(0))

    def model(*ops):
        block = Block()
        block.add_ops(ops)
        return ark.ModelOp(-1, 1, Region(block))

    outside = ark.ViewOp(tensor)
    inner = ark.ViewOp(tensor)
    good = model(inner, ark.ViewOp(tensor, inner.result))
    bad = model(ark.ViewOp(tensor, outside.result))
    ModuleOp([model(outside), good, bad])
    assert _isolated(good) and outcome(verify_op, good) is None
    assert not _isolated(bad)
    expected = outcome(IsolatedFromAbove().verify, bad)
    assert expected is not None and "IsolatedFromAbove" in expected
    assert outcome(verify_op, bad) == expected


def planc_schedule() -> str:
    """planc's own Gemini schedule of the ARK ffn example on a 2x2 mesh (JSON text)."""
    import tempfile
    from pathlib import Path

    from compiler.driver import main

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "ffn_stschedule.json"
        root = Path(__file__).resolve().parent.parent
        assert main([str(root / "examples" / "ffn.json"), "-t", "gemini", "--mesh", "2x2",
                     "-o", str(out)]) == 0
        return out.read_text()


def gemini_modules():
    """The small hand-written Gemini schedule, planc's schedule of the ffn example and a real
    one of the corpus, imported."""
    import json

    from frontends.gemini_ir import import_document
    from ground.json_reader import load_json_file, parse_json
    from tests.conftest import corpus_root
    from tests.gemini.fixtures import small_schedule

    yield import_document(parse_json(json.dumps(small_schedule())))
    yield import_document(parse_json(planc_schedule()))   # always there, unlike the corpus
    real = sorted((corpus_root() / "gemini").glob("*_stschedule.json"))
    if real:
        yield import_document(load_json_file(real[0]))


def test_gemini_ops_and_their_one_of_properties_are_judged_alike():
    """Gemini records, real and mutated, with each class tried in the properties whose
    constraint is one of a few classes (`tensor_order`, `time`, ...: decided by class)."""
    from xdsl.dialects.builtin import FloatAttr, IntegerAttr, NoneAttr, NoneType, f64, i64

    from dialects.fast_verify import _plan_of

    candidates = [StringAttr("x"), FloatAttr(1.5, f64), IntegerAttr(3, i64),
                  IntegerAttr(1, i32), NoneAttr(), NoneType(), IntAttr(2),
                  DenseArrayBase.from_list(i32, [1])]
    from xdsl.dialects.test import TestOp
    from xdsl.ir import Region

    stray = TestOp(result_types=[i64]).results[0]
    rng = random.Random(5)
    tried = broken = containers = 0
    for module in gemini_modules():
        ops = list(module.walk())
        for op in ops:
            assert outcome(verify_op, op) == outcome(lambda o: o.verify_(), op), op.name
        for op in rng.sample(ops, min(len(ops), 400)):
            plan = _plan_of(type(op))
            for name in sorted(plan.property_checks.classes if plan else ()):
                old = op.properties.get(name)
                for value in candidates:
                    op.properties[name] = value
                    expected = outcome(lambda o: o.verify_(), op)
                    assert outcome(verify_op, op) == expected, (op.name, name, value)
                    tried += 1
                    broken += expected is not None
                op.properties.pop(name)
                if old is not None:
                    op.properties[name] = old
            for _, break_it, restore in mutations(op, rng):
                saved = break_it()
                assert outcome(verify_op, op) == outcome(lambda o: o.verify_(), op), op.name
                restore(saved)
            if not op.operands:  # an operand where the op declares none
                op.operands = [stray]
                expected = outcome(lambda o: o.verify_(), op)
                assert expected is not None and outcome(verify_op, op) == expected, op.name
                op.operands = []
            # A region more, and (for a container) its own region taken away.
            op.add_region(Region())
            expected = outcome(lambda o: o.verify_(), op)
            assert expected is not None and outcome(verify_op, op) == expected, op.name
            op.detach_region(len(op.regions) - 1)
            if op.regions:
                body = op.detach_region(0)
                expected = outcome(lambda o: o.verify_(), op)
                assert expected is not None and outcome(verify_op, op) == expected, op.name
                op.add_region(body)
                containers += 1
    assert tried > 50 and broken > 20 and containers > 10


@pytest.mark.parametrize("key_order", [["start", "extent"], [1, 2], [], None])
@pytest.mark.parametrize("replicated", [True, IntegerAttr(1, i32), None])
def test_arrays_and_booleans_of_the_direct_tests_are_judged_alike(key_order, replicated):
    # `tt.core_range` is decided by `direct` tests: its key order an ArrayAttr[StringAttr],
    # `replicated` a BoolAttr (IntegerAttr whose type is i1: an AllOf).
    from xdsl.dialects.builtin import ArrayAttr

    from dialects import tt
    from dialects.json_value import bool_attr

    op = tt.CoreRangeOp((0, 0), (2, 2))
    if key_order is not None:
        op.properties["key_order"] = ArrayAttr(
            [StringAttr(k) if isinstance(k, str) else IntAttr(k) for k in key_order])
    if replicated is not None:
        op.properties["replicated"] = bool_attr(True) if replicated is True else replicated
    assert outcome(verify_op, op) == outcome(lambda o: o.verify_(), op)
