"""ARK plans: the memories of the device that runs them, as `planc check` rules.

The device is the one `--arch` names, else the most generous device planc knows with the
plan's Architecture (so a plan is refused only when no such device could hold it); a plan for
`ANY` architecture, checked without `--arch`, is not checked here.

* `ark-plan.device-memory` (error): ARK's executor lays every local buffer out back to back
  (`plan.buffer_layout`) and allocates the whole layout as one device allocation when the
  plan is loaded; a layout beyond the device's memory is refused there (out of memory), before
  any task runs.
* `ark-plan.sram` (error), for the device `--arch` names when its limit is below the one the
  verifier applied for the plan's Architecture: ARK asks the driver for the largest SramRange
  end of the plan as the loop kernel's dynamic shared memory (one block per processor); more
  than a processor of the device offers makes the launch fail (a refusal).
* `ark-plan.processors` (error), likewise: ARK's loop kernel is persistent and grid-syncs all
  NumProcessors blocks; with more blocks than the device has processors the resident ones wait
  at the first barrier for blocks that never start (a hang).

`check` is the ark-plan format's whole-document check: plan_check's rules, then these.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import ModuleOp

from devices.hardware import GpuDevice, architecture_limits, gpu_device, gpus_of_architecture
from dialects import plan as pl
from dialects.findings import ERROR, Finding, at_op
from dialects.utils import single_root
from targets.ark import plan_check


def check(module: ModuleOp | pl.PlanOp, options: Any = None) -> list[Finding]:
    p = module if isinstance(module, pl.PlanOp) else single_root(module, pl.PlanOp)
    return [*plan_check.check(p, options), *capacity_findings(p, getattr(options, "arch", None))]


def device_for(p: pl.PlanOp, arch: str | None) -> tuple[GpuDevice | None, bool]:
    """The device the plan is checked against, and whether the user named it."""
    if arch:
        return gpu_device(arch), True
    matching = gpus_of_architecture(p.arch_name)
    if not matching:
        return None, False
    return max(matching, key=lambda d: d.memory_bytes), False


def capacity_findings(p: pl.PlanOp, arch: str | None = None) -> list[Finding]:
    device, named = device_for(p, arch)
    if device is None:
        return []
    findings = []
    layout = pl.buffer_layout(p)
    if layout.total_bytes > device.memory_bytes:
        largest = sorted(layout.sizes.items(), key=lambda item: -item[1])[:3]
        named_buffers = ", ".join(f"buffer {b} ({size} B)" for b, size in largest)
        findings.append(at_op(
            p, "ark-plan.device-memory", ERROR,
            f"the plan's buffers take {layout.total_bytes} bytes of device memory but "
            f"{device.name} has {device.memory_bytes} (largest: {named_buffers}); ARK "
            "allocates them all when the plan loads"))
    if named:
        findings += _processor_findings(p, device)
    return findings


def _processor_findings(p: pl.PlanOp, device: GpuDevice) -> list[Finding]:
    """SRAM and processors against a device the user named, where the verifier (which knows
    the plan's Architecture only) allowed more."""
    limits = architecture_limits(p.arch_name) if p.arch_name else None
    findings = []
    if p.processor_count > device.processors and \
            (limits is None or limits.max_processors > device.processors):
        findings.append(at_op(
            p, "ark-plan.processors", ERROR,
            f"NumProcessors {p.processor_count} exceeds the {device.processors} processors of "
            f"{device.name}; ARK's persistent kernel would wait for ever at its first grid "
            "barrier"))
    if limits is not None and limits.max_sram <= device.sram_per_processor:
        return findings
    for pg in pl.plan_contents(p).groups:
        for rg in pg.resource_groups():
            if rg.sram.end > device.sram_per_processor:
                findings.append(at_op(
                    rg, "ark-plan.sram", ERROR,
                    f"SramRange {rg.sram} exceeds the {device.sram_per_processor} bytes of "
                    f"shared memory a plan may use on one processor of {device.name}; the "
                    "kernel's launch would fail"))
                return findings
    return findings
