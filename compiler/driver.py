"""`planc`: the command-line compiler.

    planc INPUT... --target NAME [-o OUTPUT] [--pipeline SPEC] [--print-ir-after-all] [flags]
    planc check INPUT [--json] [--model MODEL]
    planc simulate INPUT [--json]
    planc run FILE --inputs IN.npz [--weights MODEL.onnx] -o OUT.npz
    planc schema [NAME [FILE...]]

The input format is detected from the document (or named with --from); `.mlir` inputs are IR
printed by planc or planc-opt. The target's default pipeline (or --pipeline) transforms the IR,
and the target writes the result. Targets that take several documents of one format (the
ARK models of all ranks, for an MSCCL++ plan) accept INPUT repeated; they receive one module
holding every document's top-level op, each marked with the file it came from (`planc.file`).
Every user error is one line on stderr,
`planc: error: FILE: $.json.path: message`, with exit code 1 and no output file; an internal
error (a bug in planc) exits with 2, running out of memory with 3 (`compiler.process`).

Only argparse and the data tables are imported at start-up, so `planc --help` is instant.
"""

from __future__ import annotations

import argparse
import errno
import gc
import io
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from backends import (
    TARGETS,
    TargetInfo,
    all_flags,
    flags_of,
    make_options,
    refuse_ignored,
    taken_by,
    takers,
    target_named,
)
from compiler.pipeline import load_input, load_inputs, lower, without_garbage_collection
from frontends import FORMATS, load_hook
from ground.diagnostics import ArgumentError, PlancError, UsageError, did_you_mean

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

PROG = "planc"
LOG = logging.getLogger("planc.pipeline")
SUBCOMMANDS = ("check", "simulate", "run", "plot", "tune", "schema")


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def _listing() -> str:
    targets = "\n".join(f"  {t.name:<14} {t.summary}" for t in TARGETS)
    formats = "\n".join(f"  {f.name:<14} {f.summary}" for f in FORMATS)
    return (f"targets:\n{targets}\n\ninput formats (detected, or --from NAME):\n{formats}\n"
            f"  {'(*.onnx)':<14} ONNX models: ARK models, or Gemini layer graphs for CNNs "
            "(planc[onnx])\n\n"
            f"other commands:\n  {PROG} check INPUT [--json]      import and verify\n"
            f"  {PROG} simulate INPUT [--json]   functional check and modeled time\n"
            f"  {PROG} run FILE --inputs IN.npz -o OUT.npz  compute it on your inputs\n"
            f"  {PROG} plot INPUT -o OUT.png     timeline, core map and memory pictures\n"
            f"  {PROG} tune MODEL... -t T -o DIR  explore the target's decisions (--help)\n"
            f"  {PROG} schema [NAME [FILE...]]  a format's JSON Schema, or check files "
            "against it")


class ArgumentParser(argparse.ArgumentParser):
    """argparse with planc's promise for bad input: a wrong option is one line and exit 1
    (argparse prints its whole usage and exits 2, the code planc keeps for internal errors)."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """argparse's refusal of a value outside an option's choices, with the nearest choice
        (`--collective allreduc`: did you mean allreduce?), as planc's own names get."""
        if action.choices is not None and value not in action.choices:
            from ground.diagnostics import did_you_mean

            choices = [str(c) for c in action.choices]
            raise argparse.ArgumentError(
                action, f"invalid choice: '{value}'{did_you_mean(str(value), choices)} "
                f"(choose from {', '.join(choices)})")
        super()._check_value(action, value)


def _add_input_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="source_format", metavar="FORMAT",
                        choices=[f.name for f in FORMATS],
                        help="the input's format, when detection should not decide")


def _add_common_options(parser: argparse.ArgumentParser, json_help: str | None) -> None:
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress line on stderr")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log each step's time on stderr (the `planc` logger at INFO; "
                             "-vv: DEBUG)")
    if json_help:
        parser.add_argument("--json", action="store_true", help=json_help)


def configure_output(args: argparse.Namespace) -> None:
    """-q silences progress lines; -v sends the `planc` loggers to stderr. Library users
    configure the `planc` logger themselves; planc adds its handler only when asked."""
    from ground import progress

    progress.QUIET = bool(getattr(args, "quiet", False))
    logger = logging.getLogger("planc")
    logger.removeHandler(_STDERR_LOG)
    verbose = getattr(args, "verbose", 0)
    if verbose:
        # The current stderr (tests replace it). Not `setStream`, which first flushes the
        # previous stream: in-process runs had closed it, an internal error.
        _STDERR_LOG.stream = sys.stderr
        logger.addHandler(_STDERR_LOG)
        logger.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)


