"""Import ARK model files (and the operators of ARK plan files) into the `ark` dialect.

Both node layouts are accepted: `"Op": {...}` (current ARK) and `"Ops": [...]` (the older list
form), as are both tensor key orders, missing PaddedShape (older files have Pads instead) and
optional Buffer.IsExternal. Unknown keys anywhere are kept in `extra` properties.

ProducerNodeIds and ConsumerNodeIds are not trusted: the dataflow is rebuilt from the tensors,
and the declared lists must agree with it (a mismatch is an error naming both node ids). The
declared order is remembered so that export reproduces the file.

Model files are read twice at most: a plain importer (`_PlainModel`) builds the module of the
commonest documents in one pass and gives up on anything else, including every error; the
checked importer (`_ModelImporter`) then reads the document and says what is wrong and where.
"""

from __future__ import annotations

import marshal
from collections.abc import Callable

from xdsl.dialects.builtin import DictionaryAttr, IntAttr, IntegerAttr, ModuleOp, StringAttr, i1
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from dialects import ark
from dialects.json_value import dict_attr
from dialects.locations import json_location
from dialects.utils import single_root
from ground.diagnostics import PlancError
from ground.json_reader import JsonNode

# ---------------------------------------------------------------------------------------------
# Tensors, buffers and arguments
# ---------------------------------------------------------------------------------------------

TENSOR_KEYS = frozenset(
    {"Id", "DataType", "Shape", "Strides", "Offsets", "PaddedShape", "Pads", "Buffer"})
BUFFER_KEYS = frozenset({"Id", "Rank", "SendTags", "RecvTags", "IsExternal"})
OP_KEYS = frozenset(
    {"Type", "Name", "IsVirtual", "ReadTensors", "WriteTensors", "ResultTensors", "Args"})
NODE_KEYS = frozenset({"Id", "ProducerNodeIds", "ConsumerNodeIds", "Op", "Ops"})
MODEL_KEYS = frozenset({"Rank", "WorldSize", "Nodes"})

INT32 = (-(2**31), 2**31 - 1)
dims = ark.MAX_DIMS


def _constructed(node: JsonNode, build: Callable[[], Attribute]) -> Attribute:
    """Build an attribute; its verifier's complaint becomes an error at `node`."""
    try:
        return build()
    except VerifyException as e:
        raise node.error(str(e)) from None


def read_buffer(node: JsonNode) -> ark.BufferAttr:
    key = _buffer_key(node.value)
    if key is not None:
        cached = _BUFFERS.get(key)
        if cached is not None:
            return cached
    buffer = _read_buffer(node)
    if key is not None:
        _BUFFERS[key] = buffer
    return buffer


_BUFFERS: dict[tuple, ark.BufferAttr] = {}
"""Buffers already built, by content: a model mentions each buffer in many tensors."""


def _buffer_key(value) -> tuple | None:
    """A hashable key for a well-formed, extra-free buffer object; None otherwise."""
    if not isinstance(value, dict) or not value.keys() <= BUFFER_KEYS:
        return None
    get = value.get
    buffer_id, rank, external = get("Id"), get("Rank"), get("IsExternal", _ABSENT)
    if type(buffer_id) is int and type(rank) is int and get("SendTags") == [] == \
            get("RecvTags") and (external is _ABSENT or type(external) is bool):
        # The commonest buffer (no tags), keyed by what it holds (a shorter key than the
        # general one below, so the two never meet).
        return buffer_id, rank, None if external is _ABSENT else external
    send, recv = value.get("SendTags"), value.get("RecvTags")
    # Only real tag lists make a key: `{}` or `[[true, 1]]` would otherwise hash like `[]` or
    # `[[1, 1]]` and silently reuse a well-formed buffer remembered under that key. For the
    # same reason the key holds the types of the members (1 is equal to true and to 1.0).
    if type(send) is not list or type(recv) is not list:
        return None
    if send or recv:
        if not all(_is_tag_pair(p) for p in send + recv):
            return None
        send, recv = tuple(map(tuple, send)), tuple(map(tuple, recv))
    else:
        send = recv = ()
    try:
        # An explicit null is not an absent member (the checked path refuses it).
        key = (value["Id"], value["Rank"], send, recv, external,
               type(value["Id"]), type(value["Rank"]), type(external))
        hash(key)      # a member of the wrong type (a list, an object) takes the checked path
        return key
    except (KeyError, TypeError):
        return None


def _is_tag_pair(pair) -> bool:
    return type(pair) is list and len(pair) == 2 and all(type(v) is int for v in pair)


