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


def pass_options(name: str) -> list[tuple[str, str, str | None]]:
    """(option, type, default) of pass `name`, spelled as a pipeline spells them
    (`sched-partition{split-k=false}`); imports the pass's module."""
    from xdsl.passes import get_pass_option_infos

    cls = get_all_passes()[name]()
    return [(info.name.replace("_", "-"), info.expected_type.replace("'", ""),
             info.default_value) for info in get_pass_option_infos(cls)]


def check_pipeline(spec: str) -> None:
    """Every pass of pipeline `spec` exists and takes the options given, else a UsageError
    naming the nearest pass or option (xDSL's own messages give neither). A spec that does
    not parse is left to xDSL's parser, whose message shows where."""
    from xdsl.utils.arg_spec import parse_pipeline
    from xdsl.utils.exceptions import ArgSpecParseError

    from ground.diagnostics import UsageError, did_you_mean

    try:
        specs = list(parse_pipeline(spec))
    except (Exception, ArgSpecParseError):  # noqa: BLE001 - see above
        return
    names = [name for name, _, _ in PASSES]
    for one in specs:
        if one.name not in names:
            raise UsageError(f"unknown pass '{one.name}'{did_you_mean(one.name, names)} "
                             f"(known passes: {', '.join(sorted(names))}; planc-opt "
                             "--list-passes lists them with their options)")
        kinds = {option: kind for option, kind, _ in pass_options(one.name)}
        options = list(kinds)
        for given, values in one.parameters.items():
            option = given.replace("_", "-")
            if option not in options:
                raise UsageError(
                    f"pass {one.name} has no option '{given}'{did_you_mean(given, options)} "
                    f"(its options: {', '.join(options) or 'none'})")
            wrong = option_value_error(one.name, option, values)
            if wrong is not None:
                raise UsageError(wrong)


def option_value_error(name: str, option: str, values: tuple) -> str | None:
    """Why pass `name` refuses `values` (as xDSL's pipeline parser reads them: `x` a str, `3`
    an int, `true` a bool) for `option`, or None. xDSL's own refusal names neither the pass
    nor the option (`Incompatible types: given ('x',), expected <class 'int'>`), and
    planc-opt reported it as an internal error."""
    from types import NoneType
    from typing import get_args, get_type_hints

    from xdsl.utils.hints import isa

    cls = get_all_passes()[name]()
    wanted = get_type_hints(cls)[option.replace("-", "_")]
    # The cases xDSL's `_convert_arg_to_type` accepts: no value for an optional, one value of
    # the type, or a tuple of them.
    if (not values and NoneType in get_args(wanted)) or (len(values) == 1
                                                        and isa(values[0], wanted)) \
            or isa(values, wanted):
        return None
    kind = next(k for o, k, _ in pass_options(name) if o == option)
    shown = ",".join(_spelled(v) for v in values) or "nothing"
    hint = f" (write {float(values[0])!r})" if (
        "float" in kind and len(values) == 1 and type(values[0]) is int) else ""
    return f"pass {name}: option {option} takes a value of type {kind}, got {shown}{hint}"


def _spelled(value: object) -> str:
    """A pipeline value as the pipeline writes it (`true`, `3`, `'x'`)."""
    if isinstance(value, bool):
        return str(value).lower()
    return f"'{value}'" if isinstance(value, str) else str(value)


def _summary(cls: type[ModulePass]) -> str:
    """The first sentence of the pass's docstring (of its module's, where the class has only
    the signature that dataclasses write)."""
    import sys

    doc = cls.__doc__ or ""
    if not doc.strip() or doc.startswith(f"{cls.__name__}("):
        doc = sys.modules[cls.__module__].__doc__ or ""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    paragraph = paragraph.removeprefix(f"`{cls.name}`: ")
    return paragraph[:1].upper() + paragraph.split(". ")[0].rstrip(".")[1:]


def _option_line(option: str, kind: str, default: str | None) -> str:
    """`name: type = default`; an option without a value (xDSL lists its None as `none`,
    which a pipeline would pass as the string "none") is `name: type (optional)`."""
    if default is None or (default == "none" and kind.endswith("| None")):
        return f"{option}: {kind.removesuffix(' | None')} (optional)"
    return f"{option}: {kind} = {default or chr(34) * 2}"


def pass_listing() -> str:
    """Every pass with its first docstring line and its options (`planc-opt --list-passes`
    and the end of `planc-opt --help`)."""
    lines = ["passes (-p 'name{option=value ...},...'):"]
    for name, _, _ in PASSES:
        lines.append(f"  {name:<26} {_summary(get_all_passes()[name]())}")
        options = ", ".join(_option_line(*option) for option in pass_options(name))
        if options:
            lines.append(f"  {'':<26}   {options}")
    return "\n".join(lines) + "\n"
