"""Standard collective algorithms as MSCCL++ plans (`planc --collective ... --target mscclpp`).

Every algorithm takes `ranks`, a protocol (Simple: data moves, then signal/wait; LL: data moves
as flagged packets, no signals) and `instances`: that many independent copies, each on its own
thread blocks and channels and over its own chunks, which is how MSCCL++ plans use more of a
GPU's bandwidth. With c instances, chunk `j*c + k` is rank j's part handled by instance k.

    collective     algorithms                       chunks (input, output) per rank
    allreduce      ring, allpairs, oneshot, nvls     p*c, p*c
    allgather      ring, allpairs, nvls              c, p*c
    reducescatter  ring, allpairs                    p*c, c
    broadcast      ring, allpairs                    c, c      (root: --root, default 0)
    alltoall       ring, allpairs                    p*c, p*c

* ring: p-1 (twice for allreduce) neighbour steps through scratch slots, each written once;
* allpairs: every rank talks to every peer at once (allreduce: the two-step reduce-scatter +
  allgather of MSCCL++'s `allreduce.py`, one `rres` per chunk, or `allreduce_pkt.py` in LL);
* oneshot: every rank reads every peer's whole input and reduces locally (one step; best for
  small messages);
* nvls: the NVLink switch reduces (`glres`) or multicasts (`gstore`); Simple only.

Simple plans start with a relaxed handshake (each rank tells the ranks that write into it that
the previous launch is over) and end with a signal/wait so that a kernel finishes only when
everything written into its buffers has landed. Every plan passes the simulator (tested).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dialects import mscclpp as ms
from ground.diagnostics import UsageError
from targets.mscclpp.builder import BlockBuilder, Link, PlanBuilder

PROTOCOLS = ("Simple", "LL")


@dataclass(frozen=True)
class Spec:
    collective: str
    ranks: int
    algorithm: str
    protocol: str = "Simple"
    instances: int = 1
    inplace: bool = True
    root: int = 0

    @property
    def name(self) -> str:
        return (f"{self.collective}_{self.algorithm}_{self.protocol.lower()}_{self.ranks}gpus"
                + (f"_x{self.instances}" if self.instances > 1 else ""))


def _others(rank: int, ranks: int) -> list[int]:
    return [p for p in range(ranks) if p != rank]


def _plan(spec: Spec, inputs: int, outputs: int, scratch: int) -> PlanBuilder:
    extra = {"root": spec.root} if spec.collective == "broadcast" else None
    return PlanBuilder(spec.name, spec.collective, spec.ranks, spec.protocol, spec.inplace,
                       inputs, outputs, scratch, double_scratch=spec.protocol == "LL",
                       extra=extra)


def _mesh(plan: PlanBuilder, ranks: int) -> dict[tuple[int, int], Link]:
    """One link between every two ranks, seen from both ends."""
    links: dict[tuple[int, int], Link] = {}
    for a in range(ranks):
        for b in range(a + 1, ranks):
            links[(a, b)] = links[(b, a)] = plan.link(a, b)
    return links


@dataclass
class _Seat:
    """One rank's part in one instance of an all-pairs algorithm."""

    k: int
    r: int
    tb: BlockBuilder
    peers: list[int]
    link: dict[int, Link]

    @property
    def links(self) -> list[Link]:
        return [self.link[j] for j in self.peers]


def _all_pairs(plan: PlanBuilder, spec: Spec):
    """Every instance's every rank, each instance with its own mesh of links."""
    for k in range(spec.instances):
        mesh = _mesh(plan, spec.ranks)
        for r in range(spec.ranks):
            peers = _others(r, spec.ranks)
            yield _Seat(k, r, plan.block(r), peers, {j: mesh[(r, j)] for j in peers})


def _ring(plan: PlanBuilder, ranks: int) -> dict[int, tuple[Link, Link]]:
    """(link to the previous rank, link to the next) of every rank."""
    forward = {r: plan.link(r, (r + 1) % ranks) for r in range(ranks)}
    return {r: (forward[(r - 1) % ranks], forward[r]) for r in range(ranks)}


# ---------------------------------------------------------------------------------------------
# allreduce
# ---------------------------------------------------------------------------------------------