def _plain_buffer(raw: dict, key: tuple) -> ark.BufferAttr | None:
    """The buffer of a well-formed, extra-free buffer object (`key` is its `_buffer_key`),
    built and remembered without path bookkeeping; None for anything else, which takes the
    checked path (`_read_buffer`). The key already vouches for the tag lists."""
    if len(key) == 3:  # `_buffer_key`'s commonest form: an int id and rank, no tags
        buffer = _BUFFERS[key] = ark.BufferAttr.untagged(*key)
        return buffer
    external = raw.get("IsExternal", False)
    send, recv = raw["SendTags"], raw["RecvTags"]
    if type(raw["Id"]) is not int or type(raw["Rank"]) is not int or type(external) is not bool:
        return None
    try:
        buffer = ark.BufferAttr.get(raw["Id"], raw["Rank"], send, recv, raw.get("IsExternal"))
    except (VerifyException, ValueError):
        return None
    _BUFFERS[key] = buffer
    return buffer


def _read_buffer(node: JsonNode) -> ark.BufferAttr:
    def tags(key: str) -> list[tuple[int, int]]:
        pairs = []
        for pair in node[key].elements():
            remote, tag = pair.as_int_list(2, 2)
            pairs.append((remote, tag))
        return pairs

    external = node.get("IsExternal")
    return ark.BufferAttr.get(
        node["Id"].as_int(),
        node["Rank"].as_int(),
        tags("SendTags"),
        tags("RecvTags"),
        None if external is None else external.as_bool(),
        dict_attr(node.unknown_members(BUFFER_KEYS)),
    )


def read_tensor(node: JsonNode) -> ark.TensorType:
    return _plain_tensor(node.value) or _read_tensor(node)


def _plain_tensor(raw) -> ark.TensorType | None:
    """The tensor of a well-formed, extra-free tensor object, built without path bookkeeping.

    Most tensors in real files look exactly like this; anything else (including every error)
    takes the checked path, which says precisely what is wrong and where. Tensors of one
    layout (data type and integer lists) share its checks and attributes (`_LAYOUTS`).
    """
    if type(raw) is not dict or not raw.keys() <= TENSOR_KEYS:
        return None
    get = raw.get
    tensor_id, dtype, shape = get("Id"), get("DataType"), get("Shape")
    strides, offsets = get("Strides"), get("Offsets")
    padded, pads = get("PaddedShape", _ABSENT), get("Pads", _ABSENT)
    # A missing member reads as None, which no test below lets through; an explicit null
    # PaddedShape or Pads is not an absent member either: the checked path refuses both.
    if type(tensor_id) is not int or type(dtype) is not str or type(shape) is not list \
            or type(strides) is not list or type(offsets) is not list \
            or (padded is not _ABSENT and type(padded) is not list) \
            or (pads is not _ABSENT and type(pads) is not list):
        return None
    padded = None if padded is _ABSENT else padded
    pads = None if pads is _ABSENT else pads
    # Only integers (not booleans or floats, which compare equal to them) make a layout key.
    ints = [*shape, *strides, *offsets, *(padded or ()), *(pads or ())]
    if not _ONLY_INT.issuperset(map(type, ints)):
        return None
    # One flat tuple (the lists' lengths, then their integers) hashes faster than nested ones.
    key = (dtype, len(shape), len(strides), len(offsets),
           -1 if padded is None else len(padded), -1 if pads is None else len(pads), *ints)
    parameters = _LAYOUTS.get(key)
    if parameters is None:
        parameters = _new_layout(key, (
            dtype, tuple(shape), tuple(strides), tuple(offsets),
            None if padded is None else tuple(padded), None if pads is None else tuple(pads)))
        if parameters is None:
            return None
    buffer = get("Buffer")
    key = _buffer_key(buffer)
    if key is None:
        return None
    buffer_attr = _BUFFERS.get(key) or _plain_buffer(buffer, key)
    if buffer_attr is None:
        return None
    return ark.TensorType.assemble(tensor_id, parameters, buffer_attr)


_ABSENT = object()
_ONLY_INT = _INTS = frozenset({int})

_LAYOUTS: dict[tuple, tuple[Attribute, ...]] = {}
"""The layouts (data type, the lengths of shape, strides, offsets, padded shape and pads, -1
for an absent one, then their integers) of tensors that passed the checks, with their
attributes (data type and the five arrays): a model repeats a few layouts in thousands of
tensors."""


def _new_layout(key: tuple, layout: tuple) -> tuple[Attribute, ...] | None:
    """The attributes of `layout` (data type, shape, strides, offsets, padded shape or None,
    pads or None), checked by the checked path's bounds (`_read_tensor`) and the tensor's own
    rules and remembered under `key`; None when they refuse it (the checked path says
    why)."""
    dtype, shape, strides, offsets, padded, pads = layout
    lists = [v for v in layout[1:] if v is not None]
    if (dtype not in ark.DATA_TYPE_BYTES or not 1 <= len(shape) <= dims
            or not all(len(v) == len(shape) for v in lists)
            or min(shape) < 1 or min(strides) < 1 or min(offsets) < 0
            or (padded is not None and min(padded) < 1) or (pads is not None and min(pads) < 0)):
        return None
    try:
        tensor = ark.TensorType.get(0, dtype, shape, _ANY_BUFFER, strides=strides,
                                    offsets=offsets, padded_shape=padded, pads=pads)
    except (VerifyException, ValueError):  # ValueError: beyond int64
        return None
    if len(_LAYOUTS) >= 4096:
        _LAYOUTS.clear()
    parameters = _LAYOUTS[key] = tensor.parameters[1:7]
    return parameters


