"""Small models and plans the TT tests share (built here, so the suite never needs the corpus)."""

from __future__ import annotations

import copy
import json
from functools import cache

from xdsl.dialects.builtin import ModuleOp

from backends.tt_plan import document_json
from frontends.model_builder import ModelBuilder


def lower(module: ModuleOp, spec: str = "tt-tile,tt-partition{grid=2x2},tt-place") -> ModuleOp:
    """Run a tt pipeline on `module` in place (verifying after every pass) and return it."""
    from compiler.pipeline import run_pipeline

    run_pipeline(module, spec)
    return module


def matmul_model(m: int = 64, k: int = 64, n: int = 64, dtype: str = "FP16", **kw) -> ModuleOp:
    b = ModelBuilder()
    b.matmul(b.tensor([m, k], dtype), b.tensor([n, k] if kw.get("transpose_other") else [k, n],
                                                dtype), **kw)
    return b.finish()


@cache
def _matmul_plan_json() -> str:
    return json.dumps(document_json(lower(matmul_model())))


def matmul_plan() -> dict:
    """A valid plan: 64x64x64 FP16 matmul on a 2x2 grid, one output tile per core,
    len_k 2, with its kernel member."""
    return copy.deepcopy(json.loads(_matmul_plan_json()))


def kernelless_plan() -> dict:
    """The same plan as TileLang-TT writes it: no kernel member, no schema_version."""
    doc = matmul_plan()
    del doc["kernel"], doc["schema_version"]
    return doc

