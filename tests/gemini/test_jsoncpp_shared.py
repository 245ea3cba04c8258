"""`styled_json` writes an object met again from its earlier text: the result must equal the
text of the same value with no object shared (a JSON round trip; `copy.deepcopy` would keep the
sharing), at any indentation, and a later
call must not reuse text of an object changed since."""

import json
import random

from backends.jsoncpp import styled_json


def _shared_value(rng: random.Random) -> dict:
    leaves = [{"core_id": rng.randrange(16), "type": rng.choice(["core", "DRAM"]),
               "lower": [rng.randrange(4) for _ in range(4)],
               "upper": [rng.randrange(4, 9) for _ in range(4)]} for _ in range(5)]
    value: dict = {}
    for i in range(20):
        entry = {"destination": [rng.choice(leaves) for _ in range(rng.randrange(4))],
                 "weight": rng.choice(leaves), "size": rng.randrange(100)}
        value[str(i)] = [entry, {"nested": entry}] if i % 3 else entry
    value["top"] = leaves[0]
    return value


def _unshared(value: dict) -> dict:
    return json.loads(json.dumps(value))


def test_shared_objects_write_as_unshared_copies() -> None:
    rng = random.Random(7)
    for _ in range(20):
        value = _shared_value(rng)
        assert styled_json(value) == styled_json(_unshared(value))


def test_a_changed_object_is_written_anew_by_the_next_call() -> None:
    leaf = {"a": 1, "b": [1, 2, 3, 4]}
    value = {"x": leaf, "y": [leaf, leaf]}
    first = styled_json(value)
    leaf["a"] = 2
    second = styled_json(value)
    assert second != first
    assert second == styled_json(_unshared(value))
