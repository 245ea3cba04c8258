"""Ops the `sched` passes make by the thousand (kernels; task infos and task, resource and
processor groups) are built by `bare_op`, from a prototype rather than by xDSL's generic
builder. It lives in `dialects.utils` (the Gemini dialect builds its records with it, and
dialects do not import passes); this module keeps the passes' import of it.
"""

from __future__ import annotations

from dialects.utils import bare_op

__all__ = ["bare_op"]
