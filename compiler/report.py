"""Human-readable reports: figures with units, long lists summarised.

`planc simulate` (without `--json`) prints its report through `human_report`: seconds as
`40.0 us`, bytes as `21.2 MB`, cycles with separators, a per-processor list as its minimum,
median and maximum, lists of records as their first few entries. Every raw figure stays in
`--json`; `docs/results.md` says what each one means.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

# Shown first, in this order, when present; everything else follows in the report's order.
HEADLINE = ("device", "device_source", "modeled_time_s", "latency_cycles", "device_bytes",
            "max_abs_error", "proved")
LIST_PREVIEW = 3
# What a figure is per, where its name alone would mislead.
NOTES = {
    "barrier_wait_s": "summed over processors",
    "processor_utilisation": "mean over processors of busy time / modeled time",
    "per_processor_utilisation": "busy time / modeled time",
    "warp_occupancy": "active warp-seconds / all warp-seconds",
    "checked_chunk_bytes": "chunk size the symbolic replay checked",
    "device_bytes": "device memory the plan needs",
    "l1_bytes": "of which in L1, over all cores",
    "critical_compute_cycles": "the busiest core",
}


def seconds(value: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(value) >= scale or unit == "ns":
            return f"{value / scale:.3g} {unit}" if value else "0 s"
    return f"{value} s"


def size(value: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{int(value)} B"


def figure(key: str, value: Any) -> str:
    """One figure as text, with the unit its key names."""
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "-"}[value]
    if isinstance(value, int | float):
        if key.endswith("_s") or key == "seconds":
            return seconds(value)
        if key.endswith("_bytes"):
            return size(value)
        if key in EXACT_BYTES:
            return f"{value:,} B"
        if key.endswith("_cycles") or key in ("macs", "compute_cycles"):
            return f"{value:,.0f} cycles" if key.endswith("cycles") else f"{value:,}"
        if key.endswith("GBps"):
            return f"{value:.3g} GB/s"
        return f"{value:.4g}" if isinstance(value, float) else f"{value:,}"
    if isinstance(value, list):
        return _list(key, value)
    if isinstance(value, dict):
        return _mapping(key, value)
    return str(value)


def _list(key: str, values: list) -> str:
    if not values:
        return "none"
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        if len(values) > LIST_PREVIEW * 2:
            return (f"{len(values)} values: min {figure(key, min(values))}, median "
                    f"{figure(key, statistics.median(values))}, max {figure(key, max(values))}")
        return ", ".join(figure(key, v) for v in values)
    shown = [_record(v) for v in values[:LIST_PREVIEW]]
    more = f"; ... {len(values) - LIST_PREVIEW} more" if len(values) > LIST_PREVIEW else ""
    return "; ".join(shown) + more


RECORD_LABELS = {"seconds": "time"}
"""Members of listed records that read better under another name (the unit follows the
figure: `time 26.4 us`, not `seconds 26.4 us`); the others read as the report's own figures
do (`modeled time 30.3 us`, not `modeled_time_s 30.3 us`)."""
EXACT_BYTES = ("message_size",)
"""Byte counts the user gave, printed exactly with their unit (`67,108,864 B` was
`67,108,864`)."""
TENSOR_KEYED = ("inputs", "outputs")
"""Mappings keyed by tensor id: `outputs  tensor 15: ...` says what 15 is."""


def _record(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{RECORD_LABELS.get(k) or _label(k)} "
                         f"{json.dumps(v) if isinstance(v, list) else figure(k, v)}"
                         for k, v in value.items())
    return value if isinstance(value, str) else json.dumps(value)


def _mapping(key: str, value: dict) -> str:
    if not value:
        return "none"
    items = list(value.items())
    prefix = "tensor " if key in TENSOR_KEYED and all(str(k).isdigit() for k in value) else ""
    shown = "; ".join(f"{prefix}{k}: {_record(v)}" for k, v in items[:LIST_PREVIEW])
    more = f"; ... {len(items) - LIST_PREVIEW} more" if len(items) > LIST_PREVIEW else ""
    return shown + more


def human_report(path: str, report: dict[str, Any]) -> str:
    """The report of `planc simulate` for people: a verdict line, then one figure a line."""
    lines = [f"{path}: {'ok' if report.get('ok') else 'FAILED'}: {report['format']}"]
    keys = [k for k in HEADLINE if k in report]
    keys += [k for k in report if k not in keys and k not in ("format", "ok")]
    labels = {k: _label(k) for k in keys}
    width = max(map(len, labels.values()), default=0)
    for key in keys:
        if key == "proved" and isinstance(report[key], list):
            for i, statement in enumerate(report[key]):
                lines.append(f"  {labels[key] if i == 0 else '':<{width}}  {statement}")
            continue
        note = f" ({NOTES[key]})" if key in NOTES else ""
        lines.append(f"  {labels[key]:<{width}}  {figure(key, report[key])}{note}")
    return "\n".join(lines)


def _label(key: str) -> str:
    """`modeled_time_s` reads `modeled time`: the unit is printed with the figure."""
    for suffix in ("_s", "_GBps"):
        if key.endswith(suffix):
            key = key[: -len(suffix)]
    return key.replace("_", " ")
