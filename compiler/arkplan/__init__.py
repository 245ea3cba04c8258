"""ARK plans: the whole-document rules of `planc check` (`check`), decided symbolically with
the progressions and intervals of `coverage`."""
