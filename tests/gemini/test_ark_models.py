"""ARK models the way users write them, through `--target gemini` (issue 11).

Each model is built here, lowered, and proven: the layer graph against ARK's reference
interpreter, the schedule against the graph (`planc simulate`), see
`targets.gemini.equivalence`. What Gemini cannot express is refused in one line naming the
operator, its JSON path, the reason and the way out. Budgets no schedule can meet are refused
before the search (the stall of issue 11: minutes in the DRAM ordering).
"""

from __future__ import annotations

import random

import pytest

from backends.ark_model import emit_model
from compiler.pipeline import run_pipeline
from compiler.validation import prove_model
from dialects import ark, dnn
from frontends.ark_model import import_document as import_ark
from frontends.model_builder import ModelBuilder
from frontends.model_zoo import llama_decoder_layer
from ground.diagnostics import PlancError
from ground.json_reader import parse_json
from passes.gemini_dram_order import Occupancy
from targets.gemini.equivalence import compare_graph
from targets.gemini.l2 import CoreTimeline
from tests.conftest import diagonal
from tests.gemini.ark_family import REFUSABLE, family


def gpt2_block(seq: int = 24, hidden: int = 96, heads: int = 4, dtype: str = "FP16"):
    """A GPT-2 attention block: one fused QKV projection split by slices, heads, softmax."""
    m = ModelBuilder()
    x = m.tensor([1, seq, hidden], dtype)
    h = m.layer_norm(x)
    qkv = m.matmul(h, m.tensor([3 * hidden, hidden], dtype), transpose_other=True)
    head_dim = hidden // heads

    def split(part: int):
        t = m.copy(m.slice(qkv, [0, 0, part * hidden], [1, seq, hidden]))
        return m.transpose(m.reshape(t, [1, seq, heads, head_dim]), [0, 2, 1, 3])

    q, k, v = split(0), split(1), split(2)
    scores = m.scalar_mul(m.matmul(q, k, transpose_other=True), head_dim ** -0.5)
    context = m.transpose(m.matmul(m.softmax(scores), v), [0, 2, 1, 3])
    merged = m.reshape(m.copy(context), [1, seq, hidden])
    m.add(x, m.matmul(merged, m.tensor([hidden, hidden], dtype), transpose_other=True))
    return m.finish()


def sliced_qkv(seq: int = 24, hidden: int = 96):
    """The fused projection read straight through its slices (the issue's 'view27')."""
    m = ModelBuilder()
    x = m.tensor([1, seq, hidden])
    qkv = m.matmul(x, m.tensor([3 * hidden, hidden]), transpose_other=True)
    q, k, v = (m.slice(qkv, [0, 0, i * hidden], [1, seq, hidden]) for i in range(3))
    m.add(m.matmul(m.softmax(m.matmul(q, k, transpose_other=True)), v), x)
    return m.finish()


def broadcast_matmul():
    m = ModelBuilder()
    a, b = m.relu(m.tensor([2, 3, 9, 12], "FP32")), m.relu(m.tensor([1, 3, 12, 5], "FP32"))
    m.matmul(a, b)
    return m.finish()


def scalar_assign():
    m = ModelBuilder()
    x = m.tensor([1, 8, 16], "FP32")
    m.mul(m.add(x, m.scalar_assign([1, 8, 16], 2.5, "FP32")),
          m.scalar_assign([1, 1, 16], -0.5, "FP32"))
    return m.finish()


def llama_block(dtype: str = "FP32"):
    return llama_decoder_layer(seq=16, hidden=32, heads=2, intermediate=64, dtype=dtype)


def shared_weight_and_transposed_input():
    """One weight read by two matmuls and an add; a matmul of a transposed computed input."""
    m = ModelBuilder()
    x, w = m.tensor([1, 16, 16], "FP32"), m.tensor([16, 16], "FP32")
    h = m.matmul(m.relu(x), w)                  # stored transposed for the PE array
    h = m.add(m.matmul(h, w, transpose_other=True), w)      # the same weight, as it is
    m.matmul(m.sigmoid(h), m.relu(m.tensor([1, 16, 8], "FP32")), transpose_input=True)
    return m.finish()


