"""The plain model importer (`ark_model._PlainModel`) builds what the checked one builds.

`import_model` first tries the plain importer, which reads the commonest documents in one pass
and gives up on anything else; the checked importer (`_ModelImporter`) then reads the document
again and says what is wrong. Here both run on generated models, real files and many mutants
of them (broken ones and odd but valid ones): the modules must be equal op by op (types,
properties, locations, operands, uses, value names), or both must refuse with the same
message. The plain importer must accept the unmutated models and give up on some mutants.
"""

from __future__ import annotations

import copy
import json
import random

import pytest
from xdsl.dialects.builtin import ModuleOp, StringAttr

from backends.ark_model import emit_model
from dialects import ark
from frontends import ark_model
from frontends.model_zoo import generated
from ground.diagnostics import PlancError
from ground.json_reader import JsonNode
from tests.ark.fixtures import reshape_model_doc, small_model_doc
from tests.conftest import corpus_root


def describe_module(module: ModuleOp) -> list:
    """Everything an imported module holds, as plain comparable data: per op its class,
    properties in order, attributes, location, operands (by defining op and result index),
    results (types and names) and the uses of each result in use-list order."""
    (model,) = module.ops
    ops = list(model.graph.ops)
    index = {id(op): i for i, op in enumerate(ops)}

    def where(value) -> tuple[int, int]:
        return index[id(value.owner)], value.index

    rows: list = [(type(model), list(model.properties.items()), model.attributes,
                   model.location)]
    for op in ops:
        rows.append((
            type(op), list(op.properties.items()), op.attributes, op.location,
            [where(v) for v in op.operands],
            [(r.type, r.name_hint, [(index[id(u.operation)], u.index) for u in r.uses])
             for r in op.results]))
    return rows


def outcome(run) -> tuple[str, object]:
    try:
        return "module", describe_module(run())
    except PlancError as e:
        return "error", str(e)
    except Exception as e:  # noqa: BLE001 -- the same failure either way (ids beyond int64,
        # which the schema refuses before any importer runs, fail inside the checked one)
        return type(e).__name__, str(e)


def both(doc: dict) -> tuple[tuple, tuple, bool]:
    """(import_model's outcome, the checked importer's, whether the plain one accepted)."""
    plain = ark_model._PlainModel(0, 1)
    accepted = isinstance(doc, dict) and isinstance(doc.get("Rank"), int) and \
        plain.run(copy.deepcopy(doc)) is not None
    fast = outcome(lambda: ark_model.import_model(JsonNode(copy.deepcopy(doc))))
    checked = outcome(lambda: ark_model._ModelImporter(JsonNode(copy.deepcopy(doc))).run())
    return fast, checked, accepted


def model_docs() -> list[dict]:
    docs = [small_model_doc(), reshape_model_doc(), json.loads(emit_model(generated(30)))]
    tutorial = corpus_root() / "ark" / "tutorial_model.json"
    if tutorial.exists():
        docs.append(json.loads(tutorial.read_text()))
    return docs


def test_the_plain_importer_accepts_real_models_and_builds_the_same_module():
    for doc in model_docs():
        fast, checked, accepted = both(doc)
        assert accepted
        assert fast[0] == "module"
        assert fast == checked


def test_the_plain_importer_agrees_on_a_larger_generated_model():
    doc = json.loads(emit_model(generated(400)))
    fast, checked, accepted = both(doc)
    assert accepted and fast == checked


# ---------------------------------------------------------------------------------------------
# Mutants
# ---------------------------------------------------------------------------------------------


def tensors_of(doc: dict) -> list[dict]:
    found = []
    for node in doc["Nodes"]:
        for op in [node["Op"]] if "Op" in node else node.get("Ops", []):
            for key in ("ReadTensors", "WriteTensors", "ResultTensors"):
                found.extend(op.get(key, []))
    return found


ODD_VALUES = [True, False, 1.0, -1, 0, None, "x", [], {}, [1], 2**63, -(2**31) - 1]


def set_tensor_member(doc, rng):
    tensor = rng.choice(tensors_of(doc))
    key = rng.choice(["Id", "DataType", "Shape", "Strides", "Offsets", "PaddedShape", "Pads",
                      "Buffer"])
    if key in ("Shape", "Strides", "Offsets", "PaddedShape", "Pads") and key in tensor \
            and rng.random() < 0.6:
        values = list(tensor[key])
        values[rng.randrange(len(values))] = rng.choice(ODD_VALUES + [1, 2, 64])
        tensor[key] = values
    else:
        tensor[key] = rng.choice(ODD_VALUES + ["FP32", "BF16"])


