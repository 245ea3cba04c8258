"""Ops the `sched` passes make by the thousand (kernels; task infos and task, resource and
processor groups), built from a prototype rather than by xDSL's generic builder.

`Operation.create` sets operands, results and successors through their setters (which make
use lists), adds regions one by one and fills default properties and attributes: about as much
work per op as the lowering around it. An op of a class that has none of those besides its
properties (and the regions given here) is the state `create` leaves it in with its own
properties: `bare_op` copies the fields of a prototype made once by `create` (so they are
xDSL's own) and sets the properties, the default ones filled in as `create` fills them.
`tests/sched/test_plan_tables.py` checks that ops built so are the generic ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Attribute, Operation, Region
from xdsl.irdl import IRDLOperation

_PROTOTYPES: dict[type, tuple[dict, dict, dict]] = {}
"""By op class: (the fields `create()` gives an op, the default properties and the default
attributes it fills in)."""


def _prototype(cls: type[IRDLOperation]) -> tuple[dict, dict, dict]:
    found = _PROTOTYPES.get(cls)
    if found is None:
        definition = cls.get_irdl_definition()
        if definition.operands or definition.results or definition.successors:
            raise TypeError(f"{cls.__name__} is not built bare: it has operands, results or "
                            "successors")
        fields = dict(cls.create().__dict__)
        found = _PROTOTYPES[cls] = (fields, fields.pop("properties"), fields.pop("attributes"))
    return found


def bare_op(cls: type[IRDLOperation], properties: dict[str, Attribute],
            regions: Sequence[Region] = ()) -> Operation:
    """`cls.create(properties=properties, regions=regions)` for an op class without operands,
    results or successors."""
    fields, default_properties, default_attributes = _prototype(cls)
    op = cls.__new__(cls)
    state = op.__dict__
    state.update(fields)
    if default_properties:
        properties = {**properties, **{k: v for k, v in default_properties.items()
                                       if k not in properties}}
    else:
        properties = dict(properties)
    state["properties"] = properties
    state["attributes"] = dict(default_attributes)
    for region in regions:
        op.add_region(region)
    return op
