"""Building MSCCL++ plans in Python, the way the MSCCL++ DSL does.

`PlanBuilder` keeps the tables a plan needs consistent while algorithms are written in terms
of ranks and chunks: `link(a, b)` creates a channel between two ranks on both sides at once
(so the k-th channel from a to b pairs with the k-th from b to a), remote references register
the peer buffer on the GPU and on the thread block, and switch channels bind one buffer type of
a group. `BlockBuilder` appends a thread block's ops and inserts the `nop`s the executor needs,
as the DSL's `adding_data_sync` and `resolve_data_dependency` do: before a signal or semaphore
release that follows data movement, after a wait or acquire before the next data op, and
between data ops whose local accesses conflict. Ops taking more channels or buffer references
than the executor allows are split.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from dialects import mscclpp as ms
from dialects.json_value import dict_attr

Ref = ms.BufferRefAttr


@dataclass(frozen=True)
class Link:
    """A channel between ranks `a` and `b`: GPU-level channel `id_a` on a, `id_b` on b."""

    a: int
    b: int
    kind: str
    id_a: int
    id_b: int

    def end(self, rank: int) -> int:
        return self.id_a if rank == self.a else self.id_b

    def peer(self, rank: int) -> int:
        return self.b if rank == self.a else self.a


class PlanBuilder:
    def __init__(self, name: str, collective: str, ranks: int, protocol: str, inplace: bool,
                 input_chunks: int, output_chunks: int, scratch_chunks: int, *,
                 double_scratch: bool = False, alignment: int = 16,
                 extra: dict[str, Any] | None = None):
        self.name = name
        self.collective = collective
        self.ranks = ranks
        self.protocol = protocol
        self.inplace = inplace
        self.chunks = (input_chunks, output_chunks, scratch_chunks)
        self.double_scratch = double_scratch
        self.alignment = alignment
        self.extra = extra or {}
        self.peers: dict[tuple[int, str], list[int]] = defaultdict(list)
        self.remotes: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
        self.switches: dict[int, list[tuple[str, tuple[int, ...]]]] = defaultdict(list)
        self.semaphores: dict[int, list[int]] = defaultdict(list)
        self.blocks: dict[int, dict[int, BlockBuilder]] = defaultdict(dict)

    def link(self, a: int, b: int, kind: str = "memory") -> Link:
        id_a = len(self.peers[(a, kind)])
        id_b = len(self.peers[(b, kind)])
        self.peers[(a, kind)].append(b)
        self.peers[(b, kind)].append(a)
        return Link(a, b, kind, id_a, id_b)

    def switch(self, buffer: str, members: list[int]) -> int:
        """A switch channel binding `buffer` of every member; its GPU-level id on each."""
        ids = {len(self.switches[m]) for m in members}
        assert len(ids) == 1, "declare switch channels in the same order on every member"
        for member in members:
            self.switches[member].append((buffer, tuple(members)))
        return ids.pop()

    def semaphore(self, rank: int, initial: int = 0) -> int:
        self.semaphores[rank].append(initial)
        return len(self.semaphores[rank]) - 1

    def remote_buffer(self, rank: int, peer: int, buffer: str, access: str) -> int:
        entry = (peer, buffer, access)
        if entry not in self.remotes[rank]:
            self.remotes[rank].append(entry)
        return self.remotes[rank].index(entry)

    def block(self, rank: int, tb: int | None = None) -> BlockBuilder:
        """Thread block `tb` of `rank` (a new one after the last when None)."""
        blocks = self.blocks[rank]
        tb = len(blocks) if tb is None else tb
        if tb not in blocks:
            blocks[tb] = BlockBuilder(self, rank, tb)
        return blocks[tb]

    def build(self) -> ms.AlgorithmOp:
        gpus = [self._gpu(rank) for rank in range(self.ranks)]
        return ms.AlgorithmOp(
            self.name, self.collective, self.protocol, self.inplace, gpus,
            num_threads_per_block=ms._int(1024), reuse_resources=ms._bool(False),
            use_double_scratch_buffer=ms._bool(self.double_scratch),
            buffer_alignment=ms._int(self.alignment), min_message_size=ms.IntAttr(0),
            max_message_size=ms.IntAttr(ms.UINT64_MAX), extra=dict_attr(self.extra))

    def _gpu(self, rank: int) -> ms.GpuOp:
        body: list[ms.Operation] = []
        for kind in ("memory", "port"):
            if self.peers[(rank, kind)]:
                body.append(ms.ChannelOp(kind, peers=self.peers[(rank, kind)]))
        for buffer, members in self.switches[rank]:
            body.append(ms.ChannelOp("switch", buffer_type=buffer,
                                     groups=[ms.RankGroupAttr.get(list(members))]))
        body += [ms.RemoteBufferOp(peer, buffer, (access,))
                 for peer, buffer, access in self.remotes[rank]]
        body += [ms.SemaphoreOp(value) for value in self.semaphores[rank]]
        blocks = self.blocks[rank]
        body += [blocks[tb].build() for tb in sorted(blocks)]
        return ms.GpuOp(rank, *self.chunks, body)


@dataclass
class _Access:
    buffer: str
    start: int
    end: int
    write: bool


def _conflict(a: _Access, b: _Access) -> bool:
    return (a.write or b.write) and a.buffer == b.buffer and a.start < b.end and b.start < a.end


@dataclass
class BlockBuilder:
    plan: PlanBuilder
    rank: int
    tb: int
    ops: list[ms.InstructionOp] = field(default_factory=list)
    channels: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    remote: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    _dirty: list[_Access] = field(default_factory=list)
    _moved: bool = False
    """Data moved since the last nop (a signal must not overtake it)."""
    _synced: bool = False
    """A wait or acquire since the last nop (data ops must not overtake it)."""

    # -- references ----------------------------------------------------------------------------

    def local(self, buffer: str, index: int, size: int = 1) -> Ref:
        return Ref.local(buffer, index, size)

    def remote_ref(self, peer: int, buffer: str, index: int, size: int = 1,
                   access: str = "memory") -> Ref:
        gpu_id = self.plan.remote_buffer(self.rank, peer, buffer, access)
        ids = self.remote[access]
        if gpu_id not in ids:
            ids.append(gpu_id)
        return Ref.remote(ids.index(gpu_id), index, size)

    def switch_ref(self, switch: int, index: int, size: int = 1) -> Ref:
        ids = self.channels["switch"]
        if switch not in ids:
            ids.append(switch)
        return Ref.switch(ids.index(switch), index, size)

    def _channel(self, link: Link) -> int:
        ids = self.channels[link.kind]
        gpu_id = link.end(self.rank)
        if gpu_id not in ids:
            ids.append(gpu_id)
        return ids.index(gpu_id)

    # -- synchronisation -------------------------------------------------------------------------

    def nop(self) -> None:
        self.ops.append(ms.NopOp())
        self._dirty, self._moved, self._synced = [], False, False

    def _before_sync(self) -> None:
        if self._moved:
            self.nop()

    def _sync_op(self, cls: type[ms.InstructionOp], links: list[Link]) -> None:
        if not links:
            return
        self._before_sync()
        kind = links[0].kind
        for group in _groups([self._channel(link) for link in links], ms.MAX_CHANNELS_PER_OP):
            self.ops.append(cls(channel_type=kind, channel_ids=group))

    def signal(self, links: list[Link], relaxed: bool = False) -> None:
        self._sync_op(ms.RelaxedSignalOp if relaxed else ms.SignalOp, links)

    def wait(self, links: list[Link], relaxed: bool = False) -> None:
        self._sync_op(ms.RelaxedWaitOp if relaxed else ms.WaitOp, links)
        self._synced = self._synced or bool(links)

    def handshake(self, links: list[Link], relaxed: bool = True) -> None:
        """Signal every link, then wait on every link."""
        self.signal(links, relaxed)
        self.wait(links, relaxed)

    def release(self, semaphore: int) -> None:
        self._before_sync()
        self.ops.append(ms.SemReleaseOp(semaphore_ids=ms._ints([semaphore])))

    def acquire(self, semaphore: int) -> None:
        self.ops.append(ms.SemAcquireOp(semaphore_ids=ms._ints([semaphore])))
        self._synced = True

    # -- data ------------------------------------------------------------------------------------

    def _data(self, op: ms.InstructionOp) -> None:
        accesses = []
        for refs, packets, write in ((op.sources, op.source_packets(), False),
                                     (op.destinations, op.destination_packets(), True)):
            for ref, packet in zip(refs, packets, strict=True):
                if not ref.is_local or (packet and not write):
                    continue  # remote data and arriving packets are fenced elsewhere
                buffer = ref.buffer.data
                if self.plan.inplace and buffer in ("i", "o"):
                    buffer = "io"
                if packet:
                    buffer += "#packets"
                accesses.append(_Access(buffer, ref.start, ref.end, write))
        if self._synced or any(_conflict(a, d) for a in accesses for d in self._dirty):
            self.nop()
        self.ops.append(op)
        self._dirty.extend(accesses)
        self._moved = True

    def _op(self, cls: type[ms.InstructionOp], src: list[Ref], dst: list[Ref],
            channel_type: str | None = None, **props) -> None:
        self._data(cls(channel_type=channel_type, src=src, dst=dst, **props))

    def _paired(self, cls: type[ms.InstructionOp], pairs: list[tuple[Ref, Ref]],
                channel_type: str | None = "memory") -> None:
        for group in _groups(pairs, ms.MAX_CHANNELS_PER_OP):
            self._op(cls, [s for s, _ in group], [d for _, d in group], channel_type)

    def put(self, pairs: list[tuple[Ref, Ref]]) -> None:
        self._paired(ms.PutOp, pairs)

    def put_packets(self, pairs: list[tuple[Ref, Ref]]) -> None:
        self._paired(ms.PutPacketsOp, pairs)

    def read_put_packets(self, pairs: list[tuple[Ref, Ref]]) -> None:
        self._paired(ms.ReadPutPacketsOp, pairs)

    def copy(self, src: Ref, dst: Ref) -> None:
        self._op(ms.CopyOp, [src], [dst])

    def unpack_packets(self, src: Ref, dst: Ref) -> None:
        self._op(ms.UnpackPacketsOp, [src], [dst])

    def reduce(self, cls: type[ms.InstructionOp], sources: list[Ref], destinations: list[Ref],
               channel_type: str | None = None) -> None:
        """A reduction op; with more sources than one op takes, the first op accumulates
        into the (local) first destination and the last one sends (if it does)."""
        first, rest = sources[0], sources[1:]
        groups = _groups(rest, ms.MAX_BUFFER_REFS - 2) or [[]]
        accumulate = {ms.ReadReduceSendOp: ms.ReadReduceOp, ms.ReduceSendOp: ms.ReduceOp,
                      ms.ReduceSendPacketsOp: ms.ReducePacketsOp,
                      ms.ReduceCopySendPacketsOp: ms.ReducePacketsOp}.get(cls, cls)
        for position, group in enumerate(groups):
            last = position == len(groups) - 1
            op_class = cls if last else accumulate
            head = first if position == 0 else destinations[0]
            targets = destinations if last else destinations[:1]
            kind = channel_type if op_class.CHANNELS else None
            self._op(op_class, [head, *group], targets, kind, reduce_op=ms.StringAttr("sum"))

    def multi_load_reduce_store(self, src: Ref, dst: Ref) -> None:
        self._op(ms.MultiLoadReduceStoreOp, [src], [dst], "switch")

    def multi_store(self, src: Ref, dst: Ref) -> None:
        self._op(ms.MultiStoreOp, [src], [dst], "switch")

    def build(self) -> ms.ThreadblockOp:
        channels = [ms.TbChannelsAttr.get(kind, ids) for kind, ids in self.channels.items()
                    if ids]
        remote = [ms.TbRemoteBuffersAttr.get(kind, ids) for kind, ids in self.remote.items()
                  if ids]
        return ms.ThreadblockOp(self.tb, channels, remote, self.ops)


def _groups(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]