def drop_tensor_member(doc, rng):
    tensor = rng.choice(tensors_of(doc))
    tensor.pop(rng.choice(list(tensor)))


def retarget_tensor_id(doc, rng):
    tensors = tensors_of(doc)
    rng.choice(tensors)["Id"] = rng.choice(tensors)["Id"]


def change_buffer(doc, rng):
    buffer = rng.choice(tensors_of(doc))["Buffer"]
    key = rng.choice(["Id", "Rank", "SendTags", "RecvTags", "IsExternal", "Extra"])
    buffer[key] = rng.choice(ODD_VALUES + [[[1, 2]], [[0, True]], 7])


def change_operator(doc, rng):
    op = rng.choice(doc["Nodes"])["Op"]
    key = rng.choice(["Type", "Name", "IsVirtual", "ReadTensors", "WriteTensors",
                      "ResultTensors", "Args", "Extra", "Config"])
    choices = ODD_VALUES + ["Add", "Unknown", "Matmul", {"Factor": {"FLOAT": 2}},
                            {"Axis": {"INT": 1}, "KeepDim": {"BOOL": True}},
                            {"Odd": {"INT": 3}}, {"Axis": {"BOOL": 1}}]
    if key in op and rng.random() < 0.3:
        del op[key]
    else:
        op[key] = rng.choice(choices)


def move_tensor(doc, rng):
    """A tensor object dropped from one list or copied into another operator's."""
    ops = [node["Op"] for node in doc["Nodes"]]
    source, target = rng.choice(ops), rng.choice(ops)
    key = rng.choice(["ReadTensors", "WriteTensors", "ResultTensors"])
    if source[key]:
        tensor = source[key].pop(rng.randrange(len(source[key])))
        if rng.random() < 0.5:
            target[rng.choice(["ReadTensors", "WriteTensors"])].append(tensor)


def change_edges(doc, rng):
    node = rng.choice(doc["Nodes"])
    key = rng.choice(["ProducerNodeIds", "ConsumerNodeIds"])
    listed = node[key]
    match rng.randrange(6):
        case 0 if listed:
            listed.pop(rng.randrange(len(listed)))
        case 1:
            listed.append(rng.choice([n["Id"] for n in doc["Nodes"]] + [999, True]))
        case 2 if listed:
            listed.append(listed[0])
        case 3:
            listed.reverse()
        case 4:
            node[key] = rng.choice(ODD_VALUES)
        case _:
            rng.shuffle(listed)


def change_node(doc, rng):
    nodes = doc["Nodes"]
    node = rng.choice(nodes)
    match rng.randrange(6):
        case 0:
            node["Id"] = rng.choice([n["Id"] for n in nodes] + ODD_VALUES)
        case 1:
            node["Extra"] = {"a": 1}
        case 2:
            node["Ops"] = [node.pop("Op")]
        case 3:
            node["Ops"] = [copy.deepcopy(node["Op"])]
        case 4:
            i, j = rng.randrange(len(nodes)), rng.randrange(len(nodes))
            nodes[i], nodes[j] = nodes[j], nodes[i]
        case _:
            nodes.insert(rng.randrange(len(nodes)), copy.deepcopy(node))


def change_document(doc, rng):
    key = rng.choice(["Rank", "WorldSize", "Nodes", "Extra"])
    doc[key] = rng.choice(ODD_VALUES + [2, {"a": 1}])


MUTATIONS = [set_tensor_member, drop_tensor_member, retarget_tensor_id, change_buffer,
             change_operator, move_tensor, change_edges, change_node, change_document]


def mutate(mutation, doc: dict, rng: random.Random) -> None:
    """Apply `mutation`, unless an earlier one left nothing it can change."""
    try:
        mutation(doc, rng)
    except (TypeError, KeyError, AttributeError, IndexError, ValueError):
        pass


@pytest.mark.parametrize("seed", range(6))
def test_mutants_get_the_same_module_or_the_same_error(seed):
    rng = random.Random(seed)
    originals = model_docs()[:3]
    accepted = refused = 0
    for _ in range(60):
        doc = copy.deepcopy(rng.choice(originals))
        for _ in range(rng.choice([1, 1, 2])):
            mutate(rng.choice(MUTATIONS), doc, rng)
        fast, checked, plain = both(doc)
        assert fast == checked, doc
        accepted += plain
        refused += not plain
    assert accepted and refused


