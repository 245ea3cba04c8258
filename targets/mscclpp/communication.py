"""The communication of a multi-rank ARK model, and what it means.

A multi-rank ARK model is one model file per rank. Ranks exchange data through buffers tagged
with (remote rank, tag) pairs (reference ark.md §3): a `Send` on rank A writes a *proxy* tensor
on a buffer whose `Rank` is B and whose RecvTags hold (-1, t); the data lands in B's buffer
whose RecvTags hold (A, t), at the proxy's offset. `Recv` on B (reading a proxy with SendTags
(-1, t) on rank A) waits for it. The packet ops do the same with LL packets in scratch buffers
(twice the data bytes), `RecvReduceSend(Packet)` adds the peers' slices of its scratch to its
input and writes the sum into the peers' buffers, and `DeviceSync` is a barrier of ranks
0..PeerNum.

`Communication` reads that out of the models: the ordered events of every rank with their
byte spans, which buffer of which rank every transfer lands in, and a layout of all those
buffers in chunks (every span a whole number of chunks). `reference_state` runs the events on
symbolic chunks (atoms `(rank, chunk)` as in the MSCCL++ simulator) in an order the model's
blocking receives allow: the meaning a lowered plan must reproduce. `Add` and `Copy` of whole
chunks are followed too, which is how an all-reduce written with sends, receives and adds (ARK's
`Model::all_reduce`) is recognised.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from functools import reduce

from dialects import ark
from dialects.locations import source_path
from ground.diagnostics import PlancError

Value = tuple[int, ...] | None
ATOM_RANK = 1 << 40


def atom(rank: int, chunk: int) -> int:
    return rank * ATOM_RANK + chunk


@dataclass(frozen=True)
class Span:
    """Bytes `[start, start + size)` of buffer `buffer` of `rank` (ARK buffer ids)."""

    rank: int
    buffer: int
    start: int
    size: int


@dataclass
class Event:
    """One communication operator of one rank, in model order."""

    kind: str
    """send, send_packets, recv, recv_packets, reduce_send, reduce_send_packets, sync."""
    rank: int
    op: ark.ArkOp
    peer: int | None = None
    tag: int | None = None
    source: Span | None = None
    """What is sent (send*), or the input added to (reduce_send*)."""
    target: Span | None = None
    """Where it lands on the peer (send*), or the output written (recv_packets, reduce_send*)."""
    scratch: Span | None = None
    """Packets to unpack (recv_packets), or the peers' contributions (reduce_send*)."""
    slices: int = 0
    fanout: list[tuple[int, int, Span]] = field(default_factory=list)
    """(peer, tag, span on the peer) each reduce_send result goes to."""
    group: list[int] = field(default_factory=list)
    """The ranks of a sync."""


@dataclass
class Arith:
    """An Add or Copy over whole spans of one rank: target = sum of sources."""

    rank: int
    op: ark.ArkOp
    sources: list[Span]
    target: Span


COMM_OPS = (ark.SendOp, ark.SendDoneOp, ark.RecvOp, ark.SendPacketOp, ark.RecvPacketOp,
            ark.RecvReduceSendOp, ark.RecvReduceSendPacketOp, ark.DeviceSyncOp)


