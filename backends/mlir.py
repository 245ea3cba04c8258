"""`--target mlir`: the IR itself, for reading, lit tests and `planc-opt` round trips."""

from __future__ import annotations

import io
from argparse import Namespace

from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer

KEEPS_UNKNOWN_OPERATORS = ("ark-model", "ark-plan")
"""The IR is printed as it is, operators of types ARK does not register included."""


def pipeline(source_format: str, options: Namespace) -> str:
    return ""


def print_module(module: ModuleOp, *, generic: bool = False, debuginfo: bool = False) -> str:
    stream = io.StringIO()
    Printer(stream=stream, print_generic_format=generic,
            print_debuginfo=debuginfo).print_op(module)
    return stream.getvalue() + "\n"


def emit(module: ModuleOp, options: Namespace) -> str:
    return print_module(module, generic=getattr(options, "generic", False),
                        debuginfo=getattr(options, "debuginfo", False))
