"""`--target gemini-layers`: a `dnn` graph as Gemini's frontend layer description.

Layers come out in graph order with their members in the order the imported file had (`keys`);
layers built by planc (from ARK models) list the standard members. Shapes, element types and
the previous/next layer names are regenerated from the graph.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from dialects import dnn
from dialects.json_value import dict_value
from ground.diagnostics import PlancError, UnsupportedInput

STANDARD_KEYS = ("layer_index", "name", "operation", "input_dtype", "output_dtype",
                 "input_shape", "output_shape", "previous_layer", "next_layer")


def pipeline(source_format: str, options: argparse.Namespace) -> str:
    if source_format == "gemini-layers":
        return ""
    if source_format == "ark-model":
        return "dnn-from-ark"
    raise UnsupportedInput("gemini-layers", "a Gemini layer description", source_format)


def emit(module: ModuleOp, options: argparse.Namespace | None = None) -> str:
    graph = dnn.find_graph(module)
    if graph is None:
        raise PlancError("the IR holds no dnn.graph to emit")
    # Gemini's frontend writes json.dump(indent=3): ASCII escapes, no final newline.
    return json.dumps(graph_json(graph), indent=3)


def value_name(value: SSAValue) -> str:
    owner = value.owner
    while "dnn.implicit" in owner.attributes:   # a reshape the file leaves implicit
        value = owner.inputs[0]
        owner = value.owner
    if isinstance(owner, dnn.InputOp):
        return owner.input_name.data
    return owner.layer_name.data


def graph_json(graph: dnn.GraphOp) -> dict[str, Any]:
    outputs: dict[SSAValue, list[str]] = {}
    for out in graph.outputs:
        outputs.setdefault(out.value, []).append(out.output_name.data)
    written = [layer for layer in graph.layers if "dnn.implicit" not in layer.attributes]
    return {layer.name_: layer_json(layer, index, outputs)
            for index, layer in enumerate(written)}


def layer_json(layer: dnn.LayerOp, index: int, outputs: dict[SSAValue, list[str]],
               ) -> dict[str, Any]:
    typed: dict[str, Any] = {
        "layer_index": layer.layer_index.value.data if layer.layer_index else index,
        "name": layer.name_,
        "operation": layer.op_name,
        "input_dtype": [dnn.fmap(v).dtype_name for v in layer.inputs],
        "output_dtype": [layer.out_type.dtype_name],
        "input_shape": [dnn.fmap(v).shape_list for v in layer.inputs],
        "output_shape": [layer.out_type.shape_list],
        "previous_layer": [value_name(v) for v in layer.inputs],
        "next_layer": _next_layers(layer, outputs),
    }
    form = layer.output_form.data if layer.output_form is not None else ""
    if form in ("flat", "flat-shape"):
        typed["output_shape"] = layer.out_type.shape_list
    if form in ("flat", "flat-dtype"):
        typed["output_dtype"] = layer.out_type.dtype_name
    for key in ("kernel_size", "stride", "padding", "pool_size"):
        attr = layer.properties.get(key)
        if attr is not None:
            typed[key] = dnn.ints(attr)
    for key, kind in dnn.LAYER_MEMBERS.get(type(layer), {}).items():
        attr = layer.properties.get(key)
        if attr is not None:
            typed[key] = dnn.member_value(attr, kind)
    extra = dict_value(layer.extra)
    keys = [k.data for k in layer.keys.data] if layer.keys is not None else \
        [*STANDARD_KEYS, *(k for k in typed if k not in STANDARD_KEYS), *extra]
    if layer.keys is not None and "name" not in keys:
        typed.pop("name")
    merged = {**typed, **extra}
    return {k: merged[k] for k in keys if k in merged}


def _next_layers(layer: dnn.LayerOp, outputs: dict[SSAValue, list[str]]) -> list[str]:
    if layer.next_layer is not None:
        return [n.data for n in layer.next_layer.data]
    names = [use.operation.layer_name.data for use in layer.output.uses
             if isinstance(use.operation, dnn.LayerOp)]
    return list(dict.fromkeys(names + outputs.get(layer.output, [])))
