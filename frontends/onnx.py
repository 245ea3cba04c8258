"""ONNX models in (`planc model.onnx`): a convolutional network becomes a Gemini layer graph
(`frontends.onnx_cnn`) for the targets that take one, and an ARK model (`frontends.onnx_model`,
convolutions and pooling decomposed by `frontends.onnx_conv`) for the others; anything else
is an ARK model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import frontends.onnx_conv  # noqa: F401 -- registers Conv, pooling and BatchNormalization
import frontends.onnx_ops  # noqa: F401 -- registers the decomposed operators
from frontends.onnx_cnn import import_cnn
from frontends.onnx_model import CNN_OPERATORS, ArkImporter, OnnxImport, fold_constants, load


def import_onnx(path: str, wants: Sequence[str] = ()):
    """The module of an ONNX file: an ARK model, or a dnn graph for convolutional networks
    unless `wants` (the input formats of the target asked for) lacks Gemini layer graphs."""
    return import_model(load(path), path, wants).module


def import_model(model: Any, path: str = "model.onnx", wants: Sequence[str] = ()) -> OnnxImport:
    """`wants`: the formats the caller can take (a target's `sources`); empty, any. A CNN
    becomes a Gemini layer graph where that is taken (as it always did), else an ARK model."""
    ops = {node.op_type for node in model.graph.node}
    if ops & CNN_OPERATORS and (not wants or "gemini-layers" in wants):
        return import_cnn(model, path)
    folding = fold_constants(model)
    return ArkImporter(folding.model, path, folding.note).run()