def strided_leading_slice():
    """One head of every sample: [2, 1, 4, 8] out of [2, 3, 4, 8] is no range of N."""
    m = ModelBuilder()
    x = m.relu(m.tensor([2, 3, 4, 8], "FP32"))
    m.relu(m.slice(x, [0, 1, 0, 2], [2, 1, 4, 5]))
    return m.finish()


def concat_by_writing_slices():
    """Two matmuls write the column halves of one tensor, a third the rest; the reader reads
    a concat along channels (each part at its channel offset), no copy."""
    m = ModelBuilder()
    x, out = m.tensor([40, 64]), m.tensor([40, 104])
    for start, width in ((0, 48), (48, 48), (96, 8)):
        m.matmul(x, m.tensor([width, 64]), transpose_other=True,
                 output=m.slice(out, [0, start], [40, width]))
    m.matmul(m.relu(out), m.tensor([32, 104]), transpose_other=True)
    return m.finish()


def concat_of_rows_by_writing_slices():
    """Two matmuls write the row halves of one tensor: a concat along H."""
    m = ModelBuilder()
    x, out = m.tensor([2, 20, 64]), m.tensor([2, 40, 64])
    for half in range(2):
        m.matmul(x, m.tensor([64, 64]), transpose_other=True,
                 output=m.slice(out, [0, half * 20, 0], [2, 20, 64]))
    m.matmul(m.relu(out), m.tensor([16, 64]), transpose_other=True)
    return m.finish()


CASES = {"strided_leading_slice": strided_leading_slice,
         "concat_by_writing_slices": concat_by_writing_slices,
         "concat_of_rows_by_writing_slices": concat_of_rows_by_writing_slices,
         "shared_weight_and_transposed_input": shared_weight_and_transposed_input,
         "gpt2_block": gpt2_block, "sliced_qkv": sliced_qkv,
         "broadcast_matmul": broadcast_matmul, "scalar_assign": scalar_assign,
         "llama_block": llama_block}


@pytest.mark.parametrize("name, mesh_batch", diagonal(
    sorted(CASES), [("1x1", None), ("2x2", None), ("2x1", 4)],
    ids=lambda v: f"{v[0]}-{v[1]}" if isinstance(v, tuple) else v))
def test_user_models_lower_and_are_proven_equal(name, mesh_batch):
    """Every model and every mesh in `-m "not slow"`; every pair in CI."""
    mesh, batch = mesh_batch
    proof = prove_model(CASES[name](), mesh=mesh, batch=batch)
    assert proof.ok, proof.problem
    assert proof.tiles_ok


@pytest.mark.parametrize("name", sorted(CASES))
def test_user_models_through_the_command_line(planc, tmp_path, name):
    src = tmp_path / "model.json"
    src.write_text(emit_model(CASES[name]()))
    r = planc(src, "--target", "gemini", "--batch", "4", "-o", tmp_path / "out.json")
    assert r.code == 0, r.err


def test_slices_are_views_with_exact_boxes():
    module = sliced_qkv()
    run_pipeline(module, "dnn-from-ark")
    graph = dnn.find_graph(module)
    slices = [op for op in graph.layers if isinstance(op, dnn.SliceOp)]
    assert sorted(op.start for op in slices) == [[0, 0, 0, 0], [0, 96, 0, 0], [0, 192, 0, 0]]
    assert all(op.out_type.shape_list == [1, 96, 24, 1] for op in slices)


def test_a_slice_that_is_no_range_of_n_is_a_copy():
    module = strided_leading_slice()
    run_pipeline(module, "dnn-from-ark")
    (copy,) = [op for op in dnn.find_graph(module).layers if isinstance(op, dnn.StridedSliceOp)]
    assert dnn.ints(copy.offsets) == [0, 1, 0, 2] and dnn.ints(copy.shape) == [2, 1, 4, 5]


def test_broadcast_matmul_materialises_only_the_partial_broadcast():
    module = broadcast_matmul()
    run_pipeline(module, "dnn-from-ark")
    graph = dnn.find_graph(module)
    (copy,) = [op for op in graph.layers if isinstance(op, dnn.BroadcastOp)]
    assert dnn.ints(copy.from_shape) == [1, 3, 12, 5]
    assert dnn.ints(copy.to_shape) == [2, 3, 12, 5]


