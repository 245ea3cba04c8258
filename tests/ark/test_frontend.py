"""Importing ARK model files: layouts, unknown fields, dataflow checks, and bad input."""

from __future__ import annotations

import copy
import json

import pytest

from backends.ark_model import model_json, single_model
from dialects import ark
from frontends.ark_model import import_document
from ground.diagnostics import PlancError
from ground.json_reader import JsonNode
from tests.ark.fixtures import reshape_model_doc, small_model_doc, to_ops_form


def round_trip(doc: dict) -> dict:
    return model_json(single_model(import_document(JsonNode(doc))))


def error_of(doc) -> PlancError:
    with pytest.raises(PlancError) as info:
        import_document(JsonNode(doc))
    return info.value


class TestLayouts:
    def test_op_form_round_trips(self):
        doc = small_model_doc()
        assert round_trip(doc) == doc

    def test_ops_list_form_round_trips(self):
        doc = to_ops_form(small_model_doc())
        module = import_document(JsonNode(doc))
        assert single_model(module).uses_ops_lists
        assert round_trip(doc) == doc

    def test_several_operators_per_node(self):
        doc = to_ops_form(small_model_doc())
        # Merge node 1 (sigmoid) into node 0, as pre-#228 ARK merged nodes.
        node0, node1, node2 = doc["Nodes"]
        node0["Ops"] += node1["Ops"]
        node0["ConsumerNodeIds"] = [2]
        node2["ProducerNodeIds"] = [0]
        doc["Nodes"] = [node0, node2]
        node2["Id"] = 2
        assert round_trip(doc) == doc

    def test_older_tensor_key_order_is_accepted(self):
        doc = small_model_doc()
        reordered = copy.deepcopy(doc)
        for node in reordered["Nodes"]:
            op = node["Op"]
            for key in ("ReadTensors", "WriteTensors", "ResultTensors"):
                op[key] = [{"Id": t["Id"], "DataType": t["DataType"], "Buffer": t["Buffer"],
                            "Shape": t["Shape"], "Strides": t["Strides"],
                            "Offsets": t["Offsets"], "PaddedShape": t["PaddedShape"]}
                           for t in op[key]]
        assert round_trip(reordered) == doc

    def test_seed_style_pads_instead_of_padded_shape(self):
        doc = small_model_doc()
        for node in doc["Nodes"]:
            for key in ("ReadTensors", "WriteTensors", "ResultTensors"):
                for t in node["Op"][key]:
                    t["Pads"] = [1] * len(t.pop("PaddedShape"))
        assert round_trip(doc) == doc

    def test_producer_order_of_the_file_is_kept(self):
        doc = small_model_doc()
        doc["Nodes"][2]["ProducerNodeIds"] = [1, 0]
        assert round_trip(doc)["Nodes"][2]["ProducerNodeIds"] == [1, 0]


class TestUnknownFieldsAreKept:
    def test_at_every_level(self):
        doc = small_model_doc()
        doc["Comment"] = {"by": "hand", "n": [1, 2.5, None, True]}
        node = doc["Nodes"][0]
        node["Stage"] = 3
        node["Op"]["Priority"] = "high"
        node["Op"]["Args"]["Alpha"] = {"FLOAT": 0.1}
        tensor = node["Op"]["ReadTensors"][0]
        tensor["Layout"] = "row"
        tensor["Buffer"]["IsExternal"] = True
        tensor["Buffer"]["Pool"] = 2
        # The same tensor object appears again nowhere else, so the change is consistent.
        assert round_trip(doc) == doc

    def test_unknown_operator_type_with_every_argument_type(self):
        doc = small_model_doc()
        op = doc["Nodes"][1]["Op"]
        op["Type"] = "FancyActivation"
        op["IsVirtual"] = False
        tensor_arg = copy.deepcopy(op["ReadTensors"][0])
        op["Args"] = {
            "A": {"INT": -3}, "B": {"UINT32": 4000000000}, "C": {"INT64": -2**40},
            "D": {"UINT64": 2**64 - 1}, "E": {"BOOL": True}, "F": {"FLOAT": 0.0883883461356163},
            "G": {"DIMS": [1, 2, 3, 4]}, "H": {"TENSOR": tensor_arg},
            "I": {"OFFSET": {"BufferId": 3, "Value": 8192}},
        }
        module = import_document(JsonNode(doc))
        generic = [o for o in single_model(module).operators() if isinstance(o, ark.GenericOp)]
        assert [g.ark_type for g in generic] == ["FancyActivation"]
        assert round_trip(doc) == doc


