"""Lowering the communication of a multi-rank ARK model to one MSCCL++ algorithm.

Two routes, decided by what the model computes (see `communication.ReferenceRun`):

* **An all-reduce.** When every rank ends up holding, in the result of an `Add`, the sum of
  one same-sized tensor of every rank (ARK's `Model::all_reduce` writes exactly that with
  sends, receives and adds), and every send sends that tensor, the model's communication *is*
  an allreduce of it. It becomes the standard algorithm the cost model finds fastest for its
  size (or the one `--algorithm`/`--protocol`/`--instances` name), in place when the sum
  overwrites the input. The adds disappear into the algorithm.
* **Point to point.** Otherwise each rank's communication is translated op by op into one
  thread block, in model order, after a handshake (signal and wait) with every peer it
  exchanges plain data with, so that no put lands before the peer's kernel has started (as
  the MSCCL++ DSL opens its plans): `Send` is a put into the peer's buffer and a signal;
  `Recv` waits until the matching send's signal (counting signals per channel, so receives
  may come in any order of tags); `SendDone` needs nothing (memory-channel puts are done
  when they return); packet sends and receives are `ppkt`/`upkt` through scratch (no
  signals: the packets' flags synchronise); `RecvReduceSend(Packet)` waits for its
  contributions and is `res`/`respkt`; `DeviceSync` is a signal and wait with every rank of
  its group. The plan is in place: each rank's buffers that take part are laid out one
  after the other in its input (= output) buffer, packet buffers in scratch. The
  collective's name is `custom`; the result must equal the reference run of the model, which
  the tests check with the simulator. A transfer whose landing place the receiver itself
  uses before the receive (it sends from there, say: an exchange in place) would race with
  that use if put straight there; it lands in the receiver's scratch and is copied into place
  at the receive (`Communication.staged_transfers`).

Both record where each ARK buffer went in a top-level `planc_buffers` member (the executor
ignores keys it does not know).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from dialects import ark
from dialects import mscclpp as ms
from dialects.json_value import dict_attr, dict_value
from dialects.locations import source_path
from ground.diagnostics import PlancError
from targets.mscclpp.builder import BlockBuilder, Link, PlanBuilder
from targets.mscclpp.communication import (
    ATOM_RANK,
    Arith,
    Communication,
    Event,
    Layout,
    ReferenceRun,
    Span,
    atom,
    layout,
    reference_state,
)
from targets.mscclpp.cost import padded_message
from targets.mscclpp.selection import note_padding
from targets.mscclpp.simulator import Expectation
from targets.mscclpp.synthesis import Spec, synthesize


@dataclass
class Lowered:
    algorithm: ms.AlgorithmOp
    route: str
    """'allreduce' or 'point-to-point'."""
    chunk_bytes: int
    reference: ReferenceRun
    layout: Layout
    communication: Communication

    def expectation(self, cell: int) -> Expectation:
        """What the plan's outputs must hold (point to point: the reference run's buffers),
        in cells of `cell` bytes."""
        per_chunk = self.chunk_bytes // cell
        cells: dict[int, list] = {}
        inputs = self.algorithm.gpus()[0].chunks("i")
        for rank in range(self.algorithm.num_ranks):
            chunks = list(self.reference.memory.get((rank, "i"), []))
            chunks += [(atom(rank, k),) for k in range(len(chunks), inputs)]
            cells[rank] = [_split(value, per_chunk, part) for value in chunks
                           for part in range(per_chunk)]
        return Expectation(cells)


def _split(value, per_chunk: int, part: int):
    if value is None:
        return None
    return tuple(sorted(atom(a // ATOM_RANK, (a % ATOM_RANK) * per_chunk + part)
                        for a in value))


@dataclass(frozen=True)
class Choice:
    algorithm: str = "auto"
    protocol: str | None = None
    instances: int | None = None
    hardware: str = "h100"
    recognise: bool = True
    """Look for an all-reduce (else lower op by op)."""


def lower_models(models: list[ark.ModelOp], files: list[str | None],
                 choice: Choice | None = None) -> Lowered:
    choice = choice or Choice()
    comm = Communication(models, files)
    if not comm.has_communication():
        raise PlancError("the models do not communicate (no Send, Recv, packet, "
                         "RecvReduceSend or DeviceSync operators): there is no collective to "
                         "make", file=comm.files[0])
    full = layout(comm, with_arithmetic=True)
    run = reference_state(comm, full)
    pattern = None
    if choice.recognise:
        pattern = recognise_allreduce(comm, full, run) or \
            recognise_inplace_allreduce(comm, full, run)
    algorithm = _allreduce(pattern, comm, choice) if pattern is not None else None
    if algorithm is not None:
        return Lowered(algorithm, "allreduce", full.chunk, run, full, comm)
    plan_layout = layout(comm)
    reference = reference_state(comm, plan_layout)
    return Lowered(point_to_point(comm, plan_layout), "point-to-point", plan_layout.chunk,
                   reference, plan_layout, comm)


# ---------------------------------------------------------------------------------------------
# All-reduce
# ---------------------------------------------------------------------------------------------


@dataclass
class AllReducePattern:
    inputs: list[Span]
    outputs: list[Span]
    bytes: int


def _span_at(comm: Communication, lay: Layout, rank: int, first: int, like: Span
             ) -> Span | None:
    """The ARK span of `like`'s bytes placed from chunk `first` of rank's input (as many
    chunks as `like` takes in the layout), if in one buffer."""
    count = lay.ref(like)[2]
    for (owner, buffer), (letter, start) in lay.places.items():
        size = lay.buffer_chunks((owner, buffer))
        if owner == rank and letter == "i" and start <= first and first + count <= start + size:
            return Span(rank, buffer, (first - start) * lay.chunk, like.size)
    return None


def recognise_allreduce(comm: Communication, lay: Layout, run: ReferenceRun
                        ) -> AllReducePattern | None:
    """The all-reduce the model computes, if its communication computes nothing else."""
    inputs: list[Span] = []
    outputs: list[Span] = []
    for rank in range(comm.ranks):
        found = None
        for event in comm.events[rank]:
            if not isinstance(event, Arith) or not isinstance(event.op, ark.AddOp):
                continue
            bases = _full_sum(run.read(event.target), comm.ranks)
            if bases is not None and bases[rank] is not None:
                source = _span_at(comm, lay, rank, bases[rank], event.target)
                if source is not None:
                    found = (source, event.target)
        if found is None:
            return None
        inputs.append(found[0])
        outputs.append(found[1])
    sizes = {span.size for span in inputs}
    if len(sizes) != 1:
        return None
    for rank in range(comm.ranks):
        for event in comm.comm_events(rank):
            if event.kind not in ("send", "recv", "sync") or \
                    (event.kind == "send" and event.source != inputs[rank]):
                return None  # the model communicates more than the all-reduce
    return AllReducePattern(inputs, outputs, sizes.pop())


def recognise_inplace_allreduce(comm: Communication, lay: Layout, run: ReferenceRun
                                ) -> AllReducePattern | None:
    """An all-reduce the communication computes in place in one buffer per rank (as with
    RecvReduceSend: each rank reduces its shard from the others' contributions and sends
    the sum back), when everything else it writes is scratch only communication reads."""
    data: list[Span] = []
    for rank in range(comm.ranks):
        found = None
        for (owner, buffer), (letter, first) in sorted(lay.places.items()):
            if owner != rank or letter != "i":
                continue
            span = Span(rank, buffer, 0, comm.buffers[(owner, buffer)])
            bases = _full_sum(run.read(span), comm.ranks)
            if bases is not None and bases[rank] == first:
                found = span
        if found is None:
            return None
        data.append(found)
    if len({span.size for span in data}) != 1:
        return None
    firsts = [lay.places[(r, span.buffer)][1] for r, span in enumerate(data)]
    for span in data:
        if _full_sum(run.read(span), comm.ranks) != firsts:
            return None
    scratch = {(e.rank, e.scratch.buffer) for r in range(comm.ranks)
               for e in comm.comm_events(r) if e.scratch is not None}

    def inside(span: Span | None, allowed: set) -> bool:
        return span is None or (span.rank, span.buffer) in allowed or \
            span.buffer == data[span.rank].buffer

    for rank in range(comm.ranks):
        for event in comm.comm_events(rank):
            if not inside(event.source, set()):
                return None  # it sends something besides the data being reduced
            if not all(inside(span, scratch)
                       for span in [event.target] + [s for _, _, s in event.fanout]):
                return None  # it writes something besides the data and its scratch
    return AllReducePattern(data, data, data[0].size)


def _full_sum(values: list, ranks: int) -> list[int | None] | None:
    """Per rank j, the first chunk of the input chunks whose sum `values` holds, if every
    value is the sum over all ranks of chunk base_j + k."""
    bases: list[int | None] = [None] * ranks
    for k, value in enumerate(values):
        if value is None or len(value) != ranks:
            return None
        owners = [a // ATOM_RANK for a in value]
        if sorted(owners) != list(range(ranks)):
            return None
        for a in value:
            j, base = a // ATOM_RANK, a % ATOM_RANK - k
            if bases[j] is None:
                bases[j] = base
            elif bases[j] != base:
                return None
    return bases


def _allreduce(pattern: AllReducePattern, comm: Communication, choice: Choice
               ) -> ms.AlgorithmOp | None:
    """The standard all-reduce for the pattern; None (lower op by op) when it would need
    padding that other data of the tensors' buffers leaves no room for, unless the choice
    names the algorithm (then that is an error)."""
    inplace = pattern.inputs == pattern.outputs
    spec = Spec("allreduce", comm.ranks, choice.algorithm, choice.protocol or "Simple",
                choice.instances or 1, inplace)
    if choice.algorithm == "auto":
        from targets.mscclpp.selection import fastest

        algorithm = fastest(spec, choice.protocol, pattern.bytes, choice.hardware,
                            fixed_instances=choice.instances).algorithm
    else:
        algorithm = note_padding(synthesize(spec), pattern.bytes)
    padded = padded_message(algorithm, pattern.bytes)
    blocked = _unpaddable(comm, pattern) if padded != pattern.bytes else None
    if blocked is not None:
        if choice.algorithm == "auto":
            return None
        model = comm.models[blocked.rank]
        raise PlancError(
            f"the all-reduce of {pattern.bytes} bytes runs on buffers padded to {padded} "
            f"bytes, but on rank {blocked.rank} its tensor (bytes [{blocked.start}, "
            f"{blocked.start + blocked.size}) of buffer {blocked.buffer}) is followed by other "
            f"data: give the all-reduced tensor a buffer of its own, make it {padded} bytes, "
            "or let planc choose (--algorithm auto lowers it op by op)",
            path=source_path(model), file=comm.files[blocked.rank])
    buffers = [{"input": _span_json(pattern.inputs[r], padded),
                "output": _span_json(pattern.outputs[r], padded)} for r in range(comm.ranks)]
    algorithm.extra = dict_attr({**dict_value(algorithm.extra), "planc_buffers": buffers})
    return algorithm


def _unpaddable(comm: Communication, pattern: AllReducePattern) -> Span | None:
    """A tensor of the all-reduce that cannot grow into padding: the executor takes the
    message only as a multiple of the plan's chunks x alignment, so the bytes past each
    tensor must be its buffer's own slack, which no other tensor uses (the buffer plan then
    grows the buffer)."""
    for span in pattern.inputs + pattern.outputs:
        if span.start + span.size != comm.buffers[(span.rank, span.buffer)]:
            return span
    return None


def _span_json(span: Span, padded: int) -> dict:
    found = {"ark_buffer": span.buffer, "offset": span.start, "bytes": span.size}
    if padded != span.size:
        found["padded_bytes"] = padded  # the executor is called with this size
    return found


# ---------------------------------------------------------------------------------------------
# Point to point
# ---------------------------------------------------------------------------------------------


def handshake_peers(comm: Communication) -> dict[int, list[int]]:
    """Per rank, the peers it must handshake with before anything else: those it puts plain
    data into or that put plain data into it. A GPU's kernel starts when its own stream gets
    there: a put before the peer has shown it started could overwrite its input while its
    caller still writes it (or its output while the caller still reads it). LL packets need
    no handshake (their flag changes with every launch)."""
    peers: dict[int, set[int]] = defaultdict(set)
    for rank in range(comm.ranks):
        for event in comm.comm_events(rank):
            targets = [event.peer] if event.kind == "send" else []
            if event.kind == "reduce_send":
                targets += [p for p, _, _ in event.fanout]
            for peer in targets:
                if peer != rank:
                    peers[rank].add(peer)
                    peers[peer].add(rank)
    return {rank: sorted(found) for rank, found in peers.items()}


class _Signals:
    """Which signal (1-based, per sending rank and peer) announces each transfer and sync
    (the opening handshake's signal, where there is one, is number 1)."""

    def __init__(self, comm: Communication):
        self.count: dict[tuple[int, int], int] = defaultdict(int)
        self.handshakes = handshake_peers(comm)
        for rank, peers in self.handshakes.items():
            for peer in peers:
                self.count[(rank, peer)] = 1
        self.transfers: dict[tuple[int, int, int], list[int]] = defaultdict(list)
        self.syncs: dict[tuple[int, int], list[int]] = defaultdict(list)
        for rank in range(comm.ranks):
            for event in comm.comm_events(rank):
                if event.kind == "send":
                    self._announce(rank, event.peer, ("transfer", event.tag))
                elif event.kind == "reduce_send":
                    for peer, tag, _ in event.fanout:
                        self._announce(rank, peer, ("transfer", tag))
                elif event.kind == "sync" and rank in event.group:
                    for peer in event.group:
                        if peer != rank:
                            self._announce(rank, peer, ("sync", None))
        self.consumed: dict[tuple, int] = defaultdict(int)

    def _announce(self, rank: int, peer: int, what: tuple) -> None:
        self.count[(rank, peer)] += 1
        index = self.count[(rank, peer)]
        if what[0] == "transfer":
            self.transfers[(rank, peer, what[1])].append(index)
        else:
            self.syncs[(rank, peer)].append(index)

    def next_transfer(self, sender: int, receiver: int, tag: int) -> int | None:
        key = (sender, receiver, tag)
        position = self.consumed[key]
        self.consumed[key] += 1
        indices = self.transfers.get(key, [])
        return indices[position] if position < len(indices) else None

    def next_sync(self, sender: int, receiver: int) -> int | None:
        key = ("sync", sender, receiver)
        position = self.consumed[key]
        self.consumed[key] += 1
        indices = self.syncs.get((sender, receiver), [])
        return indices[position] if position < len(indices) else None


def point_to_point(comm: Communication, lay: Layout) -> ms.AlgorithmOp:
    packets = any(e.kind.endswith("packets") for r in range(comm.ranks)
                  for e in comm.comm_events(r))
    inputs = max((lay.chunks.get((r, "i"), 0) for r in range(comm.ranks)), default=0)
    staging = _staging(comm, lay)
    scratch = max([lay.chunks.get((r, "s"), 0) for r in range(comm.ranks)]
                  + [first + count for _, first, count in staging.values()], default=0)
    buffers = [[{"ark_buffer": buffer, "buffer": letter, "index": first,
                 "size": lay.buffer_chunks((owner, buffer)),
                 "bytes": comm.buffers[(owner, buffer)]}
                for (owner, buffer), (letter, first) in sorted(lay.places.items())
                if owner == rank] for rank in range(comm.ranks)]
    plan = PlanBuilder("ark_communication", "custom", comm.ranks, "LL" if packets else "Simple",
                       True, max(inputs, 1), max(inputs, 1), scratch, double_scratch=packets,
                       alignment=lay.alignment, extra={"planc_buffers": buffers})
    links = _links(comm, plan)
    signals = _Signals(comm)
    for rank in range(comm.ranks):
        _Translator(comm, lay, plan, links, signals, rank, staging).run()
    return plan.build()


def _staging(comm: Communication, lay: Layout) -> dict[int, tuple[int, int, int]]:
    """Scratch slots of the staged transfers (`Communication.staged_transfers`): the send's
    and the receive's `id` -> (receiving rank, first scratch chunk, chunks). Slots follow
    the packet buffers, whose packets take twice their data chunks."""
    staged = comm.staged_transfers()
    used = {r: 2 * lay.chunks.get((r, "s"), 0) for r in range(comm.ranks)}
    slots: dict[int, tuple[int, int, int]] = {}
    for send, recv in comm.matched_transfers():
        if id(send) not in staged:
            continue
        count = lay.ref(send.target)[2]
        slots[id(send)] = slots[id(recv)] = (recv.rank, used[recv.rank], count)
        used[recv.rank] += count
    return slots


def _links(comm: Communication, plan: PlanBuilder) -> dict[tuple[int, int], Link]:
    pairs: set[tuple[int, int]] = set()
    for rank in range(comm.ranks):
        for event in comm.comm_events(rank):
            peers = [event.peer] if event.peer is not None else []
            peers += [p for p, _, _ in event.fanout] + [p for p in event.group if p != rank]
            pairs.update((min(rank, p), max(rank, p)) for p in peers if p != rank)
    links: dict[tuple[int, int], Link] = {}
    for a, b in sorted(pairs):
        links[(a, b)] = links[(b, a)] = plan.link(a, b)
    return links


class _Translator:
    def __init__(self, comm: Communication, lay: Layout, plan: PlanBuilder,
                 links: dict[tuple[int, int], Link], signals: _Signals, rank: int,
                 staging: dict[int, tuple[int, int, int]]):
        self.comm, self.lay, self.plan, self.staging = comm, lay, plan, staging
        self.links, self.signals, self.rank = links, signals, rank
        self.tb: BlockBuilder = plan.block(rank, 0)
        self.waited: dict[int, int] = defaultdict(int)
        self.received_data = False

    def local(self, span: Span, packets: bool = False) -> ms.BufferRefAttr:
        letter, index, size = self.lay.ref(span, packets)
        return self.tb.local(letter, index, size)

    def remote(self, span: Span, packets: bool = False) -> ms.BufferRefAttr:
        letter, index, size = self.lay.ref(span, packets)
        return self.tb.remote_ref(span.rank, letter, index, size)

    def wait_for(self, peer: int, index: int | None) -> None:
        """Wait on the channel from `peer` until its `index`-th signal has come."""
        while index is not None and self.waited[peer] < index:
            self.tb.wait([self.links[(self.rank, peer)]])
            self.waited[peer] += 1

    def run(self) -> None:
        peers = self.signals.handshakes.get(self.rank, [])
        self.tb.handshake([self.links[(self.rank, p)] for p in peers])
        for peer in peers:
            self.waited[peer] = 1
        for event in self.comm.events[self.rank]:
            if isinstance(event, Arith):
                if self.received_data:
                    self._check_single_phase(event)
                continue
            getattr(self, f"_{event.kind}")(event)
        for peer in range(self.comm.ranks):
            total = self.signals.count.get((peer, self.rank), 0)
            self.wait_for(peer, total)  # leave no signal behind for the next launch

    def _check_single_phase(self, event: Arith) -> None:
        later_sends = [e for e in self.comm.comm_events(self.rank)
                       if e.kind in ("send", "send_packets") and e.source == event.target]
        if later_sends:
            send = later_sends[0].op
            raise self.comm.error(
                self.rank, f"{send.ark_type} '{send.label.data}' sends what "
                f"{event.op.ark_type} '{event.op.label.data}' computes from received data: "
                "that needs two communication phases (two plans), not one", send)

    def _send(self, event: Event) -> None:
        target = self.remote(event.target)
        if id(event) in self.staging:
            peer, first, count = self.staging[id(event)]
            target = self.tb.remote_ref(peer, "s", first, count)
        self.tb.put([(self.local(event.source), target)])
        self.tb.signal([self.links[(self.rank, event.peer)]])

    def _send_packets(self, event: Event) -> None:
        self.tb.put_packets([(self.local(event.source), self.remote(event.target, True))])

    def _recv(self, event: Event) -> None:
        self.wait_for(event.peer, self.signals.next_transfer(event.peer, self.rank, event.tag))
        if id(event) in self.staging:
            _, first, count = self.staging[id(event)]
            self.tb.copy(self.tb.local("s", first, count), self.local(event.target))
        self.received_data = True

    def _recv_packets(self, event: Event) -> None:
        self.tb.unpack_packets(self.local(event.scratch, True), self.local(event.target))
        self.received_data = True

    def _reduce_inputs(self, event: Event, packets: bool) -> list[ms.BufferRefAttr]:
        scratch = self.local(event.scratch, packets)
        width = scratch.count // event.slices
        letter = scratch.buffer.data
        return [self.local(event.source)] + [
            self.tb.local(letter, scratch.start + k * width, width) for k in range(event.slices)]

    def _reduce_send(self, event: Event) -> None:
        for (sender, _, tag), count in self.comm.contributions(event).items():
            for _ in range(count):
                self.wait_for(sender, self.signals.next_transfer(sender, self.rank, tag))
        self.tb.reduce(ms.ReduceSendOp, self._reduce_inputs(event, False),
                       [self.local(event.target)] + [self.remote(s) for _, _, s in event.fanout],
                       "memory")
        self.tb.signal([self.links[(self.rank, peer)] for peer, _, _ in event.fanout])
        self.received_data = True

    def _reduce_send_packets(self, event: Event) -> None:
        self.tb.reduce(ms.ReduceSendPacketsOp, self._reduce_inputs(event, True),
                       [self.local(event.target)] +
                       [self.remote(s, True) for _, _, s in event.fanout], "memory")
        self.received_data = True

    def _sync(self, event: Event) -> None:
        peers = [p for p in event.group if p != self.rank]
        if self.rank not in event.group:
            return
        self.tb.signal([self.links[(self.rank, p)] for p in peers])
        for peer in peers:
            self.wait_for(peer, self.signals.next_sync(peer, self.rank))
