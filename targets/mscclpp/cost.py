"""The alpha-beta cost model of MSCCL++ plans: a timed replay at a given message size.

Each thread block runs its steps one after the other; a step costs an issue overhead plus its
bytes over the rate it gets, and starts no earlier than what it waits for:

* a wait starts once the matching signal is visible: the signal's time plus the channel's
  latency alpha (memory channels: a flag written over NVLink; port channels: through the CPU
  proxy);
* an LL packet reader starts when the first packets of every writer it reads are visible and
  cannot finish before the last ones are (packets stream; no separate signal);
* semaphores and barriers add a small on-GPU latency;
* a data step's NVLink bytes (what it reads from or writes to other GPUs, LL packets counting
  twice their data) go at min(one block's copy rate, the GPU's link bandwidth shared by the
  blocks that use it); local bytes at min(one block's rate, HBM shared by the data blocks);
  switch (NVLS) steps at the switch rate shared by the blocks that use it;
* port puts run on the channel's proxy, which a later signal or flush waits for.

The time of the collective is the launch overhead plus the time of the last block (or proxy).
The numbers (the `collectives` section of each GPU's device description) are estimates
(reference §5.4: alpha of about 1-2 us per hop, about 20-40 GB/s per block, NVLink about
300-450 GB/s per direction) roughly calibrated on the
published 8-GPU figures (§5.2, §5.3); they rank algorithms, they do not predict a machine.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from functools import cache

from devices.hardware import device_names, load_device
from dialects import mscclpp as ms
from ground.diagnostics import ArgumentError, PlancError, did_you_mean
from targets.mscclpp.program import Program, ProxyKey, Region, Step, expand
from targets.mscclpp.replay import Block, Replay


@dataclass(frozen=True)
class Hardware:
    """One GPU type in an NVSwitch machine, as the cost model sees it."""

    name: str
    launch_s: float
    alpha_memory_s: float
    """From a memory-channel signal to the peer seeing it."""
    alpha_port_s: float
    """From a port-channel request to the proxy completing it (intra-node DMA)."""
    alpha_packet_s: float
    """From writing an LL packet to the peer seeing it."""
    alpha_switch_s: float
    alpha_sync_s: float
    """Semaphores and barriers between blocks of one GPU."""
    op_s: float
    """Issuing one operation (decode, address arithmetic, loop set-up)."""
    nop_s: float
    block_link_Bps: float
    """What one thread block moves over NVLink per second."""
    block_local_Bps: float
    block_switch_Bps: float
    link_Bps: float
    """NVLink bandwidth of one GPU, per direction."""
    hbm_Bps: float
    switch_Bps: float
    """NVLS multimem bandwidth of one GPU (0: no NVLS)."""
    sms: int
    """Streaming multiprocessors: the executor runs one thread block per SM and assumes
    they are all resident at once."""


DEFAULT_MESSAGE = 2**20

BUS_FACTOR = {
    "allreduce": lambda p: 2 * (p - 1) / p,
    "allgather": lambda p: (p - 1) / p,
    "reducescatter": lambda p: (p - 1) / p,
    "alltoall": lambda p: (p - 1) / p,
    "broadcast": lambda p: 1.0,
}
"""nccl-tests' bus bandwidth per algorithm bandwidth (reference §5.4)."""


def collective_devices() -> list[str]:
    """GPUs whose description has the `collectives` section this cost model needs."""
    return [n for n in device_names("gpu") if "collectives" in load_device(n)]


@cache
def hardware_named(name: str) -> Hardware:
    """The cost-model view of GPU `name`, from its device description (devices)."""
    known = collective_devices()
    if name not in known:
        # A name from the command line or a call, not from the document.
        raise ArgumentError(f"unknown hardware model '{name}'{did_you_mean(name, known)} "
                            f"(known: {', '.join(known)})")
    device = load_device(name)
    fields = {k: v for k, v in device["collectives"].items()
              if k in Hardware.__dataclass_fields__}
    return Hardware(name=name, sms=device["processors"], **fields)


