"""Names a package imports on first use (PEP 562), from one table of name -> defining module: the root
package and ``replay.agentv`` keep ``import`` cheap this way (``evalstore --version``, ``export``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_getattr(package: str, exports: dict[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: imports a listed name's module when the name is first
    read and keeps the value in ``namespace`` (the package's globals), so later reads skip it."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