_ANY_BUFFER = ark.BufferAttr.get(0)


def _read_tensor(node: JsonNode) -> ark.TensorType:
    shape = node["Shape"].as_int_list(1, dims, min_value=1)
    n = len(shape)

    def same_rank(key: str, min_value: int) -> list[int] | None:
        member = node.get(key)
        if member is None:
            return None
        values = member.as_int_list(1, dims, min_value=min_value)
        if len(values) != n:
            raise member.error(f"expected {n} integers like Shape, got {len(values)}")
        return values

    padded = same_rank("PaddedShape", 1)
    pads = same_rank("Pads", 0)
    strides = same_rank("Strides", 1)
    offsets = same_rank("Offsets", 0)
    if strides is None:
        raise node.error("missing required key 'Strides'")
    if offsets is None:
        raise node.error("missing required key 'Offsets'")
    dtype_node = node["DataType"]
    dtype = dtype_node.as_str()
    if dtype not in ark.DATA_TYPE_BYTES:
        raise dtype_node.error(f"unknown data type '{dtype}' (expected one of "
                               f"{', '.join(ark.DATA_TYPE_BYTES)})")
    tensor_id = node["Id"].as_int()
    buffer = read_buffer(node["Buffer"])
    extra = dict_attr(node.unknown_members(TENSOR_KEYS))
    return _constructed(node, lambda: ark.TensorType.get(
        tensor_id, dtype, shape, buffer, strides=strides, offsets=offsets,
        padded_shape=padded, pads=pads, extra=extra))


def read_arg(node: JsonNode, expected: ark.ArgKind | None = None) -> Attribute:
    """One `{"TAG": value}` argument as its attribute (see `ark.ArgKind`)."""
    tag, value = node.one_key()
    try:
        kind = ark.ArgKind(tag)
    except ValueError:
        raise node.error(f"unknown argument type '{tag}' (expected one of "
                         f"{', '.join(k.value for k in ark.ArgKind)})") from None
    if expected is not None and kind is not expected:
        raise node.error(f"expected a {expected.value} argument, got {tag}")
    match kind:
        case ark.ArgKind.BOOL:
            return ark.int_arg(kind, value.as_bool())
        case ark.ArgKind.INT:
            return ark.int_arg(kind, value.as_int(*INT32))
        case ark.ArgKind.UINT32:
            return ark.int_arg(kind, value.as_int(0, 2**32 - 1))
        case ark.ArgKind.INT64:
            return ark.int_arg(kind, value.as_int(-(2**63), 2**63 - 1))
        case ark.ArgKind.UINT64:
            return ark.int_arg(kind, value.as_int(0, 2**64 - 1))
        case ark.ArgKind.FLOAT:
            return ark.float_arg(value.as_number())
        case ark.ArgKind.DIMS:
            return ark.dims_arg(value.as_int_list(0, dims))
        case ark.ArgKind.TENSOR:
            return read_tensor(value)
        case ark.ArgKind.OFFSET:
            return ark.OffsetAttr(IntAttr(value["BufferId"].as_int()),
                                  IntAttr(value["Value"].as_int()))


def read_args(node: JsonNode, op_class: type[ark.ArkOp]) -> tuple[dict[str, Attribute],
                                                                   dict[str, Attribute]]:
    """Typed properties for the arguments the op type defines, and all others by key."""
    specs = {spec.key: spec for spec in op_class.ARGS}
    typed: dict[str, Attribute] = {}
    others: dict[str, Attribute] = {}
    for key, arg in node.items():
        spec = specs.get(key)
        if spec is None:
            others[key] = read_arg(arg)
        else:
            typed[spec.prop] = read_arg(arg, spec.kind)
    for spec in op_class.ARGS:
        if spec.prop not in typed:
            raise node.error(f"missing argument '{spec.key}' ({spec.kind.value}) of "
                             f"{op_class.TYPE}")
    return typed, others


# ---------------------------------------------------------------------------------------------
# Operators, with a table from tensor ids to SSA values
# ---------------------------------------------------------------------------------------------

ViewSource = Callable[[ark.TensorType], SSAValue | None]


def same_json(a, b) -> bool:
    """`a` and `b` are the same JSON value, types included. Python's `==` holds between 1,
    1.0 and true, so a tensor object repeated with `[1.0]` (or `[true]`) where it first said
    `[1]` passed as the tensor already read, while the same text where the tensor first
    appears is refused; marshal's bytes tell the types apart (~2 us for a tensor object)."""
    return a == b and marshal.dumps(a) == marshal.dumps(b)


