"""`plan_text` writes the bytes `denser_json(plan_json(p))` writes, on every plan we can make.

The second way is the document path (`plan_json`, `in_ark_format`, `denser_json`), which
`--json-layout indented` and `--ark-format torch` still take: plans from the corpus, from the
examples compiled for each device, from generated models, and small plans given unknown members
at every level (random JSON values of any depth, unknown arguments, tensors and buffers with
unusual keys, unusual header orders).
"""

from __future__ import annotations

import copy
import json
import random

import pytest

from backends.ark_plan import in_ark_format, model_pipeline, single_plan
from backends.json_format import PLAN_DEPTH, denser_json
from backends.plan_json import plan_json
from backends.plan_text import plan_text
from compiler.pipeline import load_input, run_pipeline
from dialects.locations import verify_module
from frontends.ark_plan import import_document
from frontends.model_zoo import generated
from ground.json_reader import JsonNode, load_json_file
from tests.conftest import EXAMPLES
from tests.plan.fixtures import small_plan_doc
from tests.plan.test_plan import PLAN_FILES


def document_text(p, ark_format: str = "current") -> str:
    return denser_json(in_ark_format(plan_json(p, shared=True), ark_format), PLAN_DEPTH)


def assert_same_text(module) -> None:
    p = single_plan(module)
    assert plan_text(p) == document_text(p)
    assert plan_text(p, legacy=True) == document_text(p, "legacy")


@pytest.mark.parametrize("path", PLAN_FILES)
def test_corpus_plans(path):
    module = import_document(load_json_file(path))
    verify_module(module)
    assert_same_text(module)
    assert json.loads(plan_text(single_plan(module))) == json.loads(path.read_text())


EXAMPLE_MODELS = sorted(p for p in EXAMPLES.glob("*.json")
                        if "Nodes" in json.loads(p.read_text()))


@pytest.mark.parametrize("arch", ["a100", "h100", "mi300x"])
@pytest.mark.parametrize("path", EXAMPLE_MODELS, ids=lambda p: p.name)
def test_compiled_examples(path, arch):
    _, module = load_input(str(path))
    run_pipeline(module, model_pipeline(arch))
    assert_same_text(module)


@pytest.mark.parametrize("ops", [10, 60])
def test_compiled_generated_models(ops):
    module = generated(ops)
    verify_module(module)
    run_pipeline(module, model_pipeline("a100"))
    assert_same_text(module)


def random_value(rng: random.Random, depth: int = 0):
    """A JSON value of random shape (nested up to 4 levels), strings with escapes and
    non-ASCII letters, floats, empty containers."""
    choice = rng.randrange(10 if depth < 4 else 6)
    match choice:
        case 0:
            return None
        case 1:
            return rng.choice([True, False])
        case 2:
            return rng.randrange(-10**12, 10**12)
        case 3:
            return rng.choice([0.5, -1e-7, 3.0, 1e300, 2.5e-3])
        case 4:
            return rng.choice(["", "a", "tab\t\"quoted\"", "π ≈ 3.14", "\\back"])
        case 5:
            return rng.choice([[], {}, [1, 2.5, 3]])
        case 6 | 7:
            return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
        case _:
            return {f"K{rng.randrange(100)}": random_value(rng, depth + 1)
                    for _ in range(rng.randrange(4))}


def unusual_tensor(rng: random.Random) -> dict:
    return {"Note": random_value(rng)} if rng.random() < 0.3 else {}


def unusual_buffer(rng: random.Random) -> dict:
    found = {}
    if rng.random() < 0.3:
        found["IsExternal"] = rng.choice([True, False])
    if rng.random() < 0.2:
        found["Owner"] = random_value(rng)
    return found


def unusual_plan(seed: int) -> dict:
    """The small plan with unknown members at every level and other unusual forms."""
    rng = random.Random(seed)
    doc = small_plan_doc()

    def extras(obj: dict) -> None:
        for _ in range(rng.randrange(3)):
            obj[f"Extra{rng.randrange(1000)}"] = random_value(rng)

    tensor_extras: dict[int, dict] = {}  # a tensor (and a buffer) is described alike
    buffer_extras: dict[int, dict] = {}  # wherever it appears
    extras(doc)
    for task in doc["TaskInfos"]:
        extras(task)
        for op in task["Ops"]:
            if rng.random() < 0.5:
                extras(op)
            if rng.random() < 0.3:
                op["Args"]["Unknown"] = {"INT": rng.randrange(9)}
            if rng.random() < 0.2:
                op["IsVirtual"] = not op["IsVirtual"]
            extras(op["Config"])
            for key in ("ReadTensors", "WriteTensors", "ResultTensors"):
                for tensor in op[key]:
                    tensor.update(tensor_extras.setdefault(tensor["Id"], unusual_tensor(rng)))
                    tensor["Buffer"].update(buffer_extras.setdefault(
                        tensor["Buffer"]["Id"], unusual_buffer(rng)))
    for group in doc["ProcessorGroups"]:
        extras(group)
        for rg in group["ResourceGroups"]:
            extras(rg)
            for tg in rg["TaskGroups"]:
                extras(tg)
    if rng.random() < 0.5:
        doc = {k: doc[k] for k in rng.sample(list(doc), len(doc))}
    if rng.random() < 0.3:
        del doc["Architecture"]
    return doc


@pytest.mark.parametrize("seed", range(40))
def test_unusual_plans(seed):
    doc = unusual_plan(seed)
    module = import_document(JsonNode(copy.deepcopy(doc)))
    verify_module(module)
    assert_same_text(module)
    assert json.loads(plan_text(single_plan(module))) == doc


def test_the_test_can_fail():
    """A one-character change in the document path's text shows."""
    module = import_document(JsonNode(unusual_plan(1)))
    p = single_plan(module)
    assert plan_text(p) != document_text(p).replace("  ", " ", 1)
