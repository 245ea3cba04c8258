"""`planc check`: every rule of a document's format, as findings.

The steps, each only when the previous one left no error (a later step relies on what the
earlier ones established):

1. read the JSON and import it (an unreadable document is one error);
2. run every op's verifier (the format's structural and per-op rules), collecting all
   failures and the verifiers' warnings;
3. run the format's whole-document checks (`InputFormat.check`), which decide rules such as
   task coverage, ordering of conflicting accesses or a collective's post-condition
   symbolically, without running the numbers.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from compiler.diagnostics import PlancError
from compiler.findings import ERROR, WARNING, Finding, from_error, from_warnings
from frontends import load_hook


@dataclass
class CheckReport:
    file: str
    format: str | None
    findings: list[Finding] = field(default_factory=list)
    summary: str = ""

    def count(self, severity: str) -> int:
        return sum(f.severity == severity for f in self.findings)

    def ok(self, strict: bool = False) -> bool:
        return self.count(ERROR) == 0 and not (strict and self.count(WARNING))


def check_file(path: str, options: argparse.Namespace | None = None,
               forced: str | None = None) -> CheckReport:
    """All findings about the document at `path`."""
    from compiler.driver import import_file
    from compiler.locations import verify_all
    from dialects.utils import collecting_warnings

    options = options or argparse.Namespace()
    report = CheckReport(path, None)
    try:
        fmt, module = import_file(path, forced)
    except PlancError as e:
        report.findings.append(from_error(e.in_file(path), "format"))
        return report
    report.format = fmt.name
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
    if not report.count(ERROR) and fmt.describe:
        report.summary = load_hook(fmt.describe)(module)
    report.findings = [f.in_file(path) for f in report.findings]
    return report
