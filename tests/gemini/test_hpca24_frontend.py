"""Gemini's HPCA'24 frontend layer descriptions (issue 25): vgg16.json and ssd.json write
`output_shape` flat and `output_dtype` as a string, where the ResNet files write one-element
lists. planc refused them ("output_shape[0]: expected an array"); it reads both forms and writes
each file back in its own form. Excerpts and what was trimmed: data/SOURCES.md.

SSD-MobileNetV3's whole file is still refused: its CPU post-processing layers (Div_386 ...)
describe a scalar constant input as `[]` and read a producer's [1, 3000, 2] output as
[1, 3000, 2, 1], a reshape the file leaves implicit. Its first layers (the excerpt) are read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("name", ["vgg16_excerpt.json", "ssd_mobilenetv3_excerpt.json"])
def test_hpca24_frontend_files_check_and_round_trip(planc, tmp_path, name):
    source = DATA / name
    assert planc("check", "--strict", source).code == 0
    out = tmp_path / name
    assert planc(source, "-t", "gemini-layers", "-o", out).code == 0
    assert out.read_bytes() == source.read_bytes()


def test_flat_forms_carry_the_same_shapes_as_lists(planc, tmp_path):
    """The flat file and the same file written with lists describe one network: each form
    exports back as written, and the layer shapes planc reads are equal."""
    flat = json.loads((DATA / "vgg16_excerpt.json").read_text())
    listed = {name: {**layer, "output_shape": [layer["output_shape"]],
                     "output_dtype": [layer["output_dtype"]]} for name, layer in flat.items()}
    path = tmp_path / "listed.json"
    path.write_text(json.dumps(listed, indent=3))
    out = tmp_path / "listed_out.json"
    assert planc(path, "-t", "gemini-layers", "-o", out).code == 0
    assert json.loads(out.read_text()) == listed
    texts = [planc(p).out for p in (DATA / "vgg16_excerpt.json", path)]
    assert texts[0].replace('output_form = "flat", ', "") == texts[1]


@pytest.mark.parametrize(("layer", "key", "value", "where"), [
    ("Conv_3", "output_shape", [1, 64, 224, 224, 1], "$.Conv_3.output_shape"),
    ("MaxPool_6", "output_dtype", "int7", "$.MaxPool_6.output_dtype"),
    ("Conv_3", "output_shape", [1, 64, 224, 223], "$.Conv_3"),
])
def test_a_flat_form_still_has_its_rules(planc, tmp_path, layer, key, value, where):
    flat = json.loads((DATA / "vgg16_excerpt.json").read_text())
    flat[layer][key] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(flat))
    result = planc("check", path)
    assert result.code == 1 and f"{where}:" in result.err, result.err