def allreduce_allpairs(spec: Spec) -> PlanBuilder:
    p, c = spec.ranks, spec.instances
    ll = spec.protocol == "LL"
    plan = _plan(spec, p * c, p * c, 2 * p * c if ll else 0)
    out = "i" if spec.inplace else "o"
    for seat in _all_pairs(plan, spec):
        k, r, tb, peers, links = seat.k, seat.r, seat.tb, seat.peers, seat.links
        own = r * c + k
        if ll:
            # Scatter each owner's chunk to it as packets; the owner reduces and sends the
            # sum to everyone's result slots as packets; everyone unpacks.
            tb.put_packets([(tb.local("i", j * c + k), tb.remote_ref(j, "s", r * c + k))
                            for j in peers])
            tb.reduce(ms.ReduceSendPacketsOp,
                      [tb.local("i", own)] + [tb.local("s", j * c + k) for j in peers],
                      [tb.local(out, own)] + [tb.remote_ref(j, "s", p * c + own)
                                               for j in peers], "memory")
            for j in peers:
                tb.unpack_packets(tb.local("s", p * c + j * c + k),
                                  tb.local(out, j * c + k))
            continue
        tb.handshake(links)
        tb.reduce(ms.ReadReduceSendOp,
                  [tb.local("i", own)] + [tb.remote_ref(j, "i", own) for j in peers],
                  [tb.local(out, own)] + [tb.remote_ref(j, out, own) for j in peers],
                  "memory")
        tb.handshake(links, relaxed=False)
    return plan


def allreduce_oneshot(spec: Spec) -> PlanBuilder:
    p, c = spec.ranks, spec.instances
    ll = spec.protocol == "LL"
    plan = _plan(spec, p * c, p * c, p * p * c if ll else (p * c if spec.inplace else 0))
    out = "i" if spec.inplace else "o"
    for seat in _all_pairs(plan, spec):
        k, r, tb, peers, links = seat.k, seat.r, seat.tb, seat.peers, seat.links
        part = (k * p, p)  # instance k reduces chunks [k*p, (k+1)*p) on every rank
        mine = tb.local("i", *part)

        def slot(source: int, part: tuple[int, int] = part) -> int:
            return source * p * c + part[0]

        if ll:
            tb.put_packets([(mine, tb.remote_ref(j, "s", slot(r), p)) for j in peers])
            tb.reduce(ms.ReducePacketsOp,
                      [mine] + [tb.local("s", slot(j), p) for j in peers],
                      [tb.local(out, *part)])
            continue
        staged = "s" if spec.inplace else "i"
        if spec.inplace:
            tb.copy(mine, tb.local("s", *part))  # peers read a copy: we overwrite ours
        tb.handshake(links, relaxed=not spec.inplace)
        tb.reduce(ms.ReadReduceOp,
                  [mine] + [tb.remote_ref(j, staged, *part) for j in peers],
                  [tb.local(out, *part)], "memory")
        tb.handshake(links, relaxed=False)
    return plan