class Communication:
    def __init__(self, models: list[ark.ModelOp], files: list[str | None]):
        self.files = files
        self._order_models(models)
        self.buffers: dict[tuple[int, int], int] = defaultdict(int)
        """(rank, ARK buffer id) -> bytes."""
        self.receivers: dict[tuple[int, int, int], int] = {}
        """(receiving rank, sending rank, tag) -> buffer id on the receiving rank."""
        self._scan_buffers()
        self.events: dict[int, list[Event | Arith]] = {r: [] for r in range(self.ranks)}
        for rank, model in enumerate(self.models):
            for op in model.operators():
                self._read(rank, op)
        self.packet_buffers = {(span.rank, span.buffer)
                               for events in self.events.values() for event in events
                               for span, packets in _spans(event) if packets}

    # -- models ---------------------------------------------------------------------------------

    def error(self, rank: int | None, message: str, op=None) -> PlancError:
        file = self.files[rank] if rank is not None and rank < len(self.files) else None
        return PlancError(message, path=source_path(op) if op is not None else None, file=file)

    def _order_models(self, models: list[ark.ModelOp]) -> None:
        worlds = {m.world_size_value for m in models}
        if len(worlds) != 1:
            sizes = ", ".join(map(str, sorted(worlds)))
            raise PlancError(f"the models disagree on WorldSize ({sizes})")
        world = worlds.pop()
        by_rank: dict[int, int] = {}
        for index, model in enumerate(models):
            rank = model.rank_value
            if rank in by_rank:
                raise PlancError(f"rank {rank} is given twice ({self.files[by_rank[rank]]} and "
                                 f"{self.files[index]})", path="$.Rank", file=self.files[index])
            by_rank[rank] = index
        missing = [r for r in range(world) if r not in by_rank]
        if missing:
            raise PlancError(f"the models are of a {world}-rank world; give one model file per "
                             f"rank (missing: rank {', '.join(map(str, missing))})")
        self.ranks = world
        self.models = [models[by_rank[r]] for r in range(world)]
        self.files = [self.files[by_rank[r]] for r in range(world)]

    def _scan_buffers(self) -> None:
        for rank, model in enumerate(self.models):
            for op in model.body.block.ops:
                for value in op.results:
                    tensor = value.type
                    buffer = tensor.buffer
                    owner = rank if buffer.is_local else buffer.rank.data
                    if owner < 0 or owner >= self.ranks:
                        raise self.error(rank, f"tensor {tensor.tensor_id} is on a buffer of rank "
                                         f"{owner}, outside the {self.ranks}-rank world", op)
                    if buffer.is_local:
                        key = (rank, buffer.id.data)
                        self.buffers[key] = max(self.buffers[key], tensor.span_bytes)
                        for sender, tag in buffer.recv_tag_pairs:
                            if sender < 0:
                                continue
                            known = self.receivers.setdefault((rank, sender, tag),
                                                              buffer.id.data)
                            if known != buffer.id.data:
                                raise self.error(rank, f"buffers {known} and {buffer.id.data} "
                                                 f"both receive tag {tag} from rank {sender}",
                                                 op)

    # -- events ---------------------------------------------------------------------------------

    def span(self, rank: int, op: ark.ArkOp, tensor: ark.TensorType) -> Span:
        """The bytes a tensor covers, which must be contiguous."""
        shape, strides = tensor.shape_list, tensor.strides_list
        first = next((i for i, s in enumerate(shape) if s > 1), len(shape))
        if any(shape[i] != strides[i] for i in range(first + 1, len(shape))):
            raise self.error(rank, f"{op.ark_type} '{op.label.data}': tensor "
                             f"{tensor.tensor_id} {shape} is a strided view of {strides}; "
                             "communication needs contiguous tensors", op)
        return Span(rank, tensor.buffer_id, tensor.byte_offset,
                    tensor.num_elements * tensor.element_bytes)

    def landing(self, rank: int, op: ark.ArkOp, proxy: ark.TensorType
                ) -> tuple[int, int, Span]:
        """(peer, tag, span on the peer) a write to a remote proxy tensor lands in."""
        buffer = proxy.buffer
        tags = [t for r, t in buffer.recv_tag_pairs if r == -1]
        peer = buffer.rank.data
        if buffer.is_local or len(tags) != 1:
            raise self.error(rank, f"{op.ark_type} '{op.label.data}': tensor "
                             f"{proxy.tensor_id} should be on a buffer of the receiving rank "
                             "with RecvTags [[-1, tag]]", op)
        tag = tags[0]
        target = self.receivers.get((peer, rank, tag))
        if target is None:
            raise self.error(rank, f"{op.ark_type} '{op.label.data}': rank {rank} sends tag "
                             f"{tag} to rank {peer}, but no buffer of rank {peer} has RecvTags "
                             f"[{rank}, {tag}]", op)
        start, size = proxy.byte_offset, proxy.num_elements * proxy.element_bytes
        self.buffers[(peer, target)] = max(self.buffers[(peer, target)], proxy.span_bytes)
        return peer, tag, Span(peer, target, start, size)

    def _source_tag(self, rank: int, op: ark.ArkOp, proxy: ark.TensorType) -> tuple[int, int]:
        tags = [t for r, t in proxy.buffer.send_tag_pairs if r == -1]
        if proxy.buffer.is_local or len(tags) != 1:
            raise self.error(rank, f"{op.ark_type} '{op.label.data}': its first read tensor "
                             "should be on the sending rank's buffer with SendTags "
                             "[[-1, tag]]", op)
        return proxy.buffer.rank.data, tags[0]

    def _read(self, rank: int, op: ark.ArkOp) -> None:
        events = self.events[rank]
        if isinstance(op, ark.SendOp | ark.SendPacketOp):
            packets = isinstance(op, ark.SendPacketOp)
            peer, tag, target = self.landing(rank, op, op.outputs[0])
            events.append(Event("send_packets" if packets else "send", rank, op, peer, tag,
                                self.span(rank, op, op.inputs[0]), target))
        elif isinstance(op, ark.RecvOp):
            peer, tag = self._source_tag(rank, op, op.inputs[0])
            events.append(Event("recv", rank, op, peer, tag,
                                target=self.span(rank, op, op.outputs[0])))
        elif isinstance(op, ark.RecvPacketOp):
            peer, tag = self._source_tag(rank, op, op.inputs[0])
            events.append(Event("recv_packets", rank, op, peer, tag,
                                target=self.span(rank, op, op.outputs[0]),
                                scratch=self.span(rank, op, op.inputs[1])))
        elif isinstance(op, ark.RecvReduceSendOp | ark.RecvReduceSendPacketOp):
            packets = isinstance(op, ark.RecvReduceSendPacketOp)
            source = self.span(rank, op, op.inputs[0])
            scratch = self.span(rank, op, op.inputs[1])
            peers = op.npeers.value.data if op.npeers is not None else len(op.outputs) - 1
            unit = source.size * (2 if packets else 1)
            if scratch.size != peers * unit:
                raise self.error(rank, f"{op.ark_type} '{op.label.data}': its scratch holds "
                                 f"{scratch.size} bytes, not {peers} slices of {unit}", op)
            event = Event("reduce_send_packets" if packets else "reduce_send", rank, op,
                          source=source, target=self.span(rank, op, op.outputs[0]),
                          scratch=scratch, slices=peers)
            event.fanout = [self.landing(rank, op, t) for t in op.outputs[1:]]
            events.append(event)
        elif isinstance(op, ark.DeviceSyncOp):
            count = op.peer_num.value.data if op.peer_num is not None else self.ranks - 1
            events.append(Event("sync", rank, op, group=list(range(count + 1))))
        elif isinstance(op, ark.AddOp | ark.CopyOp):
            if all(t.shape_list == op.outputs[0].shape_list for t in op.inputs):
                events.append(Arith(rank, op, [self.span(rank, op, t) for t in op.inputs],
                                    self.span(rank, op, op.outputs[0])))

    def contributions(self, event: Event) -> dict[tuple[int, int, int], int]:
        """The transfers landing in a reduce_send's scratch: (sender, rank, tag) -> count."""
        found: dict[tuple[int, int, int], int] = defaultdict(int)
        scratch = event.scratch
        for events in self.events.values():
            for other in events:
                if not isinstance(other, Event):
                    continue
                landings = [(other.peer, other.tag, other.target)] if other.kind in (
                    "send", "send_packets") else other.fanout
                for peer, tag, span in landings:
                    if span.rank == scratch.rank and span.buffer == scratch.buffer and \
                            span.start < scratch.start + scratch.size and \
                            scratch.start < span.start + span.size:
                        found[(other.rank, peer, tag)] += 1
        return found

    def comm_events(self, rank: int) -> list[Event]:
        return [e for e in self.events[rank] if isinstance(e, Event)]

    def matched_transfers(self) -> list[tuple[Event, Event]]:
        """Each plain send with the receive that waits for it: the n-th transfer from A to B
        with tag t (a send, or a RecvReduceSend's result) pairs with B's n-th receive from A
        with tag t."""
        sends: dict[tuple[int, int, int], list[Event]] = defaultdict(list)
        for rank in range(self.ranks):
            for event in self.comm_events(rank):
                if event.kind == "send":
                    sends[(rank, event.peer, event.tag)].append(event)
                elif event.kind == "reduce_send":  # counts in the order, never staged
                    for peer, tag, _ in event.fanout:
                        sends[(rank, peer, tag)].append(event)
        pairs = []
        for rank in range(self.ranks):
            taken: dict[tuple[int, int, int], int] = defaultdict(int)
            for event in self.comm_events(rank):
                if event.kind != "recv":
                    continue
                key = (event.peer, rank, event.tag)
                if taken[key] < len(sends[key]) and sends[key][taken[key]].kind == "send":
                    pairs.append((sends[key][taken[key]], event))
                taken[key] += 1
        return pairs

    def staged_transfers(self) -> set[int]:
        """The sends (by `id`) whose landing place its receiver touches before the matching
        receive (it sends from there, adds from there, or writes there). The data may
        arrive at any time between the send and the receive, so writing it into place
        directly would race with the receiver's own use: such a transfer lands in the
        receiver's scratch and is copied into place at the receive."""
        staged = set()
        for send, recv in self.matched_transfers():
            events = self.events[recv.rank]
            before = events[:next(i for i, e in enumerate(events) if e is recv)]
            if any(_overlap(span, send.target) for event in before
                   for span, _ in _spans(event)):
                staged.add(id(send))
        return staged

    def has_communication(self) -> bool:
        return any(self.comm_events(r) for r in range(self.ranks))