class TestDataflow:
    def test_consumers_use_producer_values(self):
        module = import_document(JsonNode(small_model_doc()))
        matmul, sigmoid, add = single_model(module).operators()
        assert sigmoid.read_tensors[0] is matmul.result_tensors[0]
        assert add.read_tensors[1] is sigmoid.result_tensors[0]

    def test_view_of_a_removed_reshape_links_to_its_producer(self):
        doc = reshape_model_doc()
        module = import_document(JsonNode(doc))
        exp_op, sqrt_op = single_model(module).operators()
        view = sqrt_op.read_tensors[0].owner
        assert isinstance(view, ark.ViewOp) and view.source is exp_op.result_tensors[0]
        assert round_trip(doc) == doc

    def test_undeclared_view_dependency_stays_unlinked(self):
        doc = reshape_model_doc()
        doc["Nodes"][0]["ConsumerNodeIds"] = []
        doc["Nodes"][1]["ProducerNodeIds"] = []
        module = import_document(JsonNode(doc))
        view = single_model(module).operators()[1].read_tensors[0].owner
        assert view.source is None
        assert round_trip(doc) == doc


class TestDeclaredEdges:
    @pytest.mark.parametrize("edit, path, message", [
        (lambda d: d["Nodes"][2].update(ProducerNodeIds=[1]),
         "$.Nodes[2].ProducerNodeIds",
         "node 2 does not list producer 0, although it uses a tensor produced by node 0"),
        (lambda d: d["Nodes"][1].update(ProducerNodeIds=[0, 2]),
         "$.Nodes[1].ProducerNodeIds[1]",
         "node 1 lists producer 2, but none of its tensors comes from node 2"),
        (lambda d: d["Nodes"][0].update(ConsumerNodeIds=[1]),
         "$.Nodes[0].ConsumerNodeIds",
         "node 0 does not list consumer 2, although node 2 uses a tensor it produces"),
        (lambda d: d["Nodes"][0].update(ConsumerNodeIds=[1, 2, 7]),
         "$.Nodes[0].ConsumerNodeIds[2]",
         "node 0 lists consumer 7, which is not a node of this model"),
        (lambda d: d["Nodes"][2].update(ProducerNodeIds=[0, 1, 0]),
         "$.Nodes[2].ProducerNodeIds[2]", "node 2 lists producer 0 twice"),
    ])
    def test_mismatches_name_both_nodes(self, edit, path, message):
        doc = small_model_doc()
        edit(doc)
        error = error_of(doc)
        assert (error.path, error.message) == (path, message)


def at(doc, path: str):
    """Navigate a document with a JSONPath like $.Nodes[0].Op."""
    target = doc
    for part in path.replace("[", ".[").split(".")[1:]:
        target = target[int(part[1:-1])] if part.startswith("[") else target[part]
    return target


