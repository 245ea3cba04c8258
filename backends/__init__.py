"""Output targets of `planc --target NAME`.

Like the input formats, the table is data: a target's module is imported only when the target
is used, and its command-line flags are declared here so that `planc --help` lists them without
importing anything heavy.

A target module provides:

    pipeline(source_format: str, options) -> str
        the pass pipeline that turns an imported document of that format into what `emit`
        needs ("" for none); raises PlancError when it cannot start from that format;
    emit(module: ModuleOp, options) -> str | dict[str, str]
        the output text, or {relative path: text} for targets that write a directory;
    synthesize(options) -> ModuleOp                                        (optional)
        the IR to emit when no input file is given (e.g. generated collectives);
    KEEPS_UNKNOWN_OPERATORS: tuple[str, ...]                              (optional)
        the source formats from which the target copies ARK operators of unregistered types
        as they are; from any other ARK document such an operator is refused before the
        pipeline runs, with one message whatever the target (`dialects.ark`).

`options` is an instance of the target's options dataclass (`options_type(name)`), made from
the flags the table declares for it: the command line builds it from the flags given (a flag
of another target is a usage error), the Python API (`compiler.api`) from keyword arguments.
`planc check` and `planc simulate` have options of their own (`COMMAND_FLAGS`).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable
from dataclasses import dataclass, field, make_dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Flag:
    """A command-line option some target understands."""

    name: str
    help: str
    default: Any = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    type: type = str
    switch: bool = False
    """A flag without a value (store_true)."""

    @property
    def dest(self) -> str:
        """The option's Python name: `--buffer-size` is `buffer_size`."""
        return self.name.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class TargetInfo:
    name: str
    summary: str
    module: str
    writes_directory: bool = False
    flags: tuple[Flag, ...] = ()
    many_inputs: bool = False
    """Takes several INPUT files of one format (e.g. one ARK model per rank)."""
    sources: tuple[str, ...] = ()
    """The input formats its `pipeline` starts from (what error messages name; a test
    compares it with what `pipeline` accepts)."""

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)


TT_FLAGS = (
    Flag("--arch", "device whose hardware model to use (tt: wormhole_b0 or blackhole; default "
         "wormhole_b0)", metavar="NAME"),
    Flag("--grid", "Tensix core grid GXxGY to partition over (tt; default: the device's "
         "compute grid)", metavar="GXxGY"),
    Flag("--partition", "how output tiles are split over cores (tt; default auto: the "
         "strategy the cost model finds fastest)", default="auto",
         choices=("auto", "row_major", "column_major", "block", "z_order")),
)