_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes from `4096`, `64K`, `1MB`, `1MiB`, `2G` (K, M, G, T are powers of 1024)."""
    match = _SIZE.match(str(text))
    if match is None:
        raise ValueError(f"expected a size such as 4096, 64K or 1MB, got '{text}'")
    number, unit, _ = match.groups()
    if int(number) == 0:
        # Nothing to cut into chunks: the executor's checkMessageSize refuses it, and the
        # cost model would time an empty message as free.
        raise ValueError(f"expected a size above 0 bytes, got '{text}'")
    return int(number) * 1024 ** ("kmgt".find(unit.lower()) + 1) if unit else int(number)


def message_chunks(algorithm: ms.AlgorithmOp) -> int:
    """How many chunks the message size is cut into (the executor's rule: the input size over
    input_chunks, the output size for allgather). A plan with both counts 0 (the DSL's unit
    tests: it moves no input or output data, see `mscclpp.zero-chunks`) has no chunk size;
    the message is then one chunk, so that it has a size to be timed at."""
    gpu = algorithm.gpus()[0]
    if algorithm.collective_name == "allgather" and gpu.chunks("o"):
        return gpu.chunks("o")
    return gpu.chunks("i") or gpu.chunks("o") or 1


def fitting_message(algorithm: ms.AlgorithmOp, wanted: int | None = None) -> int:
    """A message size the plan accepts, as near `wanted` (default 1 MiB) as possible."""
    unit = algorithm.alignment * message_chunks(algorithm)
    low, high = algorithm.message_range
    size = min(max(wanted or DEFAULT_MESSAGE, low, unit), high)
    return max(unit, size // unit * unit)


def padded_message(algorithm: ms.AlgorithmOp, size: int) -> int:
    """The least size of at least `size` bytes the plan takes: the executor cuts the message
    into `message_chunks` chunks of a multiple of `buffer_alignment` bytes each, so real
    tensors of any other size run on buffers padded to this (see `padding_note`)."""
    unit = algorithm.alignment * message_chunks(algorithm)
    return max(unit, -(-size // unit) * unit)


def padding_note(algorithm: ms.AlgorithmOp, size: int) -> dict | None:
    """What a caller with a `size`-byte message must do to run the plan (None: nothing).

    The message (the input; the output for allgather) is padded to `padded_bytes`, cut into
    chunks of `chunk_bytes`. Elementwise collectives (allreduce, broadcast) keep the data as
    the first `bytes` bytes; collectives of per-rank blocks (allgather, reducescatter,
    alltoall) pad each rank's block to `padded_bytes / ranks` bytes."""
    padded = padded_message(algorithm, size)
    if padded == size:
        return None
    chunks = message_chunks(algorithm)
    return {"bytes": size, "padded_bytes": padded, "chunk_bytes": padded // chunks,
            "block_bytes": padded // algorithm.num_ranks
            if algorithm.collective_name in ("allgather", "reducescatter", "alltoall")
            else padded}


@dataclass
class Timing:
    message_bytes: int
    seconds: float
    ranks: int
    collective: str

    @property
    def algbw(self) -> float:
        return self.message_bytes / self.seconds

    @property
    def busbw(self) -> float:
        return self.algbw * BUS_FACTOR.get(self.collective, lambda p: 1.0)(self.ranks)


class TimedReplay(Replay):
    def __init__(self, program: Program, hardware: Hardware):
        super().__init__(program)
        self.hw = hardware
        self.clock: dict[Block, float] = {block: 0.0 for block in program.blocks}
        self.proxy_free: dict[ProxyKey, float] = defaultdict(float)
        self.packets: dict[tuple[int, str], list[tuple[int, int, float, float]]] = \
            defaultdict(list)
        self.shares = self._shares()

    def initial_payload(self) -> float:
        return 0.0

    def _shares(self) -> dict[tuple[int, str], int]:
        """How many blocks of each rank compete for its link, HBM and switch bandwidth."""
        users: dict[tuple[int, str], set[Block]] = defaultdict(set)
        for block, steps in self.program.blocks.items():
            for step in steps:
                for kind, _ in self._bytes(step).items():
                    users[(block[0], kind)].add(block)
        return {key: len(blocks) for key, blocks in users.items()}

    @staticmethod
    def _bytes(step: Step) -> dict[str, int]:
        if step.proxy is not None:
            return {}
        found: dict[str, int] = defaultdict(int)
        if step.name in ("glres", "gstore", "gstorepkt"):
            # Every member's link carries the range (loads for the reduction, the multicast
            # store), and all members do the same at once.
            targets = step.moves[0].targets if step.moves else []
            found["switch"] = sum(r.size for r in targets)
            return found
        for move in step.moves:
            for region in move.sources:
                found["in" if region.rank != step.rank else "local"] += region.size
            for region in move.targets:
                found["out" if region.rank != step.rank else "local"] += region.size
        return {k: v for k, v in found.items() if v}

    def _duration(self, step: Step) -> float:
        rank = step.rank
        moved = self._bytes(step)
        if not moved:
            return self.hw.nop_s if step.role == "nop" else self.hw.op_s
        link = min(self.hw.block_link_Bps,
                   self.hw.link_Bps / max(self.shares.get((rank, "in"), 1),
                                          self.shares.get((rank, "out"), 1)))
        local = min(self.hw.block_local_Bps, self.hw.hbm_Bps / self.shares.get((rank, "local"),
                                                                                1))
        # In and out both count: in symmetric algorithms the peers' mirror-image ops load
        # this GPU's link the other way as much as this op does.
        times = [(moved.get("in", 0) + moved.get("out", 0)) / link,
                 moved.get("local", 0) / local]
        if "switch" in moved:
            switch = min(self.hw.block_switch_Bps,
                         self.hw.switch_Bps / self.shares.get((rank, "switch"), 1))
            times.append(self.hw.alpha_switch_s + moved["switch"] / switch)
        return self.hw.op_s + max(times)

    # -- packets ---------------------------------------------------------------------------------

    def _coverage(self, region: Region) -> list[tuple[int, int, float, float]] | None:
        """The packet writes covering `region`, or None if some bytes are not written yet."""
        writes = sorted(w for w in self.packets[(region.rank, region.space)]
                        if w[0] < region.end and w[1] > region.start)
        position = region.start
        for start, end, _, _ in writes:
            if start > position:
                return None
            position = max(position, end)
        return writes if position >= region.end else None

    def missing_packets(self, step: Step) -> str | None:
        for region in step.packet_reads():
            if self._coverage(region) is None:
                return f"waits for LL packets at gpu {region.rank} scratch"
        return None

    # -- steps -----------------------------------------------------------------------------------

    def perform(self, block: Block, step: Step, received: list[float]) -> None:
        start = max([self.clock[block], *received])
        first = last = 0.0
        for region in step.packet_reads():
            for _, _, begin, end in self._coverage(region) or []:
                first, last = max(first, begin), max(last, end)
        start = max(start, first)
        end = max(start + self._duration(step), last)
        if step.proxy is not None:
            moved = sum(r.size for m in step.moves for r in m.targets)
            rate = self.hw.link_Bps / max(1, self.shares.get((step.rank, "out"), 1))
            begin = max(end, self.proxy_free[step.proxy])
            self.proxy_free[step.proxy] = begin + self.hw.alpha_port_s + moved / rate
        for proxy in step.flushes:  # after this op's own put (pwsf)
            end = max(end, self.proxy_free[proxy])
        for move in step.moves:
            for region in move.targets:
                if region.packets:
                    self.packets[(region.rank, region.space)].append(
                        (region.start, region.end, start + self.hw.alpha_packet_s,
                         end + self.hw.alpha_packet_s))
        self.clock[block] = end

    def signal_payload(self, block: Block, step: Step, index: int) -> float:
        proxy = step.signal_proxies[index] if index < len(step.signal_proxies) else None
        if proxy is None:
            return self.clock[block] + self.hw.alpha_memory_s
        return max(self.clock[block], self.proxy_free[proxy]) + self.hw.alpha_port_s

    def release_payload(self, block: Block, step: Step) -> float:
        return self.clock[block] + self.hw.alpha_sync_s

    def arrival_payload(self, block: Block, step: Step) -> float:
        return self.clock[block] + self.hw.alpha_sync_s

    def finish_time(self) -> float:
        ends = list(self.clock.values()) + list(self.proxy_free.values())
        return self.hw.launch_s + max(ends, default=0.0)


