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


def _lowered(name: str) -> bool:
    """Does planc import this case (else its test only skips)? Errors other than planc's
    own refusal count as lowered, so that the test runs and shows them."""
    try:
        import_model(CASES[name].model, f"{name}.onnx")
    except PlancError:
        return False
    except Exception:
        return True
    return True


def pytest_generate_tests(metafunc) -> None:
    """Cases planc does not lower are marked slow: in `-m "not slow"` the ~1,700 of them would
    only skip (2 ms of pytest each); CI lists each with the importer's message."""
    _load_cases(metafunc.config)
    if "name" in metafunc.fixturenames:
        metafunc.parametrize("name", [
            pytest.param(name, marks=[] if _lowered(name) else [pytest.mark.slow])
            for name in sorted(CASES)])


def _array(value):
    return numpy_helper.to_array(value) if hasattr(value, "SerializeToString") else value


def outputs_of(imp, case, data_in):
    """planc's outputs for one data set, in the order of the graph's outputs."""
    from dialects import dnn
    from targets.ark.model_interpreter import run_model
    from targets.gemini.dnn_interpreter import run_graph

    initializers = {t.name for t in case.model.graph.initializer}
    names = [v.name for v in case.model.graph.input if v.name not in initializers]
    given = dict(imp.values)
    for name, value in zip(names, data_in, strict=False):
        given[imp.inputs[name]] = np.asarray(_array(value))
    graph = dnn.find_graph(imp.module)
    if graph is None:
        run = run_model(imp.module, given)
        return [run.tensors[tid] for tid in imp.outputs.values()]
    values = run_graph(graph, given=given)
    by_name = {out.output_name.data: values[out.value] for out in graph.outputs}
    return [by_name[name] for name in imp.outputs]


def test_node_case(name):
    case = CASES[name]
    try:
        imp = import_model(case.model, f"{name}.onnx")
    except PlancError as e:
        pytest.skip(f"not lowered: {e.message}")
    for data_in, data_out in case.data_sets:
        for got, expected in zip(outputs_of(imp, case, data_in), data_out, strict=True):
            expected = np.asarray(_array(expected))
            np.testing.assert_allclose(
                np.asarray(got, dtype=np.float64).reshape(expected.shape),
                expected.astype(np.float64), rtol=max(case.rtol, 1e-3),
                atol=max(case.atol, 1e-4))


def test_at_least_a_hundred_node_tests_are_covered():
    covered = []
    for name, case in CASES.items():
        try:
            import_model(case.model, name)
        except PlancError:
            continue
        covered.append(name)
    print(f"\nONNX node tests lowered by planc: {len(covered)} of {len(CASES)}")
    assert len(covered) >= 100
