"""Every ARK model file of the upstream corpus imports, verifies and exports unchanged."""

from __future__ import annotations

import json

import pytest

from backends.ark_model import emit_model
from dialects.locations import verify_module
from frontends.ark_model import import_document
from ground.json_reader import load_json_file
from tests.conftest import corpus_params

MODEL_FILES = [p for p in corpus_params("ark")
               if p.values[0] is None or "Nodes" in json.loads(p.values[0].read_text())]


@pytest.mark.parametrize("path", MODEL_FILES)
def test_model_file_round_trip(path):
    module = import_document(load_json_file(path))
    verify_module(module)
    text = emit_model(module)
    assert json.loads(text) == json.loads(path.read_text())
    # Stronger than required: planc writes ARK's own layout, byte for byte.
    assert text == path.read_text()
