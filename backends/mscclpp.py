"""`--target mscclpp`: MSCCL++ execution plans, in the seed schema (default) or the executor's.

Three ways in: an MSCCL++ plan (either schema) is re-emitted, which converts between schemas;
ARK models (one file per rank) are lowered to the algorithm their communication needs; and with
no input file at all, `--collective/--ranks/--algorithm/--protocol` synthesize a standard
algorithm. Plans are written as `json.dumps(indent=2)`, the layout of the MSCCL++ DSL.
"""

from __future__ import annotations

from argparse import Namespace
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from backends.json_format import indented_json
from dialects import mscclpp as ms
from dialects.json_value import dict_value
from frontends.mscclpp_schema import (
    EXECUTOR,
    OP_NAME_SPELLING,
    SEED,
    order_value,
    spellings_value,
    write_object,
)
from ground.diagnostics import PlancError, UnsupportedInput, UsageError


def _int(attr) -> int:
    return attr.value.data


def _bool(attr) -> bool:
    return bool(attr.value.data)


def _write(kind: str, op, members: dict[str, Any], schema: str) -> dict[str, Any]:
    members.update(dict_value(getattr(op, "extra", None)))
    return write_object(kind, members, schema, order_value(getattr(op, "key_order", None)),
                        spellings_value(getattr(op, "spellings", None)))


# ---------------------------------------------------------------------------------------------
# Objects
# ---------------------------------------------------------------------------------------------


def algorithm_json(algorithm: ms.AlgorithmOp, schema: str = EXECUTOR) -> dict[str, Any]:
    members: dict[str, Any] = {
        "name": algorithm.name_value, "collective": algorithm.collective_name,
        "protocol": algorithm.protocol_name, "inplace": algorithm.is_inplace,
        "gpus": [gpu_json(g, algorithm, schema) for g in algorithm.gpus()]}
    for key in ("num_threads_per_block", "buffer_alignment"):
        attr = getattr(algorithm, key)
        if attr is not None and not (key == "buffer_alignment" and schema == SEED):
            members[key] = _int(attr)
    for key in ("reuse_resources", "use_double_scratch_buffer"):
        attr = getattr(algorithm, key)
        if attr is not None:
            members[key] = _bool(attr)
    for key in ("min_message_size", "max_message_size"):
        attr = getattr(algorithm, key)
        if attr is not None:
            members[key] = attr.data
    return _write("algorithm", algorithm, members, schema)


def gpu_json(gpu: ms.GpuOp, algorithm: ms.AlgorithmOp, schema: str) -> dict[str, Any]:
    members: dict[str, Any] = {
        "id": gpu.rank_id, "input_chunks": gpu.chunks("i"), "output_chunks": gpu.chunks("o"),
        "scratch_chunks": gpu.chunks("s"),
        "threadblocks": [threadblock_json(tb, gpu, schema) for tb in gpu.threadblocks()],
        "channels": [channel_json(c, schema) for c in gpu.channels()],
        "remote_buffers": [remote_buffer_json(b, schema) for b in gpu.remote_buffers()]}
    if _bool(gpu.semaphores_listed) or gpu.semaphores():
        members["semaphores"] = [semaphore_json(s, schema) for s in gpu.semaphores()]
    if schema == SEED and algorithm.buffer_alignment is not None:
        members["buffer_alignment"] = _int(algorithm.buffer_alignment)
    return _write("gpu", gpu, members, schema)


def channel_json(channel: ms.ChannelOp, schema: str) -> dict[str, Any]:
    members: dict[str, Any] = {"channel_type": channel.kind}
    if channel.connected_to is not None:
        members["connected_to"] = channel.peers
    if channel.buffer_type is not None:
        members["buffer_type"] = channel.bound_buffer
    if channel.rank_groups is not None:
        members["rank_groups"] = [
            {"size": g.size.data, "ranks": g.rank_list, **dict_value(g.extra)}
            for g in channel.groups]
    return _write("channel", channel, members, schema)


def remote_buffer_json(buffer: ms.RemoteBufferOp, schema: str) -> dict[str, Any]:
    members: dict[str, Any] = {"rank": buffer.rank_id, "type": buffer.buffer}
    stored_access = None if buffer.access_channel_types is None else buffer.access_types
    stored_info = None if buffer.info_location is None else buffer.info_location.data
    if schema == EXECUTOR:
        members["access_channel_types"] = buffer.access_types
    else:
        info = stored_info or _info_location(buffer.access_types)
        if info is not None:
            members["info_location"] = info
        implied = list(ms.INFO_LOCATION_ACCESS.get(info, ())) if info else None
        if stored_access is not None and (stored_info is not None or stored_access != implied):
            members["access_channel_types"] = stored_access
    return _write("remote_buffer", buffer, members, schema)


def _info_location(access: list[str]) -> str | None:
    for location, types in ms.INFO_LOCATION_ACCESS.items():
        if access == list(types):
            return location
    return None


def semaphore_json(semaphore: ms.SemaphoreOp, schema: str) -> dict[str, Any]:
    return _write("semaphore", semaphore, {"init_value": semaphore.initial}, schema)


