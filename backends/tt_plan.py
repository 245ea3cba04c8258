"""`--target tt`: Tenstorrent runtime plans (`tt.plan.json`).

From an ARK model the default pipeline tiles every compute operator into 32x32 tiles
(`tt-tile`), partitions the output tiles over the core grid (`tt-partition`) and places each
buffer in L1 or DRAM (`tt-place`). A model of one kernel gives one plan object, exactly the
seed's format plus `schema_version` and planc's `kernel` member; a model of several kernels
gives a JSON array of such plans in execution order. A plan input is verified and written back.

The text is `json.dumps(indent=2)` without a trailing newline, as TileLang-TT's `emit_tt_plan`
writes it, so planc's output and TileLang-TT's files diff cleanly (the upstream example plans
round-trip byte for byte).
"""

from __future__ import annotations

import json
import re
import secrets
from argparse import Namespace
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from backends.ark_model import operator_json
from dialects import tt
from dialects.json_value import dict_value
from ground.diagnostics import PlancError, UnsupportedInput

# ---------------------------------------------------------------------------------------------
# Plans as JSON values
# ---------------------------------------------------------------------------------------------


def _finish(op: tt.JsonObjectOp, members: dict[str, Any]) -> dict[str, Any]:
    """`members` plus the op's kept extras, in the file's key order when it had its own."""
    members.update(dict_value(op.extra))
    order = op.key_order_list
    if order is None:
        return members
    return {key: members[key] for key in order if key in members} | {
        key: value for key, value in members.items() if key not in order}


def core_range_json(op: tt.CoreRangeOp) -> dict[str, Any]:
    out: dict[str, Any] = {"start": list(op.start), "extent": list(op.extent)}
    if op.replicated is not None:
        out["replicated"] = op.is_replicated
    return _finish(op, out)


def work_json(op: tt.WorkOp) -> dict[str, Any]:
    out: dict[str, Any] = {"io": op.tile[0], "jo": op.tile[1]}
    if op.len_k is not None:
        out["len_k"] = op.len_k_value
    if op.tile_order is not None:
        out["tile_order"] = op.tile_order.data
    return _finish(op, out)


def work_list_json(op: tt.WorkListOp) -> list[dict[str, Any]]:
    """The JSON objects a `tt.work_list` stands for (what `tt.work` ops would give)."""
    tail: dict[str, Any] = {}
    if op.len_k is not None:
        tail["len_k"] = op.len_k_value
    if op.tile_order is not None:
        tail["tile_order"] = op.tile_order.data
    return [{"io": io, "jo": jo, **tail} for io, jo in op.pairs()]


def _work_list_text(op: tt.WorkListOp, indent: int) -> list[str]:
    """The items of a `tt.work_list` as `json.dumps(indent=2)` writes them at nesting depth
    `indent` (spaces), one text per item: a format string applied to each tile, since a
    planned Llama layer lists two million of them."""
    tail = (op.len_k_value, None if op.tile_order is None else op.tile_order.data)
    template = _ITEM_TEMPLATES.get((indent, tail))
    if template is None:
        template = _item_template(indent, *tail)
        if len(_ITEM_TEMPLATES) < 4096:
            _ITEM_TEMPLATES[(indent, tail)] = template
    return [template % pair for pair in op.pairs()]


def _item_template(indent: int, len_k: int | None, tile_order: str | None) -> str:
    item, member = " " * indent, " " * (indent + 2)
    parts = ['"io": %d', '"jo": %d']
    if len_k is not None:
        parts.append(f'"len_k": {len_k}')
    if tile_order is not None:
        order = json.dumps(tile_order, ensure_ascii=False).replace("%", "%%")
        parts.append(f'"tile_order": {order}')
    return f"{item}{{\n" + ",\n".join(member + part for part in parts) + f"\n{item}}}"


_ITEM_TEMPLATES: dict[tuple, str] = {}
"""`_item_template`s by (indent, len_k, tile_order): a document repeats a few."""


def layout_json(op: tt.LayoutOp) -> dict[str, Any]:
    out: dict[str, Any] = {"shard": op.shard_value}
    if op.interleave is not None:
        out["interleave"] = op.interleaved
    if op.stride is not None:
        out["stride"] = op.stride
    if op.tile_id_order is not None:
        out["tile_id_order"] = op.tile_id_order.data
    return _finish(op, out)


def kernel_json(op: tt.KernelOp) -> dict[str, Any]:
    out: dict[str, Any] = {"grid_tiles": list(op.grid_tiles)}
    if op.len_k is not None:
        out["len_k"] = op.len_k_value
    out["operator"] = operator_json(op.operator)
    return _finish(op, out)


def _items_json(core: tt.CoreOp, lists: list[tt.CoreOp] | None) -> Any:
    """A core's work items as JSON; with `lists`, a core holding only `tt.work_list`s becomes
    a placeholder (see `emit_plans`), and the core is appended to `lists`."""
    runs = core.runs()
    if lists is not None and runs and all(isinstance(op, tt.WorkListOp) for op in runs):
        lists.append(core)
        return _Placeholder(len(lists) - 1)
    return [item for op in runs
            for item in ([work_json(op)] if isinstance(op, tt.WorkOp) else work_list_json(op))]


