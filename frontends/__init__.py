"""Input formats: how planc recognises a document and which importer reads it.

The table is plain data (nothing is imported until a format is used), so the CLI starts fast.
Each importer module provides `import_document(doc: JsonNode) -> ModuleOp`; `simulate` and
`describe` name optional hooks ("module:function") used by `planc simulate` / `planc check`.
`schema` names the format's JSON Schema (`frontends/schemas/NAME.schema.json`), which every
document passes before its importer sees it.

To add a format: write `frontends/<name>.py` and add one `InputFormat` below. Order matters
where sniffers overlap: the first format whose sniffer accepts a document wins.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from ground.json_reader import JsonNode


def _has(*keys: str) -> Callable[[Any], bool]:
    return lambda doc: isinstance(doc, dict) and all(k in doc for k in keys)


@dataclass(frozen=True)
class InputFormat:
    """A document format planc reads (`compiler.api.document_format` gives a module's)."""

    name: str
    """The format's name (`ark-model`, `ark-plan`, `tt`, ...), as `--from` takes it."""
    summary: str
    """What the format is, in a few words."""
    importer: str
    """Module with `import_document(doc) -> ModuleOp`."""
    sniff: Callable[[Any], bool] = field(repr=False)
    """Does this raw JSON value look like this format?"""
    root_op: str
    """Name of the op an imported document's module holds (identifies `.mlir` inputs)."""
    simulate: str | None = None
    """'module:function' running `planc simulate` on an imported module."""
    describe: str | None = None
    """'module:function' giving a one-line summary for `planc check`."""
    check: str | None = None
    """'module:function' `(module, options) -> Iterable[Finding]`: the format's whole-document
    rules that `planc check` runs after the verifiers (see `compiler.checking`)."""
    schema: str | None = None
    """Name of the format's JSON Schema (see `frontends.schemas`)."""

    def check_schema(self, doc: JsonNode) -> None:
        """The document's structure against the format's schema: the first violation is a
        `PlancError` at its JSON path."""
        if self.schema is not None:
            from frontends.schemas import validate

            validate(self.schema, doc.value)

    def import_document(self, doc: JsonNode) -> ModuleOp:
        """The importer alone (benchmarks and tests compare it with the schema)."""
        return importlib.import_module(self.importer).import_document(doc)

    def read(self, doc: JsonNode) -> ModuleOp:
        """The document checked against the format's schema, then imported: how every JSON
        input enters planc and planc-opt, since the importers' fast paths trust the structure
        the schema checked."""
        self.check_schema(doc)
        return self.import_document(doc)


def load_hook(spec: str) -> Callable[..., Any]:
    module, _, function = spec.partition(":")
    return getattr(importlib.import_module(module), function)


def _tt_plan(doc: Any) -> bool:
    """A TileLang-TT runtime plan, or an array of them (planc's multi-kernel file). Either of
    its two most distinctive keys identifies it, so a plan missing the other one is reported
    as such rather than as an unknown format."""
    def is_plan(value: Any) -> bool:
        return isinstance(value, dict) and ("core_grid" in value or "work_partition" in value)
    return is_plan(doc) or (isinstance(doc, list) and bool(doc) and is_plan(doc[0]))


def _is_layer_description(doc: Any) -> bool:
    """Gemini's frontend IR: an object of layers, each with an operation and shapes."""
    return isinstance(doc, dict) and bool(doc) and all(
        isinstance(v, dict) and "operation" in v and "output_shape" in v for v in doc.values())


FORMATS: tuple[InputFormat, ...] = (
    InputFormat("ark-model", "ARK model file (op/tensor graph)", "frontends.ark_model",
                _has("Nodes"), "ark.model",
                simulate="targets.ark.model_interpreter:simulate_model",
                describe="frontends.ark_model:describe", check="frontends.ark_model:check",
                schema="ark-model"),
    InputFormat("ark-plan", "ARK plan file (tasks on processors, warps and SRAM)",
                "frontends.ark_plan", _has("TaskInfos", "ProcessorGroups"), "plan.plan",
                simulate="targets.ark.plan_simulator:simulate_plan",
                describe="frontends.ark_plan:describe",
                check="targets.ark.capacity:check", schema="ark-plan"),
    InputFormat("tt", "Tenstorrent runtime plan (tt.plan.json, TileLang-TT)",
                "frontends.tt_plan", _tt_plan, "tt.plans",
                simulate="targets.tt.simulator:simulate_plans",
                describe="frontends.tt_plan:describe",
                check="targets.tt.check:check", schema="tt"),
    InputFormat("gemini-ir", "Gemini scheduler IR (*_stschedule.json)", "frontends.gemini_ir",
                _has("buffersize", "xlen", "ylen"), "gemini.schedule",
                simulate="targets.gemini.simulator:simulate_schedule",
                describe="frontends.gemini_ir:describe", check="targets.gemini.check:check",
                schema="gemini-ir"),
    InputFormat("gemini-layers", "Gemini frontend layer description (DNN layers)",
                "frontends.gemini_layers", _is_layer_description, "dnn.graph",
                simulate="targets.gemini.dnn_interpreter:simulate_graph",
                describe="frontends.gemini_layers:describe", schema="gemini-layers"),
    InputFormat("mscclpp", "MSCCL++ execution plan (collective algorithm; seed or executor "
                "schema)", "frontends.mscclpp",
                lambda doc: isinstance(doc, dict) and "gpus" in doc
                and ("collective" in doc or "protocol" in doc), "mscclpp.algorithm",
                simulate="targets.mscclpp.simulator:simulate_plan",
                describe="frontends.mscclpp:describe",
                check="targets.mscclpp.check:check", schema="mscclpp"),
)


def format_named(name: str) -> InputFormat | None:
    return next((f for f in FORMATS if f.name == name), None)


def detect_format(value: Any) -> InputFormat | None:
    return next((f for f in FORMATS if f.sniff(value)), None)


def format_of_root(op_name: str) -> InputFormat | None:
    return next((f for f in FORMATS if f.root_op == op_name), None)
