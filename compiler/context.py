"""The xDSL context that knows every planc dialect (loaded lazily, on first use)."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin

from dialects import get_all_dialects


def planc_context() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx
