"""Importing a module on its first use instead of at import time (importlib's LazyLoader)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def import_lazily(name: str) -> ModuleType:
    """`name` as a module whose code runs on first attribute access. An already imported
    module is returned as it is. A later `import name` statement runs it too (the import system
    reads the module's `__spec__`), so users take the returned object instead.

    The recipe of importlib's documentation ("Implementing lazy imports"). An error in the
    module then surfaces at its first use, not here."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
