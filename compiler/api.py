"""planc's Python API: what the command line does, as functions.

    import compiler as planc

    model = planc.load("examples/ffn.json")                    # an xDSL module, verified
    plan = planc.compile(model, "ark", arch="h100")            # the ARK plan's text
    files = planc.compile(model, "cpu")                        # {path: text} for a directory
    verdict = planc.check("ffn.plan.json")                     # CheckReport: .ok, .findings
    result = planc.simulate("ffn.plan.json", seed=1)           # SimulationResult: .ok, figures

Options are keyword arguments named like the command line's flags (`--buffer-size` is
`buffer_size`); each target and command accepts exactly its own (`backends.options_type(name)`
is the dataclass), so a misspelt or foreign option is a `ValueError`, as on the command line.
Errors in the user's input are `PlancError`s with the file and JSON path. `compile` never
changes the module it is given (it works on a copy).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backends import make_options, target_named
from compiler.checking import CheckReport, check_file, check_module
from frontends import InputFormat, format_named, format_of_root, load_hook
from ground.diagnostics import PlancError

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp


@dataclass(frozen=True)
class SimulationResult:
    """What `planc simulate` reports: `ok` (the document computes what it should), and every
    figure of the format's simulator (`figures`, also reachable as `result["key"]`)."""

    format: str
    ok: bool
    figures: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.figures[key]


def load(path: str | Path, *, format: str | None = None) -> ModuleOp:
    """Import and verify the document at `path` (its format detected unless named)."""
    from compiler.pipeline import load_input

    return load_input(str(path), format)[1]


def document_format(module: ModuleOp) -> InputFormat:
    """The format of an imported document (from its top-level op)."""
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

    info = target_named(target)
    if info is None:
        raise ValueError(f"unknown target '{target}'")
    opts = make_options(target, **options)

    def fresh(_options: Any) -> tuple[str, ModuleOp]:
        module = load(source) if isinstance(source, str | Path) else source.clone()
        return document_format(module).name, module

    with without_garbage_collection():
        _, product = lower(fresh, info.load(), opts, pipeline)
    if output is not None:
        write_product(str(output), product)
    return product


def check(source: ModuleOp | str | Path, *, strict: bool = False) -> CheckReport:
    """Every rule of the document's format, as `planc check` runs them; `.ok` is its exit
    status, `.findings` what it prints."""
    options = make_options("check", strict=strict)
    if isinstance(source, str | Path):
        return check_file(str(source), options)
    return check_module(document_format(source), source.clone(), options)


def simulate(source: ModuleOp | str | Path, **options: Any) -> SimulationResult:
    """Run the document as `planc simulate` does (functional check and cost model)."""
    opts = make_options("simulate", **options)
    module = load(source) if isinstance(source, str | Path) else source
    fmt = document_format(module)
    if fmt.simulate is None:
        raise PlancError(f"planc simulate does not support {fmt.name} documents yet")
    report = dict(load_hook(fmt.simulate)(module, opts))
    return SimulationResult(fmt.name, bool(report.pop("ok", False)), report)


def formats() -> list[str]:
    """The names of the document formats planc reads."""
    from frontends import FORMATS

    return [f.name for f in FORMATS]


__all__ = ["SimulationResult", "CheckReport", "load", "compile", "check", "simulate",
           "document_format", "format_named", "formats"]
