"""An MSCCL++ plan expanded into what each thread block does, byte by byte.

`expand(algorithm, chunk_bytes)` follows the executor's own arithmetic for a given chunk size:
chunk references become byte ranges (`index * chunk`), thread-block groups split every range
into aligned parts (`calcOffset`), pipelines repeat their ops over unit-sized windows (packet
ops ignore the window), packet ops address scratch at twice the offset, remote references are
resolved through the thread block's and the GPU's tables to a peer's buffer, and switch
references to the bound buffer of every member of the group. In-place collectives alias input
and output the way the executor's callers do (allreduce-like: the same buffer; allgather: the
input is this rank's slice of the output; reducescatter: the output is a slice of the input).

Known executor quirks are reproduced and reported as warnings (reference §4.6): `get` swaps its
offsets, memory `put` reads every source from the buffer type of its first, `pws`/`pwsf` on a
memory channel drop their signal, `flush` without `dst_buff` flushes nothing, `reduce_op` is
ignored (always a sum).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dialects import mscclpp as ms

REUSED_SCRATCH_BYTES = 64 * 2**20
"""The executor's shared scratch buffer (PREDFINED_SCRATCH_SIZE) under `reuse_resources`."""

PairKey = tuple[int, int, str, int]
"""A channel direction: (signalling rank, waiting rank, channel type, ordinal among the
channels of that type between the two)."""
ProxyKey = tuple[int, int]
"""A port channel's proxy: (rank, GPU-level port channel id)."""


@dataclass(frozen=True)
class Region:
    """Bytes `[start, start + size)` of memory space `space` of `rank` (see `Layout`)."""

    rank: int
    space: str
    start: int
    size: int
    buffer: str
    """The buffer letter the plan named (i, o or s), for messages."""
    offset: int
    """The byte offset inside that buffer (before aliasing), for messages."""
    packets: bool = False
    raw: bool = False
    """LL packets copied as raw bytes, flags included, without waiting for them (a port
    channel's ppkt: the executor's handlePutPackets has the proxy put `size << 1` bytes from
    `srcOffset << 1`, packets as they are)."""

    @property
    def end(self) -> int:
        return self.start + self.size


@dataclass
class Move:
    """Every byte `x` of each target becomes the sum over the sources of their byte `x`."""

    sources: list[Region]
    targets: list[Region]


@dataclass
class Step:
    """One operation (one pipeline iteration of it) of one thread block."""

    label: str
    name: str
    rank: int
    tb: int
    role: str
    """'data' (all threads move data), 'sync' (the first threads signal, wait, ...),
    'nop' (__syncthreads) or 'barrier'."""
    origin: int = 0
    """Identity of the plan op this step comes from (pipeline iterations share it)."""
    moves: list[Move] = field(default_factory=list)
    proxy: ProxyKey | None = None
    """The port channel whose proxy performs the moves (port puts)."""
    signals: list[PairKey] = field(default_factory=list)
    signal_proxies: list[ProxyKey | None] = field(default_factory=list)
    waits: list[PairKey] = field(default_factory=list)
    flushes: list[ProxyKey] = field(default_factory=list)
    acquire: list[int] = field(default_factory=list)
    release: list[int] = field(default_factory=list)
    barrier: tuple[int, int] | None = None
    grouped: bool = False
    """The op is split over a thread-block group (`split_over_group`): this block does only its
    own slice of the op's ranges."""

    def reads(self) -> list[Region]:
        return [r for m in self.moves for r in m.sources]

    def writes(self) -> list[Region]:
        return [r for m in self.moves for r in m.targets]

    def packet_reads(self) -> list[Region]:
        """The packets this step waits for (a raw copy waits for none)."""
        return [r for r in self.reads() if r.packets and not r.raw]