_STDERR_LOG = logging.StreamHandler()
_STDERR_LOG.setFormatter(logging.Formatter(f"{PROG}: %(message)s"))


def error_json(e: PlancError) -> dict[str, Any]:
    """An error as `--json` prints it."""
    return {"ok": False, "errors": [{"file": e.file, "path": e.path, "rule": e.rule,
                                     "message": " ".join(e.message.split())}]}


def _add_flags(parser: argparse.ArgumentParser, command: str | None = None) -> None:
    """Every target's and command's flags; which of them a command line may use depends on
    its target or command (`scoped_options`). Absent flags stay out of the namespace.

    A command's parser (`planc check`) shows its own flags only: the others are still read,
    so that one given says who takes it, but its help listed some forty that it refuses."""
    if command is not None:
        own = parser.add_argument_group(f"options of {PROG} {command}")
        for flag in flags_of(command):
            _add_flag(own, flag, flag.help)
        shown = {f.name for f in flags_of(command)}
        for flag in all_flags():
            if flag.name not in shown:
                _add_flag(parser, flag, argparse.SUPPRESS)
        return
    group = parser.add_argument_group(
        "target and command options (each valid only with the targets or commands that take "
        "it: see its help)")
    for flag in all_flags():
        where = ", ".join(takers(flag))
        if flag.switch:
            group.add_argument(flag.name, action="store_true", default=argparse.SUPPRESS,
                               help=f"{flag.help} [{where}]")
        else:
            group.add_argument(flag.name, default=argparse.SUPPRESS, choices=flag.choices,
                               metavar=flag.metavar, type=flag.type,
                               help=f"{flag.help} [{where}]")


def _add_flag(group: Any, flag: Any, help_text: str) -> None:
    if flag.switch:
        group.add_argument(flag.name, action="store_true", default=argparse.SUPPRESS,
                           help=help_text)
    else:
        group.add_argument(flag.name, default=argparse.SUPPRESS, choices=flag.choices,
                           metavar=flag.metavar, type=flag.type, help=help_text)


def scoped_options(args: argparse.Namespace, name: str, label: str) -> Any:
    """The options of target or command `name` from the flags given on the command line; a
    flag that `name` does not take is a usage error naming those that do."""
    own = {f.dest for f in flags_of(name)}
    given = {f.dest: f for f in all_flags() if hasattr(args, f.dest)}
    for dest, flag in given.items():
        if dest not in own:
            raise ArgumentError(f"{flag.name} is not an option of {label} ({taken_by(flag)})",
                                hint=taken_by(flag))
    return make_options(name, **{dest: getattr(args, dest) for dest in given})


def given_options(args: argparse.Namespace) -> list[str]:
    """The target and command options given on the command line (their Python names)."""
    return [f.dest for f in all_flags() if hasattr(args, f.dest)]


def compile_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Compile execution plans for accelerator runtimes.", epilog=_listing())
    parser.add_argument("input", nargs="*", metavar="INPUT",
                        help="input document (JSON, or .mlir printed by planc); targets that "
                             "combine documents (mscclpp: one ARK model per rank) take several")
    parser.add_argument("-t", "--target", default="mlir", metavar="NAME",
                        help="output format (default: mlir); see the list below")
    parser.add_argument("-o", "--output", metavar="OUTPUT",
                        help="output file, or directory for source targets (default: stdout)")
    parser.add_argument("--pipeline", metavar="SPEC",
                        help="pass pipeline to run instead of the target's, e.g. "
                             "'ark-compress{renumber=false}'")
    parser.add_argument("--print-ir-after-all", action="store_true",
                        help="print the IR to stderr after every pass")
    parser.add_argument("--verify-each", action="store_true",
                        help="verify the IR after every pass, not only the result (names the "
                             "pass that broke it)")
    parser.add_argument("--version", action=_VersionAction)
    _add_common_options(parser, "with -o: print a JSON summary on stdout (output, size, the "
                                "time of each step and pass)")
    _add_input_options(parser)
    _add_flags(parser)
    return parser