def test_the_graph_check_fails_on_a_wrong_slice():
    """The proof can fail: move one slice and the graph no longer computes the model."""
    module = sliced_qkv()
    model = next(op for op in module.clone().ops if isinstance(op, ark.ModelOp))
    run_pipeline(module, "dnn-from-ark")
    graph = dnn.find_graph(module)
    assert compare_graph(model, graph)[1] is None
    k = next(op for op in graph.layers if isinstance(op, dnn.SliceOp) and op.start[1] == 96)
    k.offsets = dnn._ints([0, 192, 0, 0])
    assert compare_graph(model, graph)[1] is not None


def test_the_graph_check_fails_on_a_wrong_batch_broadcast():
    module = broadcast_matmul()
    model = next(op for op in module.clone().ops if isinstance(op, ark.ModelOp))
    run_pipeline(module, "dnn-from-ark")
    graph = dnn.find_graph(module)
    copy = next(op for op in graph.layers if isinstance(op, dnn.BroadcastOp))
    # The same sizes, but each b sample repeated twice in a row instead of the whole b twice.
    copy.from_shape, copy.to_shape = dnn._ints([3, 1, 12, 5]), dnn._ints([3, 2, 12, 5])
    assert compare_graph(model, graph)[1] is not None


# ---------------------------------------------------------------------------------------------
# What Gemini cannot express
# ---------------------------------------------------------------------------------------------


def partial_write():
    m = ModelBuilder()
    x, out = m.tensor([40, 64]), m.tensor([40, 96])
    m.matmul(x, m.tensor([48, 64]), transpose_other=True,
             output=m.slice(out, [0, 0], [40, 48]))
    m.relu(out)
    return m.finish()


def kv_cache_update():
    m = ModelBuilder()
    cache, new, q = m.tensor([1, 16, 32]), m.tensor([1, 1, 32]), m.tensor([1, 1, 32])
    m.copy(new, output=m.slice(cache, [0, 15, 0], [1, 1, 32]))
    m.matmul(q, cache, transpose_other=True)
    return m.finish()


def embedding():
    m = ModelBuilder()
    m.relu(m.embedding(m.tensor([1, 8], "INT32"), m.tensor([100, 16])))
    return m.finish()


