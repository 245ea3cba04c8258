"""Translation validation against the input model (`targets.ark.equivalence`): every ARK
lowering proves that the model its plan carries computes what the input model computes.

(a) a planner bug (a pass monkeypatched to rewrite the graph wrongly) is an internal error
    naming the pass, and nothing is written; (b) every shipped example and the models planc's
    tests plan are accepted; (c) on small random models, the symbolic verdict agrees with the
    numpy interpreter run on both models, for wrong edits and for equal look-alikes.
"""

from __future__ import annotations

import functools
import random
from collections import Counter

import numpy as np
import pytest
from xdsl.dialects.builtin import FloatAttr, f64
from xdsl.ir import Block, Region

from backends.ark_model import emit_model
from compiler.pipeline import run_pipeline
from dialects import ark, plan
from frontends.model_builder import ModelBuilder
from targets.ark.equivalence import compare, graph_ops, snapshot
from targets.ark.model_interpreter import run_model
from tests.conftest import EXAMPLES
from tests.sched.aliasing_models import random_model
from tests.sched.models import MODELS, deep_matmul


def small_block():
    """A matmul with a fused epilogue (gelu, scale, residual add) and a second, square
    matmul: every pass has something to get wrong."""
    m = ModelBuilder()
    x, w, v = m.tensor([64, 64]), m.tensor([64, 64]), m.tensor([64, 64])
    y = m.scalar_mul(m.gelu(m.matmul(x, w)), 0.5)
    m.matmul(m.add(y, x), v)
    return m.finish()


def _proof(module, arch: str = "a100") -> list[str]:
    """Plan `module` with planc's planner and prove the plan against the model."""
    before = snapshot([op for op in module.ops if isinstance(op, ark.ModelOp)])
    run_pipeline(module, f"ark-plan{{device={arch}}}")
    return compare(before, [op for op in module.ops if isinstance(op, plan.PlanOp)])


def _first(schedule, cls):
    return next(op for op in schedule.graph.ops if isinstance(op, cls))


# -- (a) a wrong rewrite is caught, named, and writes nothing -----------------------------------


def _swap_matmul_operands(where):
    mm = where if isinstance(where, ark.MatmulOp) else _first(where, ark.MatmulOp)
    a, b, *rest = mm.operands
    mm.operands = [b, a, *rest]


def _gelu_becomes_relu(schedule):
    _first(schedule, ark.GeluOp).__class__ = ark.ReluOp


def _scale_changes(schedule):
    _first(schedule, ark.ScalarMulOp).factor = FloatAttr(0.25, f64)


def _add_reads_the_wrong_producer(schedule):
    add = _first(schedule, ark.AddOp)
    a, _, *rest = add.operands
    add.operands = [a, a, *rest]


@pytest.mark.parametrize(("pass_name", "cls_path", "bug"), [
    ("sched-fuse", "passes.sched_fuse.SchedFusePass.run", _swap_matmul_operands),
    ("sched-tile", "passes.sched_tile.SchedTilePass.run", _gelu_becomes_relu),
    ("sched-partition", "passes.sched_partition.SchedPartitionPass.partition", _scale_changes),
    ("sched-allocate", "passes.sched_allocate.SchedAllocatePass.run",
     _add_reads_the_wrong_producer),
], ids=["swapped-operands", "changed-activation", "changed-factor", "wrong-producer"])
def test_a_pass_that_rewrites_the_graph_wrongly_is_named_and_nothing_is_written(
        planc, tmp_path, monkeypatch, pass_name, cls_path, bug):
    """The planner's passes run as one (`ark-plan`); after the proof fails, they are run again
    one by one on the input, and the first whose product is not the input's is named. The
    plan's own rules (`plan_check`) cannot see these: the plan is consistent with the wrong
    model it carries."""
    import importlib

    module_name, cls_name, method = cls_path.rsplit(".", 2)
    cls = getattr(importlib.import_module(module_name), cls_name)
    model, out = tmp_path / "block.json", tmp_path / "block.plan.json"
    model.write_text(emit_model(small_block()))
    assert planc(model, "-t", "ark", "-o", out).code == 0
    out.unlink()
    run = getattr(cls, method)

    def wrong(self, schedule, tables=None):
        run(self, schedule, tables)
        bug(schedule)

    monkeypatch.setattr(cls, method, wrong)
    result = planc(model, "-t", "ark", "-o", out)
    assert result.code == 2, result.err
    assert f"pass '{pass_name}' (in 'ark-plan')" in result.err, result.err
    assert "against the input model" in result.err
    assert not out.exists()


