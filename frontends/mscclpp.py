"""Import MSCCL++ execution plans (both schemas) into the `mscclpp` dialect.

The schema is detected from the GPU objects (`input_chunks` or the seed's `inputChunks`); see
`frontends.mscclpp_schema` for both spellings. Plans written before the 2025-08 op renames
(which name ops `tpkt`, `rspkt`, ...) are recognised by those names, and their `cpkt` is read
as the old name of today's `upkt`. Unknown keys anywhere are kept in `extra`; the order and
legacy spelling of known keys are remembered, so export reproduces the document.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import ArrayAttr, IntAttr, IntegerAttr, ModuleOp, StringAttr, i1, i64
from xdsl.ir import Attribute, Block, Operation, Region

from dialects import mscclpp as ms
from dialects.json_value import dict_attr
from dialects.locations import json_location
from frontends.mscclpp_schema import (
    EXECUTOR,
    OP_NAME_SPELLING,
    SEED,
    ObjectReader,
    order_attr,
    read_spelling_member,
    spellings_attr,
)
from ground.diagnostics import one_of
from ground.json_reader import JsonNode

MAX_COUNT = 2**31 - 1


def detect_schema(doc: JsonNode) -> str:
    """SEED or EXECUTOR, from the spelling of the first GPU's chunk counts."""
    gpus = doc["gpus"].elements()
    if not gpus:
        return EXECUTOR
    first = gpus[0].as_dict()
    if "inputChunks" in first or "outputChunks" in first:
        return SEED
    if "input_chunks" in first or "output_chunks" in first:
        return EXECUTOR
    raise gpus[0].error("cannot tell the schema: expected input_chunks (executor) or "
                        "inputChunks (seed)")


def _legacy_names(doc: JsonNode) -> bool:
    """Does the plan use op names from before the 2025-08 renames?"""
    def names(value: Any):
        if isinstance(value, dict):
            if isinstance(value.get("name"), str):
                yield value["name"]
            for member in value.values():
                yield from names(member)
        elif isinstance(value, list):
            for member in value:
                yield from names(member)

    gpus = doc.value.get("gpus") if isinstance(doc.value, dict) else None
    return any(name in ms.LEGACY_ONLY_NAMES for name in names(gpus))


def _recorded(r: ObjectReader, legacy_name: str | None = None) -> dict[str, Attribute | None]:
    """The properties that remember how the file wrote this object (read last: `extra` is
    whatever no field took)."""
    spellings = r.spellings(read_spelling_member(r))
    if legacy_name is not None:
        spellings[OP_NAME_SPELLING] = legacy_name
    return {"key_order": order_attr(r.key_order()), "spellings": spellings_attr(spellings),
            "extra": dict_attr(r.extra())}


def _located(op: Operation, node: JsonNode) -> Operation:
    op.location = json_location(node.path)
    return op


def _bool(node: JsonNode) -> IntegerAttr:
    return IntegerAttr(int(node.as_bool()), i1)


def _int(node: JsonNode, lo: int = 0) -> IntegerAttr:
    return IntegerAttr(node.as_int(lo, MAX_COUNT), i64)


