"""`planc-opt`: xDSL's opt driver with every planc dialect, pass, frontend and target.

    planc-opt FILE.mlir -p 'ark-compress' [-t ark-model]
    planc-opt model.json -p ... (JSON inputs go through planc's format detection)

It is the tool of lit tests and pass-pipeline scripting. Registration is lazy: dialects and
passes load on first use. Only planc's passes and targets are offered (plus xDSL's `mlir`
printer): xDSL's own 160 passes and its LLVM/riscv targets do not apply to planc's dialects.
xDSL's flag spellings are kept and planc's are accepted as aliases (`--pipeline` for `-p`,
`--generic` for `--print-op-generic`, `--debuginfo` for `--print-debuginfo`,
`--print-ir-after-all` for `--print-between-passes`), so one command line works in both tools.
Every user error is one line, `planc-opt: error: FILE:LINE:COL: message` for IR text, and exit
code 1; a bug in planc-opt exits 2, running out of memory 3. With `-o FILE`, FILE is written
(atomically) only when the whole run succeeded.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import io
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO, NoReturn

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.target import Target
from xdsl.xdsl_opt_main import xDSLOptMain

from backends import TARGETS, TargetInfo, make_options
from dialects import get_all_dialects
from ground.diagnostics import PlancError, UsageError
from passes import get_all_passes, pass_listing


def _read_input(main: xDSLOptMain, stream: IO[bytes]) -> tuple[str, bytes]:
    """(the input's name, its bytes): an endless input (a pipe, a device) is refused."""
    from ground.json_reader import MAX_INPUT_BYTES, read_at_most

    name = main.get_input_name()
    data = read_at_most(stream, MAX_INPUT_BYTES)
    if len(data) > MAX_INPUT_BYTES:
        raise PlancError(f"{name}: larger than the {MAX_INPUT_BYTES:,} bytes planc-opt reads")
    return name, data


def _import_json(main: xDSLOptMain, stream: IO[bytes]) -> ModuleOp:
    from frontends import detect_format
    from ground.json_reader import parse_json

    name, data = _read_input(main, stream)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PlancError("not a UTF-8 text file", file=name) from None
    doc = parse_json(text)
    fmt = detect_format(doc.value)
    if fmt is None:
        raise PlancError("cannot tell the format of this JSON document", path="$")
    return fmt.read(doc)


def _import_mlir(main: xDSLOptMain, stream: IO[bytes]) -> ModuleOp:
    """MLIR text through planc's reader (`dialects.locations.parse_ir`), as xDSL's reader
    with `main`'s context and flags: bytes that are not UTF-8, deep nesting and over-long
    literals are one-line errors as in `planc FILE.mlir`, and an endless input is refused."""
    from dialects import dialect_names
    from dialects.locations import parse_ir

    name, data = _read_input(main, stream)
    return parse_ir(main.ctx, data, name, implicit_module=not main.args.no_implicit_module,
                    xdsl_errors=True, make_parser=main.locating_parser,
                    own_dialects=dialect_names())


def _planc_target(info: TargetInfo) -> Callable[[], type[Target]]:
    """An xDSL target running planc target `info`'s emitter (single-file targets only)."""

    def factory() -> type[Target]:
        @dataclasses.dataclass(frozen=True)
        class PlancTarget(Target):
            name = info.name

            def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
                product = info.load().emit(module, make_options(info.name))
                if isinstance(product, str):
                    output.write(product)
                    return
                # A directory target: every file, under a header line naming it (for lit).
                for path, text in product.items():
                    output.write(f"// ===== {path} =====\n{text}")

        return PlancTarget

    return factory


def _mlir_target() -> type[Target]:
    """xDSL's MLIR printer ending the text with one newline (xDSL's prints an empty line more),
    so that `planc-opt` and `planc` print the same IR identically."""
    from xdsl.targets.mlir import MLIRTarget

    @dataclasses.dataclass(frozen=True)
    class PlancMLIRTarget(MLIRTarget):
        def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
            text = io.StringIO()
            super().emit(ctx, module, text)
            output.write(text.getvalue().rstrip("\n") + "\n")

    return PlancMLIRTarget


class _Collected(io.StringIO):
    """The text for `-o FILE`, kept when xDSL closes its output stream: the file is written
    (atomically) only when the whole run succeeded. xDSL's own `open(FILE, "w")` created or
    emptied the file before the input was even read, so every failing run left an empty
    file in place of the user's."""

    text: str | None = None

    def close(self) -> None:
        self.text = self.getvalue()
        super().close()


class PlancOptMain(xDSLOptMain):
    collected: _Collected | None = None

    def prepare_output(self) -> IO[str]:
        if self.args.output_file is None:
            return sys.stdout
        self.collected = _Collected()
        return self.collected

    def run(self) -> None:
        from compiler.output import write_file_atomic

        if self.args.output_file is not None:
            refuse_writing_input(self.args.output_file, self.args.input_file)
        super().run()
        if self.collected is not None:
            write_file_atomic(self.args.output_file, self.collected.text or "")

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        for name, factory in get_all_dialects().items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        self.available_targets["mlir"] = _mlir_target
        for info in TARGETS:
            if info.name != "mlir":
                self.available_targets[info.name] = _planc_target(info)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument("--list-passes", action=_ListPasses,
                                help="list every pass with its options, and exit")
        # --help ends with the same list, made only when asked (it imports every pass).
        usage = arg_parser.format_help
        arg_parser.format_help = lambda: f"{usage()}\n{pass_listing()}"
        # A wrong option is one line and exit 1, as in `planc` (argparse printed its whole
        # usage and exited 2, planc-opt's code for internal errors).
        arg_parser.prog = "planc-opt"
        arg_parser.error = _one_line_usage_error  # type: ignore[method-assign]
        # planc's spellings of the same flags (see the module docstring).
        for option, alias in ALIASES.items():
            action = next(a for a in arg_parser._actions if option in a.option_strings)
            action.option_strings.append(alias)
            arg_parser._option_string_actions[alias] = action

    def setup_pipeline(self) -> None:
        """xDSL's pipeline, after planc's check of its pass and option names (which names
        the nearest ones)."""
        from passes import check_pipeline

        try:
            check_pipeline(self.args.passes)
        except UsageError as e:
            raise UsageError(f"-p: {e.message}") from None
        super().setup_pipeline()

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        self.available_frontends["json"] = lambda stream: _import_json(self, stream)
        self.available_frontends["mlir"] = lambda stream: _import_mlir(self, stream)
        self.positions: dict[int, tuple[Operation, str]] = {}
        """Where each parsed op starts (`FILE:LINE:COL`), by id (the op is kept alive)."""

    def locating_parser(self, context: Context, text: str, name: str) -> Parser:
        """xDSL's parser, noting where each op starts (for `verifier_error`)."""
        parser = _LocatingParser(context, text, name=name)
        parser.positions = self.positions
        return parser

    def apply_passes(self, prog: ModuleOp) -> None:
        """xDSL's verification (before and after the passes) reports no op; this names the
        first op that fails, at its place in the input."""
        from xdsl.utils.exceptions import DiagnosticException, VerifyException

        try:
            super().apply_passes(prog)
        except (VerifyException, DiagnosticException) as e:
            if self.args.verify_diagnostics:
                raise       # xDSL prints it, for lit tests of verifiers
            raise self.verifier_error(prog, e) from None

    def verifier_error(self, module: ModuleOp, error: Exception) -> PlancError:
        """`FILE:LINE:COL: 'op.name' op: message` for the first op (outermost first) that
        fails its own verification; ops that a pass made are placed at their closest parsed
        ancestor, and ops imported from JSON at their JSON path."""
        from xdsl.utils.exceptions import DiagnosticException, VerifyException

        from dialects.locations import source_path

        for op in module.walk():
            try:
                op.verify(verify_nested_ops=False)
            except (VerifyException, DiagnosticException) as e:
                message = " ".join(str(e).split("\n\n", 1)[0].split())
                return PlancError(f"{self._place(op)}'{op.name}' op: {message}",
                                  path=None if self._place(op) else source_path(op))
        message = " ".join(str(error).split("\n\n", 1)[0].split())
        return PlancError(f"verification failed: {message}")

    def _place(self, op: Operation | None) -> str:
        while op is not None:
            if id(op) in self.positions and self.positions[id(op)][0] is op:
                return f"{self.positions[id(op)][1]}: "
            op = op.parent_op()
        return ""


def refuse_writing_input(output: str, input_file: str | None) -> None:
    """`-o` naming the input (through any spelling of its path) would replace it."""
    if output == "":
        raise PlancError("-o '': an empty file name; give a file name")
    if input_file and os.path.exists(output) and os.path.exists(input_file) and \
            os.path.samefile(output, input_file):
        raise PlancError(f"-o {output} is the input {input_file}: planc-opt does not write "
                         "over its input; choose another output")


def _one_line_usage_error(message: str) -> NoReturn:
    sys.stderr.write(f"planc-opt: error: {' '.join(message.split())} (see planc-opt --help)\n")
    sys.exit(1)


class _ListPasses(argparse.Action):
    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help=kwargs.get("help"))

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(pass_listing())
        parser.exit()


