"""Lazy public names of a package (PEP 562): `import rollout_cards` and `rcard --help` load
neither pyarrow nor pydantic; a name's module loads on first use."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__all__ = ["install"]


class _Package(types.ModuleType):
    """A package whose public function shares a submodule's name (`rollout_cards.validate`,
    `rollout_cards.rules.rescore`): the import system binds the submodule on its parent
    when first loaded, which would hide the function. The public name wins."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in self.__dict__.get("_LAZY", {}):
            return  # resolves through __getattr__ to what _LAZY names
        super().__setattr__(name, value)


def install(package: str, names: dict[str, tuple[str, str]]) -> None:
    """Make `names` (public name -> (module relative to `package`, attribute)) attributes of
    `package` that import their module when first read."""
    module = sys.modules[package]
    namespace = module.__dict__

    def __getattr__(name: str) -> Any:
        try:
            target, attribute = names[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(target, package), attribute)
        namespace[name] = value  # later reads skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    namespace["_LAZY"] = names
    namespace["__getattr__"] = __getattr__
    namespace["__dir__"] = __dir__
    module.__class__ = _Package