def model_time(algorithm: ms.AlgorithmOp, hardware: Hardware,
               message_bytes: int | None = None) -> Timing | None:
    """The modeled time of `algorithm` for a message of `message_bytes` (the input size, the
    output size for allgather); None if the plan deadlocks."""
    size = fitting_message(algorithm) if message_bytes is None else message_bytes
    chunks = message_chunks(algorithm)
    if size % (chunks * algorithm.alignment):
        raise PlancError(f"message size {size} is not a multiple of {chunks} chunks x "
                         f"buffer_alignment {algorithm.alignment}: run it on buffers padded "
                         f"to {padded_message(algorithm, size)} bytes")
    program = expand(algorithm, size // chunks)
    if hardware.switch_Bps == 0 and any(
            step.name in ("glres", "gstore", "gstorepkt")
            for steps in program.blocks.values() for step in steps):
        raise PlancError(f"the {hardware.name} model has no NVLink switch (NVLS); this plan "
                         "uses switch channels")
    replay = TimedReplay(program, hardware)
    replay.run_earliest_first(replay.clock)
    if replay.unfinished():
        return None
    return Timing(size, replay.finish_time(), program.ranks, algorithm.collective_name)


def device_bytes(algorithm: ms.AlgorithmOp, message_bytes: int) -> int:
    """The most memory a GPU needs for the collective at this size: its input, its output
    (once if in place) and its scratch (doubled for LL packets and double buffering)."""
    chunk = message_bytes // message_chunks(algorithm)
    most = 0
    for gpu in algorithm.gpus():
        data = [gpu.chunks("i"), gpu.chunks("o")]
        buffers = max(data) if algorithm.is_inplace else sum(data)
        scratch = gpu.chunks("s") * (2 if algorithm.protocol_name == "LL" else 1) * \
            (2 if algorithm.uses_double_scratch else 1)
        most = max(most, (buffers + scratch) * chunk)
    return most


def lower_bound(collective: str, ranks: int, message_bytes: int, hardware: Hardware) -> float:
    """The alpha-beta lower bound of a collective over point-to-point links: the launch, one
    hop (through the NVSwitch every GPU reaches every other directly, so a single round can
    suffice; the cheaper of a packet and a signal), and the bytes each GPU must move over its
    link (allreduce 2(p-1)/p n, allgather/reducescatter/alltoall (p-1)/p n, broadcast n).
    Reducing in the switch (NVLS) moves fewer bytes per GPU and can beat it."""
    hop = min(hardware.alpha_memory_s, hardware.alpha_packet_s) if ranks > 1 else 0.0
    data = BUS_FACTOR.get(collective, lambda p: 1.0)(ranks) * message_bytes
    return hardware.launch_s + hop + data / hardware.link_Bps