class TensorTable:
    """The SSA value of every tensor id seen so far, while a graph is being imported.

    A tensor read before any operator produced it becomes an `ark.view`, inserted into `block`
    just before its first user; `view_source` decides which value (if any) the view aliases.
    """

    def __init__(self, block: Block):
        self.block = block
        self.values: dict[int, SSAValue] = {}
        self.described_at: dict[int, str] = {}
        self.produced_at: dict[int, str] = {}
        self.raw: dict[int, tuple[dict, SSAValue]] = {}

    def use(self, node: JsonNode, view_source: ViewSource) -> SSAValue:
        return self.use_value(node.value, node.path, view_source)

    def use_value(self, raw, path: str | tuple[str, int], view_source: ViewSource) -> SSAValue:
        """The value of the tensor object `raw` found at `path` (`use` without a node; the
        path of an array element may come as (array path, index), made into text when
        needed)."""
        # A tensor object repeats in every operator that uses it: when its text is the one
        # already seen, reuse the value instead of rebuilding (and re-verifying) its type.
        tensor_id = raw.get("Id") if type(raw) is dict else None
        known = self.raw.get(tensor_id) if type(tensor_id) is int else None
        if known is not None and same_json(known[0], raw):
            return known[1]
        if type(path) is tuple:
            path = f"{path[0]}[{path[1]}]"
        tensor = _plain_tensor(raw) or _read_tensor(JsonNode(raw, path))
        tensor_id = tensor.tensor_id
        value = self.values.get(tensor_id)
        if value is not None and value.type != tensor:
            raise PlancError(f"tensor {tensor_id} is described differently than at "
                             f"{self.described_at[tensor_id]}", path=path)
        if value is None:
            view = ark.ViewOp(tensor, view_source(tensor), location=json_location(path))
            (value,) = view.results  # `view.result`, without IRDL's accessor
            value._name = f"t{tensor_id}"  # noqa: SLF001 -- a valid `name_hint`
            _append(self.block, view)
            self.values[tensor_id] = value
            self.described_at[tensor_id] = path
        self.raw[tensor_id] = (raw, value)
        return value

    def use_list(self, node: JsonNode, key: str, view_source: ViewSource) -> list[SSAValue]:
        """The values of the tensor objects listed in member `key` of `node`."""
        listed = node.value.get(key) if type(node.value) is dict else None
        if type(listed) is not list:
            return [self.use(t, view_source) for t in node[key].elements()]  # the error
        base = f"{node.path}.{key}"  # `extend_path` of an identifier
        return [self.use_value(raw, (base, i), view_source) for i, raw in enumerate(listed)]

    def declare_result(self, node: JsonNode) -> ark.TensorType:
        tensor = read_tensor(node)
        tensor_id = tensor.tensor_id
        if tensor_id in self.produced_at:
            raise node.error(f"tensor {tensor_id} is already a result at "
                             f"{self.produced_at[tensor_id]}")
        if tensor_id in self.values:
            raise node.error(f"tensor {tensor_id} is used at {self.described_at[tensor_id]} "
                             "before this operator produces it")
        return tensor

    def define(self, value: SSAValue, node: JsonNode) -> None:
        tensor_id = value.type.tensor_id
        self.values[tensor_id] = value
        self.raw[tensor_id] = (node.value, value)
        self.produced_at[tensor_id] = self.described_at[tensor_id] = node.path


def _append(block: Block, op: Operation) -> None:
    """`block.add_op(op)` for an op just built without regions (so neither in a block nor
    holding one, which is all `add_op` checks): linked in directly."""
    last = block._last_op  # noqa: SLF001 -- the list `add_op` maintains
    op.parent = block
    if last is None:
        block._first_op = op  # noqa: SLF001
    else:
        last._next_op = op  # noqa: SLF001
        op._prev_op = last  # noqa: SLF001
    block._last_op = op  # noqa: SLF001


_ARGS: dict[tuple, tuple[dict[str, Attribute], dict[str, Attribute]]] = {}
"""`read_args` of argument objects read before, by op class and repr (immutable attributes,
in dictionaries that no caller changes)."""


