"""`python -m compiler.warm ARGS`: the planc command ARGS (`planc ARGS`), writing the cache of
dataclass code (`compiler._startup.shared_dataclass_code`) even under PYTHONDONTWRITEBYTECODE:
a build step, as `compileall` is for bytecode."""

from __future__ import annotations

import sys

from compiler import _startup


def main() -> int:
    from compiler.driver import main as planc

    _startup.FORCE_WRITE = True
    sys.argv = ["planc", *sys.argv[1:]]
    return planc()


if __name__ == "__main__":
    sys.exit(main())
