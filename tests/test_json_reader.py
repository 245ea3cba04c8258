"""JSON access with paths: each accessor's error names the path and what was expected."""

from __future__ import annotations

import pytest

from ground.diagnostics import PlancError
from ground.json_reader import JsonNode, parse_json


def error(fn):
    with pytest.raises(PlancError) as info:
        fn()
    return str(info.value)


def test_paths_compose():
    doc = JsonNode({"a": [{"b c": 1}]})
    assert doc["a"].elements()[0]["b c"].path == "$.a[0]['b c']"


def test_booleans_are_not_integers():
    assert error(lambda: JsonNode(True, "$.x").as_int()) == "$.x: expected an integer, got a boolean (true)"


def test_int_ranges():
    assert error(lambda: JsonNode(5, "$.n").as_int(0, 3)) == "$.n: expected an integer in [0, 3], got 5"
    assert error(lambda: JsonNode(-1, "$.n").as_int(lo=0)) == "$.n: expected an integer >= 0, got -1"


def test_int_lists():
    assert JsonNode([1, 2]).as_int_list(1, 4) == [1, 2]
    assert error(lambda: JsonNode([1, 2, 0], "$.s").as_int_list(1, 4, min_value=1)) == \
        "$.s[2]: expected an integer >= 1, got 0"


def test_choices():
    assert error(lambda: JsonNode("x", "$.k").as_str(("a", "b"))) == '$.k: expected a or b, got "x"'


def test_strict_parsing():
    assert error(lambda: parse_json("NaN")) == "invalid JSON: NaN is not valid JSON"
    assert error(lambda: parse_json('{"a": 1, "a": 2}')) == "$.a: invalid JSON: duplicate key 'a'"


def test_unknown_members():
    assert JsonNode({"Id": 1, "New": 2}).unknown_members(frozenset({"Id"})) == {"New": 2}


@pytest.mark.parametrize("bounded", [True, False])
def test_depth_guard_same_with_and_without_the_lowered_limit(monkeypatch, bounded):
    """The parse under a lowered recursion limit (which skips the walk over every container)
    and the walk itself give the same verdict at every depth around both thresholds."""
    from ground import json_reader

    if bounded:
        assert json_reader._bounded()  # CPython 3.11: the parser obeys the limit
    monkeypatch.setattr(json_reader, "_bounded", lambda: bounded)
    shallow, limit = json_reader._SHALLOW, json_reader.MAX_DEPTH
    for depth in (1, shallow - 2, shallow - 1, shallow, shallow + 1, limit, limit + 1, limit + 2,
                  limit + 50):
        text = '{"a": ' * depth + "1" + "}" * depth
        if depth <= limit + 1:   # depth counts containers: the innermost sits at depth - 1
            assert parse_json(text).value is not None
        else:
            assert error(lambda t=text: parse_json(t)).endswith(
                f"nested deeper than {limit} levels (planc's limit)")
            assert error(lambda t=text: parse_json(t)).startswith("$.a.a.a")


def test_depth_guard_recursion_limit_restored():
    import sys

    limit = sys.getrecursionlimit()
    parse_json('{"a": [[1]]}')
    with pytest.raises(PlancError):
        parse_json("[" * 150 + "]" * 149)
    assert sys.getrecursionlimit() == limit