def threadblock_json(tb: ms.ThreadblockOp, gpu: ms.GpuOp, schema: str) -> dict[str, Any]:
    members: dict[str, Any] = {
        "id": tb.tb_id, "ops": [op_json(op, schema) for op in tb.ops()],
        "channels": [write_object("tb_channel", {"channel_type": c.channel_type.data,
                                                 "channel_ids": c.id_list,
                                                 **dict_value(c.extra)}, schema)
                     for c in tb.channels.data]}
    if tb.remote_buffer_refs is not None:
        flat = _flat_remote_ids(tb, gpu) if schema == SEED else None
        members["remote_buffer_refs"] = flat if flat is not None else [
            {"access_channel_type": e.access_channel_type.data,
             "remote_buffer_ids": e.id_list, **dict_value(e.extra)}
            for e in tb.remote_buffer_refs.data]
    result = _write("threadblock", tb, members, schema)
    if schema == SEED and "remote_buffer_refs" in members and flat is None:
        # Not expressible as the seed's flat list: keep the executor's form and key.
        result = {("remote_buffer_refs" if k == "remoteBuffersIds" else k): v
                  for k, v in result.items()}
    return result


def _flat_remote_ids(tb: ms.ThreadblockOp, gpu: ms.GpuOp) -> list[int] | None:
    """The seed's `remoteBuffersIds` for this block, if that list says everything: at most
    one entry, reached through memory channels, with no extra fields."""
    entries = list(tb.remote_buffer_refs.data)
    if not entries:
        return []
    if len(entries) > 1 or entries[0].access_channel_type.data != "memory" or \
            entries[0].extra.data:
        return None
    return entries[0].id_list


def op_json(op: ms.InstructionOp, schema: str) -> dict[str, Any]:
    spellings = spellings_value(op.spellings)
    if schema == SEED:
        name = op.SEED_NAME or op.NAME
    else:
        name = spellings.get(OP_NAME_SPELLING, op.NAME)
    members: dict[str, Any] = {"name": name}
    if op.channel_type is not None:
        members["channel_type"] = op.channel_type.data
    if op.channel_ids is not None:
        members["channel_ids"] = op.channel_list
    if op.src_buff is not None:
        members["src_buff"] = [ref_json(r, schema) for r in op.sources]
    if op.dst_buff is not None:
        members["dst_buff"] = [ref_json(r, schema) for r in op.destinations]
    if op.tbg_info is not None:
        members["tbg_info"] = {"tb_id": op.tbg_info.tb_id.data,
                               "tbg_size": op.tbg_info.tbg_size.data,
                               **dict_value(op.tbg_info.extra)}
    if op.reduce_op is not None:
        members["reduce_op"] = op.reduce_op.data
    for key in ("barrier_id", "num_threadblocks"):
        attr = getattr(op, key)
        if attr is not None:
            members[key] = _int(attr)
    if op.semaphore_ids is not None:
        ids = op.semaphore_list
        members["semaphore_ids"] = ids[0] if schema == SEED and len(ids) == 1 else ids
    if isinstance(op, ms.PipelineOp):
        context = op.iter_context
        members["iter_context"] = write_object(
            "iter", {"unit_size": context.unit_size.data, "num_chunks": context.num_chunks.data,
                     **dict_value(context.extra)}, schema)
        members["ops"] = [op_json(inner, schema) for inner in op.ops()]
    members.update(dict_value(op.extra))
    return write_object("op", members, schema, order_value(op.key_order), spellings)


def ref_json(ref: ms.BufferRefAttr, schema: str) -> dict[str, Any]:
    members: dict[str, Any] = {}
    if ref.is_local:
        members["type"] = ref.buffer.data
    elif ref.is_remote:
        members["buffer_id"] = ref.ref_id.data
    else:
        members["switch_channel_id"] = ref.ref_id.data
    members["index"] = ref.start
    members["size"] = ref.count
    members.update(dict_value(ref.extra))
    return write_object("ref", members, schema)


# ---------------------------------------------------------------------------------------------
# The target
# ---------------------------------------------------------------------------------------------


def single_algorithm(module: ModuleOp) -> ms.AlgorithmOp:
    found = [op for op in module.ops if isinstance(op, ms.AlgorithmOp)]
    if len(found) != 1:
        raise PlancError(f"expected one mscclpp.algorithm in the module, found {len(found)}")
    return found[0]


def emit_algorithm(module: ModuleOp, schema: str = EXECUTOR) -> str:
    """The plan file text of the single `mscclpp.algorithm` in `module`."""
    return indented_json(algorithm_json(single_algorithm(module), schema))


def pipeline(source_format: str, options: Namespace) -> str:
    if source_format and getattr(options, "collective", None) is not None:
        raise UsageError("--collective generates a plan from nothing; give no INPUT with it")
    if source_format in ("mscclpp", ""):
        return ""
    if source_format == "ark-model":
        options_given = {"algorithm": getattr(options, "algorithm", None),
                         "protocol": getattr(options, "protocol", None),
                         "instances": getattr(options, "instances", None),
                         "hardware": getattr(options, "mscclpp_hw", None)}
        given = " ".join(f"{k}={v}" for k, v in options_given.items() if v is not None)
        return "lower-ark-comm-to-mscclpp" + (f"{{{given}}}" if given else "")
    raise UnsupportedInput("mscclpp", "an MSCCL++ plan", source_format)


def emit(module: ModuleOp, options: Namespace) -> str:
    schema = getattr(options, "mscclpp_schema", None) or SEED
    return emit_algorithm(module, schema)


def synthesize(options: Namespace) -> ModuleOp:
    from targets.mscclpp.selection import synthesize_from_options

    if getattr(options, "collective", None) is None:
        raise UsageError("--target mscclpp needs an INPUT file, or --collective (with --ranks "
                         "and --algorithm) to generate an algorithm")
    return ModuleOp([synthesize_from_options(options)])