class Layout:
    """The memory of one rank: spaces `io` (in-place allreduce-like), `i`, `o` and `s`, and
    where each buffer letter starts in them."""

    def __init__(self, algorithm: ms.AlgorithmOp, gpu: ms.GpuOp, chunk_bytes: int):
        rank = gpu.rank_id
        self.input_bytes = gpu.chunks("i") * chunk_bytes
        self.output_bytes = gpu.chunks("o") * chunk_bytes
        scratch = gpu.chunks("s") * chunk_bytes * (2 if algorithm.protocol_name == "LL" else 1)
        if algorithm.reuses_resources and gpu.chunks("s"):
            scratch = max(scratch, REUSED_SCRATCH_BYTES)
        collective = algorithm.collective_name
        self.places: dict[str, tuple[str, int]] = {"i": ("i", 0), "o": ("o", 0), "s": ("s", 0)}
        self.sizes = {"i": self.input_bytes, "o": self.output_bytes, "s": scratch}
        if algorithm.is_inplace and collective == "allgather":
            self.places["i"] = ("o", rank * self.input_bytes)
            self.sizes["i"] = 0
        elif algorithm.is_inplace and collective == "reducescatter":
            self.places["o"] = ("i", rank * self.output_bytes)
            self.sizes["o"] = 0
        elif algorithm.is_inplace:
            self.places["i"] = self.places["o"] = ("io", 0)
            self.sizes = {"io": max(self.input_bytes, self.output_bytes), "s": scratch}
        self.sizes = {k: v for k, v in self.sizes.items() if v or k in ("s",)}

    def place(self, buffer: str, offset: int) -> tuple[str, int]:
        space, base = self.places[buffer]
        return space, base + offset

    def extent(self, buffer: str) -> tuple[str, int, int]:
        """(space, start, size) of a whole buffer."""
        size = {"i": self.input_bytes, "o": self.output_bytes}.get(buffer)
        space, start = self.places[buffer]
        return space, start, size if size is not None else self.sizes[space]


@dataclass
class Program:
    algorithm: ms.AlgorithmOp
    chunk_bytes: int
    layouts: list[Layout]
    blocks: dict[tuple[int, int], list[Step]]
    semaphores: dict[int, list[int]]
    """Initial values of each rank's semaphores."""
    problems: list[str] = field(default_factory=list)
    """Out-of-range accesses found while expanding (pipeline windows, packet scratch)."""
    warnings: list[str] = field(default_factory=list)

    @property
    def ranks(self) -> int:
        return len(self.layouts)


# ---------------------------------------------------------------------------------------------
# The executor's arithmetic
# ---------------------------------------------------------------------------------------------


def split_over_group(op: ms.InstructionOp) -> bool:
    """Does the executor run only a slice of `op` on its block? A `tbg_info` of `tbg_size` 1
    is one part of one: the block does the whole op, as without `tbg_info`, so its races are
    ordinary races, not the group slicing's (`mscclpp.tbg-race`)."""
    return op.tbg_info is not None and op.tbg_info.tbg_size.data > 1


def group_part(size: int, part: int, parts: int, alignment: int) -> tuple[int, int]:
    """(offset, size) of part `part` of `parts` of a range (`calcOffset`/`calcSize`): aligned
    units spread evenly, the first `remainder` parts one unit longer."""
    def offset(index: int) -> int:
        units = size // alignment
        smallest, remainder = divmod(units, parts)
        extra = min(index % units, remainder) if units else 0
        return (index * smallest + extra) * alignment

    start = offset(part)
    return start, offset(part + 1) - start


def pipeline_iterations(num_chunks: int, chunk_bytes: int, unit: int) -> int:
    return math.ceil(num_chunks * chunk_bytes / unit)


def checking_chunk_bytes(algorithm: ms.AlgorithmOp) -> int:
    """A chunk size at which every split the plan makes is exact and every pipeline runs at
    least two iterations: small, so that symbolic replay stays cheap."""
    alignment = algorithm.alignment
    groups, units = 1, []
    for gpu in algorithm.gpus():
        for tb in gpu.threadblocks():
            for op in _flat_ops(tb.ops()):
                groups = math.lcm(groups, op.tbg[1])
                if isinstance(op, ms.PipelineOp):
                    units.append((op.unit, op.num_chunks))
    chunk = alignment * groups
    for unit, chunks in units:
        chunk = math.lcm(chunk, math.ceil(2 * unit / chunks))
    return chunk


def _flat_ops(ops: list[ms.InstructionOp]) -> list[ms.InstructionOp]:
    flat: list[ms.InstructionOp] = []
    for op in ops:
        flat.append(op)
        if isinstance(op, ms.PipelineOp):
            flat.extend(op.ops())
    return flat


# ---------------------------------------------------------------------------------------------
# Expansion
# ---------------------------------------------------------------------------------------------


