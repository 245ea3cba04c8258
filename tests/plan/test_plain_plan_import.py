"""The plain reader of ARK plan processor groups (`ark_plan._plain_processor_group`) builds
what the checked reader builds, or gives up.

A plan may hold a million processor groups, so the usual ones are read straight from the
parsed JSON; anything else goes to the checked reader, which says what is wrong. Here both
read real plan groups and many mutants of them (broken and odd but valid): where the plain
reader answers, the ops must equal the checked reader's (classes, properties in order,
attributes, locations, nesting); it must answer for the unmutated groups and give up on
every mutant the checked reader refuses.
"""

from __future__ import annotations

import copy
import json
import random

from frontends import ark_plan
from frontends.ark_plan import _plain_processor_group, _PlanImporter
from ground.diagnostics import PlancError
from ground.json_reader import JsonNode
from tests.conftest import corpus_root


def describe(op) -> list:
    """The op and everything nested in it as comparable rows."""
    return [(type(o), list(o.properties.items()), o.attributes, o.location,
             o.parent_op() is not None and type(o.parent_op()))
            for o in op.walk()]


def checked(value, path: str):
    importer = _PlanImporter(JsonNode({}, "$"))
    saved = ark_plan._plain_processor_group
    ark_plan._plain_processor_group = lambda value, path: None
    try:
        return importer.read_processor_group(JsonNode(value, path))
    finally:
        ark_plan._plain_processor_group = saved


def groups() -> list[dict]:
    found = []
    for path in sorted(corpus_root().glob("ark/**/*.json")):
        doc = json.loads(path.read_text())
        if isinstance(doc, dict):
            found += doc.get("ProcessorGroups", [])
    found.append({"ProcessorRange": [0, 108, 2], "ResourceGroups": [
        {"ProcessorRange": [0, 108, 2], "WarpRange": [0, 4], "SramRange": [0, 0],
         "TaskGroups": [{"TaskId": 3, "TaskRange": [0, 864, 3], "Granularity": 2},
                        {"TaskId": 4, "TaskRange": [5, 5], "Granularity": 1}]},
        {"ProcessorRange": [1, 2], "WarpRange": [4, 8], "SramRange": [0, 96],
         "TaskGroups": []}]})
    return found


ODD_VALUES = [None, True, 1.0, -1, 2**63, 2**64, "0", [], [0], [0, 1, 2, 3], [1, 0], [0, 4, 0],
              [True, 1], [0, 1.0], {}, [0, 2**63]]


def mutants(group: dict, rng: random.Random, count: int) -> list[dict]:
    """Copies with one member (at any depth) replaced, removed or added."""
    out = []
    for _ in range(count):
        mutant = copy.deepcopy(group)
        node = mutant
        while True:
            key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
            child = node[key]
            if isinstance(child, dict | list) and child and rng.random() < 0.6 and not (
                    isinstance(child, list) and all(isinstance(v, int) for v in child)):
                node = child
                continue
            action = rng.random()
            if action < 0.7:
                node[key] = rng.choice(ODD_VALUES)
            elif isinstance(node, dict) and action < 0.85:
                del node[key]
            elif isinstance(node, dict):
                node["Extra"] = 1
            else:
                node[key] = rng.choice(ODD_VALUES)
            break
        out.append(mutant)
    return out


def test_plain_groups_are_the_checked_ones():
    rng = random.Random(26)
    found = groups()
    assert found
    answered = gave_up = 0
    for group in found:
        plain = _plain_processor_group(group, "$.ProcessorGroups[0]")
        assert plain is not None, group
        assert describe(plain) == describe(checked(group, "$.ProcessorGroups[0]"))
        for mutant in mutants(group, rng, 40):
            plain = _plain_processor_group(mutant, "$.ProcessorGroups[7]")
            try:
                reference = checked(mutant, "$.ProcessorGroups[7]")
            except PlancError:
                assert plain is None, mutant
                gave_up += 1
                continue
            if plain is None:
                gave_up += 1
            else:
                answered += 1
                assert describe(plain) == describe(reference), mutant
    assert answered and gave_up