def test_each_mutation_reaches_both_importers():
    """Every kind of mutation is sometimes accepted by the checked importer or refused by
    the plain one: none of them is a no-op for the comparison above."""
    rng = random.Random(7)
    base = model_docs()[0]
    for mutation in MUTATIONS:
        gave_up = 0
        for _ in range(12):
            doc = copy.deepcopy(base)
            mutation(doc, rng)
            fast, checked, plain = both(doc)
            assert fast == checked
            gave_up += not plain
        assert gave_up, mutation.__name__


def test_declared_edges_are_still_checked_by_the_checked_importer():
    """A plain document whose declared producers disagree with its dataflow: the plain
    importer gives up and the message is the checked importer's."""
    doc = small_model_doc()
    node = next(n for n in doc["Nodes"] if n["ProducerNodeIds"])
    node["ProducerNodeIds"] = []
    assert ark_model._PlainModel(0, 1).run(copy.deepcopy(doc)) is None
    with pytest.raises(PlancError, match="does not list producer"):
        ark_model.import_model(JsonNode(doc))


def test_described_differently_is_still_an_error():
    doc = small_model_doc()
    op = doc["Nodes"][-1]["Op"]
    op["ReadTensors"][0]["Shape"] = [1] * len(op["ReadTensors"][0]["Shape"])
    assert ark_model._PlainModel(0, 1).run(copy.deepcopy(doc)) is None
    with pytest.raises(PlancError, match="is described differently"):
        ark_model.import_model(JsonNode(doc))


def repeated_tensor(doc: dict) -> tuple[dict, dict]:
    """(the first object of a tensor that several operators list, a later one)."""
    seen: dict[int, dict] = {}
    for node in doc["Nodes"]:
        for tensor in node["Op"]["ReadTensors"] + node["Op"]["WriteTensors"]:
            if tensor["Id"] in seen:
                return seen[tensor["Id"]], tensor
            seen[tensor["Id"]] = tensor
    raise AssertionError("no tensor is listed twice")


@pytest.mark.parametrize("retype", [float, lambda v: True if v == 1 else v],
                         ids=["float", "bool"])
def test_a_repeated_tensor_is_read_as_strictly_as_its_first_object(retype):
    """`[1.0]` or `[true]` equal `[1]` in Python: a later object of a tensor that says so was
    taken for the one already read (and accepted) while the same object first is refused."""
    outcomes = []
    for which in (0, 1):
        doc = json.loads(emit_model(generated(10)))
        tensor = repeated_tensor(doc)[which]
        tensor["Shape"] = [retype(v) for v in tensor["Shape"]]
        assert 1 in tensor["Shape"] or retype is float
        fast, checked, _ = both(doc)
        assert fast == checked
        outcomes.append(fast)
    assert [kind for kind, _ in outcomes] == ["error", "error"]
    assert all(".Shape[" in message for _, message in outcomes)


def test_assembled_operators_equal_constructed_ones():
    tensor = ark.TensorType.get(0, "FP16", [4], ark.BufferAttr.get(0))
    a = ark.ViewOp(tensor).result
    loc = ark_model.json_location("$.Nodes[0].Op")
    built = ark.AddOp("add", [a], [a], [tensor], node=3, virtual=True, location=loc)
    props = {"label": ark.string_attr("add"), "node": ark.int64_attr(3),
             "virtual": built.properties["virtual"]}
    fast = ark.AddOp.assembled(props, [a, a], 1, [tensor], loc)
    assert list(fast.properties.items()) == list(built.properties.items())
    assert fast.location == built.location and list(fast.operands) == list(built.operands)
    assert [r.type for r in fast.results] == [r.type for r in built.results]
    view = ark.ViewOp.assembled(tensor, a, loc)
    twin = ark.ViewOp(tensor, a, location=loc)
    assert list(view.properties.items()) == list(twin.properties.items())
    assert list(view.operands) == list(twin.operands) and view.location == twin.location


def test_untagged_buffers_and_labels_equal_constructed_ones():
    for buffer_id, rank, external in [(0, -1, None), (5, 1, True), (7, -1, False)]:
        fast = ark.BufferAttr.untagged(buffer_id, rank, external)
        slow = ark.BufferAttr(*ark.BufferAttr.get(buffer_id, rank, is_external=external)
                              .parameters)
        assert fast == slow and fast.parameters == slow.parameters
        fast.verify()
    assert ark.string_attr("mul_3") == StringAttr("mul_3")