TARGETS: tuple[TargetInfo, ...] = (
    TargetInfo("mlir", "the IR after the pipeline, as MLIR text", "backends.mlir",
               sources=("ark-model", "ark-plan", "tt", "gemini-ir", "gemini-layers", "mscclpp"),
               flags=(Flag("--generic", "print the generic op form", switch=True),
                      Flag("--debuginfo", "print source locations (JSON paths)", switch=True))),
    TargetInfo("ark-model", "ARK model file (JSON)", "backends.ark_model",
               sources=("ark-model", "ark-plan")),
    TargetInfo("ark", "ARK plan file (JSON)", "backends.ark_plan",
               sources=("ark-model", "ark-plan"),
               flags=(Flag("--json-layout", "ARK plan text layout (default: denser, ARK's own)",
                           default="denser", choices=("denser", "indented")),
                      Flag("--arch", "device whose hardware model to use (ark: a100, h100 or "
                                     "mi300x, default a100; tt: wormhole_b0 or blackhole, "
                                     "default wormhole_b0)", metavar="NAME"),
                      Flag("--planner", "how to plan a model (ark: planc, the default, or "
                                        "ark-default, ARK's own default planner)",
                           metavar="NAME"),
                      Flag("--ark-format", "ARK plan file version to write: current (ARK main), "
                                           "legacy (before mid-2024: no Architecture key) or "
                                           "torch (ARK's PyTorch branch: every buffer states "
                                           "IsExternal); default current",
                           default="current", choices=("current", "legacy", "torch")))),
    TargetInfo("tt", "Tenstorrent runtime plan (tt.plan.json)", "backends.tt_plan",
               flags=TT_FLAGS, sources=("ark-model", "tt")),
    TargetInfo("tt-metal", "TT-Metalium host program and reader/compute/writer kernels (C++)",
               "backends.tt_metal", writes_directory=True, flags=TT_FLAGS,
               sources=("ark-model", "tt")),
    TargetInfo("gemini", "Gemini scheduler IR (*_stschedule.json)", "backends.gemini",
               sources=("ark-model", "gemini-ir", "gemini-layers"),
               flags=(Flag("--mesh", "Gemini core mesh XxY (default 1x1)", metavar="XxY"),
                      Flag("--buffer-size", "Gemini L2 bytes per core (default 8388608)",
                           metavar="BYTES", type=int),
                      Flag("--dram-bw", "Gemini DRAM bandwidth in GB/s (default 16)",
                           metavar="GBPS", type=float),
                      Flag("--l2-budget", "Gemini L2 bytes per core the schedule plans to use "
                                          "for layer groups and prefetches (default 55%% of "
                                          "--buffer-size)", metavar="BYTES", type=int),
                      Flag("--batch", "Gemini batch size (default: the model's)", metavar="N",
                           type=int))),
    TargetInfo("gemini-layers", "Gemini frontend layer description (JSON)",
               "backends.gemini_layers", sources=("ark-model", "gemini-layers")),
    TargetInfo(
        "mscclpp", "MSCCL++ execution plan (JSON); from a plan, from ARK models (one file per "
        "rank), or generated with --collective", "backends.mscclpp", many_inputs=True,
        sources=("ark-model", "mscclpp"),
        flags=(Flag("--mscclpp-schema", "schema of the written plan (default: seed)",
                    default="seed", choices=("seed", "executor")),
               Flag("--collective", "generate this collective (no INPUT needed)",
                    choices=("allreduce", "allgather", "reducescatter", "broadcast",
                             "alltoall")),
               Flag("--ranks", "number of GPUs of the generated collective", type=int,
                    metavar="N"),
               Flag("--algorithm", "ring, allpairs, oneshot (allreduce), nvls (switch), or "
                    "auto: the fastest under the cost model at --message-size",
                    metavar="NAME"),
               Flag("--protocol", "Simple (signals) or LL (packets)",
                    choices=("Simple", "LL")),
               Flag("--instances", "parallel copies of the algorithm, each on its own thread "
                    "blocks and chunks (default 1)", type=int, metavar="K"),
               Flag("--root", "root rank of a broadcast (default 0)", type=int, metavar="R"),
               Flag("--out-of-place", "generate an out-of-place collective", switch=True),
               Flag("--message-size", "message size for the cost model, e.g. 1MB, 64K, 4096 "
                    "(default 1MB)", metavar="BYTES"),
               Flag("--mscclpp-hw", "GPU whose description the cost model uses (default "
                    "h100; see devices)", default="h100", metavar="GPU"))),
    TargetInfo("cpu", "C++17 program running an ARK plan on CPU threads (a directory)",
               "backends.cpu", writes_directory=True, sources=("ark-model", "ark-plan")),
    TargetInfo("cuda", "CUDA host program and persistent kernel of an ARK plan (a directory)",
               "backends.cuda", writes_directory=True, sources=("ark-model", "ark-plan"),
               flags=(Flag("--cuda-arch", "GPU architecture of the emitted build files, e.g. "
                           "sm_90 (default: the plan's Architecture, else sm_80)",
                           metavar="SM"),)),
)


# The cost models' parameters that `planc simulate` shares with the targets that plan for them.
_SIMULATE_FLAGS = {f.name: f for t in TARGETS for f in t.flags
                   if f.name in ("--dram-bw", "--message-size", "--mscclpp-hw")}

