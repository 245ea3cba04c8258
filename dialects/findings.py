"""Findings: what `planc check` reports about a document.

A finding names the rule it breaks, where (file and JSON path), and how bad it is:

* *error*: the runtime would compute a wrong result, hang, or refuse the file;
* *warning*: legal but suspicious (wasted work, a layout the producer never emits).

`planc check` exits 1 when there is an error (or, with `--strict`, a warning). Findings come
from three places: the importer (a document that cannot be read), the dialects' verifiers
(structural and per-op rules, which also guard every pass), and each format's deeper checks
(`InputFormat.check`: rules decided over the whole document, symbolically, such as task
coverage, hazards between task groups, or a collective's post-condition).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ground.diagnostics import PlancError, extend_path

if TYPE_CHECKING:
    from xdsl.ir import Operation

    from dialects.utils import VerifierWarning

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    """One finding of `planc check`: a rule the document breaks, where, and how badly;
    `str(finding)` is the line the command prints (`FILE: PATH: MESSAGE [RULE]`)."""

    rule: str
    """Short stable name of the rule, `format.rule-name`, e.g. `ark-plan.task-coverage`."""
    severity: str
    """`error` or `warning`."""
    message: str
    """What is wrong, in one sentence or a few (what `planc check` prints after the path)."""
    path: str | None = None
    """JSON path of the value at fault, when there is one."""
    file: str | None = None
    """The file the finding is about (None for a module checked in memory)."""

    def in_file(self, file: str) -> Finding:
        return self if self.file else Finding(self.rule, self.severity, self.message,
                                              self.path, file)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        parts = [p for p in (self.file, self.path) if p]
        parts.append(" ".join(self.message.split()) + f" [{self.rule}]")
        return ": ".join(parts)


def error(rule: str, message: str, path: str | None = None) -> Finding:
    return Finding(rule, ERROR, message, path)


def warning(rule: str, message: str, path: str | None = None) -> Finding:
    return Finding(rule, WARNING, message, path)


def at_op(op: Operation, rule: str, severity: str, message: str,
          *steps: str | int) -> Finding:
    """A finding about `op` (or a member of its JSON object, `steps`)."""
    from dialects.locations import source_path

    path = source_path(op)
    if path is not None and steps:
        path = extend_path(path, *steps)
    return Finding(rule, severity, message, path)


def from_error(e: PlancError, default_rule: str) -> Finding:
    """A user error (import or verifier failure) as an error finding."""
    return Finding(e.rule or default_rule, ERROR, e.message, e.path, e.file)


def from_warnings(warnings: Iterable[VerifierWarning]) -> list[Finding]:
    return [at_op(w.op, w.rule, WARNING, w.message, *w.steps) for w in warnings]


def has_errors(findings: Iterable[Finding], strict: bool = False) -> bool:
    return any(f.severity == ERROR or strict for f in findings)