def _shortening_the_last_part(split):
    def wrong(kernel, parts, *rest):
        return split(kernel, [*parts[:-1], parts[-1] - 64], *rest)
    return wrong


def _shifting_later_parts(k_slice):
    def wrong(value, axis, begin, end, ids):
        return k_slice(value, axis, begin - 64, end - 64, ids) if begin else \
            k_slice(value, axis, begin, end, ids)
    return wrong


@pytest.mark.parametrize(("name", "wrap"), [("split_k", _shortening_the_last_part),
                                            ("_k_slice", _shifting_later_parts)],
                         ids=["k-range-left-out", "overlapping-parts"])
def test_a_wrong_split_k_is_caught(planc, tmp_path, monkeypatch, name, wrap):
    """split-K's parts must sum K exactly once: parts that stop short of K (its last range
    never summed) or parts shifted (one range summed twice, another never) are not the
    input's matmul."""
    from passes import sched_partition

    model, out = tmp_path / "deep.json", tmp_path / "deep.plan.json"
    model.write_text(emit_model(deep_matmul()))
    monkeypatch.setattr(sched_partition, name, wrap(getattr(sched_partition, name)))
    # The proof against the input sees it by itself (`plan_check`'s split-K rule may too).
    assert any("Matmul 'matmul" in problem for problem in _proof(deep_matmul())), name
    result = planc(model, "-t", "ark", "--arch", "a100", "-o", out)
    assert result.code == 2, result.err
    assert "pass 'sched-partition' (in 'ark-plan')" in result.err, result.err
    assert not out.exists()


def test_the_cpu_program_is_proved_against_its_input_too(planc, tmp_path, monkeypatch):
    from passes.sched_fuse import SchedFusePass

    model, out = tmp_path / "block.json", tmp_path / "program"
    model.write_text(emit_model(small_block()))
    run = SchedFusePass.run

    def wrong(self, schedule, tables):
        run(self, schedule, tables)
        _swap_matmul_operands(schedule)

    monkeypatch.setattr(SchedFusePass, "run", wrong)
    result = planc(model, "-t", "cpu", "-o", out)
    assert result.code == 2 and "pass 'sched-fuse'" in result.err, result.err
    assert not out.exists()


# -- (b) what planc plans is accepted -------------------------------------------------------------


@pytest.mark.parametrize("arch", ["a100", "h100", "mi300x"])
def test_every_shipped_example_is_accepted(planc, tmp_path, arch):
    for path in sorted(EXAMPLES.glob("*.json")):
        for planner in ("planc", "ark-default"):
            out = tmp_path / f"{path.stem}.{planner}.plan.json"
            result = planc(path, "-t", "ark", "--arch", arch, "--planner", planner, "-o", out)
            assert result.code in (0, 1), result.err    # (ARK's planner refuses some)
            assert "translation validation" not in result.err, (path.name, result.err)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_planning_tests_models_are_accepted(name):
    for arch in ("a100", "mi300x"):
        assert _proof(MODELS[name](), arch) == [], (name, arch)


def test_aliasing_models_are_accepted():
    """Concatenations through slices, KV-cache updates, in-place updates read through old
    views: memory reuse and reordering leave every output's expression as it was."""
    for seed in range(0, 40, 3):
        assert _proof(random_model(seed)) == [], seed