class _Expander:
    def __init__(self, algorithm: ms.AlgorithmOp, chunk_bytes: int):
        self.algorithm = algorithm
        self.chunk = chunk_bytes
        self.gpus = algorithm.gpus()
        self.layouts = [Layout(algorithm, gpu, chunk_bytes) for gpu in self.gpus]
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self._warned: set[tuple[str, str]] = set()
        self._cache: dict[tuple[str, int, str], object] = {}

    def warn(self, key: str, op: ms.InstructionOp, message: str) -> None:
        if (key, op.label()) not in self._warned:
            self._warned.add((key, op.label()))
            self.warnings.append(f"{op.label()}: {message}")

    def run(self) -> Program:
        blocks: dict[tuple[int, int], list[Step]] = {}
        for gpu in self.gpus:
            for tb in gpu.threadblocks():
                steps: list[Step] = []
                for index, op in enumerate(tb.ops()):
                    steps.extend(self.op_steps(gpu, tb, op, str(index)))
                blocks[(gpu.rank_id, tb.tb_id)] = steps
        semaphores = {g.rank_id: [s.initial for s in g.semaphores()] for g in self.gpus}
        return Program(self.algorithm, self.chunk, self.layouts, blocks, semaphores,
                       self.problems, self.warnings)

    def op_steps(self, gpu: ms.GpuOp, tb: ms.ThreadblockOp, op: ms.InstructionOp,
                 path: str) -> list[Step]:
        label = f"gpu {gpu.rank_id} tb {tb.tb_id} op {path} ({op.display_name})"
        if isinstance(op, ms.PipelineOp):
            steps: list[Step] = []
            count = pipeline_iterations(op.num_chunks, self.chunk, op.unit)
            inner_ops = op.ops()
            for iteration in range(count):
                window = (iteration * op.unit, op.unit)
                for index, inner in enumerate(inner_ops):
                    steps.append(self.op_step(
                        gpu, tb, inner, window, f"gpu {gpu.rank_id} tb {tb.tb_id} op "
                        f"{path}.{index} ({inner.display_name}) (pipeline iteration "
                        f"{iteration})"))
            return steps
        return [self.op_step(gpu, tb, op, None, label)]

    # -- one op ------------------------------------------------------------------------------

    def op_step(self, gpu: ms.GpuOp, tb: ms.ThreadblockOp, op: ms.InstructionOp,
                window: tuple[int, int] | None, label: str) -> Step:
        rank = gpu.rank_id
        step = Step(label, op.NAME, rank, tb.tb_id, _role(op), origin=id(op),
                    grouped=split_over_group(op))
        if op.reduce_op is not None and op.reduce_op.data != "sum":
            self.warn("reduce_op", op, f"reduce_op \"{op.reduce_op.data}\" is ignored by the "
                      "executor, which always sums")
        if isinstance(op, (ms.SignalOp, ms.RelaxedSignalOp)):
            for key, proxy in self._channel_keys(gpu, tb, op, signal=True):
                step.signals.append(key)
                step.signal_proxies.append(proxy)
        elif isinstance(op, (ms.WaitOp, ms.RelaxedWaitOp)):
            step.waits = [key for key, _ in self._channel_keys(gpu, tb, op, signal=False)]
        elif isinstance(op, ms.FlushOp):
            if not op.destinations:
                self.warn("flush", op, "flush has no dst_buff: the executor flushes one "
                          "channel per dst_buff entry, so this flushes nothing (§4.6 #2)")
            else:
                step.flushes = [proxy for _, proxy in
                                self._channel_keys(gpu, tb, op, signal=True)][:len(
                                    op.destinations)]
        elif isinstance(op, ms.SemAcquireOp):
            step.acquire = op.semaphore_list
        elif isinstance(op, ms.SemReleaseOp):
            step.release = op.semaphore_list
        elif isinstance(op, ms.BarrierOp):
            step.barrier = (op.barrier_id.value.data, op.num_threadblocks.value.data)
        elif not isinstance(op, ms.NopOp):
            self._data(gpu, tb, op, step, window)
        return step

    def _cached(self, what: str, owner, argument: str = ""):
        """The GPU and thread-block tables, computed once (walking IR blocks is slow)."""
        key = (what, id(owner), argument)
        if key not in self._cache:
            self._cache[key] = getattr(owner, what)(*((argument,) if argument else ()))
        return self._cache[key]

    def _channel_keys(self, gpu: ms.GpuOp, tb: ms.ThreadblockOp, op: ms.InstructionOp,
                      signal: bool) -> list[tuple[PairKey, ProxyKey | None]]:
        kind = op.kind or "memory"
        tb_ids = self._cached("channel_ids", tb, kind)
        ends = self._cached("channel_ends", gpu, kind)
        keys = []
        for local in op.channel_list:
            channel = tb_ids[local]
            peer = ends[channel]
            ordinal = ends[:channel].count(peer)
            key = (gpu.rank_id, peer, kind, ordinal) if signal else \
                (peer, gpu.rank_id, kind, ordinal)
            keys.append((key, (gpu.rank_id, channel) if kind == "port" else None))
        return keys

    # -- data movement -------------------------------------------------------------------------

    def _data(self, gpu: ms.GpuOp, tb: ms.ThreadblockOp, op: ms.InstructionOp, step: Step,
              window: tuple[int, int] | None) -> None:
        kind = op.kind
        raw = kind == "port" and isinstance(op, ms.PutPacketsOp)
        source_packets = [True] * len(op.sources) if raw else op.source_packets()
        sources = [self.regions(gpu, tb, op, ref, pkt, window, f"src_buff[{i}]", raw)
                   for i, (ref, pkt) in enumerate(zip(op.sources, source_packets,
                                                      strict=True))]
        targets = [self.regions(gpu, tb, op, ref, pkt, window, f"dst_buff[{i}]", raw)
                   for i, (ref, pkt) in enumerate(zip(op.destinations,
                                                      op.destination_packets(), strict=True))]
        port = kind == "port" and isinstance(op, (ms.PutOp, ms.PutWithSignalOp,
                                                  ms.PutWithSignalAndFlushOp,
                                                  ms.PutPacketsOp, ms.ReadPutPacketsOp))
        if isinstance(op, ms.GetOp):
            sources, targets = self._get_quirk(op, sources, targets)
        if isinstance(op, ms.PutOp | ms.PutWithSignalOp | ms.PutWithSignalAndFlushOp) \
                and kind == "memory":
            sources = self._put_quirk(gpu, tb, op, sources, window)
        if isinstance(op, ms.MultiLoadReduceStoreOp):
            step.moves = [Move(sources[0], targets[0])]
        elif isinstance(op, (ms.MultiStoreOp, ms.MultiStorePacketsOp)):
            step.moves = [Move(sources[0], [r for t in targets for r in t])]
        elif op.REDUCES:
            step.moves = [Move([s[0] for s in sources], [t[0] for t in targets])]
        elif len(sources) == 1 and len(targets) > 1:
            # The DSL's fused multi-destination form: one source forwarded to every target.
            step.moves = [Move(sources[0], t) for t in targets]
        else:
            step.moves = [Move(s, t) for s, t in zip(sources, targets, strict=False)]
        if port:
            channels = self._channel_keys(gpu, tb, op, signal=True)
            step.role = "sync"  # the first threads only enqueue work for the proxy
            step.proxy = channels[0][1] if channels else None
            if isinstance(op, (ms.PutWithSignalOp, ms.PutWithSignalAndFlushOp)):
                for key, proxy in channels:
                    step.signals.append(key)
                    step.signal_proxies.append(proxy)
                if isinstance(op, ms.PutWithSignalAndFlushOp):
                    step.flushes = [proxy for _, proxy in channels]
        elif isinstance(op, (ms.PutWithSignalOp, ms.PutWithSignalAndFlushOp)):
            self.warn("pws", op, f"{op.NAME} on a memory channel only puts: the executor "
                      "drops the signal (§4.6 #4)")

    def _get_quirk(self, op, sources, targets):
        if any(s.start != d.start for s, d in zip(op.sources, op.destinations, strict=True)):
            self.warn("get", op, "the executor swaps get's source and destination offsets "
                      "(handleGet, §4.6 #1); with different indices it copies other chunks")
        swapped_sources, swapped_targets = [], []
        for src, dst in zip(sources, targets, strict=True):
            swapped_sources.append([_moved(r, d.offset - r.offset) for r, d in zip(src, dst,
                                                                                  strict=True)])
            swapped_targets.append([_moved(d, r.offset - d.offset) for r, d in zip(src, dst,
                                                                                  strict=True)])
        return swapped_sources, swapped_targets

    def _put_quirk(self, gpu, tb, op, sources, window):
        first = op.sources[0].buffer.data
        if all(ref.buffer.data == first for ref in op.sources):
            return sources
        self.warn("put", op, f"a memory put reads every source from the buffer type of its "
                  f"first ({first}); the executor ignores the other types (§4.6 #5)")
        layout = self.layouts[gpu.rank_id]
        fixed = []
        for regions in sources:
            moved = []
            for r in regions:
                space, start = layout.place(first, r.offset)
                moved.append(Region(r.rank, space, start, r.size, first, r.offset, r.packets,
                                    r.raw))
            fixed.append(moved)
        return fixed

    def regions(self, gpu: ms.GpuOp, tb: ms.ThreadblockOp, op: ms.InstructionOp,
                ref: ms.BufferRefAttr, packets: bool, window: tuple[int, int] | None,
                where: str, raw: bool = False) -> list[Region]:
        """The byte regions `ref` denotes for this op (several for switch groups); `raw`:
        packets moved as raw bytes (`Region.raw`)."""
        part, parts = op.tbg
        start, size = ref.start * self.chunk, ref.count * self.chunk
        offset, size = group_part(size, part, parts, self.algorithm.alignment)
        start += offset
        if window is not None and not op.PACKET_OP:
            shift, unit = window
            if shift > size:
                self.problems.append(
                    f"{op.label()}: {where} {ref.describe()} covers {size} bytes, but pipeline "
                    f"window [{shift}, {shift + unit}) starts past its end (the executor's "
                    "unsigned arithmetic would then access a whole unit beyond it)")
                size = 0
            else:
                start, size = start + shift, min(size - shift, unit)
        targets = list(self._targets(gpu, tb, op, ref))
        regions = []
        for rank, buffer in targets:
            layout = self.layouts[rank]
            byte_offset = start
            if packets:
                byte_offset, size_here = 2 * start, 2 * size
            else:
                size_here = size
            space, placed = layout.place(buffer, byte_offset)
            self._check_extent(op, where, ref, rank, buffer, packets, byte_offset, size_here)
            regions.append(Region(rank, space, placed, size_here, buffer, byte_offset, packets,
                                  raw and packets))
        return regions

    def _check_extent(self, op, where, ref, rank, buffer, packets, offset, size) -> None:
        layout = self.layouts[rank]
        space, base, length = layout.extent(buffer)
        limit = length if buffer != "s" else layout.sizes.get("s", 0)
        if offset + size <= limit:
            return
        if packets and buffer == "s" and self.algorithm.protocol_name != "LL":
            reason = ("packets take twice the bytes in scratch, which the executor doubles only "
                      "for protocol LL")
        else:
            reason = f"the {ms.BUFFER_NAMES[buffer]} of gpu {rank} has {limit} bytes"
        self.problems.append(f"{op.label()}: {where} {ref.describe()} reaches bytes "
                             f"[{offset}, {offset + size}); {reason}")

    def _targets(self, gpu: ms.GpuOp, tb: ms.ThreadblockOp, op: ms.InstructionOp,
                 ref: ms.BufferRefAttr):
        if ref.is_local:
            yield gpu.rank_id, ref.buffer.data
        elif ref.is_remote:
            ids = self._cached("remote_buffer_ids", tb, op.kind or "memory")
            remote = self._cached("remote_buffers", gpu)[ids[ref.ref_id.data]]
            yield remote.rank_id, remote.buffer
        else:
            switches = self._cached("channel_ids", tb, "switch")
            buffer, members = self._cached("switch_groups", gpu)[switches[ref.ref_id.data]]
            for member in members:
                yield member, buffer


def _moved(region: Region, delta: int) -> Region:
    return Region(region.rank, region.space, region.start + delta, region.size, region.buffer,
                  region.offset + delta, region.packets, region.raw)


def _role(op: ms.InstructionOp) -> str:
    if isinstance(op, ms.NopOp):
        return "nop"
    if isinstance(op, ms.BarrierOp):
        return "barrier"
    return "sync" if op.SYNC else "data"


def expand(algorithm: ms.AlgorithmOp, chunk_bytes: int) -> Program:
    """The plan's steps for a chunk size of `chunk_bytes` (a multiple of the alignment)."""
    return _Expander(algorithm, chunk_bytes).run()
