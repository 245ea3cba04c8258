"""Symbolic replay of an MSCCL++ plan: post-conditions, races, deadlocks, ranges.

Every byte cell of every buffer holds a symbolic value: the multiset of *atoms* (rank j's
initial input cell k) summed into it, or nothing (never written). Rank r's input starts as its
own atoms; the plan's steps run in an order its synchronisation allows (`replay`); at the end
each rank's output must hold what its collective promises (reference §4.3): allgather
`out[j*n + k] = A(j, k)`, allreduce `out[k] = {A(0, k), ..., A(p-1, k)}` with every atom
exactly once, reducescatter rank r's slice of that sum, alltoall `out[j*b + k] = A(j, r*b + k)`,
broadcast the root's input, sendrecv the previous rank's input.

Races are found with vector clocks. A thread block is two threads of control: its *first
threads*, which signal, wait, acquire and release (the executor runs those ops on threads
0..n-1 only), and *all threads*, which move data. Everything before a `nop` (or barrier) is
known to every thread after it; a wait is known only to the first threads until the next
`nop`; data ops of one stretch between nops are unordered among themselves (different threads
touch different elements). A signal carries what its sender's first threads know, an LL packet
what its writer knew, a semaphore token what its releaser knew. A port channel's proxy is a
third kind of thread: its puts become visible through the next signal on that channel (FIFO)
or a flush. Two accesses to a cell conflict when one writes; they race when neither happens
before the other. A rank's kernel ends when its blocks end: every access other ranks make to
its input and output must happen before that, or the caller would see (or overwrite) data
still in flight. Symmetrically, a rank's kernel *starts* when its own stream reaches it,
unrelated to its peers: each rank has a start component that all its blocks know from their
first step, and an access to a peer's memory whose knowledge lacks the peer's start (no
signal, packet or token from the peer leads to it) races with the peer's caller, which may
still be writing the input or reading the previous output (`before_start`; LL packets and
double-buffered scratch are exempt, see `_check_started`).
"""

from __future__ import annotations

import math
from argparse import Namespace
from collections import defaultdict
from dataclasses import dataclass, field
from functools import reduce as fold
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from dialects import mscclpp as ms
from dialects.json_value import dict_value
from ground.diagnostics import PlancError
from targets.mscclpp.program import Program, Region, Step, checking_chunk_bytes, expand
from targets.mscclpp.replay import Block, Replay, joined

MAX_REPORTS = 12
MAX_CELLS = 1 << 20
"""The most buffer cells the symbolic replay follows (each an object: about 150 MB). The
upstream plans have at most 544, a generated 64-rank ring a few thousand; a chunk count near
the executor's 2^31 was followed cell by cell until memory ran out."""
ATOM_RANK = 1 << 40

Value = tuple[int, ...] | None
"""A cell's content: the sorted atoms summed into it, or None (never written)."""


def atom(rank: int, cell: int) -> int:
    return rank * ATOM_RANK + cell


def add(a: Value, b: Value) -> Value:
    if a is None or b is None:
        return None
    return tuple(sorted(a + b))


@dataclass(frozen=True)
class Event:
    """An access: by thread-of-control `comp` at its time `stamp`, during `step`."""

    comp: int
    stamp: int
    origin: int
    """The plan op: its pipeline iterations run on the same threads over the same elements
    (packet ops rewrite the same packets), so they never race with each other."""
    label: str
    rank: int = -1
    """The GPU whose step made the access."""
    grouped: bool = False
    """The op is split over a thread-block group (`Step.grouped`)."""


@dataclass
class Cell:
    value: Value = None
    writer: Event | None = None
    readers: list[Event] = field(default_factory=list)
    packet: list[int] | None = None
    """The writer's knowledge when this cell holds an LL packet of this launch."""


SPACE_NAMES = {"i": "input", "o": "output", "io": "input/output", "s": "scratch"}


# ---------------------------------------------------------------------------------------------
# The symbolic replay
# ---------------------------------------------------------------------------------------------


