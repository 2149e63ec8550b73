"""The contract between `rcard import` and an importer, built in or from another package.

An importer is any object with a `name`, a one-line `summary`, the `options` it
understands and a `read(request, session)` method. It maps the request's source
files into the `ImportSession` (episodes, steps, rules, drops, provenance) and
raises `SourceFormatError` for input it cannot map. Packages register importers
under the entry-point group `rollout_cards.importers` (see `registry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import ImporterError
from .session import ImportSession

__all__ = ["ImportRequest", "Importer"]


@dataclass(frozen=True)
class ImportRequest:
    """What the user asked for: the source files and the format-independent options.

    `urls[i]` is where `sources[i]` was published (None when not given); `options`
    holds importer-specific settings (e.g. `predictions` for SWE-bench, `fields` for
    chat JSONL), checked by the importer against its `options`.
    """

    sources: tuple[Path, ...]
    urls: tuple[str | None, ...] = ()
    agent: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def url(self, index: int) -> str | None:
        """The URL given for source `index`, if any."""
        return self.urls[index] if index < len(self.urls) else None

    def check_options(self, importer: str, allowed: Mapping[str, str]) -> None:
        """Refuse options the importer does not understand (a typo must not be ignored)."""
        unknown = sorted(set(self.options) - set(allowed))
        if unknown:
            known = ", ".join(sorted(allowed)) or "none"
            raise ImporterError(f"the {importer} importer has no option {', '.join(unknown)} (it takes: {known})")


@runtime_checkable
class Importer(Protocol):
    """A source format that `rcard import` can read."""

    name: str
    summary: str
    #: option name -> one-line description
    options: Mapping[str, str]

    def read(self, request: ImportRequest, session: ImportSession) -> None:
        """Map every source of `request` into `session`."""
        ...
