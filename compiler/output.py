"""Writing results without ever leaving a partial file behind.

Targets build their whole output in memory (a text, or a mapping of relative file names to
texts for directory targets such as C++ sources). Only when everything succeeded is it written,
through a temporary file in the destination directory that is renamed into place, so a failure at
any point leaves what the user had untouched.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping, Sequence
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
    `/dev/full`, a directory planc may not create files in, a name too long) is one clean
    error. A symbolic link is written through, as the shell's `>` would: the file it names
    gets the result and the link stays (renaming over the link would have replaced it with a
    plain file); a link that leads to itself is refused. An existing file keeps its
    permissions; a read-only one is refused, as the shell's `>` refuses it. A name ending in
    `/` names a directory, which a single file cannot be."""
    if str(path).endswith(("/", os.sep)):
        raise PlancError("ends with '/', which names a directory; this target writes a single "
                         "file (give a file name)", file=str(path))
    with _refused_writes(Path(path)):
        _write_file(Path(path), text.encode("utf-8") if isinstance(text, str) else text)


def _write_file(path: Path, data: bytes) -> None:
    if path.is_symlink():
        path = _link_target(path)
    existing = _stat(path)
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise PlancError("is a directory; this target writes a single file", file=str(path))
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        with open(path, "wb") as f:
            f.write(data)
        return
    if existing is not None:
        _refuse_read_only(path, existing)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise PlancError(f"output directory '{parent}' does not exist", file=str(path))
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name[:200]}.", suffix=".tmp")
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


def _link_target(link: Path) -> Path:
    """The file a symbolic link leads to; a loop of links (a link to itself) has none, and
    writing "through" it would have replaced the link with a plain file."""
    try:
        return Path(os.path.realpath(link, strict=True))
    except FileNotFoundError:
        return Path(os.path.realpath(link))       # a dangling link: the file it will name
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise PlancError("is a symbolic link that leads back to itself; planc does not "
                             "replace it (remove it or choose another output)",
                             file=str(link)) from None
        raise


def _refuse_read_only(path: Path, existing: os.stat_result) -> None:
    """An existing file nobody may write (mode 0444): the shell's `>` refuses it, and
    replacing it by renaming (which only needs the directory writable) would undo what its
    owner asked for. Root may write anything, so the mode bits decide, not `access`."""
    if not existing.st_mode & 0o222 or not os.access(path, os.W_OK):
        raise PlancError(f"is not writable (mode {stat.S_IMODE(existing.st_mode):04o}); "
                         "planc does not replace it (make it writable or choose another "
                         "output)", file=str(path))


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


def write_directory_atomic(path: str | Path, files: Mapping[str, str],
                           inputs: Sequence[str | Path] = ()) -> None:
    """Write `files` under directory `path`, replacing same-named files and keeping others.
    A generated file that would replace one of `inputs` (`planc d/tensors.json -t cpu -o d`),
    or a read-only file, is refused before anything is written."""
    path = Path(path)
    with _refused_writes(path):
        if path.exists() and not path.is_dir():
            raise PlancError("exists and is not a directory; this target writes a directory",
                             file=str(path))
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            raise PlancError(f"output directory '{parent}' does not exist", file=str(path))
        _refuse_replacing(path, files, inputs)
        _write_directory(path, parent, files)


def _refuse_replacing(path: Path, files: Mapping[str, str],
                      inputs: Sequence[str | Path]) -> None:
    """Nothing the directory target writes may replace an input or a read-only file."""
    if not path.is_dir():
        return
    for name in files:
        target = path / name
        existing = _stat(target)
        if existing is None:
            continue
        for source in inputs:
            if os.path.exists(source) and os.path.samefile(source, target):
                raise PlancError(f"the generated file {name} would replace the input "
                                 f"{source}; planc does not write over its input (choose "
                                 "another output directory)", file=str(path))
        if stat.S_ISREG(existing.st_mode):
            _refuse_read_only(target, existing)


def _write_directory(path: Path, parent: Path, files: Mapping[str, str]) -> None:
    staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{path.name[:200]}.", suffix=".tmp"))
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


def write_product(destination: str | Path, product: Product,
                  inputs: Sequence[str | Path] = ()) -> None:
    """Write what a target produced: one file, or the files of a directory target (none of
    which may replace one of `inputs`)."""
    if str(destination) == "":
        raise PlancError("an empty output name; give a file name")
    if isinstance(product, str | bytes):
        write_file_atomic(destination, product)
    else:
        write_directory_atomic(destination, product, inputs)
