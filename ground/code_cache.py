"""Files of compiled code kept beside a package's bytecode, as Python keeps a module's.

planc compiles some Python text at run time (dataclass methods, the JSON Schema validators
fastjsonschema generates); compiling it again in every command is start-up a user waits for.
A cache file holds `marshal`led values (code objects and plain containers) per interpreter
version and optimization level, in the package's `__pycache__`. Like bytecode it is only a
cache: a missing, unreadable or foreign file reads as empty, a file planc may not write is
left alone, and nothing is written under PYTHONDONTWRITEBYTECODE unless asked (`force`).
"""

from __future__ import annotations

import marshal
import os
import sys
from typing import Any

FORCE = False
"""Write cache files even under PYTHONDONTWRITEBYTECODE (a build step: `python -m
compiler.warm`, as `compileall` writes bytecode)."""


def cache_path(package_file: str, stem: str) -> str | None:
    """The cache file `stem` of the package whose `__init__` (or module) is `package_file`;
    None where bytecode goes elsewhere (`sys.pycache_prefix`)."""
    if sys.pycache_prefix:
        return None
    return os.path.join(os.path.dirname(os.path.abspath(package_file)), "__pycache__",
                        f"{stem}.{sys.implementation.cache_tag}-{sys.hexversion:x}"
                        f"-O{sys.flags.optimize}.marshal")


def read(path: str | None) -> Any:
    """The file's value, or None if it is missing or unreadable."""
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            return marshal.loads(f.read())  # (`marshal.load` reads a file in small pieces)
    except (OSError, EOFError, ValueError, TypeError):
        return None


def write(path: str | None, value: Any, *, force: bool = False) -> None:
    """Write `value` atomically (a reader sees the old file or the new one, never half)."""
    if path is None or (sys.dont_write_bytecode and not (force or FORCE)):
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            marshal.dump(value, f)
        os.replace(tmp, path)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
