"""A module loaded on its first attribute access: pandas costs a cold `locus route` 0.35-0.4 s
of imports it never needs (routing reads the store through SQLAlchemy and numpy), so the modules
on that path name it through `lazy_module` and load it when an import or a table read first
touches it.

    >>> json = lazy_module("json")
    >>> json.dumps([1])
    '[1]'
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["lazy_module"]


class _LazyModule:
    """Stands for the module `name` and imports it on the first attribute asked of it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy_module(name: str) -> Any:
    """A stand-in for `import name` that imports it on first use."""
    return _LazyModule(name)