def tune_parser() -> argparse.ArgumentParser:
    from compiler.tune_search import OBJECTIVES, STRATEGIES

    parser = ArgumentParser(
        prog=f"{PROG} tune", description="Explore a target's decisions (a declared search "
        "space, planc's own decision first), score every candidate with the cost model, and "
        "verify the best with planc check --strict and planc simulate. Results go to "
        "DIR/tune.sqlite (an interrupted run resumes), the best document to DIR/best.json.")
    parser.add_argument("input", nargs="*", metavar="MODEL",
                        help="models to tune (none for --target mscclpp with --collective)")
    parser.add_argument("-t", "--target", help="ark, tt, gemini or mscclpp")
    parser.add_argument("-o", "--output", metavar="DIR", help="results directory")
    parser.add_argument("--arch", action="append", metavar="NAME",
                        help="device to tune for (repeat for several)")
    parser.add_argument("--space", metavar="SPEC", help="dimensions replacing or added to the "
                        "target's space: 'name=v1,v2;sched-partition.split_k=true,false'")
    parser.add_argument("--budget", type=int, default=64, metavar="N",
                        help="candidates per model and architecture (default 64)")
    parser.add_argument("--strategy", default="auto", choices=STRATEGIES,
                        help="auto: exhaustive when the space fits the budget, else tpe")
    parser.add_argument("--objective", default="time", choices=OBJECTIVES)
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="local worker processes (default 1: this process)")
    parser.add_argument("--ray", metavar="ADDRESS", help="run on Ray: 'local' or a cluster "
                        "address (needs planc[ray])")
    parser.add_argument("--tune-seed", dest="tune_seed", type=int, default=0, metavar="N",
                        help="seed of the random and tpe strategies")
    parser.add_argument("--verify", type=int, default=3, metavar="K",
                        help="how many of the best to check and simulate (default 3)")
    parser.add_argument("--report", metavar="DIR", help="print the best configurations of "
                        "the results in DIR instead of tuning")
    parser.add_argument("--plot", metavar="IMAGE", help="draw every candidate and the "
                        "time/memory front (needs planc[plot]): of the study just run, or with "
                        "--report of the results in DIR")
    _add_common_options(parser, "print the results as JSON on stdout: per study the best, "
                                "planc's default and the failures (each reason's count and "
                                "first message)")
    _add_input_options(parser)
    group = parser.add_argument_group("fixed target options (not explored)")
    # The targets' options only: the commands' (--trace, --seed, --cost-only ...) were listed
    # here, and refused when given.
    targets = {f.name for t in TARGETS for f in t.flags}
    for flag in all_flags():
        if flag.name == "--arch" or flag.name not in targets:
            continue
        if flag.switch:
            group.add_argument(flag.name, action="store_true", default=argparse.SUPPRESS,
                               help=flag.help)
        else:
            group.add_argument(flag.name, default=argparse.SUPPRESS, choices=flag.choices,
                               metavar=flag.metavar, type=flag.type, help=flag.help)
    return parser


def tune_command(args: argparse.Namespace) -> int:
    from dataclasses import asdict
    from pathlib import Path

    from compiler import tune

    if args.report:
        if args.json and args.plot:
            tune.report(args.report, plot=args.plot)
        print(tune.report_json(args.report) if args.json else
              tune.report(args.report, plot=args.plot))
        return 0
    if not args.target or not args.output:
        raise UsageError("planc tune needs --target and -o DIR (or --report DIR)")
    tune.check_target(args.target)
    archs = args.arch or [None]
    del args.arch        # explored (one study each), not a fixed option
    fixed = asdict(scoped_options(args, args.target, f"--target {args.target}"))
    defaults = asdict(make_options(args.target))
    fixed = {k: v for k, v in fixed.items() if v != defaults[k]}
    try:
        results = tune.tune(tune.TuneOptions(
            target=args.target, models=list(args.input), archs=archs,
            out=Path(args.output), space=args.space, budget=args.budget,
            strategy=args.strategy, objective=args.objective, workers=args.workers,
            ray=args.ray, seed=args.tune_seed, verify=args.verify, fixed=fixed,
            progress=not args.quiet))
    except KeyboardInterrupt:
        # One line (the workers ignore Ctrl-C: see tune_search), after the progress line.
        sys.stderr.write(f"{chr(10) if sys.stderr.isatty() else ''}{PROG}: interrupted; the "
                         f"candidates evaluated so far are in {Path(args.output) / 'tune.sqlite'}"
                         ": the same command resumes\n")
        return 130
    text = tune.dump(results) if args.json else tune.summary(results, args.objective)
    if args.plot:       # it was ignored without --report
        drawn = tune.report(args.output, plot=args.plot)
        if not args.json:
            text += "\n" + drawn.splitlines()[-1]
    print(text)
    return 0 if all(r.succeeded for r in results) else 1