REFUSED = {
    "partial_write": (partial_write, "Relu 'relu'", "$.Nodes[1]",
                      "no concat along its columns or rows"),
    "kv_cache_update": (kv_cache_update, "Matmul 'matmul'", "$.Nodes[1]", "in-place update"),
    "embedding": (embedding, "Embedding ('embedding')", "$.Nodes[0]", "a table lookup"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_gemini_cannot_express_is_refused_in_one_line(planc, tmp_path, name):
    build, operator, path, reason = REFUSED[name]
    src = tmp_path / "model.json"
    src.write_text(emit_model(build()))
    r = planc(src, "--target", "gemini", "-o", tmp_path / "out.json")
    assert r.code == 1 and r.err.count("\n") == 1, r.err
    assert r.err.startswith(f"planc: error: {src}: {path}"), r.err
    assert operator in r.err and reason in r.err
    assert "cut the network there" in r.err
    assert not (tmp_path / "out.json").exists()


# ---------------------------------------------------------------------------------------------
# Budgets: refused before the search, and searches that stay bounded
# ---------------------------------------------------------------------------------------------


def test_an_impossible_l2_budget_is_refused_before_scheduling(planc, tmp_path):
    """The stall of issue 11 (a Llama block, 3x1 mesh, 64-byte L2): over 15 minutes in the
    DRAM ordering before; now the lower bound (the largest layer's smallest part) refuses it
    in the partitioning."""
    src = tmp_path / "llama_small.json"
    src.write_text(emit_model(llama_decoder_layer(seq=64, hidden=128, heads=2,
                                                  intermediate=256)))
    r = planc(src, "--target", "gemini", "--mesh", "3x1", "--buffer-size", "64", "-o",
              tmp_path / "out.json")
    assert r.code == 1 and r.err.count("\n") == 1, r.err
    assert "does not fit the L2 buffer" in r.err and "$.Nodes[" in r.err
    assert "use --buffer-size" in r.err


def test_the_suggested_buffer_size_is_a_real_lower_bound():
    """Just below the suggested size it is refused by the bound; at it the bound passes (the
    schedule may still need more: the bound is necessary, not sufficient)."""
    module = llama_decoder_layer(seq=16, hidden=32, heads=2, intermediate=64)
    with pytest.raises(PlancError) as e:
        prove_model(module, mesh="3x1", buffer_size=64)
    suggested = int(str(e.value).split("use --buffer-size ")[1].split()[0])
    with pytest.raises(PlancError) as below:
        prove_model(module, mesh="3x1", buffer_size=suggested - 8)
    assert "does not fit the L2 buffer" in str(below.value)
    try:
        prove_model(module, mesh="3x1", buffer_size=suggested)
    except PlancError as at:
        assert "does not fit the L2 buffer" not in str(at)


def test_a_budget_that_cuts_too_fine_is_refused_before_the_workloads_exist(planc, tmp_path):
    """A 1 MB map at a 256-byte buffer is 32,768 workloads, which the 200,000-workload cap
    schedules; 8 MB is 262,144, refused before any is built."""
    m = ModelBuilder()
    m.relu(m.tensor([2048, 1024], "FP32"))
    src = tmp_path / "wide.json"
    src.write_text(emit_model(m.finish()))
    r = planc(src, "--target", "gemini", "--buffer-size", "256", "-o", tmp_path / "out.json")
    assert r.code == 1 and r.err.count("\n") == 1, r.err
    assert r.err.startswith(f"planc: error: {src}: $.Nodes[0]")
    assert "262144 workloads" in r.err and "use a larger --buffer-size" in r.err


def test_occupancy_tree_equals_a_list_of_counts():
    rng = random.Random(5)
    for positions in (1, 2, 7, 64):
        tree, plain = Occupancy(100.0, positions), [0.0] * positions
        for _ in range(200):
            first = rng.randrange(positions)
            last = rng.randrange(first, positions)
            size = rng.choice([1.0, 5.0, 17.5, 40.0])
            assert tree.fits(first, last, size) == all(plain[p] + size <= 100.0
                                                       for p in range(first, last + 1))
            assert tree.peak(first, last) == max(plain[first:last + 1])
            if rng.random() < 0.5:
                tree.add(first, last, size)
                for p in range(first, last + 1):
                    plain[p] += size


def test_position_at_equals_a_linear_scan():
    class Fake:
        def __init__(self, step):
            self.attributes = {}
            self.step = step

    rng = random.Random(3)
    for _ in range(20):
        steps = sorted(rng.sample(range(200), rng.randint(1, 30)))
        if rng.random() < 0.3:
            rng.shuffle(steps)       # imported IRs need not be ordered
        timeline = CoreTimeline.__new__(CoreTimeline)
        timeline.core, timeline.workloads = 0, []
        timeline.steps = steps
        import itertools
        timeline._reach = list(itertools.accumulate(steps, max))
        for step in range(-1, 202):
            linear = next((p for p, s in enumerate(steps) if s >= step), None)
            assert timeline.position_at(step) == linear


# ---------------------------------------------------------------------------------------------
# A generated family
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("index", range(12))
def test_generated_models_are_proven_or_refused_cleanly(index):
    name, built = family(seed=11, count=12)[index]
    module = import_ark(parse_json(emit_model(built)))     # as a user's file: with JSON paths
    rng = random.Random(index)
    mesh, batch = rng.choice(["1x1", "2x1", "2x2"]), rng.choice([None, 2])
    patterns = set(name.split("/")[0].split("+"))
    try:
        proof = prove_model(module, mesh=mesh, batch=batch)
    except PlancError as e:
        assert patterns & REFUSABLE, f"{name}: refused: {e}"
        assert e.path and e.path.startswith("$.Nodes["), str(e)
        assert "'" in str(e) and "cut the network there" in str(e), str(e)
        return
    assert not patterns & REFUSABLE, f"{name}: lowered a read of a rewritten buffer"
    assert proof.ok, f"{name}: {proof.problem}"