COMMAND_FLAGS: dict[str, tuple[Flag, ...]] = {
    "check": (
        Flag("--strict", "treat warnings as errors (exit 1 on any finding)", switch=True),
        Flag("--ark-runtime", "ARK plans: whose task distribution to check: ark (ARK's "
             "task_seq, the default: rotation taken modulo the grid) or planc (the format's "
             "formula, what planc's CPU and CUDA programs run)", default="ark",
             choices=("ark", "planc")),
        Flag("--arch", "the device whose memories the capacity rules check against: TT plans "
             "(L1, DRAM banks; default wormhole_b0), ARK plans (device memory, SRAM, "
             "processors; default: the plan's Architecture), MSCCL++ plans (device memory at "
             "the largest message; default: none)", metavar="NAME"),
        Flag("--model", "prove that the document computes this model's outputs from its "
             "inputs (an ARK model file or an ONNX model; tensors matched by ARK buffer id): "
             "ARK plans, TT plans and ARK models", metavar="MODEL"),
    ),
    "plot": (
        Flag("--arch", "device whose cost model times the plan (ark plans: a100, h100 or "
             "mi300x, default the plan's own; tt: wormhole_b0 or blackhole, default "
             "wormhole_b0)", metavar="NAME"),
        _SIMULATE_FLAGS["--message-size"], _SIMULATE_FLAGS["--mscclpp-hw"],
    ),
    "simulate": (
        Flag("--trace", "write the modeled schedule as a Chrome trace (Trace Event JSON, for "
             "ui.perfetto.dev) to this file", metavar="FILE"),
        Flag("--seed", "seed of the random inputs (default 0)", default=0, type=int,
             metavar="N"),
        Flag("--arch", "device whose cost model to use (ark plans: a100, h100 or mi300x; tt: "
             "wormhole_b0 or blackhole; default: the plan's own)", metavar="NAME"),
        Flag("--cost-only", "only model time and memory, skip the tile-by-tile functional run "
             "(for plans too large to execute with numpy)", switch=True),
        Flag("--full-run-limit", "ARK plans: run every tile when the plan has at most this "
             "many task executions (default 5000); above, prove the schedule symbolically and "
             "compute a stated sample of tiles", type=int, metavar="N"),
        *_SIMULATE_FLAGS.values(),
    ),
    "schema": (),
}
"""The options of `planc check`, `simulate`, `plot` and `schema` (the flags of the commands)."""

COMMAND_FORMATS: dict[str, dict[str, tuple[str, ...]]] = {
    "check": {"ark_runtime": ("ark-plan",), "arch": ("ark-plan", "tt", "mscclpp"),
              "model": ("ark-plan", "tt", "ark-model")},
    "plot": {"arch": ("ark-plan", "tt"), "message_size": ("mscclpp",),
             "mscclpp_hw": ("mscclpp",)},
    "simulate": {
        "seed": ("ark-model", "ark-plan", "tt", "gemini-ir", "gemini-layers"),
        "arch": ("ark-plan", "tt"),
        "cost_only": ("ark-plan", "tt", "gemini-ir"),
        "full_run_limit": ("ark-plan",),
        "dram_bw": ("gemini-ir",),
        "message_size": ("mscclpp",),
        "mscclpp_hw": ("mscclpp",),
    },
}
"""The document formats whose check, picture or simulator reads each command option (those
not listed apply to every format): given for another format, an option would be silently
ignored, so it is an error (`refuse_ignored`)."""


def refuse_ignored(command: str, given: Iterable[str], document_format: str) -> None:
    """A UsageError for the first option in `given` (option names, `message_size`) that
    `planc COMMAND` ignores on documents of `document_format`."""
    from ground.diagnostics import ArgumentError, one_of

    readers = COMMAND_FORMATS.get(command, {})
    for name in given:
        formats = readers.get(name)
        if formats is not None and document_format not in formats:
            flag = "--" + name.replace("_", "-")
            raise ArgumentError(f"{flag} does not apply to {document_format} documents: planc "
                                f"{command} reads it for {one_of(formats)} documents only")


def target_named(name: str) -> TargetInfo | None:
    return next((t for t in TARGETS if t.name == name), None)


