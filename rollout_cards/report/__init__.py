"""`rcard report`: a self-contained HTML report of a card and its rules.

The page renders the same `RescoreReport` as `rcard rescore` (its numbers are the ones the
text output prints), the card's scope, provenance, drops and integrity, and a browser over
a deterministic sample of episodes. `write_report` builds and writes it atomically.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..errors import RolloutCardError
from ..io.targets import file_target, write_output
from ..rules.rescore import RuleSource
from .data import ReportData, SampleLimits, gather
from .page import render_html

__all__ = ["ReportData", "SampleLimits", "build_report", "check_target", "gather", "render_html", "write_report"]


def build_report(
    card: str | os.PathLike[str],
    rules: Iterable[RuleSource] = (),
    *,
    seed: int | None = None,
    limits: SampleLimits | None = None,
    check: bool = True,
    public_key: str | os.PathLike[str] | None = None,
    signature: str | os.PathLike[str] | None = None,
) -> str:
    """The HTML text of the report of `card` under its rules and the alternatives."""
    from .. import __version__

    data = gather(card, rules, seed=seed, limits=limits, check=check, public_key=public_key, signature=signature)
    return render_html(data, generated_by=f"rollout-cards {__version__}")


def check_target(out: str | os.PathLike[str], *, overwrite: bool = False,
                 card: str | os.PathLike[str] | None = None) -> Path:
    """Refuse, before any work is done, an existing `out` unless `overwrite`, a directory, a
    link, and a path in `card` (the report would replace or add a file of the card)."""
    return file_target(out, overwrite=overwrite, inputs=[] if card is None else [card], what="the report")


def write_report(html_text: str, out: str | os.PathLike[str], *, overwrite: bool = False,
                 card: str | os.PathLike[str] | None = None) -> Path:
    """Write the page to `out` through a new temporary file and a rename (never a torn page)."""
    try:
        return write_output(out, html_text, overwrite=overwrite, inputs=[] if card is None else [card],
                            what="the report")
    except OSError as exc:
        raise RolloutCardError(f"cannot write {out}: {exc.strerror or exc}") from None
