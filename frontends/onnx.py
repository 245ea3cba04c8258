"""ONNX models in (`planc model.onnx`): a convolutional network becomes a Gemini layer graph
(`frontends.onnx_cnn`), anything else an ARK model (`frontends.onnx_model`)."""

from __future__ import annotations

from typing import Any

import frontends.onnx_ops  # noqa: F401 -- registers the decomposed operators
from frontends.onnx_cnn import import_cnn
from frontends.onnx_model import CNN_OPERATORS, ArkImporter, OnnxImport, fold_constants, load


def import_onnx(path: str):
    """The module of an ONNX file: an ARK model, or a dnn graph for convolutional networks."""
    return import_model(load(path), path).module


def import_model(model: Any, path: str = "model.onnx") -> OnnxImport:
    ops = {node.op_type for node in model.graph.node}
    if ops & CNN_OPERATORS:
        return import_cnn(model, path)
    folding = fold_constants(model)
    return ArkImporter(folding.model, path, folding.note).run()