def cannot_make(error: Any) -> Any:
    """`error` (an `UnsupportedInput` a target's `pipeline` raised) with which formats the
    target takes and which targets take the document's."""
    from ground.diagnostics import PlancError, one_of

    takes = f"--target {error.target} takes {one_of(target_named(error.target).sources)} " \
            "documents"
    if not error.source_format:
        return PlancError(f"{error.message} ({takes})")
    others = [t.name for t in TARGETS if error.source_format in t.sources and t.name != "mlir"]
    return PlancError(f"{error.message} ({takes}; {error.source_format} documents go to "
                      f"--target {one_of([*others, 'mlir'])})")


def all_flags() -> list[Flag]:
    """Every target and command flag once, in table order (the first declaration of a name
    wins: flags shared by several targets mean the same thing in each)."""
    seen: dict[str, Flag] = {}
    for flags in (*(t.flags for t in TARGETS), *COMMAND_FLAGS.values()):
        for flag in flags:
            seen.setdefault(flag.name, flag)
    return list(seen.values())


def flags_of(name: str) -> tuple[Flag, ...]:
    """The flags of target or command `name`."""
    if name in COMMAND_FLAGS:
        return COMMAND_FLAGS[name]
    target = target_named(name)
    if target is None:
        raise KeyError(name)
    return target.flags


def taken_by(flag: Flag) -> str:
    """`it is one of --target gemini`: the hint after a flag given where it does not belong
    (the command line's and the API's)."""
    return f"it is one of {', '.join(takers(flag))}"


def takers(flag: Flag) -> list[str]:
    """The targets and commands that take `flag` (for error messages)."""
    targets = [f"--target {t.name}" for t in TARGETS if flag.name in {f.name for f in t.flags}]
    commands = [f"planc {c}" for c, flags in COMMAND_FLAGS.items()
                if flag.name in {f.name for f in flags}]
    return targets + commands


@functools.cache
def options_type(name: str) -> type:
    """The options dataclass of target or command `name`, one field per flag it takes."""
    fields = [(f.dest, bool if f.switch else f.type | None,
               field(default=False if f.switch else f.default, metadata={"help": f.help}))
              for f in flags_of(name)]
    class_name = "".join(part.title() for part in name.replace("-", "_").split("_"))
    cls = make_dataclass(f"{class_name}Options", fields, frozen=True)
    cls.__doc__ = f"Options of `{name}` (the flags `planc` takes for it)."
    return cls


def make_options(name: str, **values: Any) -> Any:
    """Options of target or command `name` from keyword values, checked like the command line
    checks flags: unknown names, values of another type and values outside a flag's choices
    are `ArgumentError`s naming the option (and, for a misplaced one, who takes it)."""
    from ground.diagnostics import ArgumentError, did_you_mean

    flags = {f.dest: f for f in flags_of(name)}
    for key, value in values.items():
        flag = flags.get(key)
        if flag is None:
            known = ", ".join(flags) or "none"
            other = next((f for f in all_flags() if f.dest == key), None)
            hint = (taken_by(other) if other else did_you_mean(key, flags).removeprefix(": "))
            raise ArgumentError(f"{name} has no option '{key}' ("
                                + (f"{hint}; " if hint else "") + f"its options: {known})",
                                hint=hint or None)
        expected = _option_type(flag)
        if value is not None and (not isinstance(value, expected) or (
                isinstance(value, bool) and bool not in expected)):
            raise ArgumentError(f"option '{key}' of {name} must be "
                                f"{_TYPE_NAMES[expected[-1]]}, got {value!r}")
        if flag.choices and value is not None and value not in flag.choices:
            raise ArgumentError(f"option '{key}' of {name} must be one of "
                                f"{', '.join(flag.choices)}, got {value!r}")
    return options_type(name)(**values)


def _option_type(flag: Flag) -> tuple[type, ...]:
    """The Python types a value of `flag` may have (a whole number does for a float)."""
    if flag.switch:
        return (bool,)
    if flag.type is float:
        return (int, float)
    return (flag.type,)


_TYPE_NAMES = {bool: "True or False", int: "an integer", float: "a number", str: "a string"}
