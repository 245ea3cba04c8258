"""Small MSCCL++ plans written for the tests (the upstream corpus is read, never copied)."""

from __future__ import annotations

import copy
from typing import Any


def allgather_plan(ranks: int = 2) -> dict[str, Any]:
    """An in-place allgather in the executor schema, as the MSCCL++ DSL writes it: each rank
    puts its chunk into every peer's output, fenced by nops and signal/wait handshakes."""
    gpus = []
    for rank in range(ranks):
        peers = [p for p in range(ranks) if p != rank]
        channels = list(range(len(peers)))
        ops = [
            {"name": "rlxsignal", "channel_ids": channels, "channel_type": "memory"},
            {"name": "rlxwait", "channel_ids": channels, "channel_type": "memory"},
            {"name": "nop"},
            {"name": "put",
             "src_buff": [{"type": "o", "index": rank, "size": 1} for _ in peers],
             "dst_buff": [{"buffer_id": k, "index": rank, "size": 1}
                          for k in range(len(peers))],
             "channel_type": "memory"},
            {"name": "nop"},
            {"name": "signal", "channel_ids": channels, "channel_type": "memory"},
            {"name": "wait", "channel_ids": channels, "channel_type": "memory"},
            {"name": "nop"},
        ]
        gpus.append({
            "id": rank, "input_chunks": 1, "output_chunks": ranks, "scratch_chunks": 0,
            "threadblocks": [{
                "id": 0, "ops": ops,
                "channels": [{"channel_type": "memory", "channel_ids": channels}],
                "remote_buffer_refs": [{"access_channel_type": "memory",
                                        "remote_buffer_ids": list(range(len(peers)))}]}],
            "channels": [{"channel_type": "memory", "connected_to": peers}],
            "remote_buffers": [{"rank": p, "type": "o", "access_channel_types": ["memory"]}
                               for p in peers],
            "semaphores": []})
    return _allgather_document("allgather_test", gpus)


def _allgather_document(name: str, gpus: list[dict[str, Any]], protocol: str = "Simple",
                        double_scratch: bool = False) -> dict[str, Any]:
    """An in-place allgather plan document around `gpus`, with the executor's defaults."""
    return {"name": name, "collective": "allgather", "protocol": protocol,
            "inplace": True, "gpus": gpus, "num_threads_per_block": 1024,
            "use_double_scratch_buffer": double_scratch, "buffer_alignment": 16,
            "min_message_size": 0, "max_message_size": 2**64 - 1}


def ops_of(plan: dict[str, Any], rank: int, tb: int = 0) -> list[dict[str, Any]]:
    return plan["gpus"][rank]["threadblocks"][tb]["ops"]


def mutated(plan: dict[str, Any], edit) -> dict[str, Any]:
    """A deep copy of `plan` changed by `edit(copy)`."""
    changed = copy.deepcopy(plan)
    edit(changed)
    return changed


def allreduce_plan(ranks: int = 2) -> dict[str, Any]:
    """An in-place two-step all-pairs allreduce: rank r owns chunk r, reads it from every
    peer, sums, and writes the sum back to every peer (one `rres`), between handshakes."""
    plan = allgather_plan(ranks)
    plan.update(name="allreduce_test", collective="allreduce")
    for rank, gpu in enumerate(plan["gpus"]):
        peers = [p for p in range(ranks) if p != rank]
        gpu.update(input_chunks=ranks, output_chunks=ranks)
        for buffer in gpu["remote_buffers"]:
            buffer["type"] = "i"
        gpu["threadblocks"][0]["ops"][3] = {
            "name": "rres",
            "src_buff": [{"type": "i", "index": rank, "size": 1}] +
                        [{"buffer_id": k, "index": rank, "size": 1} for k in range(len(peers))],
            "dst_buff": [{"type": "i", "index": rank, "size": 1}] +
                        [{"buffer_id": k, "index": rank, "size": 1} for k in range(len(peers))],
            "channel_type": "memory", "reduce_op": "sum"}
    return plan


def port_allgather_plan(put: str = "pwsf") -> dict[str, Any]:
    """`allgather_plan(2)` over port channels, putting with `put` (pwsf: the proxy puts,
    signals in order, and the block waits until the put is done with its source)."""
    plan = allgather_plan(2)
    for gpu in plan["gpus"]:
        gpu["channels"][0]["channel_type"] = "port"
        gpu["remote_buffers"][0]["access_channel_types"] = ["port"]
        tb = gpu["threadblocks"][0]
        tb["channels"][0]["channel_type"] = "port"
        tb["remote_buffer_refs"][0]["access_channel_type"] = "port"
        for op in tb["ops"]:
            if "channel_type" in op:
                op["channel_type"] = "port"
        tb["ops"][3].update(name=put, channel_ids=[0])
        del tb["ops"][4:6]  # the nop and signal the put now does itself
    return plan