def allreduce_ring(spec: Spec) -> PlanBuilder:
    """Ring reduce-scatter then ring allgather. Simple: one block per phase (a semaphore
    hands over), reduce-send fused (`res`); LL: `respkt` chain, then `rppkt` forwarding."""
    p, c = spec.ranks, spec.instances
    ll = spec.protocol == "LL"
    plan = _plan(spec, p * c, p * c, 2 * (p - 1) * c)
    out = "i" if spec.inplace else "o"
    rs_slot = [lambda s, k=k: s * c + k for k in range(c)]
    ag_slot = [lambda s, k=k: (p - 1 + s) * c + k for k in range(c)]
    for k in range(c):
        rs_ring, ag_ring = _ring(plan, p), (None if ll else _ring(plan, p))
        for r in range(p):
            def at(step: int, r: int = r, k: int = k) -> int:
                return ((r - step) % p) * c + k

            nxt = (r + 1) % p
            rs = plan.block(r)
            ag = rs if ll else plan.block(r)
            if not ll:
                prev_link, next_link = rs_ring[r]
                rs.signal([prev_link], relaxed=True)
                rs.wait([next_link], relaxed=True)
            # Reduce-scatter: at step s, receive chunk r-1-s from the previous rank, add it to
            # ours and pass it on; after p-1 steps rank r holds the sum of chunk r+1.
            first = (rs.put_packets if ll else rs.put)
            first([(rs.local("i", at(0)), rs.remote_ref(nxt, "s", rs_slot[k](0)))])
            if not ll:
                rs.signal([next_link])
            for s in range(p - 1):
                target = at(s + 1)
                received = rs.local("s", rs_slot[k](s))
                last = s == p - 2
                if not ll:
                    rs.wait([prev_link])
                destination = rs.local(out, target)  # out of place, the input stays intact
                if last:
                    rs.reduce(ms.ReducePacketsOp if ll else ms.ReduceOp,
                              [rs.local("i", target), received], [destination])
                else:
                    rs.reduce(ms.ReduceSendPacketsOp if ll else ms.ReduceSendOp,
                              [rs.local("i", target), received],
                              [destination, rs.remote_ref(nxt, "s", rs_slot[k](s + 1))],
                              "memory")
                    if not ll:
                        rs.signal([next_link])
            # Allgather: pass the reduced chunks around the ring through scratch slots.
            owned = at(p - 1)
            if ll:
                ag.put_packets([(ag.local(out, owned), ag.remote_ref(nxt, "s", ag_slot[k](0)))])
                for s in range(p - 1):
                    slot = ag.local("s", ag_slot[k](s))
                    if s < p - 2:
                        ag.read_put_packets([(slot, ag.remote_ref(nxt, "s", ag_slot[k](s + 1)))])
                    ag.unpack_packets(slot, ag.local(out, at(p + s)))
                continue
            handover = plan.semaphore(r)
            rs.release(handover)
            prev_ag, next_ag = ag_ring[r]
            ag.signal([prev_ag], relaxed=True)
            ag.wait([next_ag], relaxed=True)
            ag.acquire(handover)
            ag.put([(ag.local(out, owned), ag.remote_ref(nxt, "s", ag_slot[k](0)))])
            ag.signal([next_ag])
            for s in range(p - 1):
                ag.wait([prev_ag])
                slot = ag.local("s", ag_slot[k](s))
                ag.copy(slot, ag.local(out, at(p + s)))
                if s < p - 2:
                    ag.put([(slot, ag.remote_ref(nxt, "s", ag_slot[k](s + 1)))])
                    ag.signal([next_ag])
    return plan


def allreduce_nvls(spec: Spec) -> PlanBuilder:
    p, c = spec.ranks, spec.instances
    plan = _plan(spec, p * c, p * c, 0)
    members = list(range(p))
    source = plan.switch("i", members)
    target = source if spec.inplace else plan.switch("o", members)
    for seat in _all_pairs(plan, spec):
        tb, own = seat.tb, seat.r * c + seat.k
        tb.handshake(seat.links)
        tb.multi_load_reduce_store(tb.switch_ref(source, own), tb.switch_ref(target, own))
        tb.handshake(seat.links)
    return plan


# ---------------------------------------------------------------------------------------------
# allgather
# ---------------------------------------------------------------------------------------------


def _own_input(spec: Spec, tb: BlockBuilder, r: int, k: int) -> tuple[str, int]:
    """Where rank r's part k of an allgather is read from (in place: its output slot)."""
    c = spec.instances
    if spec.inplace:
        return "o", r * c + k
    tb.copy(tb.local("i", k), tb.local("o", r * c + k))
    return "i", k


def allgather_allpairs(spec: Spec) -> PlanBuilder:
    p, c = spec.ranks, spec.instances
    ll = spec.protocol == "LL"
    plan = _plan(spec, c, p * c, p * c if ll else 0)
    for seat in _all_pairs(plan, spec):
        k, r, tb, peers, links = seat.k, seat.r, seat.tb, seat.peers, seat.links
        if not ll:
            tb.handshake(links)
        buffer, index = _own_input(spec, tb, r, k)
        mine = tb.local(buffer, index)
        if ll:
            tb.put_packets([(mine, tb.remote_ref(j, "s", r * c + k)) for j in peers])
            for j in peers:
                tb.unpack_packets(tb.local("s", j * c + k), tb.local("o", j * c + k))
            continue
        tb.put([(mine, tb.remote_ref(j, "o", r * c + k)) for j in peers])
        tb.handshake(links, relaxed=False)
    return plan