class _Placeholder(str):
    """Stands for the items of core `lists[index]` in the text `json.dumps` writes: the
    string "\0planc-work-list-NONCE-index", with one random NONCE per emission."""

    nonce = ""

    def __new__(cls, index: int):
        return super().__new__(cls, f"\0planc-work-list-{cls.nonce}-{index}")


def plan_json(plan: tt.PlanOp, lists: list[tt.CoreOp] | None = None) -> dict[str, Any]:
    missing = [name for name, present in (("core_grid", plan.grid is not None),
                                           ("work_partition", plan.work_partition is not None),
                                           ("layouts", plan.layouts is not None)) if not present]
    if missing:
        raise PlancError(f"{plan.label()}: the plan has no {' or '.join(missing)} yet (run "
                         "tt-partition and tt-place, or the target's default pipeline)")
    out: dict[str, Any] = {
        "core_grid": list(plan.grid),
        "core_ranges": [core_range_json(r) for r in plan.core_ranges()],
        "work_partition": {core.key.data: _items_json(core, lists)
                           for core in plan.work_partition.cores()},
        "layouts": {layout.buffer_name: layout_json(layout)
                    for layout in plan.layouts.layouts()},
    }
    if plan.schema_version is not None:
        out["schema_version"] = plan.schema_version.value.data
    if plan.backend_version is not None:
        out["backend_version"] = plan.backend_version.data
    if plan.kernel is not None:
        out["kernel"] = kernel_json(plan.kernel)
    return _finish(plan, out)


def plans_op(module: ModuleOp) -> tt.PlansOp:
    found = [op for op in module.ops if isinstance(op, tt.PlansOp)]
    if len(found) != 1:
        raise PlancError(f"expected one tt.plans document in the module, found {len(found)}")
    return found[0]


def document_json(module: ModuleOp, lists: list[tt.CoreOp] | None = None) -> Any:
    doc = plans_op(module)
    plans = [plan_json(p, lists) for p in doc.plans()]
    if doc.is_listed or len(plans) != 1:
        return plans
    return plans[0]


def emit_plans(module: ModuleOp) -> str:
    """`json.dumps(document_json(module), indent=2, ensure_ascii=False)`, with the items of
    each `tt.work_list` written from its arrays in place of a placeholder (the same text)."""
    _Placeholder.nonce = secrets.token_hex(8)
    lists: list[tt.CoreOp] = []
    text = json.dumps(document_json(module, lists), indent=2, ensure_ascii=False)
    if not lists:
        return text
    marker = re.compile(r'"\\u0000planc-work-list-' + _Placeholder.nonce + r'-(\d+)"')
    found = list(marker.finditer(text))
    if [int(m.group(1)) for m in found] != list(range(len(lists))):
        # a placeholder's text also stood elsewhere (a user string): write it plainly
        return json.dumps(document_json(module), indent=2, ensure_ascii=False)
    pieces, at = [], 0
    for match, core in zip(found, lists, strict=True):
        line = text.rfind("\n", 0, match.start()) + 1
        indent = 0
        while text[line + indent] == " ":
            indent += 1
        items = [t for op in core.runs() for t in _work_list_text(op, indent + 2)]
        pieces += [text[at:match.start()], "[\n" + ",\n".join(items) + "\n" + " " * indent
                   + "]" if items else "[]"]
        at = match.end()
    pieces.append(text[at:])
    return "".join(pieces)


# ---------------------------------------------------------------------------------------------
# The target
# ---------------------------------------------------------------------------------------------


def lowering_pipeline(options: Namespace) -> str:
    """The passes turning an ARK model into scheduled plans, configured by the TT flags."""
    from devices.tt import device_named, parse_grid

    device = device_named(getattr(options, "arch", None))
    grid = parse_grid(getattr(options, "grid", None), device)
    strategy = getattr(options, "partition", None) or "auto"
    return (f"tt-tile,tt-partition{{grid={grid[0]}x{grid[1]} strategy={strategy} "
            f"arch={device.name}}},tt-place{{arch={device.name}}}")


def pipeline(source_format: str, options: Namespace) -> str:
    if source_format == "tt":
        return ""
    if source_format == "ark-model":
        return lowering_pipeline(options)
    raise UnsupportedInput("tt", "a Tenstorrent plan", source_format)


def snapshot(module: ModuleOp, source_format: str, options: Namespace) -> Any:
    """The input model's expressions, for `validate` (`backends.ark_plan.snapshot`)."""
    from backends import ark_plan

    return ark_plan.snapshot(module, source_format, options)


def validate(module: ModuleOp, source_format: str, options: Namespace,
             before: Any = None) -> list[str]:
    """Translation validation of plans lowered from a model: the operators the kernels
    carry, run in kernel order over the model's buffers, compute the input model's outputs
    (`targets.ark.equivalence`). A plan read in is the user's: `planc check` judges it."""
    return [f"against the input model: {p}" for p in prove(module, before)]


def prove(module: ModuleOp, before: Any) -> list[str]:
    """The differences between the input (`before`) and the model, or the plans the
    pipeline has made so far (after each pass, to name the one at fault)."""
    from dialects.ark import ModelOp
    from targets.ark.equivalence import compare

    if before is None:
        return []
    return compare(before, [op for op in module.ops if isinstance(op, (ModelOp, tt.PlansOp))])


def emit(module: ModuleOp, options: Namespace) -> str:
    return emit_plans(module)
