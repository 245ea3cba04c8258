"""The ONNX backend node tests (onnx/backend/test/case/node: every operator, with expected
outputs computed by ONNX itself) through planc's importer and numpy interpreters.

Every test case whose operators planc lowers must reproduce ONNX's outputs; the others are
skipped with the importer's own message (which names the operator and why). The summary line
of the run says how many are covered."""

from __future__ import annotations

import os
import pickle
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend is the planc[onnx] extra")

from onnx import numpy_helper  # noqa: E402
from onnx.backend.test.case.node import collect_testcases  # noqa: E402

from frontends.onnx import import_model  # noqa: E402
from ground import dtypes  # noqa: E402
from ground.diagnostics import PlancError  # noqa: E402

CASES: dict = {}
"""ONNX's node test cases by name, filled when pytest collects this module."""


def _generated_cases() -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # some generators overflow on purpose
        return collect_testcases(None)


def _load_cases(config) -> None:
    """ONNX generates its cases by running every operator's reference (4-6 CPU s, in every
    xdist worker): the result is kept in pytest's cache directory (.pytest_cache, 10 MB), one
    file per onnx version, and generated again without it (`-p no:cacheprovider`)."""
    if CASES:
        return
    cache = getattr(config, "cache", None)
    path = None if cache is None else \
        cache.mkdir("onnx-node-cases") / f"onnx-{onnx.__version__}.pickle"
    if path is not None and path.is_file():
        try:
            cases = pickle.loads(path.read_bytes())
        except Exception:   # a damaged or foreign file: generate again
            cases = _generated_cases()
    else:
        cases = _generated_cases()
        if path is not None:
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            partial.write_bytes(pickle.dumps(cases, protocol=pickle.HIGHEST_PROTOCOL))
            partial.replace(path)   # atomic: xdist workers may write it together
    CASES.update((case.name, case) for case in cases)


SHAPE_ARGUMENTS = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2),
    "Slice": (1, 2, 3, 4), "Split": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Trilu": (1,),
    "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,),
    "ReduceL1": (1,), "ReduceL2": (1,), "ReduceSumSquare": (1,), "Pad": (1, 2, 3),
    "Dropout": (1, 2), "OneHot": (1,), "CenterCropPad": (1,)}
"""Inputs that decide the result's shape (or, for Dropout, its mode): planc plans tensors of
fixed shapes, so it takes them as constants at import, as a model that computes them from
constants has them after folding. The node tests feed them as graph inputs: each data set's
values are bound as initializers before import (everything else stays a model input)."""


def bound_model(case, data_in):
    """The case's model with its shape arguments bound to this data set's values."""
    model = case.model
    positions = {name for node in model.graph.node
                 for i in SHAPE_ARGUMENTS.get(node.op_type, ()) if i < len(node.input)
                 for name in [node.input[i]] if name}
    names = _graph_inputs(case)
    bind = {n: np.asarray(_array(v)) for n, v in zip(names, data_in, strict=False)
            if n in positions}
    if not bind:
        return model, {}
    bound = onnx.ModelProto()
    bound.CopyFrom(model)
    kept = [v for v in bound.graph.input if v.name not in bind]
    del bound.graph.input[:]
    bound.graph.input.extend(kept)
    bound.graph.initializer.extend(numpy_helper.from_array(v, n) for n, v in bind.items())
    return bound, bind


def _graph_inputs(case) -> list[str]:
    initializers = {t.name for t in case.model.graph.initializer}
    return [v.name for v in case.model.graph.input if v.name not in initializers]


def importers(model) -> list[tuple[str, ...]]:
    """The ways planc imports the model (what `import_model`'s `wants` asks for): a CNN both
    as the Gemini layer graph (`-t gemini`) and as the ARK model (`-t ark`); anything else as
    its ARK model."""
    from frontends.onnx_model import CNN_OPERATORS

    if {node.op_type for node in model.graph.node} & CNN_OPERATORS:
        return [("gemini-layers",), ("ark-model",)]
    return [()]


# One worker runs them all (xdist's loadgroup): each case is reproduced once per process and
# its verdict kept, so the count below costs nothing beyond the cases' own tests, and ONNX's
# cases are loaded (or generated) in one worker only.
pytestmark = pytest.mark.xdist_group("onnx-node-tests")