def allgather_ring(spec: Spec) -> PlanBuilder:
    p, c = spec.ranks, spec.instances
    ll = spec.protocol == "LL"
    plan = _plan(spec, c, p * c, p * c if ll else 0)
    for k in range(c):
        ring = _ring(plan, p)
        for r in range(p):
            tb, nxt = plan.block(r), (r + 1) % p
            prev_link, next_link = ring[r]
            if not ll:
                tb.signal([prev_link], relaxed=True)
                tb.wait([next_link], relaxed=True)
            buffer, index = _own_input(spec, tb, r, k)
            if ll:
                tb.put_packets([(tb.local(buffer, index), tb.remote_ref(nxt, "s", r * c + k))])
                for s in range(1, p):
                    origin = ((r - s) % p) * c + k
                    slot = tb.local("s", origin)
                    if s < p - 1:
                        tb.read_put_packets([(slot, tb.remote_ref(nxt, "s", origin))])
                    tb.unpack_packets(slot, tb.local("o", origin))
                continue
            tb.put([(tb.local(buffer, index), tb.remote_ref(nxt, "o", r * c + k))])
            tb.signal([next_link])
            for s in range(1, p):
                tb.wait([prev_link])
                if s < p - 1:
                    origin = ((r - s) % p) * c + k
                    tb.put([(tb.local("o", origin), tb.remote_ref(nxt, "o", origin))])
                    tb.signal([next_link])
    return plan


def allgather_nvls(spec: Spec) -> PlanBuilder:
    p, c = spec.ranks, spec.instances
    plan = _plan(spec, c, p * c, 0)
    target = plan.switch("o", list(range(p)))
    for seat in _all_pairs(plan, spec):
        tb, r, k = seat.tb, seat.r, seat.k
        tb.handshake(seat.links)
        buffer, index = ("o", r * c + k) if spec.inplace else ("i", k)
        tb.multi_store(tb.local(buffer, index), tb.switch_ref(target, r * c + k))
        tb.handshake(seat.links, relaxed=False)
    return plan


# ---------------------------------------------------------------------------------------------
# reducescatter
# ---------------------------------------------------------------------------------------------


def reducescatter_allpairs(spec: Spec) -> PlanBuilder:
    p, c = spec.ranks, spec.instances
    ll = spec.protocol == "LL"
    plan = _plan(spec, p * c, c, p * c if ll else 0)
    for seat in _all_pairs(plan, spec):
        k, r, tb, peers, links = seat.k, seat.r, seat.tb, seat.peers, seat.links
        own = r * c + k
        if ll:
            tb.put_packets([(tb.local("i", j * c + k), tb.remote_ref(j, "s", own))
                            for j in peers])
            tb.reduce(ms.ReducePacketsOp,
                      [tb.local("i", own)] + [tb.local("s", j * c + k) for j in peers],
                      [tb.local("o", k)])
            continue
        tb.handshake(links)
        tb.reduce(ms.ReadReduceOp,
                  [tb.local("i", own)] + [tb.remote_ref(j, "i", own) for j in peers],
                  [tb.local("o", k)], "memory")
        tb.handshake(links, relaxed=False)
    return plan


def reducescatter_ring(spec: Spec) -> PlanBuilder:
    p, c = spec.ranks, spec.instances
    ll = spec.protocol == "LL"
    plan = _plan(spec, p * c, c, (2 * (p - 1) + 1) * c if ll else (p - 1) * c)
    for k in range(c):
        ring = _ring(plan, p)
        for r in range(p):
            tb, nxt = plan.block(r), (r + 1) % p
            prev_link, next_link = ring[r]

            def at(step: int, r: int = r, k: int = k) -> int:
                return ((r - 1 - step) % p) * c + k

            if not ll:
                tb.signal([prev_link], relaxed=True)
                tb.wait([next_link], relaxed=True)
            (tb.put_packets if ll else tb.put)(
                [(tb.local("i", at(0)), tb.remote_ref(nxt, "s", k))])
            if not ll:
                tb.signal([next_link])
            for s in range(p - 1):
                if not ll:
                    tb.wait([prev_link])
                slot = tb.local("s", s * c + k)
                sources = [tb.local("i", at(s + 1)), slot]
                if s == p - 2:
                    tb.reduce(ms.ReducePacketsOp if ll else ms.ReduceOp, sources,
                              [tb.local("o", k)])
                    continue
                # The partial sum goes to scratch (the input stays intact): over the slot it
                # came in, or (LL) to a plain chunk after the packets.
                accumulator = tb.local("s", 2 * (p - 1) * c + k if ll else s * c + k)
                tb.reduce(ms.ReduceSendPacketsOp if ll else ms.ReduceSendOp, sources,
                          [accumulator, tb.remote_ref(nxt, "s", (s + 1) * c + k)], "memory")
                if not ll:
                    tb.signal([next_link])
    return plan


# ---------------------------------------------------------------------------------------------
# broadcast
# ---------------------------------------------------------------------------------------------