# ---------------------------------------------------------------------------------------------
# Layout: ARK buffers in chunks
# ---------------------------------------------------------------------------------------------


PAD = 16
"""Buffers are padded to multiples of this (the executor's default `buffer_alignment`)."""


@dataclass
class Layout:
    """Where each ARK buffer of a rank lives in chunks: plain buffers in `i` (in this order),
    packet buffers in `s` (at their data offset: half their packet bytes). Every buffer is
    padded to a multiple of `PAD` bytes of data, and spans that end where their buffer ends
    (and whose operator's other spans do too) reach to the padded end: a 2-byte tensor
    moves as 16 bytes, the last 14 of them padding that no tensor uses."""

    chunk: int
    places: dict[tuple[int, int], tuple[str, int]]
    """(rank, ARK buffer) -> (MSCCL++ buffer letter, first chunk)."""
    chunks: dict[tuple[int, str], int]
    """(rank, letter) -> number of chunks."""
    alignment: int
    padded: dict[tuple[int, int], int] = field(default_factory=dict)
    """(rank, ARK buffer) -> its data bytes, padded."""
    extended: set[tuple[Span, bool]] = field(default_factory=set)
    """The spans that reach to their buffer's padded end."""

    def ref(self, span: Span, packets: bool = False) -> tuple[str, int, int]:
        """(letter, chunk index, chunk count) of a span (packet spans: of its data)."""
        letter, first = self.places[(span.rank, span.buffer)]
        start, size = _data(span, packets)
        if (span, packets) in self.extended:
            size = self.padded[(span.rank, span.buffer)] - start
        return letter, first + start // self.chunk, size // self.chunk

    def buffer_chunks(self, key: tuple[int, int]) -> int:
        return self.padded[key] // self.chunk


