"""`python -m compiler.warm ARGS`: the planc command ARGS (`planc ARGS`), writing the caches of
compiled code even under PYTHONDONTWRITEBYTECODE: the dataclass code
(`compiler._startup.shared_dataclass_code`) and every shipped JSON Schema's validator
(`frontends.schemas.compiled`). A build step, as `compileall` is for bytecode."""

from __future__ import annotations

import sys

from compiler import _startup
from ground import code_cache


def main() -> int:
    from compiler.driver import main as planc
    from frontends import schemas

    _startup.FORCE_WRITE = code_cache.FORCE = True
    for name in schemas.SCHEMAS:
        schemas.compiled(name)
    sys.argv = ["planc", *sys.argv[1:]]
    return planc()


if __name__ == "__main__":
    sys.exit(main())