def _root_source(spec: Spec, tb: BlockBuilder, k: int) -> tuple[str, int]:
    if not spec.inplace:
        tb.copy(tb.local("i", k), tb.local("o", k))
    return "i", k


def broadcast_allpairs(spec: Spec) -> PlanBuilder:
    p, c, root = spec.ranks, spec.instances, spec.root
    ll = spec.protocol == "LL"
    plan = _plan(spec, c, c, c if ll else 0)
    peers = _others(root, p)
    for k in range(c):
        link = {j: plan.link(root, j) for j in peers}
        tb = plan.block(root)
        if not ll:
            tb.wait(list(link.values()), relaxed=True)
        source = tb.local(*_root_source(spec, tb, k))
        if ll:
            tb.put_packets([(source, tb.remote_ref(j, "s", k)) for j in peers])
        else:
            tb.put([(source, tb.remote_ref(j, "o", k)) for j in peers])
            tb.signal(list(link.values()))
        for j in peers:
            leaf = plan.block(j)
            if ll:
                leaf.unpack_packets(leaf.local("s", k), leaf.local("o", k))
            else:
                leaf.signal([link[j]], relaxed=True)
                leaf.wait([link[j]])
    return plan


def broadcast_ring(spec: Spec) -> PlanBuilder:
    """A chain from the root; with c instances it is a pipeline of c chunks."""
    p, c, root = spec.ranks, spec.instances, spec.root
    ll = spec.protocol == "LL"
    plan = _plan(spec, c, c, c if ll else 0)
    order = [(root + d) % p for d in range(p)]
    for k in range(c):
        links = {d: plan.link(order[d], order[d + 1]) for d in range(p - 1)}
        for d, r in enumerate(order):
            tb = plan.block(r)
            into, out_link = links.get(d - 1), links.get(d)
            nxt = order[d + 1] if d < p - 1 else None
            if d == 0:
                buffer, index = _root_source(spec, tb, k)
                if ll:
                    tb.put_packets([(tb.local(buffer, index), tb.remote_ref(nxt, "s", k))])
                    continue
                tb.wait([out_link], relaxed=True)
                tb.put([(tb.local(buffer, index), tb.remote_ref(nxt, "o", k))])
                tb.signal([out_link])
                continue
            if ll:
                if nxt is not None:
                    tb.read_put_packets([(tb.local("s", k), tb.remote_ref(nxt, "s", k))])
                tb.unpack_packets(tb.local("s", k), tb.local("o", k))
                continue
            tb.signal([into], relaxed=True)
            if nxt is not None:
                tb.wait([out_link], relaxed=True)
            tb.wait([into])
            if nxt is not None:
                tb.put([(tb.local("o", k), tb.remote_ref(nxt, "o", k))])
                tb.signal([out_link])
    return plan


# ---------------------------------------------------------------------------------------------
# alltoall
# ---------------------------------------------------------------------------------------------


def alltoall_allpairs(spec: Spec) -> PlanBuilder:
    p, c = spec.ranks, spec.instances
    ll = spec.protocol == "LL"
    staged = ll or spec.inplace  # in place, a peer's slot for us is still its data for us
    plan = _plan(spec, p * c, p * c, p * c if staged else 0)
    out = "i" if spec.inplace else "o"
    for seat in _all_pairs(plan, spec):
        k, r, tb, peers, links = seat.k, seat.r, seat.tb, seat.peers, seat.links
        if not spec.inplace:
            tb.copy(tb.local("i", r * c + k), tb.local("o", r * c + k))
        if ll:
            tb.put_packets([(tb.local("i", j * c + k), tb.remote_ref(j, "s", r * c + k))
                            for j in peers])
            for j in peers:
                tb.unpack_packets(tb.local("s", j * c + k), tb.local(out, j * c + k))
            continue
        tb.handshake(links)
        tb.put([(tb.local("i", j * c + k),
                 tb.remote_ref(j, "s" if staged else "o", r * c + k)) for j in peers])
        tb.handshake(links, relaxed=False)
        if staged:
            for j in peers:
                tb.copy(tb.local("s", j * c + k), tb.local(out, j * c + k))
    return plan


