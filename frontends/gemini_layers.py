"""Import Gemini's frontend layer description (the "Frontend IR") into the `dnn` dialect.

The document is an object of layers keyed by name; each layer names its `operation`, its
`previous_layer`s (layers, or names of network inputs and constants such as conv weights) with
their `input_shape`/`input_dtype`, one `output_shape`/`output_dtype`, and its `next_layer`s
(layers, or network outputs). Here every layer becomes one `dnn` layer op whose operands are its
previous layers' results, every name that is not a layer becomes a `dnn.input` (a constant when
it is not the first input of a layer, or its name says so) and every next name that is not a
layer a `dnn.output`.

The geometry of convolutions and pools is typed; all other members (quantisation, file lists,
module lists, ...) are kept in `extra` with the member order in `keys`, so the description
exports back unchanged (`--target gemini-layers`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr, UnitAttr, i64
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from dialects import dnn
from dialects.json_value import dict_attr
from dialects.locations import json_location
from ground.json_reader import JsonNode

TYPED_KEYS = frozenset({"layer_index", "operation", "input_shape", "output_shape",
                        "input_dtype", "output_dtype", "previous_layer", "next_layer"})
GEOMETRY = {"kernel_size": 2, "stride": 2, "padding": 4, "pool_size": 2}
"""Typed geometry members and their lengths (on the layer kinds that have them)."""


def import_document(doc: JsonNode) -> ModuleOp:
    layers = dict(doc.items())
    if not layers:
        raise doc.error("expected at least one layer")
    order = _topological_order(layers)
    block = Block()
    values: dict[str, SSAValue] = {}
    inputs: dict[str, dnn.InputOp] = {}
    outputs: list[tuple[str, str]] = []
    for name in order:
        node = layers[name]
        operands = [_operand(node, i, prev, layers, values, inputs, block, name)
                    for i, prev in enumerate(_names(node, "previous_layer"))]
        op = _layer(name, node, operands)
        block.add_op(op)
        values[name] = op.output
        outputs += [(nxt, name) for nxt in _names(node, "next_layer") if nxt not in layers]
    seen: set[str] = set()
    for out_name, producer in outputs:
        if out_name not in seen:
            seen.add(out_name)
            block.add_op(dnn.OutputOp.new(out_name, values[producer]))
    _check_next_layers(layers, block)
    graph = dnn.GraphOp.create(regions=[Region(block)])
    graph.location = json_location(doc.path)
    return ModuleOp([graph])


def _names(node: JsonNode, key: str) -> list[str]:
    """The names a layer lists. A layer may take one producer twice (x * x lists it twice in
    previous_layer, one per input); a consumer listed twice in next_layer is the same one."""
    member = node[key]
    names = [e.as_str() for e in member.elements()]
    if key == "next_layer" and len(set(names)) != len(names):
        raise member.error("lists a name twice")
    return names


def _topological_order(layers: dict[str, JsonNode]) -> list[str]:
    """Layer names, producers before consumers, otherwise in file order."""
    done: set[str] = set()
    order: list[str] = []
    visiting: set[str] = set()
    for root, node in layers.items():
        node.as_dict()
        # Depth-first without recursion (a network may be thousands of layers deep): each
        # stack entry is a layer and the producers still to visit.
        stack = [(root, iter(_names(node, "previous_layer")))] if root not in done else []
        visiting.add(root)
        while stack:
            name, pending = stack[-1]
            prev = next((p for p in pending if p in layers and p not in done), None)
            if prev is None:
                stack.pop()
                visiting.discard(name)
                done.add(name)
                order.append(name)
            elif prev in visiting:
                raise layers[prev]["previous_layer"].error(
                    f"layer '{prev}' depends on itself (a cycle through previous_layer)")
            else:
                visiting.add(prev)
                stack.append((prev, iter(_names(layers[prev], "previous_layer"))))
    return order


def _shape_at(node: JsonNode, key: str, index: int, scalar: bool = False,
              ) -> tuple[list[int], JsonNode]:
    """The shape of input `index`; `scalar`: it may be `[]` (a constant other than the first
    input: Gemini's SSD files divide by one in their CPU post-processing)."""
    shapes = node[key]
    elements = shapes.elements()
    if index >= len(elements):
        raise shapes.error(f"expected a shape for input {index} (one per previous_layer), got "
                           f"{len(elements)}")
    element = elements[index]
    if scalar and isinstance(element.value, list) and not element.value:
        return [], element
    return element.as_int_list(1, 4, min_value=1), element


def _dtype_at(node: JsonNode, key: str, index: int) -> str:
    dtypes = node[key].elements()
    if index >= len(dtypes):
        raise node[key].error(f"expected an element type for position {index}, got "
                              f"{len(dtypes)}")
    dtype = dtypes[index].as_str()
    if dtype not in dnn.DTYPE_BITS:
        raise dtypes[index].error(f"unknown element type '{dtype}' (known: "
                                  f"{', '.join(dnn.DTYPE_BITS)})")
    return dtype


def _operand(node: JsonNode, index: int, prev: str, layers: dict[str, JsonNode],
             values: dict[str, SSAValue], inputs: dict[str, dnn.InputOp], block: Block,
             consumer: str = "") -> SSAValue:
    shape, shape_node = _shape_at(node, "input_shape", index,
                                  scalar=index > 0 and prev not in layers)
    dtype = _dtype_at(node, "input_dtype", index)
    if prev in layers:
        produced = dnn.fmap(values[prev])
        if produced.shape_list != shape and produced.dtype_name == dtype and \
                _squeezed(produced.shape_list) == _squeezed(shape):
            return _implicit_reshape(values[prev], shape, dtype, prev, consumer, block,
                                     shape_node)
        if produced.shape_list != shape or produced.dtype_name != dtype:
            raise shape_node.error(f"input {index} from layer '{prev}' is described as "
                                   f"{shape} {dtype}, but '{prev}' produces "
                                   f"{produced.shape_list} {produced.dtype_name}")
        return values[prev]
    type_ = dnn.FmapType.get(shape, dtype)
    known = inputs.get(prev)
    if known is not None:
        if known.output.type != type_:
            raise shape_node.error(f"'{prev}' is used as {shape} {dtype} here but as "
                                   f"{known.output.type.shape_list} "
                                   f"{known.output.type.dtype_name} elsewhere")
        return known.output
    # Inputs after the first are weights and constants, but a concat's are all activations.
    concat = node.get("operation") is not None and node["operation"].as_str() == "concat"
    constant = index > 0 and not concat or "constant" in prev or "weight" in prev
    op = dnn.InputOp.new(prev, type_, constant)
    op.location = json_location(node["previous_layer"].elements()[index].path)
    inputs[prev] = op
    first_layer = next((o for o in block.ops if not isinstance(o, dnn.InputOp)), None)
    if first_layer is None:
        block.add_op(op)
    else:
        block.insert_op_before(op, first_layer)
    return op.output


def _layer(name: str, node: JsonNode, operands: list[SSAValue]) -> dnn.LayerOp:
    operation = node["operation"].as_str()
    cls = dnn.layer_class(operation)
    shape, dtype, form = _output(node)
    out = dnn.FmapType.get(shape, dtype)
    if len(node["input_shape"].as_list()) != len(operands):
        raise node["input_shape"].error(f"expected {len(operands)} shapes (one per "
                                        f"previous_layer), got {len(node['input_shape'].value)}")
    props: dict[str, Attribute | None] = {"keys": ArrayAttr([StringAttr(k) for k in
                                                            node.as_dict()])}
    index = node.get("layer_index")
    if index is not None:
        props["layer_index"] = IntegerAttr(index.as_int(), i64)
    props["next_layer"] = ArrayAttr([StringAttr(n) for n in _names(node, "next_layer")])
    if form:
        props["output_form"] = StringAttr(form)
    typed = set(TYPED_KEYS)
    for key, length in GEOMETRY.items():
        member = node.get(key)
        if member is None or key not in _geometry_of(cls):
            continue
        props[key] = dnn._ints(member.as_int_list(length, length, min_value=0))
        typed.add(key)
    for key, kind in dnn.LAYER_MEMBERS.get(cls, {}).items():
        member = node.get(key)
        if member is None:
            continue
        props[key] = dnn.member_attr(_member_value(member, kind), kind)
        typed.add(key)
    if cls is dnn.SliceOp and "offsets" not in props and node.get("starts") is not None:
        props["offsets"] = dnn._ints(_slice_offsets(node, operands[0]))
    props["extra"] = dict_attr(node.unknown_members(typed))
    op = cls.new(name, operation, operands, out, **props)
    op.location = json_location(node.path)
    try:
        op.verify_()
    except VerifyException as e:
        raise node.error(str(e).removeprefix(f"{operation} layer '{name}': ")) from None
    return op


IMPLICIT = "dnn.implicit"
"""On a reshape the file does not write: a layer reads its producer's output with dims of size
1 added or left out (SSD-MobileNetV3's quantize_Div_386_1 reads Div_386's [1, 3000, 2] as
[1, 3000, 2, 1], Add_387_1 reads [1, 3000, 2, 1] as [1, 1, 3000, 2]); any other difference is
an error. The exporter leaves it out, so the file comes back as it was."""


def _squeezed(shape: list[int]) -> list[int]:
    return [d for d in shape if d != 1]


def _implicit_reshape(value: SSAValue, shape: list[int], dtype: str, prev: str, consumer: str,
                      block: Block, where: JsonNode) -> SSAValue:
    op = dnn.ReshapeOp.new(f"{prev}:{consumer}", "reshape", [value],
                           dnn.FmapType.get(shape, dtype))
    op.attributes[IMPLICIT] = UnitAttr()
    op.location = json_location(where.path)
    block.add_op(op)
    return op.output


def _slice_offsets(node: JsonNode, source: SSAValue) -> list[int]:
    """NCHW `offsets` of a slice written as ONNX writes it (`starts`, `axes`, `steps`, the
    form of Gemini's SSD files; `ends` follows from the output shape). The axes count the
    input's own dims, which `FmapType.nchw` places in NCHW."""
    rank = len(dnn.fmap(source).shape_list)
    place = {1: [1], 2: [0, 1], 3: [0, 1, 2], 4: [0, 1, 2, 3]}.get(rank, [])
    starts = node["starts"].as_int_list(1, 4, min_value=0)
    axes = node["axes"].as_int_list(len(starts), len(starts), min_value=-rank) \
        if node.get("axes") is not None else list(range(len(starts)))
    if node.get("steps") is not None and any(
            step != 1 for step in node["steps"].as_int_list(len(starts), len(starts))):
        raise node["steps"].error("a slice with a step other than 1 is not a view (planc "
                                  "reads slices of contiguous boxes)")
    offsets = [0, 0, 0, 0]
    for start, axis in zip(starts, axes, strict=True):
        axis %= rank
        if axis >= len(place):
            raise node["axes"].error(f"axis {axis} is not a dimension of the input")
        offsets[place[axis]] = start
    return offsets


def _output(node: JsonNode) -> tuple[list[int], str, str]:
    """The layer's output shape and element type, and how they were written: as one-element
    lists (`[[1, 64, 112, 112]]`, `["int8"]`: the ResNet files), or flat (`[1, 64, 224, 224]`,
    `"int8"`: Gemini's HPCA'24 files vgg16.json and ssd.json; SSD-MobileNetV3 mixes them)."""
    member = node["output_shape"]
    elements = member.elements()
    flat_shape = bool(elements) and not isinstance(elements[0].value, list)
    if flat_shape:
        shape = member.as_int_list(1, 4, min_value=1)
    else:
        if len(elements) != 1:
            raise member.error(f"expected one output shape, got {len(elements)}")
        shape = elements[0].as_int_list(1, 4, min_value=1)
    dtype_node = node["output_dtype"]
    flat_dtype = isinstance(dtype_node.value, str)
    if flat_dtype:
        dtype = dtype_node.as_str()
        if dtype not in dnn.DTYPE_BITS:
            raise dtype_node.error(f"unknown element type '{dtype}' (known: "
                                   f"{', '.join(dnn.DTYPE_BITS)})")
    else:
        dtype = _dtype_at(node, "output_dtype", 0)
    form = "flat" if flat_shape and flat_dtype else "flat-shape" if flat_shape else \
        "flat-dtype" if flat_dtype else ""
    return shape, dtype, form


def _member_value(member: JsonNode, kind: str):
    if kind == "ints":
        return member.as_int_list(1, 8)
    return {"int": member.as_int, "bool": member.as_bool, "float": member.as_number}[kind]()


def _geometry_of(cls: type[dnn.LayerOp]) -> frozenset[str]:
    if cls is dnn.Conv2dOp:
        return frozenset({"kernel_size", "stride", "padding"})
    if cls is dnn.PoolOp:
        return frozenset({"pool_size", "stride", "padding"})
    return frozenset()


def _check_next_layers(layers: dict[str, JsonNode], block: Block) -> None:
    """Each layer's next_layer names exactly the layers that list it as previous."""
    consumers: dict[str, set[str]] = {name: set() for name in layers}
    for name, node in layers.items():
        for prev in _names(node, "previous_layer"):
            if prev in consumers:
                consumers[prev].add(name)
    for name, node in layers.items():
        listed = {n for n in _names(node, "next_layer") if n in layers}
        if listed != consumers[name]:
            missing = sorted(consumers[name] - listed)
            extra = sorted(listed - consumers[name])
            what = (f"does not list '{missing[0]}', which takes '{name}' as previous_layer"
                    if missing else f"lists '{extra[0]}', which does not take '{name}' as "
                                    f"previous_layer")
            raise node["next_layer"].error(what)


def describe(module: ModuleOp) -> str:
    graph = dnn.find_graph(module)
    kinds: dict[str, int] = {}
    written = [layer for layer in graph.layers if IMPLICIT not in layer.attributes]
    for layer in written:
        kinds[layer.op_name] = kinds.get(layer.op_name, 0) + 1
    parts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    implicit = len(graph.layers) - len(written)
    more = f" (and {implicit} reshape(s) the file leaves implicit)" if implicit else ""
    return f"{len(written)} layers: {parts}{more}"

