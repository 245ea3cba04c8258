"""`planc check`: every rule of a document's format, as findings.

The steps, each only when the previous one left no error (a later step relies on what the
earlier ones established):

1. read the JSON and import it (an unreadable document is one error);
2. run every op's verifier (the format's structural and per-op rules), collecting all
   failures and the verifiers' warnings;
3. run the format's whole-document checks (`InputFormat.check`), which decide rules such as
   task coverage, ordering of conflicting accesses or a collective's post-condition
   symbolically, without running the numbers;
4. with `--model MODEL`, prove that the document computes MODEL's outputs
   (`compiler.model_check`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from backends import COMMAND_FORMATS, make_options
from dialects.findings import ERROR, WARNING, Finding, from_error, from_warnings
from frontends import InputFormat, load_hook
from ground.diagnostics import PlancError

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp


MODEL_FORMATS = COMMAND_FORMATS["check"]["model"]
"""The formats `--model` compares (`compiler.model_check`): ARK plans, TT plans, ARK models."""


@dataclass
class CheckReport:
    """The verdict of `planc check` on one document."""

    file: str
    """The checked file ("" for a module checked in memory)."""
    format: str | None
    """The document's format (None when it could not be read)."""
    findings: list[Finding] = field(default_factory=list)
    """Every finding, errors and warnings, in the order `planc check` prints them."""
    summary: str = ""
    """One line describing the document (when it has no errors)."""
    strict: bool = False
    """Warnings count as errors (`--strict`)."""
    model: dict[str, Any] | None = None
    """With `--model`, once the comparison ran: the model's file and how many outputs and
    communication operators it compared (`model_check.Comparison`)."""

    def count(self, severity: str) -> int:
        """How many findings have `severity` (`error` or `warning`)."""
        return sum(f.severity == severity for f in self.findings)

    @property
    def ok(self) -> bool:
        """No errors (and, when strict, no warnings): the exit code of `planc check` is 0."""
        return self.count(ERROR) == 0 and not (self.strict and self.count(WARNING))

    def as_json(self) -> dict[str, Any]:
        """What `planc check --json` prints."""
        errors = [str(f) for f in self.findings if f.severity == ERROR]
        return {"file": self.file, "format": self.format, "ok": self.ok,
                "errors": self.count(ERROR), "warnings": self.count(WARNING),
                "summary": self.summary, "findings": [f.as_json() for f in self.findings],
                **({"model": self.model} if self.model is not None else {}),
                **({"error": errors[0]} if errors else {})}


def check_file(path: str, options: Any = None, forced: str | None = None) -> CheckReport:
    """All findings about the document at `path`."""
    from compiler.pipeline import import_file

    try:
        fmt, module = import_file(path, forced)
    except PlancError as e:
        return CheckReport(path, None, [from_error(e.in_file(path), "format")],
                           strict=getattr(options, "strict", False))
    report = check_module(fmt, module, options)
    report.file = path
    report.findings = [f.in_file(path) for f in report.findings]
    return report


def check_module(fmt: InputFormat, module: ModuleOp, options: Any = None) -> CheckReport:
    """All findings about an imported (not yet verified) document of format `fmt`."""
    from dialects.locations import verify_all
    from dialects.utils import collecting_warnings

    options = options if options is not None else make_options("check")
    report = CheckReport("", fmt.name, strict=options.strict)
    with collecting_warnings() as warnings:
        errors = verify_all(module)
    report.findings += [from_error(e, fmt.name) for e in errors]
    report.findings += from_warnings(warnings)
    if not errors and fmt.check:
        try:
            with collecting_warnings() as warnings:
                report.findings += load_hook(fmt.check)(module, options)
            report.findings += from_warnings(warnings)
        except PlancError as e:
            report.findings.append(from_error(e, fmt.name))
    model = getattr(options, "model", None)
    compared = None
    if model and not report.count(ERROR) and fmt.name in MODEL_FORMATS:
        from compiler.model_check import against_model

        compared = against_model(fmt.name, module, model)
        report.findings += compared.findings
        report.model = compared.as_json()
    if not report.count(ERROR) and fmt.describe:
        report.summary = load_hook(fmt.describe)(module)
    if compared is not None and not report.count(ERROR):
        # (The ok line says the comparison ran: without it, it reads as a plain check.)
        report.summary = "; ".join(filter(None, (report.summary, compared.summary())))
    return report