def test_a_model_from_onnx_is_accepted(planc, tmp_path):
    onnx = pytest.importorskip("onnx", reason="the ONNX frontend's optional dependency")
    from tests.onnx.test_models import transformer_block

    path, out = tmp_path / "block.onnx", tmp_path / "block.plan.json"
    onnx.save(transformer_block(onnx.TensorProto.FLOAT16), path)
    result = planc(path, "-t", "ark", "-o", out)
    assert result.code == 0, result.err


@pytest.mark.parametrize("arch", ["a100", "mi300x"])
def test_split_k_over_a_concat_written_between_its_parts_is_accepted(planc, tmp_path, arch):
    """ONNX's light SqueezeNet: a 1x1 convolution over a concatenation, cut in K parts that
    each run once their own rows of the concatenation are written (the first part before
    the second half is). The parts' slices are read from different states of the buffer:
    the proof joined them only when each read the same in the first part's state, and
    refused this plan (exit 2); the carried model computes the input's outputs (numpy)."""
    onnx = pytest.importorskip("onnx", reason="the ONNX frontend's optional dependency")
    from pathlib import Path

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    model = light / "light_squeezenet.onnx"
    if not model.is_file():
        pytest.skip(f"onnx's light networks are not installed ({model})")
    result = planc(model, "-t", "ark", "--arch", arch, "-o", tmp_path / "sq.plan.json")
    assert result.code == 0, result.err


def _concat(order, parts: int = 80, row_split: bool = True):
    """`parts` slices of one [parts*2, 16] tensor, slice i written with input's times i, in
    `order` (row blocks; or columns, each written 1 + parts/16 times, the last write
    winning), then the whole read through a reshape. Buffer semantics: the slices are views
    of the fresh tensor, the read sees what was written."""
    m = ModelBuilder()
    x, whole = m.tensor([2 * parts, 16], "FP32"), m.tensor([2 * parts, 16], "FP32")
    for i in order:
        offsets, shape = ([2 * i, 0], [2, 16]) if row_split else ([0, i % 16], [2 * parts, 1])
        m.scalar_mul(m.slice(x, offsets, shape), float(i), output=m.slice(whole, offsets, shape))
    flat = m.reshape(whole, [32 * parts])
    m.exp(flat)
    return m.finish()


def test_look_alikes_that_compute_the_same_are_accepted():
    """Writes of disjoint bytes commute: the slices of a concatenation written in any order
    (more of them than a read looks back over is bounded by `MAX_WALK`), read whole through
    another grid (a reshape), are the same output; a slice left out, or read back before the
    last one is written, is not."""
    parts = 80
    forward, backward = list(range(parts)), list(reversed(range(parts)))
    shuffled = random.Random(0).sample(forward, parts)
    before = snapshot([_operators_root(_concat(forward, parts))])
    for order in (backward, shuffled):
        assert compare(before, [_operators_root(_concat(order, parts))]) == []
    assert compare(before, [_operators_root(_concat(forward[1:], parts))])
    # Overlapping writes do not commute: columns written several times, in another order.
    before = snapshot([_operators_root(_concat(forward, parts, False))])
    assert compare(before, [_operators_root(_concat(backward, parts, False))])
    # Numerically too (the second way): the same outputs, and a missing slice differs.
    few = list(range(8))
    original = _concat(few, 8)
    assert _numerically_equal(original, _operators_root(_concat(few[::-1], 8)))
    assert not _numerically_equal(original, _operators_root(_concat(few[1:], 8)))


# -- (c) the symbolic verdict agrees with running both models -----------------------------------


def _outputs(run) -> dict:
    found = {}
    for tensor_id in run.outputs:
        t = run.types[tensor_id]
        found[(t.buffer_id, tuple(t.shape_list), tuple(t.offsets_list))] = \
            run.memory.read(t).astype(np.float64)
    return found


