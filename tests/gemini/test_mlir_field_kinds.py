"""A Gemini schedule read from MLIR text can hold any attribute in any field (the JSON importer
checks kinds; the MLIR parser only builds what it reads). `planc check` and compiling must
report a field of the wrong kind, or a missing required one, as a one-line error with exit 1,
never an internal error: a workload's rules read its records' fields, so every record passes
its definition's checks before any record's own rules run."""

from __future__ import annotations

import json
import random
import re

import pytest

from tests.gemini.fixtures import small_schedule

WRONG_KINDS = ["1.5 : f64", "unit", "{}", "[1 : i64, 2 : i64]", '"x"', "array<i64>", "true",
               "5 : i32", "#gemini.dest<core_id = 0, kind = \"core\", workload_id = 0>"]
"""Values of other kinds than a field declares (integers, int arrays, strings, lists)."""

FIELD = re.compile(r"(?<=[{,] )(\w+) = (array<i64[^>]*>|-?\d+ : i64|\"[^\"]*\"|true|false)")
"""A record's field with a plain value, in the property dictionary of an op's line."""


@pytest.fixture(scope="module")
def small_mlir(tmp_path_factory) -> str:
    from compiler.driver import main

    folder = tmp_path_factory.mktemp("small")
    source = folder / "small.json"
    source.write_text(json.dumps(small_schedule()))
    target = folder / "small.mlir"
    assert main([str(source), "-t", "mlir", "-o", str(target)]) == 0
    return target.read_text()


def _mutants(text: str, count: int, seed: int) -> list[tuple[str, str]]:
    """(description, text) with one field of one record line given a value of another kind,
    or a required field dropped, or a destination's layer name made a number."""
    rng = random.Random(seed)
    lines = text.splitlines()
    fields = [(i, m) for i, line in enumerate(lines) if "gemini." in line
              for m in FIELD.finditer(line.split("<", 1)[0] if "#gemini" in line else line)]
    found = []
    for _ in range(count):
        i, match = rng.choice(fields)
        line = lines[i]
        choice = rng.random()
        if choice < 0.15:
            changed = line[:match.start()] + line[match.end():].removeprefix(", ")
            what = f"line {i + 1}: {match.group(1)} dropped"
        elif choice < 0.25 and "layer_name = " in line and "#gemini.dest<" in line:
            changed = re.sub(r'(#gemini.dest<[^>]*layer_name = )"[^"]*"', r"\g<1>3", line,
                             count=1)
            what = f"line {i + 1}: a destination's layer name made 3"
        else:
            value = rng.choice(WRONG_KINDS)
            changed = line[:match.start(2)] + value + line[match.end(2):]
            what = f"line {i + 1}: {match.group(1)} = {value}"
        found.append((what, "\n".join([*lines[:i], changed, *lines[i + 1:]]) + "\n"))
    return found


@pytest.mark.parametrize("seed", range(3))
def test_fields_of_other_kinds_are_errors_not_crashes(planc, tmp_path, small_mlir, seed):
    for what, text in _mutants(small_mlir, 25, seed):
        source = tmp_path / "bad.mlir"
        source.write_text(text)
        out = tmp_path / "out_stschedule.json"
        for args in (("check", source), (source, "-t", "gemini", "-o", out)):
            r = planc(*args)
            assert r.code in (0, 1), f"{what}: {r.err}"
            if r.code == 1:
                lines = r.err.splitlines()
                assert len(lines) == 1 and lines[0].startswith("planc: error: "), \
                    f"{what}: {r.err}"
        assert not out.exists() or planc("check", source).code == 0, what
        out.unlink(missing_ok=True)


def test_a_record_without_a_required_field_is_named(planc, tmp_path, small_mlir):
    """The L2 tensor's own `size` is read by its workload's snapshot rule: the missing key is
    reported, not a comparison with None."""
    line = next(i for i, text in enumerate(small_mlir.splitlines())
                if "gemini.l2_tensor" in text)
    lines = small_mlir.splitlines()
    lines[line] = re.sub(r"(?<=, )size = \d+ : i64, ", "", lines[line], count=1)
    source = tmp_path / "nosize.mlir"
    source.write_text("\n".join(lines) + "\n")
    r = planc("check", source)
    assert r.code == 1
    assert r.err == f"planc: error: {source}: missing required key 'size' [gemini.l2_tensor]\n"


def test_an_attribute_refused_while_parsing_names_its_line(planc, tmp_path, small_mlir):
    lines = small_mlir.splitlines()
    line = next(i for i, text in enumerate(lines) if 'layer_name = "conv"' in text
                and "#gemini.dest<" in text)
    lines[line] = lines[line].replace('layer_name = "conv"', "layer_name = 3", 1)
    source = tmp_path / "dest.mlir"
    source.write_text("\n".join(lines) + "\n")
    r = planc("check", source)
    assert r.code == 1
    assert re.fullmatch(rf"planc: error: {re.escape(str(source))}: invalid IR: "
                        rf"{re.escape(str(source))}:{line + 1}:\d+: gemini.dest: field "
                        r"'layer_name' must be a string \[format\]\n", r.err), r.err