def parser_for(command: str) -> argparse.ArgumentParser:
    """The parser of a subcommand (`planc check`, `simulate`, `plot`, `tune`, `schema`)."""
    if command == "schema":
        return schema_parser()
    if command == "run":
        return run_parser()
    return tune_parser() if command == "tune" else command_parser(command)


def schema_parser() -> argparse.ArgumentParser:
    from frontends.schemas import SCHEMAS

    names = "\n".join(f"  {name:<17} {summary}" for name, summary in SCHEMAS.items())
    parser = ArgumentParser(
        prog=f"{PROG} schema", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Print the JSON Schema (draft 2020-12) of a document format planc reads "
        "and writes, or check files against it (structure only: `planc check` runs every "
        "rule). Without NAME, list the schemas.", epilog=f"schemas:\n{names}")
    parser.add_argument("name", nargs="?", metavar="NAME", choices=list(SCHEMAS),
                        help="the schema: a format name (see below)")
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="JSON files to check against the schema instead of printing it")
    return parser


def schema_command(args: argparse.Namespace) -> int:
    from frontends import schemas
    from ground.json_reader import load_json_file

    if args.name is None:
        print("\n".join(f"{name:<17} {summary}" for name, summary in schemas.SCHEMAS.items()))
        return 0
    if not args.files:
        sys.stdout.write(schemas.text(args.name))
        return 0
    for path in args.files:
        try:
            schemas.validate(args.name, load_json_file(path).value)
        except PlancError as e:
            raise e.in_file(path) from None
        print(f"{path}: ok: {args.name}")
    return 0


def run_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog=f"{PROG} run", description="Compute a document on your inputs with planc's "
        "interpreters and simulators (an ONNX or ARK model, an ARK plan tile by tile, TT "
        "plans kernel by kernel) and write its outputs. Arrays are named as the ONNX graph "
        "names its inputs and outputs (plans lowered from ONNX keep the names), else t<id>.")
    parser.add_argument("input", metavar="FILE")
    parser.add_argument("--inputs", dest="input_values", metavar="IN.npz",
                        help="the input values (.npz, one array per input name)")
    parser.add_argument("--weights", metavar="MODEL.onnx",
                        help="the ONNX model a plan or ARK model was lowered from: its "
                             "weights and constants")
    parser.add_argument("-o", "--output", metavar="OUT.npz",
                        help="write the outputs here (.npz, one array per output name)")
    _add_common_options(parser, "print a JSON summary on stdout")
    _add_input_options(parser)
    return parser


def run_command(args: argparse.Namespace) -> int:
    from compiler.run import run_command as run

    refuse_stdout(args.output, "-o", "planc run")
    refuse_overwriting_inputs(args.output, [p for p in (args.input, args.input_values,
                                                        args.weights) if p])
    args.inputs = [args.input]
    with without_garbage_collection():
        summary = run(args)
    if args.json:
        print(json.dumps(summary))
    else:
        shapes = ", ".join(f"{name} {o['dtype']} {o['shape']}"
                           for name, o in summary["outputs"].items())
        print(f"{args.input}: ok: {summary['format']}: {shapes}"
              + (f" -> {args.output}" if args.output else ""))
    return 0


def command_parser(command: str) -> argparse.ArgumentParser:
    summary = {"check": "Import and verify a document; exit 0 if it is valid, 1 if not.",
               "simulate": "Run a document functionally (and with the cost model where the "
                           "format has one) and report.",
               "plot": "Draw a plan: a timeline over the cost model's time, core-grid "
                       "heatmaps, memory over time (needs matplotlib: planc[plot])."}[command]
    parser = ArgumentParser(prog=f"{PROG} {command}", description=summary)
    parser.add_argument("input", metavar="INPUT")
    if command == "plot":
        parser.add_argument("-o", "--output", required=True, metavar="IMAGE",
                            help="image file to write (.png, .svg or .pdf)")
    _add_common_options(parser, "print one JSON object on stdout (errors too, as {file, path, "
                                "rule, message})")
    _add_input_options(parser)
    _add_flags(parser, command)
    return parser


