"""Tenstorrent devices: the `kind: "tenstorrent"` descriptions of `devices/`.

The numbers are the ones planc's plans depend on: the compute grid (default `--grid`), L1 per
core (what fits in L1), DRAM bandwidth and per-tile cycle counts (the cost model that picks a
partition strategy and reports modeled time). Each file lists its sources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from devices import hardware
from ground.diagnostics import ArgumentError, PlancError, UsageError, did_you_mean

DEFAULT_DEVICE = "wormhole_b0"


@dataclass(frozen=True)
class TTDevice:
    name: str
    description: str
    compute_grid: tuple[int, int]
    l1_bytes: int
    l1_reserved_bytes: int
    dram_bytes: int
    dram_banks: int
    dram_bandwidth_bytes_per_s: float
    clock_hz: float
    noc_bytes_per_cycle: int
    matmul_tile_cycles: int
    eltwise_tile_cycles: int
    sfpu_tile_cycles: int
    kernel_launch_s: float

    @property
    def l1_usable_bytes(self) -> int:
        return self.l1_bytes - self.l1_reserved_bytes

    @property
    def l1_banks(self) -> int:
        """L1-interleaved buffers spread their pages over every compute core's L1."""
        return self.compute_grid[0] * self.compute_grid[1]


def device_names() -> list[str]:
    return hardware.device_names(kind="tenstorrent")


@cache
def _load(name: str) -> TTDevice:
    """Every field read and checked where it stands in the device file: a user's file without
    one (or with a string for a count) is an error at that path, not an internal error."""
    doc = hardware.device_document(name)
    positive = hardware.positive
    try:
        l1_bytes = positive(doc["l1_bytes"])
        return TTDevice(
            name=doc["name"].as_str(),
            description=doc["description"].as_str() if doc.has("description") else "",
            compute_grid=tuple(doc["compute_grid"].as_int_list(2, 2, min_value=1)),
            l1_bytes=l1_bytes,
            l1_reserved_bytes=doc["l1_reserved_bytes"].as_int(lo=0, hi=l1_bytes - 1),
            dram_bytes=positive(doc["dram_bytes"]),
            dram_banks=positive(doc["dram_banks"]),
            dram_bandwidth_bytes_per_s=positive(doc["dram_bandwidth_bytes_per_s"],
                                                integer=False),
            clock_hz=positive(doc["clock_hz"], integer=False),
            noc_bytes_per_cycle=positive(doc["noc_bytes_per_cycle"]),
            matmul_tile_cycles=positive(doc["matmul_tile_cycles"]),
            eltwise_tile_cycles=positive(doc["eltwise_tile_cycles"]),
            sfpu_tile_cycles=positive(doc["sfpu_tile_cycles"]),
            kernel_launch_s=positive(doc["kernel_launch_s"], integer=False),
        )
    except PlancError as e:
        raise e.in_file(str(hardware.device_files()[name])) from None


def device_named(name: str | None) -> TTDevice:
    """The device called `name` (the default device for None); unknown names are an error."""
    name = name or DEFAULT_DEVICE
    if name not in device_names():
        raise ArgumentError(f"--arch: unknown Tenstorrent device '{name}'"
                         f"{did_you_mean(name, device_names())} (known: "
                         f"{', '.join(device_names())})")
    return _load(name)


def parse_grid(text: str | None, device: TTDevice) -> tuple[int, int]:
    """`--grid GXxGY` (default: the device's compute grid), checked against the device."""
    if text is None:
        return device.compute_grid
    match = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text)
    if match is None or min(int(match.group(1)), int(match.group(2))) < 1:
        raise UsageError(f"--grid: expected GXxGY with positive integers (e.g. 8x8), got "
                         f"'{text}'")
    grid = int(match.group(1)), int(match.group(2))
    limit = device.compute_grid
    if grid[0] > limit[0] or grid[1] > limit[1]:
        raise UsageError(f"--grid {grid[0]}x{grid[1]} does not fit the {device.name} compute "
                         f"grid {limit[0]}x{limit[1]}")
    return grid