def alltoall_ring(spec: Spec) -> PlanBuilder:
    """p-1 pairwise steps: at step s, send to rank r+s and receive from rank r-s."""
    p, c = spec.ranks, spec.instances
    ll = spec.protocol == "LL"
    plan = _plan(spec, p * c, p * c, p * c)
    out = "i" if spec.inplace else "o"
    for seat in _all_pairs(plan, spec):
        tb, r, k = seat.tb, seat.r, seat.k
        if not spec.inplace:
            tb.copy(tb.local("i", r * c + k), tb.local("o", r * c + k))
        if not ll:
            tb.handshake(seat.links)
        for s in range(1, p):
            to, frm = (r + s) % p, (r - s) % p
            pair = [(tb.local("i", to * c + k), tb.remote_ref(to, "s", r * c + k))]
            (tb.put_packets if ll else tb.put)(pair)
            if not ll:
                tb.signal([seat.link[to]])
                tb.wait([seat.link[frm]])
        # Unpacked only now: in place, slot r-s of the input is sent at step p-s.
        for s in range(1, p):
            frm = (r - s) % p
            (tb.unpack_packets if ll else tb.copy)(tb.local("s", frm * c + k),
                                                   tb.local(out, frm * c + k))
    return plan


# ---------------------------------------------------------------------------------------------
# The table and the command line
# ---------------------------------------------------------------------------------------------

ALGORITHMS: dict[str, dict[str, Callable[[Spec], PlanBuilder]]] = {
    "allreduce": {"ring": allreduce_ring, "allpairs": allreduce_allpairs,
                  "oneshot": allreduce_oneshot, "nvls": allreduce_nvls},
    "allgather": {"ring": allgather_ring, "allpairs": allgather_allpairs,
                  "nvls": allgather_nvls},
    "reducescatter": {"ring": reducescatter_ring, "allpairs": reducescatter_allpairs},
    "broadcast": {"ring": broadcast_ring, "allpairs": broadcast_allpairs},
    "alltoall": {"ring": alltoall_ring, "allpairs": alltoall_allpairs},
}
SIMPLE_ONLY = frozenset({"nvls"})
MAX_FANOUT_RANKS = ms.MAX_CHANNELS_PER_OP + 1
"""All-pairs ops reach every peer in one op: at most 8 remote buffers."""
MAX_SIZE = 4096
"""The largest collective planc generates, in ranks x ranks x instances (64 GPUs of one
instance, 8 GPUs of 64): a ring's operations grow so (each of `ranks` GPUs takes about
2 x ranks steps per instance), and building, replaying and timing them is Python work per
operation; `--ranks 2147483648` ran for ever."""


def refuse_too_large(spec: Spec) -> None:
    size = spec.ranks * spec.ranks * spec.instances
    if size > MAX_SIZE:
        raise UsageError(f"--ranks {spec.ranks} with --instances {spec.instances} is a "
                         f"collective of {size} rank x rank x instance steps, more than the "
                         f"{MAX_SIZE} planc generates")


def variants(collective: str, ranks: int) -> list[tuple[str, str]]:
    """Every (algorithm, protocol) planc can generate for this collective and rank count."""
    return [(name, protocol) for name in ALGORITHMS[collective] for protocol in PROTOCOLS
            if not (name in SIMPLE_ONLY and protocol == "LL")
            and not (name != "ring" and ranks > MAX_FANOUT_RANKS)]


def synthesize(spec: Spec) -> ms.AlgorithmOp:
    table = ALGORITHMS.get(spec.collective)
    if table is None:
        raise UsageError(f"--collective must be one of {', '.join(ALGORITHMS)}")
    if spec.algorithm not in table:
        raise UsageError(f"--algorithm {spec.algorithm} is not an algorithm for "
                         f"{spec.collective} (choose {', '.join(table)} or auto)")
    if spec.protocol not in PROTOCOLS:
        raise UsageError(f"--protocol must be Simple or LL, got {spec.protocol}")
    if spec.algorithm in SIMPLE_ONLY and spec.protocol == "LL":
        raise UsageError(f"--algorithm {spec.algorithm} works with --protocol Simple only")
    if spec.ranks < 2:
        raise UsageError(f"--ranks must be at least 2, got {spec.ranks}")
    if spec.algorithm != "ring" and spec.ranks > MAX_FANOUT_RANKS:
        raise UsageError(f"--algorithm {spec.algorithm} reaches every peer in one op, which the "
                         f"executor allows for at most {MAX_FANOUT_RANKS} ranks; use ring")
    if spec.instances < 1:
        raise UsageError(f"--instances must be at least 1, got {spec.instances}")
    if not 0 <= spec.root < spec.ranks:
        raise UsageError(f"--root {spec.root} is not a rank of {spec.ranks}")
    refuse_too_large(spec)
    return table[spec.algorithm](spec).build()