def _numerically_equal(original, variant) -> bool:
    """Do both models compute the same outputs from the same inputs (given by buffer and
    layout: the variant's tensor ids may name other views)?"""
    first = run_model(original, seed=1)
    by_place = {_place(first.types[tid]): data for tid, data in first.inputs.items()}
    given = {}
    for op in variant.walk():
        for value in op.results:
            if isinstance(value.type, ark.TensorType) and _place(value.type) in by_place:
                given[value.type.tensor_id] = by_place[_place(value.type)]
    second = run_model(variant, given, seed=1)
    a, b = _outputs(first), _outputs(second)
    if a.keys() - b.keys():
        return False
    return all(np.allclose(a[k], b[k], rtol=1e-2, atol=1e-2, equal_nan=True) for k in a)


def _place(t: ark.TensorType) -> tuple:
    return (t.buffer_id, t.data_type, t.shape_tuple, t.strides_tuple, t.offsets_tuple)


def _operators(module):
    model = next(op for op in module.ops if isinstance(op, ark.ModelOp))
    return model.operators()


def _swap(op):
    a, b, *rest = op.operands
    op.operands = [b, a, *rest]


def _retype(op):
    op.__class__ = ark.SigmoidOp if not isinstance(op, ark.SigmoidOp) else ark.ExpOp
    op.properties.pop("factor", None)


def _rewire(op, value):
    op.operands = [value, *op.operands[1:]]


def _same(values: dict, a: ark.TensorType, b: ark.TensorType) -> bool:
    x, y = values.get(a.tensor_id), values.get(b.tensor_id)
    return x is None or y is None or np.array_equal(x, y, equal_nan=True)


def _layout(t: ark.TensorType) -> tuple:
    return (t.data_type, t.shape_list, t.strides_list, t.offsets_list)


def _edits(rng: random.Random, module, values: dict):
    """Wrong edits, each changing one operator of the model: operands of a subtraction or
    division swapped, an activation or scalar operator changed, a read wired to another
    producer's result of the same layout and other values (`values`: by tensor id, in a run
    of the model; `relu(relu(x))` read for `relu(x)` is an identity expressions do not
    know)."""
    ops = [op for op in _operators(module) if not op.is_virtual]
    binary = [op for op in ops if isinstance(op, (ark.SubOp, ark.DivOp))
              and op.inputs[0] == op.inputs[1] and op.operands[0] is not op.operands[1]]
    unary = [op for op in ops if isinstance(op, (ark.ExpOp, ark.ReluOp, ark.SigmoidOp,
                                                 ark.ScalarMulOp, ark.ScalarAddOp))]
    rewirings = []
    for i, op in enumerate(ops):
        reads = op.operand_groups()[0]
        if reads:
            tensor = reads[0].type
            rewirings += [(op, value) for earlier in ops[:i] for value in earlier.result_tensors
                          if _layout(value.type) == _layout(tensor)
                          and value.type.buffer_id != tensor.buffer_id
                          and not _same(values, value.type, tensor)]
    choices = []
    if binary:
        choices.append(functools.partial(_swap, rng.choice(binary)))
    if unary:
        choices.append(functools.partial(_retype, rng.choice(unary)))
    if rewirings:
        choices.append(functools.partial(_rewire, *rng.choice(rewirings)))
    return choices


def _as_model(plan_op):
    """A plan's operators as a model for the interpreter: in the order the plan runs them
    (`graph_ops`: by task group, not block order), after the views they read."""
    ordered = graph_ops(plan_op)
    views = [op for op in plan_op.graph.ops if isinstance(op, ark.ViewOp)]
    for op in [*views, *ordered]:
        op.detach()
    rest = list(plan_op.graph.ops)
    for op in rest:
        op.detach()
    return ark.ModelOp(0, 1, Region(Block([*views, *ordered])))