class _LocatingParser(Parser):
    """xDSL's parser, noting where each operation starts (xDSL keeps no position of an op,
    so its verification errors could only print the whole module)."""

    positions: dict[int, tuple[Operation, str]]

    def parse_operation(self) -> Operation:
        start = self._current_token.span.get_location()
        op = super().parse_operation()
        self.positions[id(op)] = (op, str(start))
        return op


ALIASES = {"--passes": "--pipeline", "--print-op-generic": "--generic",
           "--print-debuginfo": "--debuginfo", "--print-between-passes": "--print-ir-after-all"}


def main(args: Sequence[str] | None = None) -> None:
    from compiler.process import guard_standard_streams

    guard_standard_streams()
    sys.exit(run(args))


def run(args: Sequence[str] | None = None) -> int:
    """planc-opt with `args`; returns the exit code (a wrong option exits 1 through SystemExit)."""
    from compiler.process import one_line_warnings

    try:
        with one_line_warnings("planc-opt"):
            PlancOptMain(description="planc modular optimizer driver", args=args).run()
        return 0
    except KeyboardInterrupt:
        # One line, as planc says it (the exception went on to Python's traceback).
        sys.stderr.write("planc-opt: interrupted\n")
        return 130
    except SystemExit:
        raise
    except MemoryError:
        if os.environ.get("PLANC_DEBUG"):
            raise
    except BaseException as e:  # noqa: BLE001 -- sorted into user errors and bugs just below
        message = user_error(e)
        if message is None:
            if os.environ.get("PLANC_DEBUG"):
                raise
            message = (f"internal error: {type(e).__name__}: {' '.join(str(e).split())[:500]}"
                       " (set PLANC_DEBUG=1 for a traceback)")
            sys.stderr.write(f"planc-opt: {message}\n")
            return 2
        sys.stderr.write(f"planc-opt: error: {message}\n")
        return 1
    # Out of memory, reported once the exception (and the frames it held) is gone.
    from compiler.process import out_of_memory

    given = args if args is not None else sys.argv[1:]
    return out_of_memory("planc-opt", [a for a in given if os.path.isfile(a)])


