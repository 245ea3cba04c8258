"""Small ARK model documents for tests, built with the model builder."""

from __future__ import annotations

import json

from backends.ark_model import emit_model
from frontends.model_builder import ModelBuilder


def small_model_doc() -> dict:
    """x[4,8] @ w[16,8]^T -> sigmoid -> add(mm, sig): three nodes, FP32."""
    m = ModelBuilder()
    x = m.tensor([4, 8], "FP32")
    w = m.tensor([16, 8], "FP32")
    y = m.matmul(x, w, transpose_other=True)
    m.add(y, m.sigmoid(y))
    return json.loads(emit_model(m.finish()))


def reshape_model_doc() -> dict:
    """exp then a reshaped view of its result read by sqrt: the view has no producing node."""
    m = ModelBuilder()
    e = m.exp(m.tensor([4, 8], "FP32"))
    m.sqrt(m.reshape(e, [32]))
    return json.loads(emit_model(m.finish()))


def to_ops_form(doc: dict) -> dict:
    """The same model in the legacy layout: each node's operator inside an `Ops` list."""
    doc = json.loads(json.dumps(doc))
    for node in doc["Nodes"]:
        node["Ops"] = [node.pop("Op")]
    return doc
