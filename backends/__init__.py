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
        the IR to emit when no input file is given (e.g. generated collectives).

`options` is the parsed command line (an argparse namespace holding every flag below).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
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


@dataclass(frozen=True)
class TargetInfo:
    name: str
    summary: str
    module: str
    writes_directory: bool = False
    flags: tuple[Flag, ...] = ()

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)


TARGETS: tuple[TargetInfo, ...] = (
    TargetInfo("mlir", "the IR after the pipeline, as MLIR text", "backends.mlir",
               flags=(Flag("--generic", "print the generic op form", switch=True),
                      Flag("--debuginfo", "print source locations (JSON paths)", switch=True))),
    TargetInfo("ark-model", "ARK model file (JSON)", "backends.ark_model"),
    TargetInfo("ark", "ARK plan file (JSON)", "backends.ark_plan",
               flags=(Flag("--json-layout", "ARK plan text layout (default: denser, ARK's own)",
                           default="denser", choices=("denser", "indented")),)),
    TargetInfo("cpu", "C++17 program running an ARK plan on CPU threads (a directory)",
               "backends.cpu", writes_directory=True),
    TargetInfo("cuda", "CUDA host program and persistent kernel of an ARK plan (a directory)",
               "backends.cuda", writes_directory=True,
               flags=(Flag("--cuda-arch", "GPU architecture of the emitted build files, e.g. "
                           "sm_90 (default: the plan's Architecture, else sm_80)",
                           metavar="SM"),)),
)


def target_named(name: str) -> TargetInfo | None:
    return next((t for t in TARGETS if t.name == name), None)


def all_flags() -> list[Flag]:
    """Every target flag once, in table order (the first declaration of a name wins)."""
    seen: dict[str, Flag] = {}
    for target in TARGETS:
        for flag in target.flags:
            seen.setdefault(flag.name, flag)
    return list(seen.values())
