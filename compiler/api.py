"""planc's Python API: what the command line does, as functions.

    import compiler as planc

    model = planc.load("examples/ffn.json")                    # an xDSL module, verified
    plan = planc.compile(model, "ark", arch="h100")            # the ARK plan's text
    files = planc.compile(model, "cpu")                        # {path: text} for a directory
    verdict = planc.check("ffn.plan.json")                     # CheckReport: .ok, .findings
    result = planc.simulate("ffn.plan.json", seed=1)           # SimulationResult: .ok, figures

Options are keyword arguments named like the command line's flags (`--buffer-size` is
`buffer_size`); each target and command accepts exactly its own (`backends.options_type(name)`
is the dataclass), of the flag's type, so a misspelt, foreign or mistyped option is an
`ArgumentError` naming it, as on the command line. `compile` never changes the module it is
given (it works on a copy).

Errors: every mistake of the caller is one exception family, the command line's
(`ground.diagnostics`, re-exported here): `PlancError` (`.file`, `.path`, `.rule`, `.message`
and `.hint`: what `planc` prints as `planc: error: FILE: PATH: MESSAGE`), its subclass
`UsageError` for a wrong call rather than a wrong document, and `ArgumentError` (a
`UsageError` and a `ValueError`) for a wrong option or name.

Verdicts and loaders: `check` is a verdict, and returns one whatever the document (a missing
or unreadable file is a `CheckReport` with `ok` False and one error finding, as `planc check`
exits 1 with that line); `load`, `compile` and `simulate` need a document and raise
`PlancError` when they cannot read one (the same message).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backends import TARGETS, make_options, refuse_ignored, target_named
from compiler.checking import CheckReport, check_file, check_module
from dialects.findings import Finding
from frontends import InputFormat, format_named, format_of_root, load_hook
from ground.diagnostics import ArgumentError, PlancError, UsageError, did_you_mean

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp


@dataclass(frozen=True)
class SimulationResult:
    """What `planc simulate` reports: `ok` (the document computes what it should), and every
    figure of the format's simulator (`figures`, also reachable as `result["key"]`)."""

    format: str
    """The document's format (`ark-plan`, `tt`, ...)."""
    ok: bool
    """The document computes what it should (the exit status of `planc simulate`)."""
    figures: dict[str, Any] = field(default_factory=dict)
    """Every other figure of the report, as `planc simulate --json` prints them
    (`docs/results.md` says what each one means)."""

    def __getitem__(self, key: str) -> Any:
        return self.figures[key]

    def get(self, key: str, default: Any = None) -> Any:
        """A figure, or `default` when the format's simulator does not report it."""
        return self.figures.get(key, default)


def load(path: str | Path, *, format: str | None = None) -> ModuleOp:
    """Import and verify the document at `path` (its format detected unless named); a
    document that cannot be read or is invalid raises `PlancError`."""
    from compiler.pipeline import load_input

    if not isinstance(path, str | Path):
        raise ArgumentError(f"load takes a path, got {path!r}")
    if format is not None and format_named(format) is None:
        names = formats()
        raise ArgumentError(f"unknown format '{format}'{did_you_mean(format, names)} (formats: "
                            f"{', '.join(names)})")
    return load_input(str(path), format)[1]


def _is_module(source: Any) -> bool:
    from xdsl.dialects.builtin import ModuleOp

    if isinstance(source, ModuleOp):
        return True
    if isinstance(source, str | Path):
        return False
    raise ArgumentError(f"the source must be a path or an imported module (xDSL ModuleOp), "
                        f"got {source!r}")


def document_format(module: ModuleOp) -> InputFormat:
    """The format of an imported document (from its top-level op); a path or anything else
    that is not a module is an `ArgumentError` (it was an `AttributeError` on `.ops`)."""
    if not _is_module(module):
        raise ArgumentError(f"document_format takes an imported module (planc.load(path)), "
                            f"got the path {str(module)!r}")
    for op in module.ops:
        fmt = format_of_root(op.name)
        if fmt is not None:
            return fmt
    raise PlancError("the module holds no planc document (no top-level op of a known format)")


def compile(source: ModuleOp | str | Path, target: str, *, pipeline: str | None = None,
            output: str | Path | None = None, **options: Any) -> str | dict[str, str]:
    """Compile `source` (a path or an imported module) for `target`, as `planc SOURCE
    --target TARGET` does; returns the text, or {relative path: text} for targets that write
    a directory, and also writes it to `output` when given (atomically)."""
    from compiler.output import write_product
    from compiler.pipeline import lower, without_garbage_collection

    info = target_named(target) if isinstance(target, str) else None
    if info is None:
        names = [t.name for t in TARGETS]
        raise ArgumentError(f"unknown target {target!r}{did_you_mean(str(target), names)} "
                            f"(targets: {', '.join(names)})")
    opts = make_options(target, **options)

    given_module = _is_module(source)

    def fresh(_options: Any) -> tuple[str, ModuleOp]:
        from compiler.pipeline import load_input

        # an ONNX CNN is imported as the target takes it (a Gemini layer graph or ARK model)
        module = source.clone() if given_module else load_input(str(source), None,
                                                                info.sources)[1]
        return document_format(module).name, module

    with without_garbage_collection():
        _, product = lower(fresh, info.load(), opts, pipeline)
    if output is not None:
        write_product(str(output), product)
    return product


def check(source: ModuleOp | str | Path, *, strict: bool = False,
          model: str | Path | None = None) -> CheckReport:
    """Every rule of the document's format, as `planc check` runs them; `.ok` is its exit
    status, `.findings` what it prints. A verdict: a file that cannot be read or imported is
    a report with one error finding (`ok` False), not an exception. `model` (a file, as
    `--model`): also prove the document computes that model's outputs; a model that cannot
    be read, or a document of a format it does not apply to, raises as on the command line."""
    options = make_options("check", strict=strict, model=str(model) if model else None)
    if not _is_module(source):
        report = check_file(str(source), options)
    else:
        report = check_module(document_format(source), source.clone(), options)
    if model and report.format is not None:
        refuse_ignored("check", ["model"], report.format)
    return report


def simulate(source: ModuleOp | str | Path, **options: Any) -> SimulationResult:
    """Run the document as `planc simulate` does (functional check and cost model); options
    the document's simulator does not read (`message_size` for an ARK plan) are an
    `ArgumentError`, as on the command line."""
    opts = make_options("simulate", **options)
    module = source if _is_module(source) else load(source)
    fmt = document_format(module)
    if fmt.simulate is None:
        raise PlancError(f"planc simulate does not support {fmt.name} documents yet")
    refuse_ignored("simulate", options, fmt.name)
    report = dict(load_hook(fmt.simulate)(module, opts))
    return SimulationResult(fmt.name, bool(report.pop("ok", False)), report)


def formats() -> list[str]:
    """The names of the document formats planc reads."""
    from frontends import FORMATS

    return [f.name for f in FORMATS]


__all__ = ["SimulationResult", "CheckReport", "Finding", "InputFormat", "PlancError",
           "UsageError", "ArgumentError", "load", "compile", "check", "simulate",
           "document_format", "format_named", "formats"]
