"""Writing results without ever leaving a partial file behind.

Targets build their whole output in memory (a text, or a mapping of relative file names to
texts for directory targets such as C++ sources). Only when everything succeeded is it written,
through a temporary file in the destination directory that is renamed into place, so a failure at
any point leaves what the user had untouched.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from ground.diagnostics import PlancError

# What a target produces: the text of one file, or {relative path: text} for a directory.
Product = str | bytes | Mapping[str, str]


def _umask_mode(mode: int) -> int:
    """`mode` as the user's umask lets new files have it (0666 -> 0644 under umask 022)."""
    current = os.umask(0)
    os.umask(current)
    return mode & ~current


def write_file_atomic(path: str | Path, text: str | bytes) -> None:
    """Write `text` (UTF-8) or raw bytes (an image) to `path` atomically. An existing
    device, pipe or socket (`-o /dev/null`, `-o /dev/stdout`, a FIFO) is written into
    instead: renaming a file over it would replace the node itself (as root, `/dev/null`
    became a regular file holding the plan). A write the system refuses (a full disk,
    `/dev/full`, a directory planc may not create files in) is one clean error. A symbolic
    link is written through, as the shell's `>` would: the file it names gets the result and
    the link stays (renaming over the link would have replaced it with a plain file). An
    existing file keeps its permissions."""
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    data = text.encode("utf-8") if isinstance(text, str) else text
    existing = _stat(path)
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise PlancError("is a directory; this target writes a single file", file=str(path))
    with _refused_writes(path):
        if existing is not None and not stat.S_ISREG(existing.st_mode):
            with open(path, "wb") as f:
                f.write(data)
            return
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            raise PlancError(f"output directory '{parent}' does not exist", file=str(path))
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            # mkstemp makes the file private (0600); a new result gets the umask's mode, a
            # replaced one the mode it had.
            os.chmod(tmp, stat.S_IMODE(existing.st_mode) if existing is not None
                     else _umask_mode(0o666))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _stat(path: Path) -> os.stat_result | None:
    """What is at `path` (through links), or None if nothing is."""
    try:
        return os.stat(path)
    except OSError:
        return None


@contextmanager
def _refused_writes(path: Path) -> Iterator[None]:
    """Turn an OSError while writing `path` into planc's one-line error."""
    try:
        yield
    except OSError as e:
        raise PlancError(f"cannot write the output: {e.strerror or e}", file=str(path)) from None


def write_directory_atomic(path: str | Path, files: Mapping[str, str]) -> None:
    """Write `files` under directory `path`, replacing same-named files and keeping others."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise PlancError("exists and is not a directory; this target writes a directory",
                         file=str(path))
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise PlancError(f"output directory '{parent}' does not exist", file=str(path))
    with _refused_writes(path):
        _write_directory(path, parent, files)


def _write_directory(path: Path, parent: Path, files: Mapping[str, str]) -> None:
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
