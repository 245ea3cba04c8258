"""Multi-rank ARK models that communicate, built like ARK's Python API builds them.

`CommunicationBuilder` extends `ModelBuilder` with the communication operators the plain
builder lacks or simplifies: sends into any window of a peer's buffer, packet sends and
receives, RecvReduceSend(Packet) and DeviceSync, all with ARK's tag conventions (reference
ark.md §3). The functions below build the models of every rank of a few standard patterns;
tests, examples and benchmarks lower them to MSCCL++.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from dialects import ark
from frontends.model_builder import ModelBuilder

Value = SSAValue


class CommunicationBuilder(ModelBuilder):
    def first_tag(self, count: int) -> list[int]:
        """`count` consecutive tags; every rank that builds the same model gets the same
        ones (ARK's unique_tag is a per-process counter)."""
        return [self._tag() for _ in range(count)]

    def receiving(self, shape: Sequence[int], dtype: str, senders: Sequence[tuple[int, int]],
                  ) -> Value:
        """A local tensor on a new buffer that (sender, tag) transfers land in."""
        return self.tensor(shape, dtype, buffer=self.buffer(recv=list(senders)))

    def _proxy(self, peer: int, tag: int, dtype: str, shape: Sequence[int],
               whole: Sequence[int] | None, offsets: Sequence[int] | None,
               tags_key: str = "recv") -> Value:
        buffer = self.buffer(rank=peer, **{tags_key: [(-1, tag)]})
        strides = list(whole) if whole is not None else list(shape)
        return self._view(ark.TensorType.get(self._tensor_id(), dtype, shape, buffer,
                                             strides=strides, offsets=offsets))

    def send_into(self, x: Value, peer: int, tag: int, *, whole: Sequence[int] | None = None,
                  offsets: Sequence[int] | None = None) -> Value:
        """Send `x` into the window `offsets` of a `whole`-shaped buffer of `peer` (default:
        all of a same-shaped one); returns the SendDone result."""
        t = x.type
        self._tags.setdefault(t.buffer_id, ([], []))[0].append((peer, tag))
        proxy = self._proxy(peer, tag, t.data_type, t.shape_list, whole, offsets)
        sent = self._append(ark.SendOp, [x], [proxy]).result_tensors[0]
        return self._append(ark.SendDoneOp, [sent], [], results_alias=[sent]).result_tensors[0]

    def recv_into(self, out: Value, peer: int, tag: int) -> Value:
        """Wait for what `peer` sends with `tag` into `out`'s buffer."""
        t = out.type
        proxy = self._proxy(peer, tag, t.data_type, t.shape_list, None, None, "send")
        return self._append(ark.RecvOp, [proxy], [out]).result_tensors[0]

    def send_packet(self, x: Value, peer: int, tag: int, *, whole_bytes: int | None = None,
                    offset_bytes: int = 0) -> Value:
        """Send `x` as LL packets (twice its bytes) into the scratch of `peer`."""
        t = x.type
        size = 2 * t.num_elements * t.element_bytes
        proxy = self._proxy(peer, tag, "UINT8", [size], [whole_bytes or size], [offset_bytes])
        return self._append(ark.SendPacketOp, [x], [proxy],
                            {"flag": ark.int_arg(ark.ArgKind.UINT32, 1)}).result_tensors[0]

    def recv_packet(self, scratch: Value, out: Value, peer: int, tag: int) -> Value:
        t = scratch.type
        proxy = self._proxy(peer, tag, t.data_type, t.shape_list, None, None, "send")
        return self._append(ark.RecvPacketOp, [proxy, scratch], [out],
                            {"flag": ark.int_arg(ark.ArgKind.UINT32, 1)}).result_tensors[0]

    def recv_reduce_send(self, x: Value, scratch: Value, out: Value,
                         peers: Sequence[tuple[int, int, Sequence[int], Sequence[int]]],
                         packets: bool = False) -> Value:
        """out = x + the peers' slices of `scratch`; the sum also goes to each peer's window
        (peer, tag, whole shape, offsets) (as packets into its scratch if `packets`)."""
        t = x.type
        remote = []
        for peer, tag, whole, offsets in peers:
            dtype, shape = ("UINT8", [2 * t.num_elements * t.element_bytes]) if packets \
                else (t.data_type, t.shape_list)
            remote.append(self._proxy(peer, tag, dtype, shape, whole, offsets))
        args = {"npeers": ark.int_arg(ark.ArgKind.UINT32, len(peers)),
                "rank": ark.int_arg(ark.ArgKind.INT, self.rank)}
        cls = ark.RecvReduceSendPacketOp if packets else ark.RecvReduceSendOp
        if packets:
            args["flag"] = ark.int_arg(ark.ArgKind.UINT32, 1)
        return self._append(cls, [x, scratch], [out, *remote], args).result_tensors[0]

    def device_sync(self, x: Value) -> Value:
        args = {"peer_num": ark.int_arg(ark.ArgKind.INT, self.world_size - 1),
                "rank": ark.int_arg(ark.ArgKind.INT, self.rank)}
        return self._append(ark.DeviceSyncOp, [x], [x], args).result_tensors[0]

    def all_reduce(self, x: Value) -> Value:
        """ARK's `Model::all_reduce`: send x to every other rank, receive theirs, add."""
        ranks, me = self.world_size, self.rank
        tags = self.first_tag(ranks)
        total = x
        for i in range(1, ranks):
            dst, src = (me + i) % ranks, (me - i) % ranks
            t = x.type
            self.send_into(x, dst, tags[me])
            received = self.recv_into(self.receiving(t.shape_list, t.data_type,
                                                     [(src, tags[src])]), src, tags[src])
            total = self.add(total, received)
        return total


def all_reduce_models(ranks: int, shape: Sequence[int] = (1024,), dtype: str = "FP16"
                      ) -> list[ModuleOp]:
    """Every rank: y = all_reduce(x) + x' (a bias), as ARK's examples write it."""
    modules = []
    for rank in range(ranks):
        m = CommunicationBuilder(rank, ranks)
        x = m.tensor(shape, dtype)
        m.add(m.all_reduce(x), m.tensor(shape, dtype))
        modules.append(m.finish())
    return modules


def shard_all_reduce_models(ranks: int, shard: int = 1024, dtype: str = "FP16",
                            packets: bool = False) -> list[ModuleOp]:
    """The all-reduce of ARK's `allreduce-sm` (and `allreduce-packet`) plans as models: rank
    r sends shard k of its data to rank k's scratch, reduces shard r with RecvReduceSend,
    which writes the sum into every peer's shard r, and receives the other shards."""
    modules = []
    for rank in range(ranks):
        m = CommunicationBuilder(rank, ranks)
        scatter, gather = m.first_tag(2)
        peers = [p for p in range(ranks) if p != rank]
        data = m.tensor([ranks * shard], dtype, buffer=m.buffer(
            recv=[] if packets else [(p, gather) for p in peers]))
        if packets:
            size = 2 * shard * ark.DATA_TYPE_BYTES[dtype]
            scratch = m.tensor([len(peers) * size], "UINT8", buffer=m.buffer(
                recv=[(p, scatter) for p in peers]))
        else:
            scratch = m.receiving([len(peers) * shard], dtype, [(p, scatter) for p in peers])
        for peer in peers:
            slot = [p for p in range(ranks) if p != peer].index(rank)
            part = m.slice(data, [peer * shard], [shard])
            if packets:
                m.send_packet(part, peer, scatter, whole_bytes=len(peers) * size,
                              offset_bytes=slot * size)
            else:
                m.send_into(part, peer, scatter, whole=[len(peers) * shard],
                            offsets=[slot * shard])
        if not packets:
            m.device_sync(data)
        mine = m.slice(data, [rank * shard], [shard])
        if packets:
            results = m.tensor([len(peers) * size], "UINT8", buffer=m.buffer(
                recv=[(p, gather) for p in peers]))
            targets = [(p, gather, [len(peers) * size],
                        [[q for q in range(ranks) if q != p].index(rank) * size])
                       for p in peers]
        else:
            targets = [(p, gather, [ranks * shard], [rank * shard]) for p in peers]
        m.recv_reduce_send(mine, scratch, mine, targets, packets)
        for peer in peers:
            part = m.slice(data, [peer * shard], [shard])
            if packets:
                slot = peers.index(peer)
                window = m.slice(results, [slot * size], [size])
                m.recv_packet(window, part, peer, gather)
            else:
                m.recv_into(part, peer, gather)
        if not packets:
            m.device_sync(data)
        modules.append(m.finish())
    return modules


def ring_shift_models(ranks: int, shape: Sequence[int] = (256,), dtype: str = "FP32",
                      packets: bool = False) -> list[ModuleOp]:
    """Every rank sends its tensor to the next rank and receives the previous rank's."""
    modules = []
    for rank in range(ranks):
        m = CommunicationBuilder(rank, ranks)
        tag, = m.first_tag(1)
        nxt, prev = (rank + 1) % ranks, (rank - 1) % ranks
        x = m.tensor(shape, dtype)
        out = m.tensor(shape, dtype)
        if packets:
            size = 2 * x.type.num_elements * x.type.element_bytes
            m.send_packet(x, nxt, tag)
            scratch = m.tensor([size], "UINT8", buffer=m.buffer(recv=[(prev, tag)]))
            m.recv_packet(scratch, out, prev, tag)
        else:
            m.send_into(x, nxt, tag)
            received = m.recv_into(m.receiving(shape, dtype, [(prev, tag)]), prev, tag)
            m.copy(received, output=out)
        modules.append(m.finish())
    return modules


def exchange_in_place_models(ranks: int, shape: Sequence[int] = (64,), dtype: str = "FP32"
                             ) -> list[ModuleOp]:
    """Every rank sends its tensor to the next rank and receives the previous rank's into
    the same tensor (the receiver uses the landing place, to send from it, before the
    receive)."""
    modules = []
    for rank in range(ranks):
        m = CommunicationBuilder(rank, ranks)
        tag, = m.first_tag(1)
        nxt, prev = (rank + 1) % ranks, (rank - 1) % ranks
        x = m.tensor(shape, dtype, buffer=m.buffer(recv=[(prev, tag)]))
        m.send_into(x, nxt, tag)
        m.recv_into(x, prev, tag)
        modules.append(m.finish())
    return modules


def send_recv_matmul_models(m_rows: int = 64, k: int = 32, n: int = 16, dtype: str = "FP32"
                            ) -> list[ModuleOp]:
    """Rank 0 computes y = x @ w and sends it; rank 1 receives it and computes y @ w2."""
    modules = []
    for rank in range(2):
        m = CommunicationBuilder(rank, 2)
        tag, = m.first_tag(1)
        if rank == 0:
            y = m.matmul(m.tensor([m_rows, k], dtype), m.tensor([k, n], dtype))
            m.send_into(y, 1, tag)
        else:
            received = m.recv_into(m.receiving([m_rows, n], dtype, [(0, tag)]), 0, tag)
            m.matmul(received, m.tensor([n, 8], dtype))
        modules.append(m.finish())
    return modules


def random_transfer_models(seed: int, max_ranks: int = 5, width: int = 16,
                           dtype: str = "FP32") -> tuple[list[ModuleOp], list[tuple]]:
    """A random set of point-to-point transfers of `width` elements (a fixed seed gives the
    same models): each rank has a `data` tensor of slots; each transfer sends one slot of the
    sender's data either into a fresh tensor of the receiver or into a slot of the
    receiver's data (in place, where the receiver may itself have sent from). Every rank
    sends first, in a random order, then receives, in another. Returns the models and the
    transfers as (sender, receiver, tag, source slot, target slot or None)."""
    import random

    rng = random.Random(seed)
    ranks = rng.randint(2, max_ranks)
    slots = 4
    transfers = []
    free = {r: list(range(slots)) for r in range(ranks)}
    for tag in range(rng.randint(1, 2 * ranks)):
        src = rng.randrange(ranks)
        dst = rng.choice([r for r in range(ranks) if r != src])
        target = free[dst].pop(rng.randrange(len(free[dst]))) \
            if free[dst] and rng.random() < 0.6 else None
        transfers.append((src, dst, tag, rng.randrange(slots), target))
    modules = []
    for rank in range(ranks):
        m = CommunicationBuilder(rank, ranks)
        tags = m.first_tag(len(transfers))
        into = [(s, tags[t]) for s, d, t, _, slot in transfers if d == rank and slot is not None]
        data = m.tensor([slots * width], dtype, buffer=m.buffer(recv=into))
        mine = [t for t in transfers if t[0] == rank]
        for _, dst, tag, slot, target in rng.sample(mine, len(mine)):
            part = m.slice(data, [slot * width], [width])
            if target is None:
                m.send_into(part, dst, tags[tag])
            else:
                m.send_into(part, dst, tags[tag], whole=[slots * width],
                            offsets=[target * width])
        theirs = [t for t in transfers if t[1] == rank]
        for src, _, tag, _, target in rng.sample(theirs, len(theirs)):
            if target is None:
                m.recv_into(m.receiving([width], dtype, [(src, tags[tag])]), src, tags[tag])
            else:
                m.recv_into(m.slice(data, [target * width], [width]), src, tags[tag])
        modules.append(m.finish())
    return modules, transfers
