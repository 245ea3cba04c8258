"""Export the `ark` dialect as ARK model files (and the operator objects ARK plans embed).

Keys come out in the order current ARK writes them (tensors: Id, DataType, Shape, Strides,
Offsets, PaddedShape, Buffer; Args alphabetical); fields kept in `extra` follow the known ones.
ProducerNodeIds/ConsumerNodeIds are regenerated from the dataflow, in ascending order unless the
imported file used another order for the same ids.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import ModuleOp, NoneAttr
from xdsl.ir import Attribute

from backends.json_format import MODEL_DEPTH, denser_json
from dialects import ark
from dialects.json_value import dict_value
from dialects.utils import single_root
from ground.diagnostics import PlancError, UnsupportedInput


def buffer_json(buffer: ark.BufferAttr) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Id": buffer.id.data,
        "Rank": buffer.rank.data,
        "SendTags": [list(p) for p in buffer.send_tag_pairs],
        "RecvTags": [list(p) for p in buffer.recv_tag_pairs],
    }
    if not isinstance(buffer.is_external, NoneAttr):
        out["IsExternal"] = bool(buffer.is_external.value.data)
    out.update(dict_value(buffer.extra))
    return out


def tensor_json(tensor: ark.TensorType) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Id": tensor.tensor_id,
        "DataType": tensor.data_type,
        "Shape": tensor.shape_list,
        "Strides": tensor.strides_list,
        "Offsets": tensor.offsets_list,
    }
    if not isinstance(tensor.padded_shape, NoneAttr):
        out["PaddedShape"] = tensor.padded_list
    if not isinstance(tensor.pads, NoneAttr):
        out["Pads"] = list(tensor.pads.get_values())
    out["Buffer"] = buffer_json(tensor.buffer)
    out.update(dict_value(tensor.extra))
    return out


def arg_json(attr: Attribute) -> dict[str, Any]:
    kind = ark.ArgKind.of(attr)
    match kind:
        case ark.ArgKind.TENSOR:
            value: Any = tensor_json(attr)
        case ark.ArgKind.OFFSET:
            value = {"BufferId": attr.buffer_id.data, "Value": attr.value.data}
        case _:
            value = ark.arg_value(attr)
    return {kind.value: value}


def operator_json(op: ark.ArkOp, tensors: dict | None = None,
                  configs: dict | None = None) -> dict[str, Any]:
    """The operator object; plans add their `Config` (kept on the op) after `Args`.

    `tensors`, when given, memoizes tensor objects across operators (a tensor appears as the
    result of one operator and the input of others), by the identity of the type attribute
    (which the IR keeps alive); `configs` likewise memoizes Config and argument objects by
    the identity of the attribute (which the memo keeps alive). The caller must not mutate
    them.
    """
    def tensor(t: ark.TensorType) -> dict[str, Any]:
        if tensors is None:
            return tensor_json(t)
        found = tensors.get(id(t))  # by identity: hashing a tensor type is slow
        if found is None:
            found = tensors[id(t)] = tensor_json(t)
        return found

    def arg(attr: Attribute) -> dict[str, Any]:
        if configs is None:
            return arg_json(attr)
        found = configs.get(("Args", id(attr)))  # arguments repeat: flags, axes, dims
        if found is None:
            found = configs[("Args", id(attr))] = (attr, arg_json(attr))
        return found[1]

    out: dict[str, Any] = {
        "Type": op.ark_type,
        "Name": op.label.data,
        "IsVirtual": op.is_virtual,
        "ReadTensors": [tensor(t) for t in op.inputs],
        "WriteTensors": [tensor(t) for t in op.outputs],
        "ResultTensors": [tensor(t) for t in op.results_types],
        "Args": {key: arg(attr) for key, attr in op.arg_attrs().items()},
    }
    if op.config is not None:
        if configs is None:
            out["Config"] = dict_value(op.config)
        else:  # kernels that share a tiling share its Config attribute
            found = configs.get(id(op.config))
            if found is None:
                found = configs[id(op.config)] = (op.config, dict_value(op.config))
            out["Config"] = found[1]
    out.update(dict_value(op.extra))
    return out


def _ordered(derived: list[int], hint: list[int] | None) -> list[int]:
    """`derived` in the file's order where the file listed them, the rest ascending."""
    wanted = set(derived)
    first = [n for n in (hint or []) if n in wanted]
    return first + sorted(wanted - set(first))


def model_json(model: ark.ModelOp) -> dict[str, Any]:
    block = model.graph
    producers = ark.node_producers(block)
    consumers = ark.node_consumers(producers)
    nodes: dict[int, list[ark.ArkOp]] = {}
    for op in model.operators():
        if op.node_id is None:
            raise PlancError(f"{op.ark_type} '{op.label.data}' belongs to no node; a model "
                             "file needs every operator in a node")
        nodes.setdefault(op.node_id, []).append(op)
    out_nodes = []
    for node_id, ops in nodes.items():
        info = dict_value(ops[0].node_info)
        node: dict[str, Any] = {
            "Id": node_id,
            "ProducerNodeIds": _ordered(producers[node_id], info.pop("ProducerNodeIds", None)),
            "ConsumerNodeIds": _ordered(consumers[node_id], info.pop("ConsumerNodeIds", None)),
        }
        operators = [operator_json(op) for op in ops]
        if model.uses_ops_lists:
            node["Ops"] = operators
        elif len(operators) == 1:
            node["Op"] = operators[0]
        else:
            raise PlancError(f"node {node_id} holds {len(operators)} operators; the 'Op' node "
                             "form holds one (use the legacy 'Ops' form for several)")
        node.update(info)
        out_nodes.append(node)
    doc = {"Rank": model.rank_value, "WorldSize": model.world_size_value, "Nodes": out_nodes}
    doc.update(dict_value(model.extra))
    return doc


def single_model(module: ModuleOp) -> ark.ModelOp:
    return single_root(module, ark.ModelOp)


def emit_model(module: ModuleOp) -> str:
    """The ARK model file text for the single `ark.model` in `module`."""
    model = single_model(module)
    # The legacy `Ops` arrays nest operators one level deeper; ARK's printer went one deeper.
    depth = MODEL_DEPTH + 1 if model.uses_ops_lists else MODEL_DEPTH
    return denser_json(model_json(model), depth)


KEEPS_UNKNOWN_OPERATORS = ("ark-model",)
"""A model is written back as it was read, operators of types ARK does not register
included (import and export are lossless); every other target refuses them."""


def pipeline(source_format: str, options) -> str:
    if source_format == "ark-plan":
        return "ark-lift-plan"      # the model the plan computes, to plan again
    if source_format != "ark-model":
        raise UnsupportedInput("ark-model", "an ARK model file", source_format)
    return ""


def emit(module: ModuleOp, options) -> str:
    return emit_model(module)