def port_packet_allgather_plan(put: str = "ppkt") -> dict[str, Any]:
    """An in-place LL allgather of 2 GPUs whose transfer runs on a port channel, as the DSL's
    multi-node allreduce moves packets between nodes: each GPU writes its chunk as packets
    into its own scratch (`cpkt`), its proxy puts those packets as they are into the peer's
    scratch (`put`: ppkt, or rppkt, which first waits for them), and a second thread block
    unpacks the peer's packets into the output (`upkt`)."""
    gpus = []
    for rank in range(2):
        peer = 1 - rank
        sender = [{"name": "cpkt", "src_buff": [{"type": "o", "index": rank, "size": 1}],
                   "dst_buff": [{"type": "s", "index": rank, "size": 1}]},
                  {"name": "nop"},
                  {"name": put, "src_buff": [{"type": "s", "index": rank, "size": 1}],
                   "dst_buff": [{"buffer_id": 0, "index": rank, "size": 1}],
                   "channel_ids": [0], "channel_type": "port"}]
        receiver = [{"name": "upkt", "src_buff": [{"type": "s", "index": peer, "size": 1}],
                     "dst_buff": [{"type": "o", "index": peer, "size": 1}]}]
        gpus.append({
            "id": rank, "input_chunks": 1, "output_chunks": 2, "scratch_chunks": 2,
            "threadblocks": [
                {"id": 0, "ops": sender,
                 "channels": [{"channel_type": "port", "channel_ids": [0]}],
                 "remote_buffer_refs": [{"access_channel_type": "port",
                                         "remote_buffer_ids": [0]}]},
                {"id": 1, "ops": receiver, "channels": [], "remote_buffer_refs": []}],
            "channels": [{"channel_type": "port", "connected_to": [peer]}],
            "remote_buffers": [{"rank": peer, "type": "s", "access_channel_types": ["port"]}],
            "semaphores": []})
    return _allgather_document("port_packets", gpus, protocol="LL", double_scratch=True)


def group_allgather_plan(barrier: bool = False) -> dict[str, Any]:
    """An in-place allgather of 2 GPUs with 2 chunks per GPU, shaped like upstream
    `reduce_tbg.py`: a thread-block group of 2 blocks copies the GPU's 2 chunks into scratch
    (block t does chunk t), each block then handshakes with its own peer block on its own
    memory channel, and the group gets the peer's 2 chunks one at a time (block t does half t
    of each chunk). `barrier`: a barrier over the group after the copy, before the signals."""
    gpus = []
    for rank in range(2):
        peer = 1 - rank
        gpus.append({
            "id": rank, "input_chunks": 2, "output_chunks": 4, "scratch_chunks": 4,
            "threadblocks": [
                {"id": tb, "ops": _group_ops(rank, tb, barrier),
                 "channels": [{"channel_type": "memory", "channel_ids": [tb]}],
                 "remote_buffer_refs": [{"access_channel_type": "memory",
                                         "remote_buffer_ids": [0]}]} for tb in range(2)],
            "channels": [{"channel_type": "memory", "connected_to": [peer, peer]}],
            "remote_buffers": [{"rank": peer, "type": "s", "access_channel_types": ["memory"]}],
            "semaphores": []})
    return _allgather_document("group_allgather", gpus)


def _group_ops(rank: int, tb: int, barrier: bool) -> list[dict[str, Any]]:
    """Block `tb`'s ops in `group_allgather_plan` (its own channel is its tb-local 0)."""
    part = {"tbg_info": {"tb_id": tb, "tbg_size": 2}}
    copy = {"name": "copy", "src_buff": [{"type": "o", "index": 2 * rank, "size": 2}],
            "dst_buff": [{"type": "s", "index": 2 * rank, "size": 2}], **part}
    gets = [{"name": "get", "src_buff": [{"buffer_id": 0, "index": chunk, "size": 1}],
             "dst_buff": [{"type": "o", "index": chunk, "size": 1}], "channel_ids": [0],
             "channel_type": "memory", **part} for chunk in (2 - 2 * rank, 3 - 2 * rank)]
    fence = {"name": "barrier", "barrier_id": 0, "num_threadblocks": 2} if barrier else \
        {"name": "nop"}
    handshake = [{"name": "signal", "channel_ids": [0], "channel_type": "memory"},
                 {"name": "wait", "channel_ids": [0], "channel_type": "memory"},
                 {"name": "nop"}]
    return [copy, fence, *handshake, *gets, {"name": "nop"}, *handshake]
