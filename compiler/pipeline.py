"""Reading inputs and running pipelines: what every planc command and the Python API share.

`load_input` imports a document (JSON, ONNX or MLIR) into IR and verifies it; `run_pipeline`
applies a pass pipeline and verifies the result; `lower` loads, runs a target's pipeline and
emits, planning again when the target asks to. The commands of `compiler.driver`, the API
(`compiler.api`), `planc check` (`compiler.checking`) and `planc tune` build on these.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from frontends import FORMATS, InputFormat, detect_format, format_named, format_of_root
from ground.diagnostics import PlancError, UnsupportedInput, UsageError

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

LOG = logging.getLogger("planc.pipeline")


# ---------------------------------------------------------------------------------------------
# Reading inputs
# ---------------------------------------------------------------------------------------------


def load_input(path: str, forced: str | None = None, wants: Sequence[str] = (),
               ) -> tuple[InputFormat, ModuleOp]:
    """Import `path` into IR and verify it; the format is detected unless `forced`. `wants`
    (the input formats of the target asked for) picks how an ONNX CNN is imported."""
    from dialects.locations import verify_module

    fmt, module = import_file(path, forced, wants)
    try:
        verify_module(module)
    except PlancError as e:
        raise e.in_file(path) from None
    return fmt, module


def import_file(path: str, forced: str | None = None, wants: Sequence[str] = (),
                ) -> tuple[InputFormat, ModuleOp]:
    """Import `path` into IR without verifying it."""
    if path.endswith(".mlir"):
        return _load_mlir(path)
    if path.endswith(".onnx"):
        return _load_onnx(path, wants)
    from ground.json_reader import load_json_file

    doc = load_json_file(path)
    fmt = format_named(forced) if forced else detect_format(doc.value)
    if fmt is None:
        known = ", ".join(f.name for f in FORMATS)
        raise PlancError(f"cannot tell the format of this document (known formats: "
                         f"{known}); name it with --from", path="$", file=path)
    try:
        return fmt, fmt.read(doc)
    except PlancError as e:
        raise e.in_file(path) from None


def _load_onnx(path: str, wants: Sequence[str] = ()) -> tuple[InputFormat, ModuleOp]:
    """An ONNX model: an ARK model, or a Gemini layer graph for convolutional networks where
    the target takes one (see `frontends.onnx.import_model`)."""
    from frontends.onnx import import_onnx

    module = import_onnx(path, wants)
    return format_of_root(module.ops.first.name), module


def _load_mlir(path: str) -> tuple[InputFormat, ModuleOp]:
    from compiler.context import planc_context
    from dialects import dialect_names
    from dialects.locations import parse_ir
    from ground.json_reader import MAX_INPUT_BYTES, read_at_most

    try:
        with open(path, "rb") as f:
            data = read_at_most(f, MAX_INPUT_BYTES)
    except OSError as e:
        raise PlancError(f"cannot read: {e.strerror}", file=path) from None
    if len(data) > MAX_INPUT_BYTES:
        raise PlancError(f"larger than the {MAX_INPUT_BYTES:,} bytes planc reads as one "
                         "document", file=path)
    try:
        module = parse_ir(planc_context(), data, path, own_dialects=dialect_names())
    except PlancError as e:
        raise PlancError(f"invalid IR: {e.message}", file=e.file) from None
    roots = [op.name for op in module.ops]
    fmt = next((f for f in map(format_of_root, roots) if f is not None), None)
    if fmt is None:
        raise PlancError(f"no planc document in this IR (top-level ops: {', '.join(roots)})",
                         file=path)
    return fmt, module


# ---------------------------------------------------------------------------------------------
# Compiling
# ---------------------------------------------------------------------------------------------


def run_pipeline(module: ModuleOp, spec: str, *, print_ir: bool = False,
                 verify_each: bool | None = None) -> list[tuple[str, float]]:
    """Apply the pass pipeline `spec` to `module` and verify the result. With `verify_each`
    (`--verify-each`, `PLANC_VERIFY_EACH=1`, or printing the IR after every pass) the IR is
    verified after every pass, which names the pass that broke it; by default only after the
    last one, since whole-module verification of intermediate IR was half of a 4x4 Gemini
    compile and every pass's result reaches the final verification anyway. Each pass's time
    is logged at INFO on the `planc.pipeline` logger (`planc -v`); on a terminal a progress
    line names the pass that runs. Returns (pass, seconds) per pass."""
    if not spec:
        return []
    if verify_each is None:
        verify_each = bool(os.environ.get("PLANC_VERIFY_EACH"))
    verify_each = verify_each or print_ir
    from time import perf_counter

    from xdsl.passes import PassPipeline

    from compiler.context import planc_context
    from dialects.locations import verify_module
    from ground.progress import Stages
    from passes import check_pipeline, get_all_passes

    clock = [perf_counter()]
    timings: list[tuple[str, float]] = []

    def after_each(previous, module: ModuleOp, following) -> None:
        if previous is not None:
            ran = perf_counter()
            if verify_each or following is None:
                verify_module(module)
            LOG.info("pass %s: %.3f s (verify %.3f s)", previous.name, ran - clock[0],
                     perf_counter() - ran)
            timings.append((previous.name, perf_counter() - clock[0]))
            stages.done()
            if print_ir:
                from backends.mlir import print_module  # xDSL's printer, only when asked

                sys.stderr.write(f"// -----// IR Dump After {previous.name} //----- //\n")
                sys.stderr.write(print_module(module))
        if following is not None:
            stages.start(following.name)
        clock[0] = perf_counter()

    from xdsl.utils.exceptions import ArgSpecParseError

    available = get_all_passes()
    try:
        check_pipeline(spec)
    except UsageError as e:
        raise UsageError(f"--pipeline: {e.message}") from None
    try:
        pipeline = PassPipeline.parse_spec(available, spec, after_each)
    # xDSL reports spec errors as assorted exceptions; a syntax error's class derives from
    # BaseException alone (`--pipeline 'ark-compress{'` was a traceback), and its text spans
    # several lines (the spec and a caret under the fault).
    except (Exception, ArgSpecParseError) as e:  # noqa: BLE001
        raise UsageError(f"--pipeline: {' '.join(str(e).split())} (known passes: "
                         f"{', '.join(sorted(available))})") from None
    with Stages(len(pipeline.passes), "pipeline") as stages:
        pipeline.apply(planc_context(), module)
    return timings


@contextmanager
def without_garbage_collection() -> Iterator[None]:
    """Pause Python's cycle collector: IR is a large graph of cyclic objects, which makes
    every collection walk all of it, so compile time grows quadratically with model size."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_inputs(paths: list[str], forced: str | None = None) -> tuple[InputFormat, ModuleOp]:
    """Several documents of one format as one module; each top-level op is marked with its
    file (`planc.file`) so that errors found later can name it."""
    from xdsl.dialects.builtin import StringAttr

    loaded = [(path, *load_input(path, forced)) for path in paths]
    first_path, fmt, combined = loaded[0]
    for path, other, _ in loaded[1:]:
        if other is not fmt:
            raise UsageError(f"all inputs must be of one format: {first_path} is {fmt.name}, "
                             f"{path} is {other.name}")
    for path, _, module in loaded:
        for op in list(module.ops):
            op.attributes["planc.file"] = StringAttr(path)
            if module is not combined:
                op.detach()
                combined.body.block.add_op(op)
    return fmt, combined