class _Importer:
    def __init__(self, doc: JsonNode):
        self.doc = doc
        self.schema = detect_schema(doc)
        self.legacy = self.schema == EXECUTOR and _legacy_names(doc)

    # -- the plan ------------------------------------------------------------------------------

    def algorithm(self) -> ms.AlgorithmOp:
        r = ObjectReader(self.doc, "algorithm", self.schema)
        name = r["name"]
        plan_name: str | None = None if name.value is None else name.as_str()
        collective = r["collective"].as_str()
        protocol = r["protocol"].as_str()
        inplace = r["inplace"].as_bool()
        gpu_nodes = r["gpus"].elements()
        optional: dict[str, Attribute | None] = {}
        for key in ("num_threads_per_block", "buffer_alignment"):
            node = r.get(key)
            optional[key] = None if node is None else _int(node, 1)
        for key in ("reuse_resources", "use_double_scratch_buffer"):
            node = r.get(key)
            optional[key] = None if node is None else _bool(node)
        for key in ("min_message_size", "max_message_size"):
            node = r.get(key)
            optional[key] = None if node is None else IntAttr(node.as_int(0, ms.UINT64_MAX))
        gpus = [self.gpu(node) for node in gpu_nodes]
        if self.schema == SEED:
            optional["buffer_alignment"] = self._seed_alignment(gpu_nodes)
        op = ms.AlgorithmOp(plan_name, collective, protocol, inplace, gpus, **_recorded(r),
                            **optional)
        return _located(op, self.doc)

    def _seed_alignment(self, gpu_nodes: list[JsonNode]) -> IntegerAttr | None:
        """The seed gives `bufferAlignment` per GPU; the executor has one per plan."""
        found: tuple[int, JsonNode] | None = None
        for node in gpu_nodes:
            member = node.get("bufferAlignment")
            if member is None:
                continue
            value = member.as_int(1, MAX_COUNT)
            if found is not None and value != found[0]:
                raise member.error(f"bufferAlignment {value} differs from {found[0]} at "
                                   f"{found[1].path}; the executor has one alignment per plan")
            found = found or (value, member)
        return None if found is None else IntegerAttr(found[0], i64)

    # -- GPUs ----------------------------------------------------------------------------------

    def gpu(self, node: JsonNode) -> ms.GpuOp:
        r = ObjectReader(node, "gpu", self.schema)
        rank = r["id"].as_int(0, MAX_COUNT)
        counts = [r[key].as_int(0, MAX_COUNT)
                  for key in ("input_chunks", "output_chunks", "scratch_chunks")]
        body: list[Operation] = [self.channel(c) for c in r["channels"].elements()]
        body += [self.remote_buffer(b) for b in r["remote_buffers"].elements()]
        semaphores = r.get("semaphores")
        if semaphores is not None:
            body += [self.semaphore(s) for s in semaphores.elements()]
        body += [self.threadblock(tb) for tb in r["threadblocks"].elements()]
        if self.schema == SEED:
            r.get("buffer_alignment")  # read at plan level (it is one value per plan)
        op = ms.GpuOp(rank, *counts, body, semaphores_listed=semaphores is not None,
                      **_recorded(r))
        return _located(op, node)

    def channel(self, node: JsonNode) -> ms.ChannelOp:
        r = ObjectReader(node, "channel", self.schema)
        kind = r["channel_type"].as_str(("memory", "port", "switch"))
        peers = groups = buffer_type = None
        if kind == "switch":
            buffer_type = r["buffer_type"].as_str(ms.BUFFER_TYPES)
            groups = [self.rank_group(g) for g in r["rank_groups"].elements()]
        else:
            peers = r["connected_to"].as_int_list(min_value=0)
        op = ms.ChannelOp(kind, peers=peers, buffer_type=buffer_type, groups=groups,
                          **_recorded(r))
        return _located(op, node)

    def rank_group(self, node: JsonNode) -> ms.RankGroupAttr:
        r = ObjectReader(node, "rank_group", self.schema)
        size = r["size"].as_int(0, MAX_COUNT)
        ranks = r["ranks"].as_int_list(min_value=0)
        return ms.RankGroupAttr.get(ranks, size, dict_attr(r.extra()))

    def remote_buffer(self, node: JsonNode) -> ms.RemoteBufferOp:
        r = ObjectReader(node, "remote_buffer", self.schema)
        rank = r["rank"].as_int(0, MAX_COUNT)
        buffer = r["type"].as_str(ms.BUFFER_TYPES)
        access_node = r.get("access_channel_types")
        access = None
        if access_node is not None:
            access = [a.as_str(("memory", "port")) for a in access_node.elements()]
        info = r.get("info_location") if self.schema == SEED else None
        if access is None and info is None:
            key = "infoLocation" if self.schema == SEED else "access_channel_types"
            raise node.error(f"missing required key '{key}'")
        info_location = None
        if info is not None:
            info_location = StringAttr(info.as_str(tuple(ms.INFO_LOCATION_ACCESS)))
        op = ms.RemoteBufferOp(rank, buffer, access, info_location=info_location,
                               **_recorded(r))
        return _located(op, node)

    def semaphore(self, node: JsonNode) -> ms.SemaphoreOp:
        r = ObjectReader(node, "semaphore", self.schema)
        value = r["init_value"].as_int(0, MAX_COUNT)
        return _located(ms.SemaphoreOp(value, **_recorded(r)), node)

    # -- thread blocks -----------------------------------------------------------------------

    def threadblock(self, node: JsonNode) -> ms.ThreadblockOp:
        r = ObjectReader(node, "threadblock", self.schema)
        tb_id = r["id"].as_int(0, MAX_COUNT)
        ops = [self.instruction(o) for o in r["ops"].elements()]
        channels = [self.tb_channels(c) for c in r["channels"].elements()]
        refs = r.get("remote_buffer_refs")
        if refs is None and self.schema == SEED:
            refs = r.consume("remote_buffer_refs")  # a list the seed's flat form cannot say
        remote = None
        if refs is not None:
            remote = (self._flat_remote_ids(refs) if self.schema == SEED and
                      isinstance(refs.value, list) and all(isinstance(v, int) for v in refs.value)
                      else [self.tb_remote(e) for e in refs.elements()])
        op = ms.ThreadblockOp(tb_id, channels, remote, ops, **_recorded(r))
        return _located(op, node)

    def _flat_remote_ids(self, node: JsonNode) -> list[ms.TbRemoteBuffersAttr]:
        """The seed's `remoteBuffersIds`: GPU-level ids, reached through memory channels
        (the seed has no port channel access); an empty list stays empty."""
        ids = node.as_int_list(min_value=0)
        return [ms.TbRemoteBuffersAttr.get("memory", ids)] if ids else []

    def tb_channels(self, node: JsonNode) -> ms.TbChannelsAttr:
        r = ObjectReader(node, "tb_channel", self.schema)
        kind = r["channel_type"].as_str(ms.CHANNEL_TYPES)
        ids = self._channel_ids(r["channel_ids"])
        return ms.TbChannelsAttr.get(kind, ids, dict_attr(r.extra()))

    def tb_remote(self, node: JsonNode) -> ms.TbRemoteBuffersAttr:
        r = ObjectReader(node, "tb_remote", self.schema)
        kind = r["access_channel_type"].as_str(("memory", "port"))
        ids = r["remote_buffer_ids"].as_int_list(min_value=0)
        return ms.TbRemoteBuffersAttr.get(kind, ids, dict_attr(r.extra()))

    def _channel_ids(self, node: JsonNode) -> list[int]:
        """Channel ids; the seed's example also writes them as `{"id": n}` objects."""
        if self.schema == SEED and isinstance(node.value, list) and \
                any(isinstance(v, dict) for v in node.value):
            return [e["id"].as_int(0, MAX_COUNT) if isinstance(e.value, dict)
                    else e.as_int(0, MAX_COUNT) for e in node.elements()]
        return node.as_int_list(min_value=0)

    # -- operations --------------------------------------------------------------------------

    def _op_class(self, node: JsonNode) -> tuple[type[ms.InstructionOp], str | None]:
        """The op class a `name` denotes, and the legacy spelling to remember (if any)."""
        name = node.as_str()
        if self.schema == SEED:
            for cls in ms.INSTRUCTIONS:
                if cls.SEED_NAME == name:
                    return cls, None
        elif self.legacy and name == "cpkt":
            return ms.UnpackPacketsOp, name
        current = ms.LEGACY_INSTRUCTION_NAMES.get(name, name) if self.schema == EXECUTOR \
            else name
        cls = ms.INSTRUCTION_BY_NAME.get(current)
        if cls is None or (self.schema == SEED and cls.SEED_NAME is not None):
            accepted = [c.SEED_NAME or c.NAME for c in ms.INSTRUCTIONS] if self.schema == SEED \
                else [c.NAME for c in ms.INSTRUCTIONS]
            error = node.error(
                f"unknown operation \"{name}\": the executor's operation table has no such "
                f"operation and refuses the plan when it parses it (\"Invalid operation "
                f"type\"; the {self.schema} schema has {one_of(accepted)})")
            error.rule = "mscclpp.operation-table"
            raise error
        return cls, (name if current != name else None)

    def instruction(self, node: JsonNode) -> ms.InstructionOp:
        r = ObjectReader(node, "op", self.schema)
        cls, legacy_name = self._op_class(r["name"])
        props: dict[str, Attribute] = {}
        kind = r.get("channel_type")
        if kind is not None:
            props["channel_type"] = StringAttr(kind.as_str(ms.CHANNEL_TYPES))
        ids = r.get("channel_ids")
        if ids is not None:
            props["channel_ids"] = ms._ints(self._channel_ids(ids))
        for key in ("src_buff", "dst_buff"):
            refs = r.get(key)
            if refs is not None:
                props[key] = ArrayAttr([self.ref(e) for e in refs.elements()])
        tbg = r.get("tbg_info")
        if tbg is not None:
            props["tbg_info"] = self.tbg(tbg)
        reduce_op = r.get("reduce_op")
        if reduce_op is not None:
            props["reduce_op"] = StringAttr(reduce_op.as_str())
        for key in ("barrier_id", "num_threadblocks"):
            member = r.get(key)
            if member is not None:
                props[key] = _int(member)
        sems = r.get("semaphore_ids")
        if sems is not None:
            values = [sems.as_int(0, MAX_COUNT)] if self.schema == SEED and \
                isinstance(sems.value, int) else sems.as_int_list(min_value=0)
            props["semaphore_ids"] = ms._ints(values)
        inner: list[ms.InstructionOp] = []
        if cls is ms.PipelineOp:
            props["iter_context"] = self.iter_context(r["iter_context"])
            inner = [self.instruction(o) for o in r["ops"].elements()]
        props.update({k: v for k, v in _recorded(r, legacy_name).items() if v is not None})
        op = cls.create(properties=props, regions=[Region(Block(inner))]
                        if cls is ms.PipelineOp else [])
        return _located(op, node)

    def ref(self, node: JsonNode) -> ms.BufferRefAttr:
        r = ObjectReader(node, "ref", self.schema)
        kinds = [(k, r.get(k)) for k in ("type", "buffer_id", "switch_channel_id")]
        present = [(k, v) for k, v in kinds if v is not None]
        if len(present) != 1:
            names = [n if self.schema == EXECUTOR else {"buffer_id": "buff_id"}.get(n, n)
                     for n, _ in kinds]
            raise node.error(f"a buffer reference has exactly one of {one_of(names)}, got "
                             f"{len(present)}")
        (key, value), = present
        index = r["index"].as_int(0, MAX_COUNT)
        size = r["size"].as_int(0, MAX_COUNT)
        extra = dict_attr(r.extra())
        if key == "type":
            return ms.BufferRefAttr.local(value.as_str(ms.BUFFER_TYPES), index, size, extra)
        if key == "buffer_id":
            return ms.BufferRefAttr.remote(value.as_int(0, MAX_COUNT), index, size, extra)
        return ms.BufferRefAttr.switch(value.as_int(0, MAX_COUNT), index, size, extra)

    def tbg(self, node: JsonNode) -> ms.TbgAttr:
        r = ObjectReader(node, "tbg", self.schema)
        size = r["tbg_size"].as_int(1, MAX_COUNT)
        tb_id = r["tb_id"].as_int(0, size - 1)
        return ms.TbgAttr.get(tb_id, size, dict_attr(r.extra()))

    def iter_context(self, node: JsonNode) -> ms.IterContextAttr:
        r = ObjectReader(node, "iter", self.schema)
        unit = r["unit_size"].as_int(1, 2**32 - 1)
        chunks = r["num_chunks"].as_int(1, MAX_COUNT)
        return ms.IterContextAttr.get(unit, chunks, dict_attr(r.extra()))


def import_document(doc: JsonNode) -> ModuleOp:
    """An MSCCL++ plan (either schema) as a module holding one `mscclpp.algorithm`."""
    if not isinstance(doc.value, dict):
        raise doc.expected("an MSCCL++ plan object")
    importer = _Importer(doc)
    algorithm = importer.algorithm()
    if importer.schema == SEED:
        # `planc check` judges plans by what today's executor does, and today's executor
        # reads the executor schema only (see targets.mscclpp.check).
        algorithm.attributes["planc.schema"] = StringAttr("seed")
    return ModuleOp([algorithm])


def describe(module: ModuleOp) -> str:
    algorithm = next(op for op in module.ops if isinstance(op, ms.AlgorithmOp))
    gpus = algorithm.gpus()
    blocks = sum(len(g.threadblocks()) for g in gpus)
    ops = sum(len(tb.ops()) for g in gpus for tb in g.threadblocks())
    name = algorithm.name_value
    return (f"{algorithm.collective_name} '{name}', {algorithm.protocol_name}, "
            f"{'in-place' if algorithm.is_inplace else 'out-of-place'}, {len(gpus)} GPUs, "
            f"{blocks} thread blocks, {ops} operations")
