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


def check_target(out: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Refuse an existing `out` (a file or a link) unless `overwrite`; before any work is done."""
    target = Path(out)
    if os.path.lexists(target) and not overwrite:
        raise RolloutCardError(f"{target} exists; pass --overwrite to replace it")
    if target.is_dir():
        raise RolloutCardError(f"{target} is a directory; give a file name such as report.html")
    return target


def write_report(html_text: str, out: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write the page to `out` through a new temporary file and a rename (never a torn page)."""
    target = check_target(out, overwrite=overwrite)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(tmp, flags, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(html_text)
        os.replace(tmp, target)
    except OSError as exc:
        raise RolloutCardError(f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return target