def pytest_generate_tests(metafunc) -> None:
    """Every case is a test (the ~1,000 planc does not lower skip with the importer's message;
    deciding that at collection cost every worker an import of all 1,884 cases)."""
    _load_cases(metafunc.config)
    if "name" in metafunc.fixturenames:
        metafunc.parametrize("name", sorted(CASES))


VERDICTS: dict[str, BaseException | None] = {}
"""Each case's outcome in this process: None where planc reproduces it, else the PlancError
that refused it or the exception that the case's test reports."""


def verdict(name: str) -> BaseException | None:
    if name not in VERDICTS:
        try:
            reproduce(CASES[name])
            VERDICTS[name] = None
        except Exception as e:   # noqa: BLE001 -- kept for the case's test to raise
            VERDICTS[name] = e
    return VERDICTS[name]


def _array(value):
    return numpy_helper.to_array(value) if hasattr(value, "SerializeToString") else value


def outputs_of(imp, case, data_in, bound=()):
    """planc's outputs for one data set, in the order of the graph's outputs."""
    from dialects import dnn
    from targets.ark.model_interpreter import run_model
    from targets.gemini.dnn_interpreter import run_graph

    given = dict(imp.values)
    for name, value in zip(_graph_inputs(case), data_in, strict=False):
        if name not in bound:
            given[imp.inputs[name]] = np.asarray(_array(value))
    graph = dnn.find_graph(imp.module)
    if graph is None:
        run = run_model(imp.module, given)
        return [run.tensors[tid] for tid in imp.outputs.values()]
    values = run_graph(graph, given=given)
    by_name = {out.output_name.data: values[out.value] for out in graph.outputs}
    return [by_name[name] for name in imp.outputs]


def reproduce(case) -> None:
    """Import the case (per data set, with its shape arguments bound) and compare every
    output with ONNX's, values and shape (ARK's [1] stands for a scalar). Raises PlancError
    when planc refuses it, AssertionError when it computes something else."""
    for data_in, data_out in case.data_sets:
        model, bound = bound_model(case, data_in)
        imported, refusal = [], None
        for wants in importers(model):
            try:
                imported.append(import_model(model, f"{case.name}.onnx", wants))
            except PlancError as e:
                refusal = e     # the last way's (the ARK model's) reason
        if not imported:
            raise refusal
        for imp in imported:
            _compare(outputs_of(imp, case, data_in, bound), data_out, case)


def _compare(outputs, data_out, case) -> None:
    for got, expected in zip(outputs, data_out, strict=True):
        expected = np.asarray(_array(expected))
        got = np.asarray(got)
        assert got.shape == (expected.shape or (1,)), (got.shape, expected.shape)
        tolerance = HALF_TOLERANCE.get(expected.dtype.name, 1e-3)
        np.testing.assert_allclose(
            got.astype(np.float64), expected.astype(np.float64),
            rtol=max(case.rtol, tolerance), atol=max(case.atol, tolerance / 10))


HALF_TOLERANCE = {"float16": dtypes.tolerance("FP16").rtol,
                  "bfloat16": dtypes.tolerance("BF16").rtol}
"""Half-precision results: every ARK operator rounds its result to the element type, as the
device does, where ONNX's reference rounds the whole operator's result once (a softmax of
bf16 differs by an ulp, 0.008 near 1)."""


def test_node_case(name):
    found = verdict(name)
    if isinstance(found, PlancError):
        pytest.skip(f"not lowered: {found.message}")
    if found is not None:
        raise found


REPRODUCED_AT_LEAST = 800


@pytest.mark.slow
def test_at_least_800_node_tests_are_reproduced_exactly():
    """Every case, imported and run: how many planc reproduces (values and shapes). A wrong
    value or an internal error fails the case's own test above; here it does not count."""
    reproduced = [name for name in sorted(CASES) if verdict(name) is None]
    print(f"\nONNX node tests reproduced by planc: {len(reproduced)} of {len(CASES)}")
    assert len(reproduced) >= REPRODUCED_AT_LEAST