class TranslationValidationError(Exception):
    """A lowering's product failed its proof against its input: a bug of the pass named (an
    internal error, exit 2); nothing is written."""


def validating(backend: Any, spec: str) -> bool:
    """Does this lowering get translation validation (a backend with `validate`, a pipeline
    to prove, and not `PLANC_VALIDATE=0`, which is for measuring its cost)?"""
    return (getattr(backend, "validate", None) is not None and bool(spec)
            and os.environ.get("PLANC_VALIDATE") != "0")


def validation_snapshot(backend: Any, module: ModuleOp, source: str, options: Any,
                        spec: str) -> Any:
    """What the backend keeps of the input before the pipeline rewrites it in place (its
    `snapshot(module, source, options)`, e.g. the input model's canonical expressions), for
    `validate_lowering` to prove the product against; None when not validating, or with
    `PLANC_VALIDATE_INPUT=0` (for measuring the proof against the input by itself)."""
    take = getattr(backend, "snapshot", None)
    if take is None or not validating(backend, spec) or os.environ.get(
            "PLANC_VALIDATE_INPUT") == "0":     # (the proof against the input alone off)
        return None
    return take(module, source, options)


def validate_lowering(backend: Any, module: ModuleOp, source: str, options: Any, spec: str,
                      passes: list[tuple[str, float]], before: Any = None,
                      load: Callable[[Any], tuple[str, ModuleOp]] | None = None) -> None:
    """Run the target's `validate(module, source, options[, before])` on what the pipeline
    made (before anything is emitted or written); `before` is the backend's snapshot of the
    input. On failure, when the backend can prove intermediate IR (`prove(module, before)`)
    and the pipeline has several passes (its own, or those `stages(spec)` expands a pass that
    runs several as one into, e.g. `ark-plan`), the input is loaded again (`load`) and
    proved after each pass: the first whose product differs is named."""
    if not validating(backend, spec):
        return
    validate = backend.validate
    problems = (validate(module, source, options) if before is None
                else validate(module, source, options, before))
    if problems:
        name = passes[-1][0] if passes else spec
        culprit = _failing_stage(backend, load, options, spec, before) if load else None
        where = (f"'{name}'" if culprit in (None, name) else f"'{culprit}'" if len(passes) > 1
                 else f"'{culprit}' (in '{name}')")     # (a pass that runs several as one)
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise TranslationValidationError(
            f"translation validation: the product of pass {where} does not compute its "
            f"input: {problems[0]}{more}")


