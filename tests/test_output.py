"""Atomic output: whole files or nothing."""

from __future__ import annotations

import pytest

from compiler.output import write_directory_atomic, write_file_atomic
from ground.diagnostics import PlancError


def test_file_is_replaced_whole(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    write_file_atomic(target, "new")
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_missing_parent_directory(tmp_path):
    with pytest.raises(PlancError, match="does not exist"):
        write_file_atomic(tmp_path / "no" / "out.txt", "x")


def test_directory_keeps_unrelated_files(tmp_path):
    out = tmp_path / "gen"
    write_directory_atomic(out, {"a.cpp": "1", "sub/b.h": "2"})
    (out / "mine.txt").write_text("keep")
    write_directory_atomic(out, {"a.cpp": "3"})
    assert (out / "a.cpp").read_text() == "3"
    assert (out / "sub" / "b.h").read_text() == "2"
    assert (out / "mine.txt").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gen"]


def test_directory_target_over_a_file_is_refused(tmp_path):
    clash = tmp_path / "gen"
    clash.write_text("file")
    with pytest.raises(PlancError, match="is not a directory"):
        write_directory_atomic(clash, {"a": "b"})
    assert clash.read_text() == "file"