def read_operator(
    node: JsonNode,
    table: TensorTable,
    view_source: ViewSource,
    *,
    extra_keys: frozenset[str] = frozenset(),
    config_key: str | None = None,
    node_id: int | None = None,
    task_id: int | None = None,
    repeat: bool = False,
) -> ark.ArkOp:
    """Import one ARK operator object and append it (and any views it needs) to the block.

    `repeat` imports another copy of an operator already imported (a plan may run one operator
    in several tasks): its results are fresh values that do not replace the first ones.
    """
    raw = node.value if type(node.value) is dict else {}
    # Members of the expected types are taken as they are; any other takes the checked
    # accessor, which refuses it with the same message at the same path.
    type_name = raw.get("Type")
    if type(type_name) is not str:
        type_name = node["Type"].as_str()
    op_class = ark.OPERATOR_BY_TYPE.get(type_name, ark.GenericOp)
    label = raw.get("Name")
    if type(label) is not str:
        label = node["Name"].as_str()
    virtual = raw.get("IsVirtual")
    if type(virtual) is not bool:
        virtual = node["IsVirtual"].as_bool()
    reads = table.use_list(node, "ReadTensors", view_source)
    writes = table.use_list(node, "WriteTensors", view_source)
    result_nodes = node["ResultTensors"].elements()
    results = [read_tensor(t) if repeat else table.declare_result(t) for t in result_nodes]
    args = raw.get("Args")
    if type(args) is not dict:
        node["Args"].as_dict()  # refused, with the checked accessor's message
    if not args and not op_class.ARGS and op_class is not ark.GenericOp:
        typed, others = {}, {}
    elif op_class is ark.GenericOp:
        args_node = node["Args"]
        typed: dict[str, Attribute] = {"type_name": StringAttr(type_name)}
        all_args = {k: read_arg(a) for k, a in args_node.items()}
        if all_args:
            typed["args"] = DictionaryAttr(all_args)
        others = {}
    else:
        # Operators repeat a few argument objects: one read serves every equal one. The key
        # is the object's repr, which tells true from 1 and 1.0 (equality does not).
        args_node = node["Args"]
        key = (op_class, repr(args))
        read = _ARGS.get(key)
        if read is None:
            read = read_args(args_node, op_class)
            if len(_ARGS) >= 4096:
                _ARGS.clear()
            _ARGS[key] = read
        typed, others = read
    config = None
    if config_key is not None:
        config = dict_attr(node[config_key].as_dict()) or DictionaryAttr({})
    known = OP_KEYS | extra_keys if extra_keys else OP_KEYS
    op = op_class(
        label, reads, writes, results,
        args=typed,
        node=node_id,
        task=task_id,
        virtual=virtual,
        config=config,
        extra=None if raw.keys() <= known else dict_attr(node.unknown_members(known)),
        extra_args=DictionaryAttr(others) if others else None,
        location=json_location(node.path),
    )
    _append(table.block, op)
    for value, result_node in zip(op.results, result_nodes, strict=True):
        value._name = f"t{value.type.tensor_id}"  # noqa: SLF001 -- a valid `name_hint`
        if not repeat:
            table.define(value, result_node)
    return op


# ---------------------------------------------------------------------------------------------
# Model files
# ---------------------------------------------------------------------------------------------


def _node_operators(node: JsonNode) -> tuple[str, list[JsonNode]]:
    raw = node.value
    if type(raw) is dict and "Op" in raw and "Ops" not in raw:
        return "Op", [JsonNode(raw["Op"], f"{node.path}.Op")]  # the commonest form
    has_op, has_ops = node.has("Op"), node.has("Ops")
    if has_op and has_ops:
        raise node.error("has both 'Op' and 'Ops'; expected one of them")
    if has_ops:
        ops = node["Ops"].elements()
        if not ops:
            raise node["Ops"].error("expected at least one operator")
        return "Ops", ops
    return "Op", [node["Op"]]


def _int_list_member(node: JsonNode, raw: dict, key: str) -> JsonNode:
    """Member `key` of `node` (whose value is `raw`, or {}), an array of integers."""
    value = raw.get(key)
    if type(value) is list and _INTS.issuperset(map(type, value)):
        return JsonNode(value, f"{node.path}.{key}")
    member = node[key]
    member.as_int_list()  # the checked path, which says what is wrong
    return member


