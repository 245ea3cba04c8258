"""Hardware descriptions: one JSON data file per device, loaded by name (`--arch NAME`).

Device files live in `devices/` (and in the folders listed in $PLANC_DEVICE_PATH,
which take precedence, so users can describe their own devices without editing planc). A file
holds at least `name` and `kind`; what else it holds depends on the kind. `load_device(name)`
reads any device; `gpu_device(name)` reads and checks the fields that GPU planners and cost
models use (processors, warps, shared memory, peak FLOP/s per data type, bandwidths, the
matmul kernel configurations the runtime's kernels support, ...).

Descriptions are data so that planners and cost models stay free of device constants: the
tiling, partitioning and simulation code only ever asks a `GpuDevice`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ground.diagnostics import ArgumentError, PlancError, UsageError, did_you_mean, one_of
from ground.json_reader import JsonNode, load_json_file

DEVICES = Path(__file__).resolve().parent
"""The folder of the device files planc ships (beside this module)."""


def device_folders() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("PLANC_DEVICE_PATH", "").split(os.pathsep) if p]
    return [*extra, DEVICES]


def device_files() -> dict[str, Path]:
    """Every known device name and the file describing it (earlier folders win)."""
    found: dict[str, Path] = {}
    for folder in device_folders():
        if folder.is_dir():
            for path in sorted(folder.glob("*.json")):
                found.setdefault(path.stem, path)
    return found


def device_names(kind: str | None = None) -> list[str]:
    """Known device names, optionally only those of one kind (e.g. "gpu")."""
    names = sorted(device_files())
    if kind is None:
        return names
    return [n for n in names if device_document(n)["kind"].as_str() == kind]


@cache
def _raw_cached(path: Path) -> JsonNode:
    return load_json_file(path)


def device_document(name: str) -> JsonNode:
    path = device_files().get(name)
    if path is None:
        raise ArgumentError(f"unknown device '{name}'{did_you_mean(name, device_names())} (known "
                         f"devices: {one_of(device_names()) or 'none'})")
    return _raw_cached(path)


def load_device(name: str) -> dict[str, Any]:
    """The description of device `name` as plain JSON values."""
    doc = device_document(name)
    doc["kind"].as_str()
    return doc.as_dict()


# ---------------------------------------------------------------------------------------------
# GPUs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MatmulKernel:
    """One matmul kernel configuration the runtime supports: output tile M x N, the K step,
    and the warps and shared-memory bytes one tile needs."""

    tile: tuple[int, int, int]
    warps: int
    sram: int


@dataclass(frozen=True)
class GpuDevice:
    """A GPU as planc's ARK planners and cost model see it."""

    name: str
    description: str
    architecture: str
    processors: int
    warp_size: int
    max_warps_per_processor: int
    """Warps one block (an ARK processor's resident work) may hold: 1024 threads / warp size."""
    plan_warps_per_processor: int
    """Warps planc gives each processor in the plans it makes (register budget, see notes)."""
    shared_memory_per_processor: int
    reserved_shared_memory: int
    clock_hz: float
    memory_bytes: int
    memory_bandwidth: float
    l2_bandwidth: float
    processor_bandwidth: float
    """Bytes per second one processor can move on its own (when few processors are busy)."""
    matmul_flops: dict[str, float]
    vector_flops: dict[str, float]
    matmul_efficiency: float
    memory_latency_s: float
    """Charged once per operator of every task (its first loads; ARK does not prefetch across
    operators). An assumption of microbenchmark magnitude, not a measured figure for ARK's
    kernels: it is what makes long fused tasks and many-part split-K sums costly in planc's
    cost model, and the plain roofline of bench/roofline.py has no such term."""
    task_overhead_s: float
    """Charged once per task (fetching its task description, the slot's synchronisation). An
    assumption, like `memory_latency_s`, not a measurement."""
    barrier_s: float
    """A grid barrier between processor groups. An assumption, not a measurement."""
    warps_to_saturate_compute: int
    """Warps one processor needs for its full matmul and vector rate (one per scheduler or
    SIMD: a 2-warp tile alone on a processor computes at half its rate)."""
    warps_to_saturate_memory: int
    """Warps one processor needs in flight to reach its bandwidth share (an assumption)."""
    matmul_kernels: dict[str, tuple[MatmulKernel, ...]]

    @property
    def sram_per_processor(self) -> int:
        """Shared-memory bytes a plan's SramRange may use on one processor."""
        return self.shared_memory_per_processor - self.reserved_shared_memory

    def matmul_rate(self, dtype: str) -> float:
        """Achievable matmul FLOP/s of the whole device for `dtype`."""
        return self.matmul_flops.get(dtype, self.vector_flops.get("FP32", 0.0)) * \
            self.matmul_efficiency

    def vector_rate(self, dtype: str) -> float:
        return self.vector_flops.get(dtype, self.vector_flops.get("FP32", 0.0))

    @property
    def is_rocm(self) -> bool:
        return self.architecture.startswith("ROCM")