class _VersionAction(argparse.Action):
    """`--version`, reading the package metadata only when asked (importing
    `importlib.metadata` costs every compile ~20 ms otherwise)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show program's version number and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(f"{PROG} {_version()}\n")
        parser.exit()


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("planc")
    except Exception:  # noqa: BLE001 -- running from a source tree without metadata
        return "unknown"


def _synthesize_or_load(args: argparse.Namespace, target: TargetInfo, options: Any,
                        ) -> tuple[str, ModuleOp]:
    if len(args.inputs) > 1:
        if not target.many_inputs:
            raise UsageError(f"--target {target.name} takes one INPUT, got {len(args.inputs)}")
        fmt, module = load_inputs(args.inputs, args.source_format)
        return fmt.name, module
    if args.input is not None:
        fmt, module = load_input(args.input, args.source_format, target.sources)
        return fmt.name, module
    synthesize = getattr(target.load(), "synthesize", None)
    if synthesize is None:
        raise UsageError(f"an INPUT file is required for --target {target.name}")
    return "", synthesize(options)


def refuse_stdout(output: str | None, flag: str, command: str) -> None:
    """`-` means standard output to the compiling command; these outputs share stdout with
    the command's report, so `-` would have been a file named `-` in the current directory."""
    if output == "-":
        raise UsageError(f"{flag} -: {command} writes this output to a file (its report goes to "
                         "standard output); give a file name")


def refuse_overwriting_inputs(output: str | None, inputs: Sequence[str],
                              flag: str = "-o") -> None:
    """`-o` (or `--trace`) naming an input would replace the user's document with the
    result. An empty name is no file at all (`-o ''` from an unset shell variable): it had
    meant standard output, or no trace."""
    if output == "":
        raise UsageError(f"{flag} '': an empty file name; give a file name")
    if not output or output == "-" or not os.path.exists(output):
        return
    for path in inputs:
        if os.path.exists(path) and os.path.samefile(output, path):
            raise UsageError(f"{flag} {output} is the input {path}: planc does not write over "
                             "its input; choose another output")


def compile_command(args: argparse.Namespace) -> int:
    from time import perf_counter

    from compiler.output import write_product

    target = target_named(args.target)
    if target is None:
        names = [t.name for t in TARGETS]
        raise UsageError(f"unknown target '{args.target}'{did_you_mean(args.target, names)} "
                         f"(known targets: {', '.join(names)})")
    refuse_overwriting_inputs(args.output, args.inputs)
    if target.writes_directory and not args.output:
        raise UsageError(f"--target {target.name} writes a directory; give it with -o DIR")
    if args.json and (not args.output or args.output == "-"):
        raise UsageError("--json prints a summary on stdout; give the output with -o")
    options = scoped_options(args, target.name, f"--target {target.name}")
    # The collector stays off for the whole command: importing builds the IR graph too, and
    # collections during it cost a third of the import at 10k operators.
    with without_garbage_collection():
        steps = {"load": perf_counter()}
        try:
            passes, product = lower(lambda opts: _synthesize_or_load(args, target, opts),
                                    target.load(), options, args.pipeline, steps,
                                    print_ir=args.print_ir_after_all,
                                    verify_each=args.verify_each or None)
        except PlancError as e:
            # With several inputs, only the error itself knows which file it is about.
            raise e.in_file(args.input) if len(args.inputs) == 1 else e from None
    steps["write"] = perf_counter()
    if args.output and args.output != "-":
        write_product(args.output, product, args.inputs)
    elif isinstance(product, str):
        sys.stdout.write(product)
    else:
        raise UsageError(f"--target {target.name} writes several files; give -o DIR")
    seconds = _step_seconds(steps, perf_counter())
    LOG.info("%s", ", ".join(f"{step} {t:.3f} s" for step, t in seconds.items()))
    if args.json:
        files = product if isinstance(product, dict) else {"": product}
        print(json.dumps({"ok": True, "target": target.name, "output": args.output,
                          "files": len(files), "bytes": sum(len(t) for t in files.values()),
                          "seconds": seconds,
                          "passes": [{"name": n, "seconds": round(t, 6)} for n, t in passes]}))
    return 0


