"""planc's dialects, one module each. `get_all_dialects` is lazy, like xDSL's own: a dialect's
module is imported only when the context first needs it. To add one, add a row to `DIALECTS`."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.ir import Dialect

DIALECTS: tuple[tuple[str, str, str], ...] = (
    # (dialect name, module, Dialect object)
    ("ark", "dialects.ark", "Ark"),
    ("plan", "dialects.plan", "Plan"),
    ("tt", "dialects.tt", "TT"),
    ("metalium", "dialects.metalium", "Metalium"),
    ("gemini", "dialects.gemini", "Gemini"),
    ("dnn", "dialects.dnn", "Dnn"),
    ("mscclpp", "dialects.mscclpp", "Mscclpp"),
    ("sched", "dialects.sched", "Sched"),
)


def dialect_names() -> set[str]:
    """The names of planc's own dialects (what their ops' names begin with)."""
    return {row[0] for row in DIALECTS}


def _lazy(module: str, name: str) -> Callable[[], Dialect]:
    def load() -> Dialect:
        return getattr(importlib.import_module(module), name)

    return load


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    return {name: _lazy(module, obj) for name, module, obj in DIALECTS}