class SymbolicReplay(Replay):
    def __init__(self, program: Program, cell_bytes: int):
        self.cell = cell_bytes
        self.components: dict[Any, int] = {}
        for rank in range(program.ranks):
            self.components[("start", rank)] = len(self.components)
        for block in program.blocks:
            self.components[("lead", block)] = len(self.components)
            self.components[("data", block)] = len(self.components)
        for steps in program.blocks.values():
            for step in steps:
                for proxy in [step.proxy, *step.flushes, *step.signal_proxies]:
                    if proxy is not None and ("proxy", proxy) not in self.components:
                        self.components[("proxy", proxy)] = len(self.components)
        self.width = len(self.components)
        self.owners = {comp: key for key, comp in self.components.items()}
        self.proxy_comps = {c for key, c in self.components.items() if key[0] == "proxy"}
        super().__init__(program)
        self.memory: dict[tuple[int, str], dict[int, Cell]] = defaultdict(dict)
        self.lead = {b: self._started(b) for b in program.blocks}
        self.all = {b: self._started(b) for b in program.blocks}
        self.epoch = {b: self._started(b) for b in program.blocks}
        self.proxy_clock: dict[Any, list[int]] = defaultdict(self._zero)
        self.counter: dict[int, int] = defaultdict(int)
        self.races: dict[tuple[str, str, str], list[tuple[int, str, int]]] = {}
        self.raced_writes: dict[tuple[str, str, str], tuple[str, list[tuple]]] = {}
        """Per race: the earlier access's label and, per cell, (rank, space, index, the value
        written, which of the two wrote it: "event" or "earlier"), to name first the access
        that is the mistake (see `_wrong_access_first`)."""
        self.group_races: dict[tuple[str, str, str], tuple[Block, str, Block, str,
                                                           list[Block]]] = {}
        """Per race between two slices of thread-block-group ops: the later access's block
        and op label, the earlier one's, and the other blocks of the earlier one's GPU that
        the later one has synchronised with by then: which edge is missing."""
        self.misreads: list[str] = []
        self.early: dict[tuple[str, str, int, bool], list[tuple[int, str, int]]] = {}
        """(op label, verb, peer rank, fenced by the first threads only) -> cells it touched
        before knowing the peer started."""
        self.lead_now: list[int] = self._zero()
        """The first threads' knowledge while a data step runs."""
        self.exempt_scratch = program.algorithm.uses_double_scratch
        self._initialise_inputs()

    def _zero(self) -> list[int]:
        return [0] * self.width

    def _started(self, block: Block) -> list[int]:
        """A block's clock at its start: it knows its own rank's kernel has started."""
        clock = self._zero()
        clock[self.components[("start", block[0])]] = 1
        return clock

    def initial_payload(self) -> list[int]:
        return self._zero()

    def _initialise_inputs(self) -> None:
        for rank, layout in enumerate(self.program.layouts):
            space, start = layout.place("i", 0)
            first = start // self.cell
            for k in range(layout.input_bytes // self.cell):
                self.memory[(rank, space)][first + k] = Cell(value=(atom(rank, k),))

    # -- clocks --------------------------------------------------------------------------------

    def _tick(self, comp: int) -> int:
        self.counter[comp] += 1
        return self.counter[comp]

    def perform(self, block: Block, step: Step, received: list[Any]) -> None:
        lead_comp = self.components[("lead", block)]
        data_comp = self.components[("data", block)]
        if step.role in ("nop", "barrier"):
            merged = joined([self.lead[block], self.all[block], self.epoch[block], *received],
                            self.width)
            self.lead[block], self.all[block], self.epoch[block] = merged, list(merged), \
                list(merged)
            return
        if step.role == "sync":
            stamp = self._tick(lead_comp)
            knowledge = joined([self.lead[block], *received], self.width)
            knowledge[lead_comp] = stamp
            self.lead[block] = knowledge
            if step.proxy is not None:
                self.lead_now = knowledge
                self._proxy_moves(step, joined([knowledge, *self._packet_knowledge(step)],
                                               self.width))
            for proxy in step.flushes:  # after this op's own put (pwsf)
                self.lead[block] = joined([self.lead[block], self.proxy_clock[proxy]],
                                          self.width)
            return
        stamp = self._tick(data_comp)
        knowledge = joined([self.all[block], *self._packet_knowledge(step)], self.width)
        event = Event(data_comp, stamp, step.origin, step.label, step.rank, step.grouped)
        self.lead_now = self.lead[block]
        self._moves(step, event, knowledge)
        knowledge[data_comp] = stamp
        self.epoch[block] = joined([self.epoch[block], knowledge], self.width)

    def _proxy_moves(self, step: Step, issued: list[int]) -> None:
        comp = self.components[("proxy", step.proxy)]
        clock = joined([self.proxy_clock[step.proxy], issued], self.width)
        clock[comp] = self._tick(comp)
        self.proxy_clock[step.proxy] = clock
        self._moves(step, Event(comp, clock[comp], step.origin, step.label, step.rank,
                                step.grouped), clock)

    def signal_payload(self, block: Block, step: Step, index: int) -> list[int]:
        proxy = step.signal_proxies[index] if index < len(step.signal_proxies) else None
        if proxy is None:
            return list(self.lead[block])
        # A port signal goes through the proxy's FIFO, after the puts queued before it.
        return joined([self.lead[block], self.proxy_clock[proxy]], self.width)

    def release_payload(self, block: Block, step: Step) -> list[int]:
        return list(self.lead[block])

    def arrival_payload(self, block: Block, step: Step) -> list[int]:
        return joined([self.lead[block], self.all[block], self.epoch[block]], self.width)

    def final_knowledge(self, block: Block) -> list[int]:
        return joined([self.lead[block], self.all[block], self.epoch[block]], self.width)

    # -- data ----------------------------------------------------------------------------------

    def _cells(self, region: Region) -> range:
        return range(region.start // self.cell, region.end // self.cell)

    def _packet_knowledge(self, step: Step) -> list[list[int]]:
        found = []
        for region in step.packet_reads():
            space = self.memory[(region.rank, region.space)]
            for index in self._cells(region):
                cell = space.get(index)
                if cell is not None and cell.packet is not None:
                    found.append(cell.packet)
        return found

    def missing_packets(self, step: Step) -> str | None:
        for region in step.packet_reads():
            space = self.memory[(region.rank, region.space)]
            for index in self._cells(region):
                cell = space.get(index)
                if cell is None or cell.packet is None:
                    offset = region.offset + (index - region.start // self.cell) * self.cell
                    return (f"waits for LL packets at gpu {region.rank} scratch bytes "
                            f"[{offset}, {region.offset + region.size}), which are never "
                            "written")
        return None

    def _read(self, region: Region, event: Event, knowledge: list[int]) -> list[Value]:
        self._check_started(region, event, knowledge, "reads")
        space = self.memory[(region.rank, region.space)]
        values: list[Value] = []
        cells = list(self._cells(region))
        if region.packets:
            cells = cells[::2]
        for index in cells:
            cell = space.setdefault(index, Cell())
            self._check(region, index, cell.writer, event, knowledge, "reads", "written",
                        (cell.value, "earlier"))
            if cell.packet is not None and not region.packets:
                self.misreads.append(f"{event.label} reads LL packets at gpu {region.rank} "
                                     f"{SPACE_NAMES[region.space]} as plain data")
            cell.readers.append(event)
            values.append(cell.value)
        return values

    def _write(self, region: Region, values: list[Value], event: Event,
               knowledge: list[int], flags: list[list[int] | None] | None = None) -> None:
        """`flags`: for a raw packet copy, the packets' own flags (their writers' knowledge,
        None for a packet never written in this launch) instead of this writer's."""
        self._check_started(region, event, knowledge, "writes")
        space = self.memory[(region.rank, region.space)]
        cells = list(self._cells(region))
        step = 2 if region.packets else 1
        for position, index in enumerate(cells):
            cell = space.setdefault(index, Cell())
            new = values[position // step] if values else None
            self._check(region, index, cell.writer, event, knowledge, "writes", "written",
                        (new, "event"))
            for reader in cell.readers:
                self._check(region, index, reader, event, knowledge, "writes", "read",
                            (new, "event"))
            cell.value = values[position // step] if values else None
            cell.writer = event
            cell.readers = []
            cell.packet = None
            if region.packets and flags is not None:
                # A copied packet's flag is valid only if the source's was; a reader that sees
                # it knows what the packet's writer knew, and that this copy landed.
                flag = flags[position // step] if position // step < len(flags) else None
                if flag is not None:
                    flag = list(flag)
                    flag[event.comp] = max(flag[event.comp], event.stamp)
                cell.packet = flag
            elif region.packets:
                clock = list(knowledge)
                clock[event.comp] = event.stamp
                cell.packet = clock

    def _moves(self, step: Step, event: Event, knowledge: list[int]) -> None:
        for move in step.moves:
            flags = self._raw_flags(move.sources[0]) if move.sources and \
                move.sources[0].raw else None
            sources = [self._read(r, event, knowledge) for r in move.sources]
            values = [fold(add, column) for column in zip(*sources, strict=True)] \
                if sources else []
            for target in move.targets:
                self._write(target, values, event, knowledge, flags if target.raw else None)

    def _raw_flags(self, region: Region) -> list[list[int] | None]:
        """The flags of the packets a raw copy reads, one per value (every other cell)."""
        space = self.memory[(region.rank, region.space)]
        return [cell.packet if (cell := space.get(index)) is not None else None
                for index in list(self._cells(region))[::2]]

    def _check_started(self, region: Region, event: Event, knowledge: list[int],
                       verb: str) -> None:
        """A GPU's kernel starts when its stream reaches it, unrelated to its peers' starts:
        until then the peer's caller may still be writing its input, reading its previous
        output, or (a previous launch) using its scratch. Any access to a peer's memory must
        follow something the peer did in this launch (a signal, a packet, ...). LL packets
        are exempt: their flags change with every launch, and the scratch they land in is
        one the peer's previous launch is done with once it sent this rank anything. So is
        scratch under `use_double_scratch_buffer` (launches alternate halves)."""
        if region.packets or (region.space == "s" and self.exempt_scratch):
            return
        start = self.components[("start", region.rank)]
        if knowledge[start] >= 1:
            return
        # Known to the block's first threads (a wait with no nop after it): the other threads
        # may run ahead of it. The draft DSL wrote such plans; a warning.
        unfenced = self.lead_now[start] >= 1
        cells = [(region.rank, region.space, i) for i in self._cells(region)]
        self.early.setdefault((event.label, verb, region.rank, unfenced), []).extend(cells)

    def _check(self, region: Region, index: int, earlier: Event | None, event: Event,
               knowledge: list[int], verb: str, past: str, written: tuple | None = None,
               ) -> None:
        if earlier is None or earlier.origin == event.origin:
            return
        if knowledge[earlier.comp] >= earlier.stamp:
            return
        key = (event.label, verb, f"{past} by {earlier.label}")
        self.races.setdefault(key, []).append((region.rank, region.space, index))
        if event.grouped and earlier.grouped and key not in self.group_races:
            self._note_group_race(key, event, earlier, knowledge)
        if written is not None:
            self.raced_writes.setdefault(key, (earlier.label, []))[1].append(
                (region.rank, region.space, index, *written))

    def _note_group_race(self, key: tuple[str, str, str], event: Event, earlier: Event,
                         knowledge: list[int]) -> None:
        """Which blocks of the earlier access's GPU the later access's block has heard from
        (through signals, barriers, semaphores or packets) when it makes its access."""
        later, first = self.owners[event.comp], self.owners[earlier.comp]
        if later[0] == "proxy" or first[0] == "proxy":
            return
        heard = [block for block in self.program.blocks
                 if block[0] == first[1][0] and block not in (first[1], later[1])
                 and (knowledge[self.components[("lead", block)]]
                      or knowledge[self.components[("data", block)]])]
        self.group_races[key] = (later[1], event.label, first[1], earlier.label, heard)

    # -- end of the launch ---------------------------------------------------------------------

    def unfinished_at_end(self) -> dict[tuple[str, str], list[tuple[int, str, int]]]:
        """Accesses to a rank's input/output that its own kernel end does not wait for. The
        verb is `proxy-reads` for a read by the rank's own port-channel proxy (a put with no
        flush after it): the collective's result is right, but the caller may overwrite the
        source after the kernel returns while the proxy still reads it."""
        ends: dict[int, list[int]] = {}
        for block in self.program.blocks:
            rank = block[0]
            ends[rank] = joined([ends.get(rank, self._zero()), self.final_knowledge(block)],
                                self.width)
        found: dict[tuple[str, str], list[tuple[int, str, int]]] = {}
        for (rank, space), cells in self.memory.items():
            if space == "s":
                continue
            end = ends.get(rank, self._zero())
            for index, cell in cells.items():
                for access, verb in [(cell.writer, "writes"),
                                     *((r, "reads") for r in cell.readers)]:
                    if access is not None and end[access.comp] < access.stamp:
                        if verb == "reads" and access.comp in self.proxy_comps \
                                and access.rank == rank:
                            verb = "proxy-reads"
                        found.setdefault((access.label, verb), []).append((rank, space, index))
        return found


# ---------------------------------------------------------------------------------------------
# Post-conditions
# ---------------------------------------------------------------------------------------------


@dataclass
class Expectation:
    """What each rank's output cells must hold, or why it cannot be said."""

    cells: dict[int, list[Value]] = field(default_factory=dict)
    problem: str | None = None


def expected_outputs(program: Program, cell: int, root: int = 0) -> Expectation:
    algorithm = program.algorithm
    collective = algorithm.collective_name
    p = program.ranks
    n_in = [layout.input_bytes // cell for layout in program.layouts]
    n_out = [_output_bytes(program, r) // cell for r in range(p)]
    gpus = algorithm.gpus()
    result = Expectation()

    def everyone(k: int) -> Value:
        return tuple(sorted(atom(j, k) for j in range(p)))

    for r in range(p):
        counts = (f"gpu {r} has input_chunks {gpus[r].chunks('i')}, output_chunks "
                  f"{gpus[r].chunks('o')}")
        if collective == "allreduce":
            if n_out[r] != n_in[r]:
                return Expectation(problem=f"allreduce needs equal input and output ({counts})")
            result.cells[r] = [everyone(k) for k in range(n_in[r])]
        elif collective == "allgather":
            if n_out[r] != p * n_in[r]:
                return Expectation(problem=f"allgather needs output_chunks = {p} x input_chunks "
                                           f"({counts})")
            result.cells[r] = [(atom(j, k),) for j in range(p) for k in range(n_in[r])]
        elif collective == "reducescatter":
            if n_in[r] != p * n_out[r]:
                return Expectation(problem=f"reducescatter needs input_chunks = {p} x "
                                           f"output_chunks ({counts})")
            result.cells[r] = [everyone(r * n_out[r] + k) for k in range(n_out[r])]
        elif collective == "alltoall":
            if n_out[r] != n_in[r] or n_in[r] % p:
                return Expectation(problem=f"alltoall needs equal input and output, divisible "
                                           f"by {p} ranks ({counts})")
            block = n_in[r] // p
            result.cells[r] = [(atom(j, r * block + k),) for j in range(p)
                               for k in range(block)]
        elif collective == "broadcast":
            if not 0 <= root < p or n_out[r] != n_in[root]:
                return Expectation(problem=f"broadcast from root {root} needs every output as "
                                           f"large as the root's input ({counts})")
            result.cells[r] = [(atom(root, k),) for k in range(n_in[root])]
        elif collective == "sendrecv":
            source = (r - 1) % p
            if n_out[r] != n_in[source]:
                return Expectation(problem=f"sendrecv needs equal input and output ({counts})")
            result.cells[r] = [(atom(source, k),) for k in range(n_in[source])]
        else:
            return Expectation(problem=f"no post-condition is defined for collective "
                                       f"'{collective}'")
    return result


def _output_bytes(program: Program, rank: int) -> int:
    layout = program.layouts[rank]
    if layout.output_bytes == 0 and layout.places["o"] == layout.places["i"]:
        return layout.input_bytes  # in place, output_chunks 0: the input is the output
    return layout.output_bytes


def broadcast_root(algorithm: ms.AlgorithmOp) -> int:
    """The root of a broadcast: a top-level `root` member (which planc writes), else 0."""
    root = dict_value(algorithm.extra).get("root", 0)
    return root if isinstance(root, int) and not isinstance(root, bool) else 0


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------


@dataclass
class Report:
    collective: str
    ranks: int
    chunk_bytes: int
    postcondition: str
    errors: dict[str, list[str]]
    warnings: list[str]

    @property
    def ok(self) -> bool:
        return not any(self.errors.values())

    def first_error(self) -> str | None:
        for kind, messages in self.errors.items():
            if messages:
                return f"{kind}: {messages[0]}"
        return None


class _Describer:
    """Cells as chunk coordinates and atoms as sentences, for messages."""

    def __init__(self, program: Program, cell: int):
        self.program = program
        self.cell = cell
        self.chunk = program.chunk_bytes

    def bytes_of(self, rank: int, space: str, cells: list[int]) -> str:
        runs = _runs(sorted(set(cells)))
        texts = []
        for first, last in runs[:3]:
            start, end = first * self.cell, (last + 1) * self.cell
            chunks = (start // self.chunk, (end - 1) // self.chunk)
            where = f"chunk {chunks[0]}" if chunks[0] == chunks[1] else \
                f"chunks {chunks[0]}-{chunks[1]}"
            texts.append(f"[{start}, {end}) ({where})")
        more = f" and {len(runs) - 3} more ranges" if len(runs) > 3 else ""
        return f"gpu {rank} {SPACE_NAMES[space]} bytes {', '.join(texts)}{more}"

    def source(self, value: Value) -> str:
        if value is None:
            return "nothing (never written)"
        groups: dict[int, list[int]] = defaultdict(list)
        for a in value:
            groups[a % ATOM_RANK].append(a // ATOM_RANK)
        parts = []
        for cell, ranks in sorted(groups.items()):
            where = self.position(cell)
            if len(ranks) == 1:
                parts.append(f"input {where} of gpu {ranks[0]}")
            else:
                parts.append(f"the sum of input {where} of gpus {_rank_list(ranks)}")
        return " + ".join(parts[:3]) + (" + ..." if len(parts) > 3 else "")

    def position(self, cell: int) -> str:
        per_chunk = self.chunk // self.cell
        chunk, part = divmod(cell, per_chunk)
        if per_chunk == 1:
            return f"chunk {chunk}"
        return f"chunk {chunk} (bytes [{part * self.cell}, {(part + 1) * self.cell}))"


def _runs(values: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


def _rank_list(ranks: list[int]) -> str:
    counts = defaultdict(int)
    for r in ranks:
        counts[r] += 1
    return ", ".join(f"{r}" + (f" (x{c})" if c > 1 else "") for r, c in sorted(counts.items()))


def check_plan(algorithm: ms.AlgorithmOp, chunk_bytes: int | None = None,
               expectation: Expectation | None = None) -> Report:
    """Replay `algorithm` symbolically and check it; see the module docstring.

    `expectation` replaces the collective's post-condition (lowered model communication has
    its own)."""
    chunk = chunk_bytes or checking_chunk_bytes(algorithm)
    program = expand(algorithm, chunk)
    cell = _cell_bytes(program)
    cells = sum(sum(layout.sizes.values()) for layout in program.layouts) // cell
    if cells > MAX_CELLS:
        raise PlancError(f"the symbolic check would follow {cells:,} cells of the gpus' "
                         f"buffers, more than the {MAX_CELLS:,} planc follows (the chunk counts "
                         "are too large: real plans have tens to hundreds of chunks)")
    replay = SymbolicReplay(program, cell)
    replay.run_round_robin()
    describe = _Describer(program, cell)
    errors: dict[str, list[str]] = {"zero_chunks": zero_chunks(algorithm),
                                    "out_of_range": list(program.problems), "deadlocks": [],
                                    "races": [], "before_start": [], "unbalanced": [],
                                    "postcondition_failures": []}
    deadlocks = replay.deadlocks()
    errors["deadlocks"] = deadlocks
    expected = None if deadlocks else \
        expectation or expected_outputs(program, cell, broadcast_root(algorithm))
    wanted = _wanted_cells(program, expected, cell) if expected is not None else {}
    errors["races"] = _race_messages(replay, describe, wanted) + replay.misreads[:MAX_REPORTS]
    errors["before_start"] = _limited(_early_messages(replay, describe, unfenced=False)
                                      + _early_messages(replay, describe, unfenced=True))
    postcondition = "not checked: the plan deadlocks"
    if not deadlocks:
        errors["unbalanced"] = replay.leftovers()
        if expected.problem is not None:
            postcondition = f"not checked: {expected.problem}"
            if algorithm.collective_name in ms.COLLECTIVES + ("sendrecv",):
                errors["postcondition_failures"].append(expected.problem)
        else:
            errors["postcondition_failures"] = _compare(program, replay, expected, describe)
            postcondition = "failed" if errors["postcondition_failures"] else "satisfied"
    for kind in errors:
        errors[kind] = _limited(errors[kind])
    return Report(algorithm.collective_name, program.ranks, chunk, postcondition, errors,
                  program.warnings + _input_overwrites(program)
                  + _unflushed_messages(replay, describe))


def zero_chunks(algorithm: ms.AlgorithmOp) -> list[str]:
    """The executor's `checkMessageSize`, run whenever it loads a plan, takes the message
    sizes modulo `input_chunks` and `output_chunks` with no zero guard (reference §4.6 #10):
    a count of 0 is an integer division by zero, on the host, before the kernel runs.
    Executors from before that check sized the chunks from whichever count is not 0 and
    refused a GPU with both 0 ("Output or Input chunks must be greater than 0"), so a GPU
    with both 0 fails on every executor and one with a single 0 on the current one."""
    found = []
    for gpu in algorithm.gpus():
        both = gpu.chunks("i") == 0 and gpu.chunks("o") == 0
        for buffer in ("i", "o"):
            if gpu.chunks(buffer) == 0:
                found.append(f"gpu {gpu.rank_id}: {ms.BUFFER_NAMES[buffer]}_chunks is 0: the "
                             "executor's message-size check takes the message size modulo it "
                             "when it loads the plan, a division by zero (reference §4.6 #10)"
                             + (_BOTH_ZERO if both else ""))
    return found


_BOTH_ZERO = ("; with both counts 0, the executors from before that check refuse the GPU "
              "too (\"Output or Input chunks must be greater than 0\")")


def _input_overwrites(program: Program) -> list[str]:
    """Out of place, a collective's input is the caller's and should stay unchanged."""
    if program.algorithm.is_inplace:
        return []
    found = []
    for steps in program.blocks.values():
        for step in steps:
            for region in step.writes():
                if region.space == "i":  # out of place, space i is exactly the input
                    found.append(f"{step.label} writes the input of gpu {region.rank}, which "
                                 "an out-of-place collective should leave unchanged")
                    break
    return _limited(found)


def _cell_bytes(program: Program) -> int:
    """The largest cell size that every accessed range and buffer boundary is a multiple of."""
    sizes = [program.chunk_bytes]
    for steps in program.blocks.values():
        for step in steps:
            for region in step.reads() + step.writes():
                sizes += [region.start, region.size]
    for layout in program.layouts:
        sizes += [layout.input_bytes, layout.output_bytes, *(s for _, s in
                                                             layout.places.values())]
    return fold(math.gcd, (s for s in sizes if s), 0) or program.chunk_bytes


def _wanted_cells(program: Program, expected: Expectation, cell: int
                  ) -> dict[tuple[int, str, int], Value]:
    """What the post-condition wants in each output cell, by (rank, space, cell index)."""
    wanted = {}
    for rank, values in expected.cells.items():
        space, start = program.layouts[rank].place("o", 0)
        first = start // cell
        for k, want in enumerate(values):
            wanted[(rank, space, first + k)] = want
    return wanted


def _wrong_access_first(replay: SymbolicReplay, key: tuple[str, str, str],
                        wanted: dict[tuple[int, str, int], Value]) -> tuple[str, str, str]:
    """A race names first the access that is the mistake, where the post-condition says: on
    an output cell, a write of the value it wants is right, so the other access (a read of
    the cell, or a second write) is the mistake; a write of another value is the mistake
    itself. Else the two as the replay met them."""
    label, verb, what = key
    earlier, cells = replay.raced_writes.get(key, (None, []))
    for rank, space, index, value, writer in cells:
        want = wanted.get((rank, space, index))
        if want is None:
            continue
        event_wrong = (value == want) != (writer == "event")
        if event_wrong:
            return key
        past = what.split(" by ", 1)[0]
        swapped = {("writes", "written"): ("writes", "written"),
                   ("writes", "read"): ("reads", "written"),
                   ("reads", "written"): ("writes", "read")}[(verb, past)]
        return earlier, swapped[0], f"{swapped[1]} by {label}"
    return key


def _race_messages(replay: SymbolicReplay, describe: _Describer,
                   wanted: dict[tuple[int, str, int], Value] | None = None) -> list[str]:
    messages = []
    for key, cells in replay.races.items():
        label, verb, what = _wrong_access_first(replay, key, wanted or {})
        by_space: dict[tuple[int, str], list[int]] = defaultdict(list)
        for rank, space, index in cells:
            by_space[(rank, space)].append(index)
        where = "; ".join(describe.bytes_of(r, s, c) for (r, s), c in by_space.items())
        why = _group_race_reason(replay.group_races.get(key))
        messages.append(f"{label} {verb} {where}, {what}, with no synchronisation between "
                        f"them{why}")
    for (label, verb), cells in sorted(replay.unfinished_at_end().items()):
        if verb == "proxy-reads":
            continue    # `_unflushed_messages`
        by_space = defaultdict(list)
        for rank, space, index in cells:
            by_space[(rank, space)].append(index)
        for (rank, space), indices in by_space.items():
            messages.append(f"{label} {verb} {describe.bytes_of(rank, space, indices)} without "
                            f"synchronisation before gpu {rank} finishes: the caller may see "
                            "(or overwrite) data still in flight")
    return messages


def _group_race_reason(noted: tuple[Block, str, Block, str, list[Block]] | None) -> str:
    """Why two slices of thread-block-group ops race: the edge that is missing. The executor
    slices a group's op when it loads the plan (`ExecutionPlan::calcOffset`), each block runs
    its slice alone (`executionKernel` runs a block's ops in order; a nop is `__syncthreads`,
    one block only), and a memory channel's signal/wait pairs one block with one peer block:
    a block's signal covers its own slice only, and nothing synchronises the group."""
    if noted is None:
        return ""
    (later_rank, later_tb), later_label, (first_rank, first_tb), first_label, heard = noted
    later, first = f"gpu {later_rank} tb {later_tb}", f"gpu {first_rank} tb {first_tb}"
    later_op, first_op = later_label[len(later) + 1:], first_label[len(first) + 1:]
    others = ", ".join(f"gpu {r} tb {t}" for r, t in heard) + " only" if heard else \
        f"no other thread block of gpu {first_rank}"
    return (f": {later} synchronises with {others} before its {later_op}, not with {first} "
            f"after its {first_op}; the executor runs the slices of a thread-block group's "
            "op with no synchronisation between the group's blocks, so a block's signal "
            "covers its own slice only (a barrier over the group, or a signal, semaphore or "
            f"barrier path from {first} after {first_op.split(' (')[0]} to {later} before "
            f"{later_op.split(' (')[0]}, would order them)")


UNFLUSHED = "with no flush before gpu"


def _unflushed_messages(replay: SymbolicReplay, describe: _Describer) -> list[str]:
    """Port puts whose proxy may still read the rank's own input or output after its kernel
    returns (no flush, and nothing from a peer that the proxy's reads precede). The
    collective's result is right; the caller must not overwrite the source until the proxy is
    done (a hazard after the kernel, so a warning)."""
    messages = []
    for (label, verb), cells in sorted(replay.unfinished_at_end().items()):
        if verb != "proxy-reads":
            continue
        by_space: dict[tuple[int, str], list[int]] = defaultdict(list)
        for rank, space, index in cells:
            by_space[(rank, space)].append(index)
        for (rank, space), indices in by_space.items():
            messages.append(f"{label}: its port channel's proxy reads "
                            f"{describe.bytes_of(rank, space, indices)} {UNFLUSHED} {rank} "
                            "finishes: the caller may overwrite the source after the kernel "
                            "returns while the proxy still reads it (flush the channel, or use "
                            "pwsf)")
    return _limited(messages)


UNFENCED = "only the thread block's first threads have waited for gpu"


def _early_messages(replay: SymbolicReplay, describe: _Describer, unfenced: bool) -> list[str]:
    """Accesses to a peer's memory not ordered after its kernel start (`unfenced`: ordered
    for the block's first threads only, with no nop between their wait and the access)."""
    messages = []
    for (label, verb, peer, weak), cells in replay.early.items():
        if weak != unfenced:
            continue
        by_space: dict[tuple[int, str], list[int]] = defaultdict(list)
        for rank, space, index in cells:
            by_space[(rank, space)].append(index)
        where = "; ".join(describe.bytes_of(r, s, c) for (r, s), c in by_space.items())
        if weak:
            messages.append(f"{label} {verb} {where}, but {UNFENCED} {peer} to start: with no "
                            "nop (__syncthreads) after the wait, the other threads may get "
                            f"there before gpu {peer}'s kernel starts")
            continue
        messages.append(
            f"{label} {verb} {where} before anything shows that gpu {peer} has started: no "
            f"signal, packet or other access orders it after gpu {peer}'s kernel start, while "
            f"gpu {peer}'s caller may still be writing its input, reading its previous output "
            "or (a previous launch) using its scratch; signal and wait with it first")
    return _limited(messages)


def _compare(program: Program, replay: SymbolicReplay, expected: Expectation,
             describe: _Describer) -> list[str]:
    failures = []
    for rank, values in sorted(expected.cells.items()):
        layout = program.layouts[rank]
        space, start = layout.place("o", 0)
        space_cells = replay.memory[(rank, space)]
        first = start // describe.cell
        reported_chunks: set[int] = set()
        for k, want in enumerate(values):
            cell = space_cells.get(first + k)
            got = cell.value if cell is not None else None
            if got == want:
                continue
            chunk = k * describe.cell // program.chunk_bytes
            if chunk in reported_chunks:
                continue
            reported_chunks.add(chunk)
            writer = (f" (last written by {cell.writer.label})"
                      if cell is not None and cell.writer is not None else "")
            failures.append(f"gpu {rank} output {describe.position(k)}: expected "
                            f"{describe.source(want)}, found {describe.source(got)}{writer}")
    return failures


def _limited(messages: list[str]) -> list[str]:
    if len(messages) <= MAX_REPORTS:
        return messages
    return messages[:MAX_REPORTS] + [f"... and {len(messages) - MAX_REPORTS} more"]


# ---------------------------------------------------------------------------------------------
# `planc simulate`
# ---------------------------------------------------------------------------------------------


def simulate_plan(module: ModuleOp, options: Namespace) -> dict[str, Any]:
    """The `planc simulate` hook: the symbolic check and the cost model's time."""
    from targets.mscclpp.cost import device_bytes, hardware_named, model_time, parse_size

    algorithm = next(op for op in module.ops if isinstance(op, ms.AlgorithmOp))
    report = check_plan(algorithm)
    result: dict[str, Any] = {
        "ok": report.ok, "collective": report.collective, "ranks": report.ranks,
        "threadblocks": sum(len(g.threadblocks()) for g in algorithm.gpus()),
        "operations": sum(len(tb.ops()) for g in algorithm.gpus() for tb in g.threadblocks()),
        "postcondition": report.postcondition, **report.errors, "warnings": report.warnings,
        "checked_chunk_bytes": report.chunk_bytes}
    hardware = hardware_named(getattr(options, "mscclpp_hw", None) or "h100")
    for gpu in algorithm.gpus():
        blocks = len(gpu.threadblocks())
        if blocks > hardware.sms:
            result["warnings"].append(
                f"gpu {gpu.rank_id} runs {blocks} thread blocks, but the {hardware.name} has "
                f"{hardware.sms} SMs: the executor assumes every block is resident at once "
                "(waits between blocks could hang)")
    size_text = getattr(options, "message_size", None)
    try:
        size = parse_size(size_text) if size_text else None
    except ValueError as e:
        raise PlancError(f"--message-size: {e}") from None
    timing = model_time(algorithm, hardware, size) if not report.errors["deadlocks"] else None
    result["hardware"] = hardware.name
    result["message_size"] = timing.message_bytes if timing else size
    result["modeled_time_s"] = timing.seconds if timing else None
    result["device_bytes"] = device_bytes(algorithm, timing.message_bytes) if timing else None
    # The check is symbolic and exact: every output holds exactly the promised sums, or not.
    result["max_abs_error"] = 0.0 if report.postcondition == "satisfied" else None
    if timing:
        result["algbw_GBps"] = timing.algbw / 1e9
        result["busbw_GBps"] = timing.busbw / 1e9
    return result