def _data(span: Span, packets: bool) -> tuple[int, int]:
    return (span.start // 2, span.size // 2) if packets else (span.start, span.size)


def layout(comm: Communication, with_arithmetic: bool = False) -> Layout:
    """A layout of every buffer the communication touches (and the adds and copies, if
    `with_arithmetic`), with the largest chunk that divides every (padded) span, buffer and
    placement."""
    used: set[tuple[int, int]] = set()
    groups: list[tuple[bool, list[tuple[Span, bool]]]] = []
    for rank in range(comm.ranks):
        for event in comm.events[rank]:
            if isinstance(event, Arith) and not with_arithmetic:
                continue
            spans = _spans(event)
            used.update((span.rank, span.buffer) for span, _ in spans)
            # A reduction's scratch holds one slice per peer at ARK's own offsets: its spans
            # keep their sizes.
            fixed = isinstance(event, Event) and event.kind.startswith("reduce_send")
            groups.append((fixed, spans))
    data = {key: comm.buffers[key] // 2 if key in comm.packet_buffers else comm.buffers[key]
            for key in used}
    padded = {key: -(-size // PAD) * PAD for key, size in data.items()}
    extended = _extended_spans(groups, data)
    numbers = list(padded.values())
    for _, spans in groups:
        for span, packets in spans:
            start, size = _data(span, packets)
            if (span, packets) in extended:
                size = padded[(span.rank, span.buffer)] - start
            numbers += [start, size]
    chunk = reduce(math.gcd, (n for n in numbers if n), 0)
    if chunk == 0:
        raise PlancError("the communication moves no data")
    alignment = math.gcd(chunk, PAD)
    if alignment < 4:
        raise PlancError(_misaligned(groups, extended, padded))
    places: dict[tuple[int, int], tuple[str, int]] = {}
    chunks: dict[tuple[int, str], int] = defaultdict(int)
    for key in sorted(used):
        rank, _ = key
        letter = "s" if key in comm.packet_buffers else "i"
        places[key] = (letter, chunks[(rank, letter)])
        chunks[(rank, letter)] += padded[key] // chunk
    return Layout(chunk, places, dict(chunks), alignment, padded, extended)


def _extended_spans(groups: list[tuple[bool, list[tuple[Span, bool]]]],
                    data: dict[tuple[int, int], int]) -> set[tuple[Span, bool]]:
    """The spans that may reach into their buffer's padding: those ending at their buffer's
    end, used only by operators all of whose spans do (a send's source and target move the
    same bytes). Shrinks to a fixed point: at most one pass per span."""
    extended = {(span, packets) for _, spans in groups for span, packets in spans
                if sum(_data(span, packets)) == data[(span.rank, span.buffer)]}
    changed = True
    while changed:
        changed = False
        for fixed, spans in groups:
            if any(s in extended for s in spans) and (
                    fixed or not all(s in extended for s in spans)):
                extended.difference_update(spans)
                changed = True
    return extended


def _misaligned(groups, extended, padded) -> str:
    for _, spans in groups:
        for span, packets in spans:
            start, size = _data(span, packets)
            if (span, packets) in extended:
                size = padded[(span.rank, span.buffer)] - start
            if start % 4 or size % 4:
                return (f"rank {span.rank} communicates bytes [{span.start}, "
                        f"{span.start + span.size}) of buffer {span.buffer}, which neither "
                        "start and end at multiples of 4 bytes nor end where the buffer ends "
                        "(where planc pads it): the executor moves data in aligned units; "
                        "give the tensor a buffer of its own or a size of a multiple of 4 "
                        "bytes")
    return "communicated tensors must start and end at multiples of 4 bytes"


def _overlap(a: Span, b: Span) -> bool:
    return a.rank == b.rank and a.buffer == b.buffer and a.start < b.start + b.size and \
        b.start < a.start + a.size


def _spans(event: Event | Arith) -> list[tuple[Span, bool]]:
    if isinstance(event, Arith):
        return [(s, False) for s in [*event.sources, event.target]]
    packets_in = event.kind in ("recv_packets", "reduce_send_packets")
    found = [(s, False) for s in (event.source, event.target) if s is not None]
    if event.kind == "send_packets":
        found = [(event.source, False), (event.target, True)]
    if event.scratch is not None:
        found.append((event.scratch, packets_in))
    found += [(span, event.kind == "reduce_send_packets") for _, _, span in event.fanout]
    return found


# ---------------------------------------------------------------------------------------------
# Reference semantics
# ---------------------------------------------------------------------------------------------


def _union(a: Value, b: Value) -> Value:
    return None if a is None or b is None else tuple(sorted(a + b))


class ReferenceRun:
    """The model's communication on symbolic chunks (see the module docstring)."""

    def __init__(self, comm: Communication, plan_layout: Layout):
        self.comm = comm
        self.layout = plan_layout
        self.memory: dict[tuple[int, str], list[Value]] = {}
        for (rank, letter), count in plan_layout.chunks.items():
            self.memory[(rank, letter)] = [(atom(rank, k),) if letter == "i" else None
                                           for k in range(count)]
        self.arrived: dict[tuple[int, int, int], int] = defaultdict(int)
        self.consumed: dict[tuple[int, int, int], int] = defaultdict(int)
        self.synced: dict[int, int] = defaultdict(int)
        self.position = {r: 0 for r in range(comm.ranks)}
        self.staged = comm.staged_transfers()
        self.landings = {id(recv): send.target for send, recv in comm.matched_transfers()
                         if id(send) in self.staged}
        """Receives of staged transfers -> where they put the data."""
        self.in_flight: dict[tuple[int, int, int], list[list[Value]]] = defaultdict(list)
        """Staged transfers' data, sent and not yet received, per (sender, receiver, tag)."""

    def _cells(self, span: Span, packets: bool = False) -> tuple[list[Value], int, int]:
        letter, first, count = self.layout.ref(span, packets)
        return self.memory[(span.rank, letter)], first, count

    def read(self, span: Span, packets: bool = False) -> list[Value]:
        cells, first, count = self._cells(span, packets)
        return cells[first:first + count]

    def write(self, span: Span, values: list[Value], packets: bool = False) -> None:
        cells, first, count = self._cells(span, packets)
        cells[first:first + count] = values

    def ready(self, event: Event | Arith) -> bool:
        if isinstance(event, Arith):
            return True
        if event.kind in ("recv", "recv_packets"):
            key = (event.peer, event.rank, event.tag)
            return self.arrived[key] > self.consumed[key]
        if event.kind in ("reduce_send", "reduce_send_packets"):
            return all(self.arrived[key] >= count
                       for key, count in self.comm.contributions(event).items())
        if event.kind == "sync":
            mine = self.synced[event.rank]
            return all(self.synced[r] > mine or self._at_sync(r, mine) for r in event.group)
        return True

    def _at_sync(self, rank: int, count: int) -> bool:
        events = self.comm.events[rank]
        position = self.position[rank]
        return position < len(events) and isinstance(events[position], Event) and \
            events[position].kind == "sync" and self.synced[rank] == count

    def perform(self, event: Event | Arith) -> None:
        if isinstance(event, Arith):
            spans = [*event.sources, event.target]
            if any((s.rank, s.buffer) not in self.layout.places for s in spans):
                return  # computation outside the buffers this layout follows
            columns = zip(*(self.read(s) for s in event.sources), strict=True)
            self.write(event.target, [reduce(_union, c) for c in columns])
            return
        kind = event.kind
        if kind in ("send", "send_packets"):
            key = (event.rank, event.peer, event.tag)
            if id(event) in self.staged:  # lands at the receive (see staged_transfers)
                self.in_flight[key].append(self.read(event.source))
            else:
                self.write(event.target, self.read(event.source), kind == "send_packets")
            self.arrived[key] += 1
        elif kind in ("recv", "recv_packets"):
            key = (event.peer, event.rank, event.tag)
            self.consumed[key] += 1
            if kind == "recv" and id(event) in self.landings:
                self.write(self.landings[id(event)], self.in_flight[key].pop(0))
            if kind == "recv_packets":
                self.write(event.target, self.read(event.scratch, True))
        elif kind in ("reduce_send", "reduce_send_packets"):
            packets = kind == "reduce_send_packets"
            scratch = self.read(event.scratch, packets)
            width = len(scratch) // event.slices
            parts = [self.read(event.source)] + [scratch[k * width:(k + 1) * width]
                                                 for k in range(event.slices)]
            total = [reduce(_union, column) for column in zip(*parts, strict=True)]
            self.write(event.target, total)
            for peer, tag, span in event.fanout:
                self.write(span, total, packets)
                self.arrived[(event.rank, peer, tag)] += 1
        elif kind == "sync":
            self.synced[event.rank] += 1

    def run(self) -> None:
        progress = True
        while progress:
            progress = False
            for rank in range(self.comm.ranks):
                events = self.comm.events[rank]
                while self.position[rank] < len(events) and \
                        self.ready(events[self.position[rank]]):
                    self.perform(events[self.position[rank]])
                    self.position[rank] += 1
                    progress = True
        stuck = [(r, self.comm.events[r][self.position[r]]) for r in range(self.comm.ranks)
                 if self.position[r] < len(self.comm.events[r])]
        if stuck:
            rank, event = stuck[0]
            raise self.comm.error(rank, f"the model's communication deadlocks: rank {rank}'s "
                                  f"{event.op.ark_type} '{event.op.label.data}' waits for "
                                  "data no rank sends", event.op)


def reference_state(comm: Communication, plan_layout: Layout) -> ReferenceRun:
    run = ReferenceRun(comm, plan_layout)
    run.run()
    return run