class _ModelImporter:
    def __init__(self, doc: JsonNode):
        self.doc = doc
        self.block = Block()
        self.table = TensorTable(self.block)
        self.node_ops: dict[int, list[ark.ArkOp]] = {}
        self.position: dict[int, int] = {}
        self.declared: dict[int, tuple[JsonNode, JsonNode, JsonNode]] = {}
        self.node_form: str | None = None

    def run(self) -> ModuleOp:
        doc = self.doc
        rank = doc["Rank"].as_int()
        world_size = doc["WorldSize"].as_int(lo=1)
        for node in doc["Nodes"].elements():
            self.read_node(node)
        self.check_declared_edges()
        model = ark.ModelOp(rank, world_size, Region(self.block),
                            node_form="Ops" if self.node_form == "Ops" else None,
                            extra=dict_attr(doc.unknown_members(MODEL_KEYS)))
        model.location = json_location("$")
        return ModuleOp([model])

    def read_node(self, node: JsonNode) -> None:
        raw = node.value if type(node.value) is dict else {}
        node_id = raw.get("Id")
        if type(node_id) is not int:
            node_id = node["Id"].as_int()
        if node_id in self.node_ops:
            raise node["Id"].error(f"node id {node_id} is used by two nodes")
        producers = _int_list_member(node, raw, "ProducerNodeIds")
        consumers = _int_list_member(node, raw, "ConsumerNodeIds")
        form, operator_nodes = _node_operators(node)
        if self.node_form is None:
            self.node_form = form
        elif form != self.node_form:
            raise node.error(f"node uses '{form}' but earlier nodes use '{self.node_form}'")
        self.declared[node_id] = (node, producers, consumers)
        source = self._view_source(producers.value)
        ops = [read_operator(op, self.table, source, node_id=node_id) for op in operator_nodes]
        # Export lists edges in ascending order; remember the file's order only when it differs.
        info = {key: listed.value for key, listed in (("ProducerNodeIds", producers),
                                                       ("ConsumerNodeIds", consumers))
                if len(listed.value) > 1 and listed.value != sorted(listed.value)}
        if not raw.keys() <= NODE_KEYS:
            info.update(node.unknown_members(NODE_KEYS))
        if info:
            ops[0].node_info = dict_attr(info)
        self.node_ops[node_id] = ops
        self.position[node_id] = len(self.position)

    def _view_source(self, declared_producers: list[int]) -> ViewSource:
        """A view aliases the newest result on its buffer among the declared producers.

        A compressed ARK model no longer has the virtual nodes (reshapes, slices) that made a
        view; its consumers list the real producer instead. Linking the view to that producer's
        result puts the dependency back into SSA form.
        """
        position = self.position
        candidates = [p for p in declared_producers if p in position]
        if len(candidates) > 1:
            candidates = sorted(set(candidates), key=position.__getitem__, reverse=True)

        def source(tensor: ark.TensorType) -> SSAValue | None:
            buffer_id = tensor.buffer.id.data
            for producer in candidates:
                for op in reversed(self.node_ops[producer]):
                    for value in op.results:  # `result_tensors`, the only results
                        if value.type.buffer.id.data == buffer_id:
                            return value
            return None
        return source

    def check_declared_edges(self) -> None:
        derived = ark.node_producers(self.block)
        for node_id, (_, producers, _) in self.declared.items():
            _check_list(producers, node_id, "producer", derived[node_id], self.node_ops)
        derived_consumers = ark.node_consumers(derived)
        for node_id, (_, _, consumers) in self.declared.items():
            _check_list(consumers, node_id, "consumer", derived_consumers[node_id],
                        self.node_ops)


def _check_list(listed_node: JsonNode, node_id: int, role: str, derived: list[int],
                nodes: dict[int, list[ark.ArkOp]]) -> None:
    listed = listed_node.value
    seen = set(listed)
    if len(seen) == len(listed) and seen == set(derived) and seen <= nodes.keys():
        return  # none of the complaints below applies
    seen = set()
    for i, other in enumerate(listed):
        at = JsonNode(other, f"{listed_node.path}[{i}]")
        if other in seen:
            raise at.error(f"node {node_id} lists {role} {other} twice")
        seen.add(other)
        if other not in nodes:
            raise at.error(f"node {node_id} lists {role} {other}, which is not a node of "
                           "this model")
        if other not in derived:
            reason = (f"none of its tensors comes from node {other}" if role == "producer"
                      else f"node {other} does not use any tensor of node {node_id}")
            raise at.error(f"node {node_id} lists {role} {other}, but {reason}")
    for other in derived:
        if other not in seen:
            reason = (f"it uses a tensor produced by node {other}" if role == "producer"
                      else f"node {other} uses a tensor it produces")
            raise listed_node.error(f"node {node_id} does not list {role} {other}, "
                                    f"although {reason}")


def import_model(doc: JsonNode) -> ModuleOp:
    """An ARK model document as a module holding one `ark.model`.

    The plain importer (`_PlainModel`) reads the commonest documents in one pass; anything it
    does not expect, including every error, makes it give up, and the checked importer
    (`_ModelImporter`) reads the document from the start and says what is wrong and where."""
    rank = doc["Rank"].as_int()  # the checked importer's first two steps (and messages)
    world_size = doc["WorldSize"].as_int(lo=1)
    module = _PlainModel(rank, world_size).run(doc.value)
    return module if module is not None else _ModelImporter(doc).run()


class _GiveUp(Exception):
    """The plain importer met something only the checked importer handles."""


_NO_NODES: frozenset[int] = frozenset()
_OPERAND_LISTS = ("ReadTensors", "WriteTensors")