class TestBadInput:
    @pytest.mark.parametrize("edit, path, message", [
        (lambda d: d.pop("WorldSize"), "$", "missing required key 'WorldSize'"),
        (lambda d: d.update(Nodes={}), "$.Nodes", "expected an array, got an object"),
        (lambda d: d["Nodes"][0].pop("Op"), "$.Nodes[0]", "missing required key 'Op'"),
        (lambda d: d["Nodes"][0].update(Ops=[]), "$.Nodes[0]", "has both 'Op' and 'Ops'"),
        (lambda d: d["Nodes"][1].update(Id=0), "$.Nodes[1].Id", "node id 0 is used by two nodes"),
        (lambda d: at(d, "$.Nodes[0].Op").update(Type=7), "$.Nodes[0].Op.Type",
         "expected a string, got an integer (7)"),
        (lambda d: at(d, "$.Nodes[0].Op").update(IsVirtual="no"), "$.Nodes[0].Op.IsVirtual",
         'expected a boolean, got a string ("no")'),
        (lambda d: at(d, "$.Nodes[0].Op.ReadTensors[0]").update(Shape=[4, "8"]),
         "$.Nodes[0].Op.ReadTensors[0].Shape[1]",
         "expected an integer (1 to 4 integers here), got a string (\"8\")"),
        (lambda d: at(d, "$.Nodes[0].Op.ReadTensors[0]").update(Shape=[]),
         "$.Nodes[0].Op.ReadTensors[0].Shape", "expected 1 to 4 integers, got 0"),
        (lambda d: at(d, "$.Nodes[0].Op.ReadTensors[0]").update(Strides=[4]),
         "$.Nodes[0].Op.ReadTensors[0].Strides", "expected 2 integers like Shape, got 1"),
        (lambda d: at(d, "$.Nodes[0].Op.ReadTensors[0]").update(Offsets=[1, 0]),
         "$.Nodes[0].Op.ReadTensors[0]", "tensor 0: offsets + shape exceed strides in dim 0 (1 + 4 > 4)"),
        (lambda d: at(d, "$.Nodes[0].Op.ReadTensors[0]").update(DataType="FP8"),
         "$.Nodes[0].Op.ReadTensors[0].DataType", "unknown data type 'FP8'"),
        (lambda d: at(d, "$.Nodes[0].Op.ReadTensors[0].Buffer").pop("SendTags"),
         "$.Nodes[0].Op.ReadTensors[0].Buffer", "missing required key 'SendTags'"),
        (lambda d: at(d, "$.Nodes[0].Op.ReadTensors[0].Buffer").update(SendTags=[[1]]),
         "$.Nodes[0].Op.ReadTensors[0].Buffer.SendTags[0]", "expected 2 integers, got 1"),
        (lambda d: at(d, "$.Nodes[0].Op.Args").update(TransposeOther={"INT": 1}),
         "$.Nodes[0].Op.Args.TransposeOther", "expected a BOOL argument, got INT"),
        (lambda d: at(d, "$.Nodes[0].Op.Args").update(TransposeOther={"BOOL": True, "INT": 1}),
         "$.Nodes[0].Op.Args.TransposeOther", "expected an object with exactly one key, got 2"),
        (lambda d: at(d, "$.Nodes[0].Op.Args").update(X={"DOUBLE": 1.0}),
         "$.Nodes[0].Op.Args.X", "unknown argument type 'DOUBLE'"),
        (lambda d: at(d, "$.Nodes[0].Op.Args").pop("TransposeInput"),
         "$.Nodes[0].Op.Args", "missing argument 'TransposeInput' (BOOL) of Matmul"),
        (lambda d: at(d, "$.Nodes[0].Op.Args").update(TransposeOther={"BOOL": 1}),
         "$.Nodes[0].Op.Args.TransposeOther.BOOL", "expected a boolean, got an integer (1)"),
        (lambda d: at(d, "$.Nodes[1].Op.ReadTensors[0]").update(Shape=[4, 4], Strides=[4, 4],
                                                                   Offsets=[0, 0], PaddedShape=[4, 4]),
         "$.Nodes[1].Op.ReadTensors[0]", "tensor 3 is described differently than at "
                                         "$.Nodes[0].Op.ResultTensors[0]"),
        (lambda d: at(d, "$.Nodes[1].Op.ResultTensors[0]").update(Id=3),
         "$.Nodes[1].Op.ResultTensors[0]", "tensor 3 is already a result at "
                                           "$.Nodes[0].Op.ResultTensors[0]"),
    ])
    def test_precise_errors(self, edit, path, message):
        doc = small_model_doc()
        edit(doc)
        error = error_of(doc)
        assert error.path == path
        assert error.message.startswith(message)

    def test_forward_reference(self):
        doc = small_model_doc()
        doc["Nodes"] = [doc["Nodes"][1], doc["Nodes"][0], doc["Nodes"][2]]
        error = error_of(doc)
        assert error.path == "$.Nodes[1].Op.ResultTensors[0]"
        assert error.message == ("tensor 3 is used at $.Nodes[0].Op.ReadTensors[0] before this "
                                 "operator produces it")

    def test_not_an_object(self):
        error = error_of([1, 2])
        assert (error.path, error.message) == ("$", "expected an ARK model object, got an array of 2")


def test_doc_survives_json_text():
    doc = small_model_doc()
    assert json.loads(json.dumps(round_trip(doc))) == doc