def _rename_everything(module):
    """A look-alike: every label, tensor id and intermediate buffer id changes (what import,
    memory reuse and renumbering do); the outputs stay where they were."""
    for op in _operators(module):
        op.label = type(op.label)(f"renamed_{op.label.data}")


def test_the_symbolic_verdict_agrees_with_running_both_models():
    """For the planner's own product (run as a model: its operators in the order the plan
    runs them, its memory reused), for a renamed look-alike, and for wrong one-operator
    edits, on generated models with aliasing views: "equal" by the expressions is "equal" by
    the interpreter (fp16 and bf16 within rounding), always (the proof is sound), and the
    planner's products and the look-alikes are all equal. The converse may fail where an
    edit happens to keep the values by an identity the expressions do not know (`relu` of a
    reshape is the reshape of a `relu`): a rejected correct compile would be a false alarm,
    so such edits must stay rare."""
    verdicts: dict[str, list[tuple[bool, bool]]] = {"planned": [], "renamed": [],
                                                     "edited": []}
    for seed in range(16):
        rng = random.Random(seed)
        original = random_model(seed)
        before = snapshot([op for op in original.ops if isinstance(op, ark.ModelOp)])
        values = run_model(original, seed=1).tensors
        planned = random_model(seed)
        run_pipeline(planned, "ark-plan{device=a100}")
        cases = [("planned", _as_model(next(op for op in planned.ops
                                             if isinstance(op, plan.PlanOp))))]
        renamed = random_model(seed)
        _rename_everything(renamed)
        cases.append(("renamed", _operators_root(renamed)))
        for _ in range(4):
            edited = random_model(seed)
            edits = _edits(rng, edited, values)
            if edits:
                rng.choice(edits)()
                cases.append(("edited", _operators_root(edited)))
        for name, variant in cases:
            symbolic = compare(before, [variant]) == []
            numeric = _numerically_equal(original, variant)
            assert numeric or not symbolic, (seed, name)    # sound
            verdicts[name].append((symbolic, numeric))
    assert all(v == (True, True) for v in verdicts["planned"] + verdicts["renamed"])
    edited = verdicts["edited"]
    assert len(edited) >= 40 and [n for _, n in edited].count(False) >= 30, edited
    assert sum(s == n for s, n in edited) >= 0.9 * len(edited), edited


def _operators_root(module):
    return next(op for op in module.ops if isinstance(op, ark.ModelOp))


def _output_bits(original, variant) -> tuple[dict, dict]:
    """Both models' outputs on the same inputs, as the bytes of their data types."""
    first = run_model(original, seed=1)
    by_place = {_place(first.types[tid]): data for tid, data in first.inputs.items()}
    given = {value.type.tensor_id: by_place[_place(value.type)] for op in variant.walk()
             for value in op.results if isinstance(value.type, ark.TensorType)
             and _place(value.type) in by_place}
    second = run_model(variant, given, seed=1)
    return tuple({(t.buffer_id, t.shape_tuple, t.offsets_tuple): run.memory.read(t).tobytes()
                  for t in (run.types[tid] for tid in run.outputs)} for run in (first, second))


def test_operands_of_add_and_mul_commute_and_of_sub_and_div_do_not():
    """Brute force, each binary operator of small random models (in place, broadcasting
    `[1, n]` operands, slices, FP32, FP16, BF16 and INT32) with its operands swapped: the
    symbolic verdict is "equal" exactly where running both models gives the same bits in
    every output, and that is every `add` and `mul` (IEEE addition and multiplication
    commute bit for bit) and no `sub` (whose operands here never hold the same values; these
    models make no `div`, which the plan tests of `--model` swap)."""
    seen: Counter = Counter()
    for seed in range(48):
        original = random_model(seed)
        before = snapshot([_operators_root(original)])
        count = sum(isinstance(op, (ark.AddOp, ark.SubOp, ark.MulOp, ark.DivOp))
                    for op in _operators(original))
        for i in range(count):
            edited = random_model(seed)
            op = [op for op in _operators(edited)
                  if isinstance(op, (ark.AddOp, ark.SubOp, ark.MulOp, ark.DivOp))][i]
            if op.operands[0] is op.operands[1]:
                continue
            _swap(op)
            symbolic = compare(before, [_operators_root(edited)]) == []
            first, second = _output_bits(original, _operators_root(edited))
            assert symbolic == (first == second), (seed, i, op.name)
            assert symbolic == isinstance(op, (ark.AddOp, ark.MulOp)), (seed, i, op.name)
            seen[type(op).TYPE] += 1
    assert seen["Add"] >= 40 and seen["Mul"] >= 5 and seen["Sub"] >= 30, seen


