"""Gemini's HPCA'24 frontend layer descriptions (issue 25). vgg16.json and ssd.json write
`output_shape` flat and `output_dtype` as a string, where the ResNet files write one-element
lists (planc refused them: "output_shape[0]: expected an array"); both SSD files describe the
divisor of their CPU post-processing as a scalar (`[]`) and slice as ONNX does (`starts`,
`axes`, `steps`); SSD-MobileNetV3 reads some outputs with dims of size 1 added or dropped
([1, 3000, 2] as [1, 3000, 2, 1]). planc reads all of it and writes each file back byte for
byte. The excerpts (head and tail layers, unchanged) and what was left out: data/SOURCES.md;
the whole files (30 to 380 KB) were read upstream in parts only, so this is what the parts
show, not a proof that every layer of them is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("name", ["vgg16_excerpt.json", "ssd_mobilenetv3_excerpt.json",
                                  "ssd_head_excerpt.json", "ssd_mobilenetv3_head_excerpt.json"])
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


@pytest.mark.parametrize(("edit", "where"), [
    # A description that is not the producer's dims with ones added or dropped.
    (lambda d: d["quantize_Div_386_1"]["input_shape"].__setitem__(0, [1, 2, 3000, 1]),
     "$.quantize_Div_386_1.input_shape[0]"),
    # A scalar stands for a constant, never for a layer's output or the first input.
    (lambda d: d["Div_386"]["input_shape"].__setitem__(0, []), "$.Div_386.input_shape[0]"),
])
def test_implicit_reshapes_and_scalars_have_their_limits(planc, tmp_path, edit, where):
    doc = json.loads((DATA / "ssd_mobilenetv3_head_excerpt.json").read_text())
    edit(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    result = planc("check", path)
    assert result.code == 1 and f"{where}:" in result.err, result.err


def test_an_onnx_style_slice_is_the_box_it_names():
    """Slice_373 takes [2, end) of axis 2 of a [1, 3000, 4] map: NCHW offsets [0, 0, 2, 0]."""
    from dialects import dnn
    from frontends.gemini_layers import import_document
    from ground.json_reader import parse_json

    module = import_document(parse_json((DATA / "ssd_head_excerpt.json").read_text()))
    slices = {op.name_: op.start for op in dnn.find_graph(module).layers
              if isinstance(op, dnn.SliceOp)}
    assert slices == {"Slice_368": [0, 0, 0, 0], "Slice_373": [0, 0, 2, 0],
                      "Slice_380": [0, 0, 0, 0], "Slice_385": [0, 0, 2, 0]}