def _passes_of(spec: str) -> list[str]:
    """The passes of a pipeline spec (commas outside the braces of options)."""
    passes, depth, start = [], 0, 0
    for i, c in enumerate(spec):
        depth += (c == "{") - (c == "}")
        if c == "," and depth == 0:
            passes.append(spec[start:i])
            start = i + 1
    return [*passes, spec[start:]]


def _failing_stage(backend: Any, load: Callable[[Any], tuple[str, ModuleOp]], options: Any,
                   spec: str, before: Any) -> str | None:
    """The first of the backend's `stages(spec)` (or of the passes of `spec`) after which
    `prove` fails on a fresh load of the input, or None (a single pass, or every stage
    proves: the fault is in what `validate` checks beyond the input's expressions)."""
    stages = getattr(backend, "stages", None)
    prove = getattr(backend, "prove", None)
    steps = (stages(spec) if stages is not None else None) or _passes_of(spec)
    if len(steps) < 2 or prove is None or before is None:
        return None
    _, module = load(options)
    for step in steps:
        name = step.split("{", 1)[0]
        try:
            run_pipeline(module, step, verify_each=True)
        except Exception:  # noqa: BLE001 -- a pass that fails alone is the one at fault
            return name
        if prove(module, before):
            return name
    return None


def _split_at_proof(backend: Any, spec: str) -> tuple[str, str]:
    """(the passes whose product is proved, the passes after): a backend whose last passes
    only translate what the proof covers into a form it cannot read (`PROVED_BEFORE`, e.g.
    `tt-to-metalium` turning TT plans into C++ kernels) is proved on the IR those passes
    receive. Otherwise the whole pipeline, and nothing after."""
    name = getattr(backend, "PROVED_BEFORE", None)
    passes = _passes_of(spec) if name and spec else []
    at = next((i for i, step in enumerate(passes) if step.split("{", 1)[0] == name), None)
    if not at:      # (not in the pipeline, or first: there is nothing before it to prove)
        return spec, ""
    return ",".join(passes[:at]), ",".join(passes[at:])


MAX_RETRIES = 4
"""Attempts a backend's `retry` may add (each one loads and plans the input again)."""


def lower(load: Callable[[Any], tuple[str, ModuleOp]], backend: Any, options: Any,
          pipeline: str | None, steps: dict[str, float] | None = None,
          **run: Any) -> tuple[list[tuple[str, float]], Any]:
    """Load the input (`load(options)` gives its format and a fresh module), run the target's
    pipeline (or `pipeline`) and emit: ((pass, seconds) per pass, the product). A backend with
    `retry(error, options)` may answer an error of its pipeline with options for another
    attempt (Gemini plans again with a smaller L2 budget when a cut overflows L2); an explicit
    `--pipeline` is run as given."""
    from time import perf_counter

    steps = {} if steps is None else steps
    retry = getattr(backend, "retry", None) if pipeline is None else None
    attempts = 0
    while True:
        source, module = load(options)
        if source in ("ark-model", "ark-plan") and source not in getattr(
                backend, "KEEPS_UNKNOWN_OPERATORS", ()):
            from dialects.ark import refuse_unknown_operators

            refuse_unknown_operators(module)    # one message, whichever target was asked
        try:
            spec = pipeline if pipeline is not None else backend.pipeline(source, options)
        except UnsupportedInput as e:
            from backends import cannot_make

            raise cannot_make(e) from None
        head, tail = _split_at_proof(backend, spec)
        before = validation_snapshot(backend, module, source, options, head)
        steps["pipeline"] = perf_counter()
        try:
            passes = run_pipeline(module, head, **run)
            validate_lowering(backend, module, source, options, head, passes, before, load)
            passes += run_pipeline(module, tail, **run)
            steps["emit"] = perf_counter()
            return passes, backend.emit(module, options)
        except PlancError as e:
            again = retry(e, options) if retry is not None and attempts < MAX_RETRIES else None
            if again is None:
                raise
            LOG.info("%s; planning again with %s", e.message, again.retry_note)
            options, attempts = again, attempts + 1
