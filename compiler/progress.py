"""Progress bars on stderr for work that takes more than a moment.

`progress(items, label)` iterates like `items`; when stderr is a terminal (and `PLANC_QUIET`
is not set) it draws a tqdm bar that appears after a second, so short runs stay silent and
logs and pipes never see control characters.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def enabled() -> bool:
    return sys.stderr.isatty() and not os.environ.get("PLANC_QUIET")


def progress(items: Iterable[T], label: str, total: int | None = None) -> Iterator[T]:
    if not enabled():
        yield from items
        return
    from tqdm import tqdm

    yield from tqdm(items, desc=f"planc: {label}", total=total, delay=1.0, leave=False,
                    file=sys.stderr, unit="")