def _step_seconds(starts: dict[str, float], end: float) -> dict[str, float]:
    """{step: seconds} from the start time of each step, in order, and the end time."""
    times = [*starts.values(), end]
    return {step: round(b - a, 6) for step, a, b in zip(starts, times, times[1:], strict=False)}


# ---------------------------------------------------------------------------------------------
# check / simulate
# ---------------------------------------------------------------------------------------------


def check_command(args: argparse.Namespace) -> int:
    from compiler.checking import check_file

    options = scoped_options(args, "check", "planc check")
    from ground.progress import Steps

    # The collector stays off: the import builds a large cyclic graph.
    with without_garbage_collection(), Steps("check", 1) as steps, steps.step("check"):
        report = check_file(args.input, options, args.source_format)
    if report.format is not None:
        refuse_ignored("check", given_options(args), report.format)
    if args.json:
        print(json.dumps(report.as_json()))
        return 0 if report.ok else 1
    for finding in report.findings:
        sys.stderr.write(f"{PROG}: {finding.severity}: {finding}\n")
    if report.ok:
        warnings = report.count("warning")
        note = f"; {warnings} warning{'s' * (warnings != 1)}" if warnings else ""
        print(f"{args.input}: ok: {report.format}"
              + (f" ({report.summary})" if report.summary else "") + note)
    return 0 if report.ok else 1


def simulate_command(args: argparse.Namespace) -> int:
    options = scoped_options(args, "simulate", "planc simulate")
    if (getattr(options, "seed", 0) or 0) < 0:     # numpy's generators take seeds >= 0
        raise UsageError(f"--seed: expected a non-negative integer, got {options.seed}")
    refuse_stdout(getattr(options, "trace", None), "--trace", "planc simulate")
    refuse_overwriting_inputs(getattr(options, "trace", None), [args.input], "--trace")
    from ground.progress import Steps

    with Steps("simulate", 3 if options.trace else 2) as steps:
        with steps.step("load"):
            fmt, module = load_input(args.input, args.source_format)
        if fmt.simulate is None:
            raise UsageError(f"planc simulate does not support {fmt.name} documents yet")
        refuse_ignored("simulate", given_options(args), fmt.name)
        try:
            with steps.step(f"simulate the {fmt.name}"):
                report: dict[str, Any] = {"format": fmt.name,
                                          **load_hook(fmt.simulate)(module, options)}
            if options.trace:
                from compiler.output import write_product
                from compiler.plot import chrome_trace, pictures

                with steps.step("trace"):
                    write_product(options.trace, chrome_trace(pictures(module, options)),
                                  [args.input])
                report["trace"] = options.trace
        except PlancError as e:
            raise e.in_file(args.input) from None
    if args.json:
        print(json.dumps(report))
    else:
        from compiler.report import human_report

        print(human_report(args.input, report))
    return 0 if report.get("ok") else 1