def user_error(e: BaseException) -> str | None:
    """The one-line message of an error in planc-opt's input or command line; None for a bug."""
    from xdsl.utils.exceptions import (
        ArgSpecParseError,
        DiagnosticException,
        ParseError,
        VerifyException,
    )

    from dialects.locations import parse_error_message

    if isinstance(e, PlancError):
        return str(e)
    if isinstance(e, ParseError):
        # The first line says where, as every error does; then xDSL's snippet of the line
        # with a caret under the fault, as xdsl-opt and mlir-opt show it.
        snippet = e.span.print_with_context(None).split("\n", 1)[1].rstrip("\n")
        return f"{parse_error_message(e)}\n{snippet}"
    if isinstance(e, OSError) and e.filename:
        return f"{e.filename}: cannot read: {e.strerror}"
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO,
                                              errno.EBADF):
        # `-o /dev/full`, a full disk, standard output closed (`planc-opt ... >&-`)
        return f"cannot write the output: {e.strerror}"
    if isinstance(e, VerifyException | DiagnosticException):
        return "verification failed: " + " ".join(str(e).split("\n\n", 1)[0].split())[:500]
    if isinstance(e, ArgSpecParseError):
        return f"-p: {' '.join(str(e).split())}"
    if isinstance(e, ValueError) and str(e).startswith(("Unrecognized passes",
                                                         "Provided arguments",
                                                         "Unrecognized file extension")):
        known = ", ".join(sorted(get_all_passes()))
        return f"-p: {e}" + (f" (known passes: {known})" if "passes" in str(e) else "")
    return None


if __name__ == "__main__":
    main()
