"""Source locations of imported IR: the JSON path each op came from.

Importers stamp every op with `loc("$.Nodes[3].Op")`, the MLIR way of remembering where IR came
from. When a verifier later rejects an op, the driver reports that path, so a verification
error points into the user's file just like an import error does.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, NameLoc, NoneAttr, StringAttr
from xdsl.ir import Operation
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from compiler.diagnostics import PlancError, extend_path


class VerifyAt(VerifyException):
    """A verifier's complaint about a place other than the op being verified.

    Checks that need a global view (an id that must resolve elsewhere in the document) run in
    one op but blame another: `op` is the op whose JSON path is reported (None: the op being
    verified) and `steps` continue that path into the op's fields, e.g.
    `VerifyAt("no such workload", ofmap_op, "destination", 1)` is reported at
    `$['0'][3].ofmap[0].destination[1]`.
    """

    def __init__(self, message: str, op: Operation | None = None, *steps: str | int):
        super().__init__(message)
        self.op = op
        self.steps = steps


def json_location(path: str) -> NameLoc:
    return NameLoc(StringAttr(path), NoneAttr())


def source_path(op: Operation) -> str | None:
    """The JSON path `op` was imported from: its own, or its closest located ancestor's."""
    current: Operation | None = op
    while current is not None:
        loc = current.location
        if isinstance(loc, NameLoc) and loc.desc.data.startswith("$"):
            return loc.desc.data
        current = current.parent_op()
    return None


def verify_module(module: ModuleOp) -> None:
    """Verify every op; the first failure becomes a `PlancError` at the op's JSON path.

    Ops are verified one by one rather than through `module.verify()`, whose diagnostics print
    the whole module: for a user, the op's path and the verifier's sentence are the message.
    """
    for op in module.walk():
        try:
            op.verify_()
        except (VerifyException, DiagnosticException) as e:
            message = str(e).split("\n", 1)[0]
            raise PlancError(message, path=_blamed_path(op, e)) from None


def _blamed_path(op: Operation, error: Exception) -> str | None:
    if not isinstance(error, VerifyAt):
        return source_path(op)
    path = source_path(error.op or op)
    return extend_path(path, *error.steps) if path else None