def plot_command(args: argparse.Namespace) -> int:
    from compiler.output import write_product
    from compiler.plot import draw, pictures

    options = scoped_options(args, "plot", "planc plot")
    refuse_stdout(args.output, "-o", "planc plot")
    refuse_overwriting_inputs(args.output, [args.input])
    from ground.progress import Steps

    with Steps("plot", 3) as steps:
        with steps.step("load"):
            fmt, module = load_input(args.input, args.source_format)
        refuse_ignored("plot", given_options(args), fmt.name)
        try:
            with steps.step("model"):
                drawn = pictures(module, options)
        except PlancError as e:
            raise e.in_file(args.input) from None
        with steps.step("draw"):
            image = io.BytesIO()
            draw(drawn, image, os.path.splitext(args.output)[1].lstrip(".") or "png")
            write_product(args.output, image.getvalue(), [args.input])
    if args.json:
        print(json.dumps({"ok": True, "output": args.output, "pictures": len(drawn)}))
    else:
        # One image file; each picture is a panel of it.
        print(f"{args.output}: 1 image of {len(drawn)} panel{'s' * (len(drawn) != 1)}")
    return 0


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def single_threaded_blas() -> None:
    """Use one BLAS thread unless the user chose otherwise. planc's numpy work is many small
    matrix products (one per simulated tile), for which a multithreaded BLAS spends more time
    waking its threads than computing (4x slower on a 2-core machine). It only takes effect
    before numpy is first imported, so the command line calls it first."""
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one planc command; as the `planc` program (`argv` None), every command but `tune`
    (whose worker pools and Ray shut down at exit) ends the process without freeing its IR
    (`exit_without_teardown`)."""
    if argv is None:
        from compiler.process import guard_standard_streams

        guard_standard_streams()
    command = (sys.argv[1:] if argv is None else argv)[:1]
    if argv is None and (not command or command[0] not in SUBCOMMANDS or command == ["check"]):
        # Compiling and checking build the IR with the collector off; turning it back on
        # afterwards made the next allocation collect the whole IR, which had piled up in
        # the youngest generation (0.76 s of a 6 s compile at 10k operators). The program
        # ends right after without freeing anything, so it stays off.
        gc.disable()
    code = _main(argv)
    if argv is None and command != ["tune"]:
        exit_without_teardown(code)
    return code


def exit_without_teardown(code: int) -> None:
    """End the process now: freeing a large IR graph object by object (and the collector's
    final pass over it) costs ~7% of a compile, for memory the OS reclaims anyway. Output
    files are closed already; the standard streams are flushed here, and the dataclass code
    cache (which `atexit` would write) is written."""
    from compiler._startup import save_dataclass_code

    save_dataclass_code()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass
    os._exit(code)


def _drop_unwritten_stdout() -> None:
    """Point stdout at /dev/null so that flushing at exit does not fail a second time."""
    from compiler.process import ClosedStream

    if isinstance(sys.stdout, ClosedStream):
        return                                  # it holds nothing to flush
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _main(argv: Sequence[str] | None) -> int:
    single_threaded_blas()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = None
    try:
        if argv and argv[0] in SUBCOMMANDS:
            command = argv[0]
            args = parser_for(command).parse_args(argv[1:])
            handler = {"check": check_command, "simulate": simulate_command,
                       "run": run_command,
                       "plot": plot_command, "tune": tune_command,
                       "schema": schema_command}[command]
        else:
            args = compile_parser().parse_args(argv)
            args.inputs = args.input
            args.input = args.inputs[0] if args.inputs else None
            handler = compile_command
        configure_output(args)
        from compiler.process import one_line_warnings

        with one_line_warnings(PROG):
            code = handler(args)
        sys.stdout.flush()      # a full disk under `planc ... > out` is an error, not exit 0
        return code
    except PlancError as e:
        sys.stderr.write(f"{PROG}: error: {e}\n")
        if getattr(args, "json", False):
            print(json.dumps(error_json(e)))
        return 1
    except BrokenPipeError:
        # The reader of stdout went away (`planc simulate p.json | head`): end quietly, and
        # keep Python from complaining about the closed pipe when it flushes at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except MemoryError:
        if os.environ.get("PLANC_DEBUG"):
            raise
    except OSError as e:
        if e.filename is None and e.errno in _FULL_OUTPUT:
            # Standard output refused the text (`planc ... > out` on a full disk): the
            # result did not reach the user, which exit 0 would hide.
            sys.stderr.write(f"{PROG}: error: <stdout>: cannot write the output: "
                             f"{e.strerror}\n")
            _drop_unwritten_stdout()
            return 1
        return _internal_error(e)
    except Exception as e:  # noqa: BLE001 -- a bug in planc, not in the user's input
        return _internal_error(e)
    # Out of memory, reported only now: while the except clause ran, the exception held the
    # failed work's frames and all they allocated, and even writing the message failed.
    from compiler.process import out_of_memory

    return out_of_memory(PROG, _input_paths(args))


_FULL_OUTPUT = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EBADF)
"""What a stream says when the text written to it cannot be stored (EBADF: standard output
was closed, `planc ... >&-`)."""


def _input_paths(args: argparse.Namespace | None) -> list[str]:
    """The input files of a parsed command line (none before it is parsed)."""
    inputs = getattr(args, "inputs", None) or getattr(args, "input", None)
    inputs = inputs if isinstance(inputs, list) else [inputs]   # `planc tune` takes several
    return [path for path in inputs if isinstance(path, str)]


def _internal_error(e: BaseException) -> int:
    if os.environ.get("PLANC_DEBUG"):
        raise e
    sys.stderr.write(f"{PROG}: internal error: {type(e).__name__}: "
                     f"{' '.join(str(e).split())[:500]} (set PLANC_DEBUG=1 for a "
                     "traceback)\n")
    return 2

if __name__ == "__main__":
    sys.exit(main())
