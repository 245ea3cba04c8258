"""Writing results without ever leaving a partial file behind.

Targets build their whole output in memory (a text, or a mapping of relative file names to
texts for directory targets such as C++ sources). Only when everything succeeded is it written,
through a temporary file in the destination directory that is renamed into place, so a failure at
any point leaves what the user had untouched.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from compiler.diagnostics import PlancError

# What a target produces: the text of one file, or {relative path: text} for a directory.
Product = str | bytes | Mapping[str, str]


def _umask_mode(mode: int) -> int:
    """`mode` as the user's umask lets new files have it (0666 -> 0644 under umask 022)."""
    current = os.umask(0)
    os.umask(current)
    return mode & ~current


def write_file_atomic(path: str | Path, text: str | bytes) -> None:
    """Write `text` (UTF-8) or raw bytes (an image) to `path` atomically."""
    path = Path(path)
    if path.is_dir():
        raise PlancError("is a directory; this target writes a single file", file=str(path))
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise PlancError(f"output directory '{parent}' does not exist", file=str(path))
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
        # mkstemp makes the file private (0600); a written result gets the umask's mode.
        os.chmod(tmp, _umask_mode(0o666))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_directory_atomic(path: str | Path, files: Mapping[str, str]) -> None:
    """Write `files` under directory `path`, replacing same-named files and keeping others."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise PlancError("exists and is not a directory; this target writes a directory",
                         file=str(path))
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise PlancError(f"output directory '{parent}' does not exist", file=str(path))
    staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp"))
    os.chmod(staging, _umask_mode(0o777))   # mkdtemp's 0700 would be the directory's mode
    try:
        for name, text in files.items():
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        if not path.exists():
            staging.rename(path)
            return
        for name in files:
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / name, path / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def write_product(destination: str | Path, product: Product) -> None:
    if isinstance(product, str | bytes):
        write_file_atomic(destination, product)
    else:
        write_directory_atomic(destination, product)