class _PlainModel:
    """The checked importer (`_ModelImporter`) for documents made only of what real files
    hold: nodes of one `Op` (a known type, no unknown members), tensors that `_plain_tensor`
    reads, declared edges that agree with the dataflow. Anything else raises `_GiveUp`, and
    `run` returns None.

    It builds the module the checked importer builds (the same ops in the same order, with
    the same properties, types, locations and value names; each step below names the code
    it stands for), in one pass over the raw JSON: a tensor's value, its last tensor object
    and the node its data comes from sit in one table, and each node's producers are
    derived while its operator is built instead of by walking the block again
    (`check_declared_edges`).
    """

    def __init__(self, rank: int, world_size: int):
        self.rank, self.world_size = rank, world_size
        self.block = Block()
        self.tensors: dict[int, tuple[dict, SSAValue, int | None]] = {}
        """Per tensor id seen so far: the tensor object last read for it, its value and the
        node its data comes from (a view's: its source's; `producer_nodes`). Together
        `TensorTable.raw` and `values`, and `produced_at` for the ids a node produced."""
        self.results: dict[int, list[tuple[int, SSAValue]]] = {}
        """Per node id: (buffer id, value) of each result of its operator."""
        self.position: dict[int, int] = {}
        self.consumers: dict[int, set[int]] = {}
        """Per node id: the nodes that use its results (`node_consumers`)."""
        self.result_buffers: set[int] = set()
        """The buffers of all results so far: a view of any other buffer aliases nothing."""
        self.producers: list[int] = []
        self.candidates: list[int] | None = None
        """The current node's declared producers and the view source candidates they give
        (`_ModelImporter._view_source`, sorted on first use)."""

    def run(self, doc: dict) -> ModuleOp | None:
        try:
            if not doc.keys() <= MODEL_KEYS:
                raise _GiveUp
            nodes = doc.get("Nodes")
            if type(nodes) is not list:
                raise _GiveUp
            declared = [self.read_node(node, i) for i, node in enumerate(nodes)]
            consumers = self.consumers
            for node_id, listed in declared:
                if set(listed) != consumers.get(node_id, _NO_NODES):
                    raise _GiveUp  # `_check_list` explains (duplicates were refused before)
        except Exception:  # noqa: BLE001 -- `_GiveUp`, or anything the checked importer
            # reports its own way: it reads the document again and its outcome is the answer.
            return None
        model = ark.ModelOp(self.rank, self.world_size, Region(self.block))
        model.location = json_location("$")
        return ModuleOp([model])

    def read_node(self, node, index: int) -> tuple[int, list[int]]:
        """`_ModelImporter.read_node` of node `index`; its id and declared consumers."""
        if type(node) is not dict or not node.keys() <= NODE_KEYS or "Ops" in node:
            raise _GiveUp
        get = node.get
        node_id, producers, consumers, raw = (
            get("Id"), get("ProducerNodeIds"), get("ConsumerNodeIds"), get("Op"))
        if type(node_id) is not int or node_id in self.results or type(producers) is not list \
                or type(consumers) is not list or type(raw) is not dict \
                or not _INTS.issuperset(map(type, producers)) \
                or not _INTS.issuperset(map(type, consumers)) \
                or len(set(consumers)) != len(consumers):
            raise _GiveUp
        listed = set(producers)
        if len(listed) != len(producers):
            raise _GiveUp
        self.producers, self.candidates = producers, None
        path = f"$.Nodes[{index}].Op"
        operator, derived = self.read_operator(raw, path, node_id)
        derived.discard(node_id)
        derived.discard(None)
        if derived != listed:
            raise _GiveUp  # `_check_list` explains
        consumers_of = self.consumers
        for producer in derived:
            found = consumers_of.get(producer)
            if found is None:
                consumers_of[producer] = {node_id}
            else:
                found.add(node_id)
        if (len(producers) > 1 and producers != sorted(producers)) or \
                (len(consumers) > 1 and consumers != sorted(consumers)):
            # Export lists edges in ascending order; the file's order is kept where it differs.
            operator.node_info = dict_attr(
                {key: listed for key, listed in (("ProducerNodeIds", producers),
                                                 ("ConsumerNodeIds", consumers))
                 if len(listed) > 1 and listed != sorted(listed)})
        self.position[node_id] = len(self.position)
        return node_id, consumers

    def read_operator(self, raw: dict, path: str, node_id: int) -> tuple[ark.ArkOp, set]:
        """`read_operator` of a node's operator; the op and the nodes its operands come from
        (with None for a view of nothing)."""
        if not raw.keys() <= OP_KEYS:
            raise _GiveUp
        get = raw.get
        type_name, label, virtual = get("Type"), get("Name"), get("IsVirtual")
        reads, writes, results, args = (get("ReadTensors"), get("WriteTensors"),
                                        get("ResultTensors"), get("Args"))
        op_class = ark.OPERATOR_BY_TYPE.get(type_name) if type(type_name) is str else None
        if op_class is None or type(label) is not str or type(virtual) is not bool \
                or type(reads) is not list or type(writes) is not list \
                or type(results) is not list or type(args) is not dict:
            raise _GiveUp
        tensors = self.tensors
        operands: list[SSAValue] = []
        derived = set()
        for key, listed in zip(_OPERAND_LISTS, (reads, writes), strict=True):
            for i, tensor_raw in enumerate(listed):
                # `TensorTable.use_value`: a tensor object seen before as it is now is its value.
                tensor_id = tensor_raw.get("Id") if type(tensor_raw) is dict else None
                entry = tensors.get(tensor_id) if type(tensor_id) is int else None
                if entry is None or not same_json(entry[0], tensor_raw):
                    entry = self.use(tensor_raw, f"{path}.{key}[{i}]")
                operands.append(entry[1])
                derived.add(entry[2])
        types = []
        for tensor_raw in results:  # `TensorTable.declare_result`
            tensor = _plain_tensor(tensor_raw)
            if tensor is None or tensor.id.data in tensors:
                raise _GiveUp
            types.append(tensor)
        if not args and not op_class.ARGS:
            typed, others = {}, {}
        else:
            key = (op_class, repr(args))  # as `read_operator` does
            read = _ARGS.get(key)
            if read is None:
                read = read_args(JsonNode(args, f"{path}.Args"), op_class)
                if len(_ARGS) >= 4096:
                    _ARGS.clear()
                _ARGS[key] = read
            typed, others = read
        # The properties `ArkOp.__init__` makes of what `read_operator` gives it.
        properties = {"label": ark.string_attr(label), **typed, "node": ark.int64_attr(node_id)}
        if virtual is not op_class.IS_VIRTUAL:
            properties["virtual"] = IntegerAttr(int(virtual), i1)
        if others:
            properties["extra_args"] = DictionaryAttr(others)
        op = op_class.assembled(properties, operands, len(reads), types, json_location(path))
        _append(self.block, op)
        own = []
        result_buffers = self.result_buffers
        for value, tensor, tensor_raw in zip(op.results, types, results, strict=True):
            tensor_id = tensor.id.data
            value._name = f"t{tensor_id}"  # noqa: SLF001 -- a valid `name_hint`
            tensors[tensor_id] = (tensor_raw, value, node_id)
            buffer_id = tensor.buffer.id.data
            own.append((buffer_id, value))
            result_buffers.add(buffer_id)
        self.results[node_id] = own
        return op, derived

    def use(self, raw, path: str) -> tuple[dict, SSAValue, int | None]:
        """The rest of `TensorTable.use_value`: a tensor object not seen before as it is, at
        `path`; a new view when no operator produced its tensor."""
        tensor = _plain_tensor(raw)
        if tensor is None:
            raise _GiveUp
        tensor_id = tensor.id.data
        entry = self.tensors.get(tensor_id)
        if entry is not None:
            if entry[1].type != tensor:
                raise _GiveUp  # described differently: `TensorTable.use_value` explains
            entry = self.tensors[tensor_id] = (raw, entry[1], entry[2])
            return entry
        buffer_id = tensor.buffer.id.data
        source, node = self.source(buffer_id) if buffer_id in self.result_buffers \
            else (None, None)
        view = ark.ViewOp.assembled(tensor, source, json_location(path))
        (value,) = view.results  # `view.result`, without IRDL's accessor
        value._name = f"t{tensor_id}"  # noqa: SLF001 -- a valid `name_hint`
        _append(self.block, view)
        entry = self.tensors[tensor_id] = (raw, value, node)
        return entry

    def source(self, buffer_id: int) -> tuple[SSAValue | None, int | None]:
        """`_ModelImporter._view_source` of the current node: the value a view of buffer
        `buffer_id` aliases and its node, or (None, None)."""
        candidates = self.candidates
        if candidates is None:
            position = self.position
            candidates = [p for p in self.producers if p in position]
            if len(candidates) > 1:
                candidates = sorted(set(candidates), key=position.__getitem__, reverse=True)
            self.candidates = candidates
        results = self.results
        for producer in candidates:
            for buffer, value in results[producer]:
                if buffer == buffer_id:
                    return value, producer
        return None, None


def import_document(doc: JsonNode) -> ModuleOp:
    if not isinstance(doc.value, dict):
        raise doc.expected("an ARK model object")
    return import_model(doc)



def check(module: ModuleOp, options=None) -> list:
    """`planc check`'s rules of an ARK model beyond its verifiers: every operator type is one
    ARK registers (the file imports and exports as it is, but ARK refuses to load it)."""
    from dialects.findings import from_error

    return [from_error(ark.unknown_type_error(op), "ark-model")
            for op in ark.unknown_operators(module)]


def describe(module: ModuleOp) -> str:
    model = single_root(module, ark.ModelOp)
    operators = model.operators()
    nodes = {op.node_id for op in operators}
    tensors = {r.type.tensor_id for op in model.graph.ops for r in op.results}
    buffers = {r.type.buffer_id for op in model.graph.ops for r in op.results}
    return (f"rank {model.rank_value} of {model.world_size_value}, {len(nodes)} nodes, "
            f"{len(operators)} operators, {len(tensors)} tensors, {len(buffers)} buffers")