# -- the Tenstorrent target ---------------------------------------------------------------------


def test_tt_plans_are_proved_against_their_input(planc, tmp_path, monkeypatch):
    """`-t tt` proves the operators its kernels carry (run in kernel order over the model's
    buffers) against the input model: the shipped examples are accepted; a kernel whose
    operator reads the wrong producer, made by a wrong `tt-partition`, is named and not
    written."""
    for path in sorted(EXAMPLES.glob("*.json")):
        if "rank" not in path.name:     # (communication has no Tenstorrent kernel)
            result = planc(path, "-t", "tt", "-o", tmp_path / f"{path.stem}.tt.json")
            assert result.code == 0, (path.name, result.err)
    model, out = tmp_path / "block.json", tmp_path / "block.tt.json"
    model.write_text(emit_model(small_block()))
    _break_tt_partition(monkeypatch)
    result = planc(model, "-t", "tt", "-o", out)
    assert result.code == 2, result.err
    assert "pass 'tt-partition' does not compute its input" in result.err, result.err
    assert not out.exists()


def test_tt_metal_proves_the_tt_plans_it_lowers_before_writing(planc, tmp_path, monkeypatch):
    """`-t tt-metal` runs `-t tt`'s proof on the TT plans that `tt-to-metalium` turns into
    C++, before anything is written: the shipped examples planc has kernels for still lower
    (and the proof runs: a wrong rewrite is caught, below); a wrong `tt-partition` (a
    matmul's operands swapped) is an internal error naming that pass, and the output folder
    is not made. Unguarded (`PLANC_VALIDATE=0`), the same bug writes a program."""
    result = planc(EXAMPLES / "ffn.json", "-t", "tt-metal", "-o", tmp_path / "ffn")
    assert result.code == 0, result.err
    assert (tmp_path / "ffn" / "main.cpp").exists()
    model, out = tmp_path / "block.json", tmp_path / "block"
    model.write_text(emit_model(small_block()))
    assert planc(model, "-t", "tt-metal", "-o", tmp_path / "good").code == 0
    _break_tt_partition(monkeypatch)
    result = planc(model, "-t", "tt-metal", "-o", out)
    assert result.code == 2, result.err
    assert "translation validation" in result.err, result.err
    assert "pass 'tt-partition' does not compute its input" in result.err, result.err
    assert not out.exists()
    monkeypatch.setenv("PLANC_VALIDATE", "0")
    assert planc(model, "-t", "tt-metal", "-o", out).code == 0
    assert (out / "main.cpp").exists()


def _break_tt_partition(monkeypatch) -> None:
    """Make `tt-partition` swap a matmul's operands after it runs (a wrong rewrite)."""
    from dialects import tt
    from passes.tt_partition import TtPartitionPass

    apply = TtPartitionPass.apply

    def wrong(self, ctx, module):
        apply(self, ctx, module)
        plans = next(op for op in module.ops if isinstance(op, tt.PlansOp))
        _swap_matmul_operands(next(op for op in plans.walk() if isinstance(op, ark.MatmulOp)))

    monkeypatch.setattr(TtPartitionPass, "apply", wrong)
