"""What the `planc` and `planc-opt` programs do about their process rather than their input:
standard streams that were closed before they started, and running out of memory.

Exit codes (README.md): 0 success, 1 an error in the input or the request (one line), 2 an
internal error (a bug in planc), `EXIT_OUT_OF_MEMORY` (3) out of memory, 130 interrupted.
"""

from __future__ import annotations

import errno
import functools
import gc
import io
import os
import sys
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TextIO

EXIT_OUT_OF_MEMORY = 3
"""The exit code of a run that ran out of memory: not the input's mistake (1), and not a bug
(2), but a limit of the machine or of `ulimit -v` that a smaller problem or more memory
lifts."""


class ClosedStream(io.TextIOBase):
    """Standard output that was closed when the program started (`planc ... >&-`). Python
    leaves `sys.stdout` None then, and the first print was an AttributeError (an internal
    error, and a traceback from the flush at exit). Writing refuses with EBADF, which the
    programs report in one line as output that cannot be written; a run that prints nothing
    (`-o FILE`) is not disturbed."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


@contextmanager
def one_line_warnings(prog: str) -> Iterator[None]:
    """Python's warnings (numpy's RuntimeWarning, say) as one line each, `PROG: warning:
    Category: message`: their default form adds the file, line number and source text, a
    report of two lines that names planc's code rather than the input."""
    with warnings.catch_warnings():
        warnings.showwarning = functools.partial(_show_warning, prog)
        yield


def _show_warning(prog: str, message: Warning | str, category: type[Warning], filename: str,
                  lineno: int, file: TextIO | None = None, line: str | None = None) -> None:
    text = " ".join(str(message).split())
    (file or sys.stderr).write(f"{prog}: warning: {category.__name__}: {text}\n")


def guard_standard_streams() -> None:
    """Give each closed standard descriptor /dev/null, so that no file the program opens later
    becomes descriptor 1 or 2 (where a write meant for the terminal would land in it), and
    give Python a stdout that refuses writes (`ClosedStream`) and a stderr that drops them."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)       # the lowest free descriptor: `fd`
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stdout is None:
        sys.stdout = ClosedStream()
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 -- stderr for the process' life


def out_of_memory(prog: str, inputs: Iterable[str]) -> int:
    """Report running out of memory in one line; the exit code. Called after the failed
    work's frames are gone: what they held is collected first (the programs run with the
    cyclic collector off), so that writing the message has memory to do it."""
    gc.collect()
    sys.stderr.write(f"{prog}: error: {out_of_memory_message(inputs)}\n")
    return EXIT_OUT_OF_MEMORY


def out_of_memory_message(inputs: Iterable[str]) -> str:
    """Why the run stopped, with what it was given and what it was allowed: the total size
    of the input files and the address-space limit (`ulimit -v`, RLIMIT_AS)."""
    size = 0
    for path in inputs:
        try:
            size += os.stat(path).st_size if os.path.isfile(path) else 0
        except OSError:
            pass
    return (f"out of memory (input {size:,} bytes; {_memory_limit()}); give planc more "
            "memory or a smaller problem")


def _memory_limit() -> str:
    try:
        import resource
    except ImportError:                   # not POSIX: no limit planc can read
        return "the machine's memory ran out"
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return "no address-space limit is set, so the machine's memory ran out"
    return f"address-space limit {soft:,} bytes, ulimit -v {soft // 1024}"
