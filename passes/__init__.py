"""planc's passes, one module each. `get_all_passes` is lazy, like xDSL's own: a pass's module
is imported only when a pipeline uses it. To add a pass, add a row to `PASSES`."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.passes import ModulePass

PASSES: tuple[tuple[str, str, str], ...] = (
    # (pass name, module, class)
    ("ark-compress", "passes.ark_compress", "ArkCompressPass"),
    ("ark-lift-plan", "passes.ark_lift_plan", "ArkLiftPlanPass"),
    # Tenstorrent
    ("tt-tile", "passes.tt_tile", "TtTilePass"),
    ("tt-partition", "passes.tt_partition", "TtPartitionPass"),
    ("tt-place", "passes.tt_place", "TtPlacePass"),
    ("tt-to-metalium", "passes.tt_to_metalium", "TtToMetaliumPass"),
    # Gemini
    ("dnn-from-ark", "passes.dnn_from_ark", "DnnFromArkPass"),
    ("dnn-rebatch", "passes.dnn_rebatch", "DnnRebatchPass"),
    ("gemini-group-layers", "passes.gemini_group_layers", "GeminiGroupLayersPass"),
    ("gemini-batch-cut", "passes.gemini_batch_cut", "GeminiBatchCutPass"),
    ("gemini-partition", "passes.gemini_partition", "GeminiPartitionPass"),
    ("gemini-workloads", "passes.gemini_workloads", "GeminiWorkloadsPass"),
    ("gemini-receptive-field", "passes.gemini_receptive_field", "GeminiReceptiveFieldPass"),
    ("gemini-transfer-ids", "passes.gemini_transfer_ids", "GeminiTransferIdsPass"),
    ("gemini-dram-order", "passes.gemini_dram_order", "GeminiDramOrderPass"),
    ("gemini-allocate-l2", "passes.gemini_allocate_l2", "GeminiAllocateL2Pass"),
    ("gemini-wl0", "passes.gemini_wl0", "GeminiWl0Pass"),
    ("gemini-cycles", "passes.gemini_cycles", "GeminiCyclesPass"),
    # MSCCL++
    ("lower-ark-comm-to-mscclpp", "passes.lower_ark_comm_to_mscclpp",
     "LowerArkCommToMscclppPass"),
    # ARK plans
    ("ark-default-plan", "passes.ark_default_plan", "ArkDefaultPlanPass"),
    ("ark-plan", "passes.ark_plan", "ArkPlanPass"),
    ("ark-to-sched", "passes.ark_to_sched", "ArkToSchedPass"),
    ("sched-fuse", "passes.sched_fuse", "SchedFusePass"),
    ("sched-tile", "passes.sched_tile", "SchedTilePass"),
    ("sched-partition", "passes.sched_partition", "SchedPartitionPass"),
    ("sched-allocate", "passes.sched_allocate", "SchedAllocatePass"),
    ("sched-to-plan", "passes.sched_to_plan", "SchedToPlanPass"),
)


def _lazy(module: str, cls: str) -> Callable[[], type[ModulePass]]:
    def load() -> type[ModulePass]:
        return getattr(importlib.import_module(module), cls)

    return load


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {name: _lazy(module, cls) for name, module, cls in PASSES}