def positive(node: JsonNode, integer: bool = True) -> Any:
    value = node.as_int(lo=1) if integer else node.as_number()
    if not integer and value <= 0:
        raise node.error(f"expected a positive number, got {value}")
    return value


def _rates(node: JsonNode) -> dict[str, float]:
    return {dtype: positive(rate, integer=False) for dtype, rate in node.items()}


def _kernels(node: JsonNode) -> dict[str, tuple[MatmulKernel, ...]]:
    table = {}
    for dtype, entries in node.items():
        table[dtype] = tuple(
            MatmulKernel(tuple(e["tile"].as_int_list(3, 3, min_value=1)),
                         positive(e["warps"]), e["sram"].as_int(lo=0))
            for e in entries.elements())
    return table


@cache
def gpu_device(name: str) -> GpuDevice:
    """The GPU named `name`; a clear error if it is unknown or not a GPU."""
    if name not in device_files():
        gpus = device_names("gpu")
        raise ArgumentError(f"unknown device '{name}'{did_you_mean(name, gpus)} (known GPUs: "
                         f"{one_of(gpus)})")
    doc = device_document(name)
    kind = doc["kind"].as_str()
    if kind != "gpu":
        raise UsageError(f"device '{name}' is a {kind} device, not a GPU (GPUs: "
                         f"{one_of(device_names('gpu'))})")
    try:
        return GpuDevice(
            name=doc["name"].as_str(),
            description=doc["description"].as_str(),
            architecture=doc["architecture"].as_str(),
            processors=positive(doc["processors"]),
            warp_size=positive(doc["warp_size"]),
            max_warps_per_processor=positive(doc["max_warps_per_processor"]),
            plan_warps_per_processor=positive(doc["plan_warps_per_processor"]),
            shared_memory_per_processor=positive(doc["shared_memory_per_processor"]),
            reserved_shared_memory=doc["reserved_shared_memory"].as_int(lo=0),
            clock_hz=positive(doc["clock_hz"], integer=False),
            memory_bytes=positive(doc["memory_bytes"]),
            memory_bandwidth=positive(doc["memory_bandwidth"], integer=False),
            l2_bandwidth=positive(doc["l2_bandwidth"], integer=False),
            processor_bandwidth=positive(doc["processor_bandwidth"], integer=False),
            matmul_flops=_rates(doc["matmul_flops"]),
            vector_flops=_rates(doc["vector_flops"]),
            matmul_efficiency=(positive(doc["matmul_efficiency"], integer=False)
                               if doc.has("matmul_efficiency") else 1.0),
            memory_latency_s=positive(doc["memory_latency_s"], integer=False),
            task_overhead_s=positive(doc["task_overhead_s"], integer=False),
            barrier_s=positive(doc["barrier_s"], integer=False),
            warps_to_saturate_compute=positive(doc["warps_to_saturate_compute"]),
            warps_to_saturate_memory=positive(doc["warps_to_saturate_memory"]),
            matmul_kernels=_kernels(doc["matmul_kernels"]),
        )
    except PlancError as e:
        raise e.in_file(str(device_files()[name])) from None


def _loadable_gpus() -> list[GpuDevice]:
    """Every GPU description that loads (a broken file is reported when it is asked for by
    name, not when some plan's Architecture is looked up)."""
    found = []
    for name in device_files():
        try:
            if device_document(name)["kind"].as_str() == "gpu":
                found.append(gpu_device(name))
        except PlancError:
            continue
    return found


def gpu_for_architecture(architecture: str | None) -> GpuDevice | None:
    """The first known GPU (by name) of an ARK Architecture name such as CUDA_80."""
    if architecture is None:
        return None
    return next((d for d in _loadable_gpus() if d.architecture == architecture), None)


@dataclass(frozen=True)
class ArchitectureLimits:
    """What any plan for an architecture may ask of one processor."""

    max_warps: int
    max_sram: int
    max_processors: int
    """The most processors (SMs, CUs) of a device with this architecture."""


@cache
def architecture_limits(architecture: str) -> ArchitectureLimits | None:
    """The per-processor limits of an ARK Architecture, from the devices that have it
    (the most generous when several do); None when no known device has it."""
    matching = [d for d in _loadable_gpus() if d.architecture == architecture]
    if not matching:
        return None
    return ArchitectureLimits(max(d.max_warps_per_processor for d in matching),
                              max(d.sram_per_processor for d in matching),
                              max(d.processors for d in matching))


def gpus_of_architecture(architecture: str | None) -> list[GpuDevice]:
    """The GPUs planc knows whose ARK Architecture is `architecture`."""
    return [d for d in _loadable_gpus() if d.architecture == architecture]


def most_processors() -> int:
    """The most processors of any GPU planc knows."""
    return max(d.processors for d in _loadable_gpus())


def resolve_gpu(name: str | None, default: str = "a100") -> GpuDevice:
    """The GPU a command-line `--arch` names (the default when it names none)."""
    return gpu_device(name or default)
