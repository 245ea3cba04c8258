"""Running the thread blocks of an expanded plan in an order its synchronisation allows.

A `Replay` owns what the executor's synchronisation primitives hold during one launch: the
signals in flight on each channel direction (the n-th wait consumes the n-th signal), the
tokens of each counting semaphore, the thread blocks waiting at each barrier, and (through the
subclass) which LL packets have arrived. Each signal, token or barrier carries a *payload*
whose meaning is the subclass's: vector clocks for the symbolic simulator, times for the cost
model. A thread block runs its next step when nothing it waits for is missing; when no block
can run, the blocks still unfinished are deadlocked and `blocked` says on what.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict, deque
from collections.abc import Iterable
from typing import Any

from targets.mscclpp.program import PairKey, Program, Step

Block = tuple[int, int]


class Replay:
    def __init__(self, program: Program):
        self.program = program
        self.position: dict[Block, int] = {block: 0 for block in program.blocks}
        self.signals: dict[PairKey, deque[Any]] = defaultdict(deque)
        self.sent: Counter[PairKey] = Counter()
        self.received: Counter[PairKey] = Counter()
        self.tokens: dict[tuple[int, int], deque[Any]] = {
            (rank, sem): deque(self.initial_payload() for _ in range(value))
            for rank, values in program.semaphores.items() for sem, value in enumerate(values)}
        self.arrivals: dict[tuple[int, int], list[tuple[Block, Any]]] = defaultdict(list)
        self.released: dict[Block, Any] = {}

    # -- what subclasses provide ---------------------------------------------------------------

    def initial_payload(self) -> Any:
        return None

    def perform(self, block: Block, step: Step, received: list[Any]) -> None:
        """Carry out `step` of `block`; `received` are the payloads it consumed."""

    def signal_payload(self, block: Block, step: Step, index: int) -> Any:
        return None

    def release_payload(self, block: Block, step: Step) -> Any:
        return None

    def arrival_payload(self, block: Block, step: Step) -> Any:
        return None

    def missing_packets(self, step: Step) -> str | None:
        """Why the packets `step` reads are not all there yet (None when they are)."""
        return None

    # -- scheduling ----------------------------------------------------------------------------

    def current(self, block: Block) -> Step | None:
        steps = self.program.blocks[block]
        position = self.position[block]
        return steps[position] if position < len(steps) else None

    def unfinished(self) -> list[Block]:
        return [b for b in self.program.blocks if self.current(b) is not None]

    def blocked(self, block: Block) -> str | None:
        """Why `block` cannot run its next step now (None if it can)."""
        step = self.current(block)
        assert step is not None
        needed = Counter(step.waits)
        for key, count in needed.items():
            if len(self.signals[key]) < count:
                source, _, kind, ordinal = key
                return (f"waits for signal #{self.received[key] + 1} from gpu {source} on "
                        f"{kind} channel #{ordinal} between them, which sends "
                        f"{self.sent[key]} in all")
        for sem, count in Counter(step.acquire).items():
            if len(self.tokens[(step.rank, sem)]) < count:
                return f"waits to acquire semaphore {sem} of gpu {step.rank}, which stays 0"
        if step.barrier is not None and block not in self.released:
            arrived = self.arrivals[(step.rank, step.barrier[0])]
            if block not in (b for b, _ in arrived):
                arrived.append((block, self.arrival_payload(block, step)))
                if len(arrived) >= step.barrier[1]:
                    for member, _ in arrived:
                        self.released[member] = [p for _, p in arrived]
                    self.arrivals[(step.rank, step.barrier[0])] = []
                    return None
            if block not in self.released:
                count = len(self.arrivals[(step.rank, step.barrier[0])])
                return (f"waits at barrier {step.barrier[0]} for {step.barrier[1]} thread "
                        f"blocks, {count} arrived")
        return self.missing_packets(step)

    def advance(self, block: Block) -> None:
        """Run the next step of `block` (which must not be blocked)."""
        step = self.current(block)
        assert step is not None
        received: list[Any] = []
        for key in step.waits:
            received.append(self.signals[key].popleft())
            self.received[key] += 1
        for sem in step.acquire:
            received.append(self.tokens[(step.rank, sem)].popleft())
        if step.barrier is not None:
            received.extend(self.released.pop(block))
        self.perform(block, step, received)
        for index, key in enumerate(step.signals):
            self.signals[key].append(self.signal_payload(block, step, index))
            self.sent[key] += 1
        for sem in step.release:
            self.tokens[(step.rank, sem)].append(self.release_payload(block, step))
        self.position[block] += 1

    def run_round_robin(self) -> None:
        """Each block in turn runs until it blocks; repeat while anything moves."""
        progress = True
        while progress:
            progress = False
            for block in self.program.blocks:
                while self.current(block) is not None and self.blocked(block) is None:
                    self.advance(block)
                    progress = True

    def run_earliest_first(self, clock: dict[Block, float]) -> None:
        """Always advance the block with the earliest `clock` that can run, so semaphore
        tokens and barriers are handed out in time order. A blocked block is parked on what
        it waits for and woken when a step produces it."""
        heap = [(clock[b], n, b) for n, b in enumerate(self.program.blocks)]
        heapq.heapify(heap)
        order = {b: n for n, b in enumerate(self.program.blocks)}
        parked: dict[Any, list[Block]] = defaultdict(list)
        while heap:
            _, _, block = heapq.heappop(heap)
            step = self.current(block)
            if step is None:
                continue
            if self.blocked(block) is not None:
                for resource in _needs(step):
                    parked[resource].append(block)
                continue
            self.advance(block)
            woken = {b for resource in _produces(step) for b in parked.pop(resource, [])}
            for b in [block, *woken]:
                heapq.heappush(heap, (clock[b], order[b], b))

    # -- after the run -------------------------------------------------------------------------

    def deadlocks(self) -> list[str]:
        return [f"{self.current(b).label} {self.blocked(b)}" for b in self.unfinished()]

    def leftovers(self) -> list[str]:
        """Signals and semaphore tokens a finished launch leaves behind for the next one."""
        found = []
        for key, pending in sorted(self.signals.items()):
            if pending:
                source, target, kind, ordinal = key
                found.append(
                    f"gpu {source} sends {self.sent[key]} signals on {kind} channel #{ordinal} "
                    f"to gpu {target}, which waits {self.received[key]} times: the next launch "
                    "would start with a stale signal")
        for (rank, sem), tokens in sorted(self.tokens.items()):
            initial = self.program.semaphores[rank][sem]
            if len(tokens) != initial:
                found.append(f"semaphore {sem} of gpu {rank} ends at {len(tokens)}, not its "
                             f"initial {initial}: the next launch would start from the wrong "
                             "value")
        return found


def _needs(step: Step) -> list[Any]:
    return ([("signal", k) for k in step.waits] + [("sem", step.rank, s) for s in step.acquire]
            + ([("barrier", step.rank, step.barrier[0])] if step.barrier else [])
            + [("packets", r.rank, r.space) for r in step.packet_reads()])


def _produces(step: Step) -> list[Any]:
    return ([("signal", k) for k in step.signals] + [("sem", step.rank, s) for s in step.release]
            + ([("barrier", step.rank, step.barrier[0])] if step.barrier else [])
            + [("packets", r.rank, r.space) for r in step.writes() if r.packets])


def joined(clocks: Iterable[list[int]], width: int) -> list[int]:
    """The element-wise maximum of vector clocks."""
    result = [0] * width
    for clock in clocks:
        result = [a if a >= b else b for a, b in zip(result, clock, strict=True)]
    return result
