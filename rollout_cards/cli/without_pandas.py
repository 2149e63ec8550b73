"""Keep pyarrow from importing pandas during a command that does not use it.

pyarrow imports pandas the first time it converts any Python object to Arrow (`pa.array`,
`pa.table`, a compute call with a Python scalar), only to recognise pandas' own objects and
missing-value markers; its C++ layer retries that import on every conversion while it fails.
With pandas installed (statsmodels, Ray and most notebooks bring it) this costs about 0.6 s of
CPU and most of a second of wall time: more than `rcard validate` spends on a small card.

The same first conversion probes `dateutil.relativedelta` (to recognise its interval objects;
~15-20 ms of a 0.9 s `rcard validate`), which is blocked alike.

rollout-cards never hands pyarrow a pandas or dateutil object, so a command that runs only this package's
code runs with pandas reported missing to whoever imports it. Not blocked: `import` of a format
a plug-in provides (other people's code; the built-in importers block it themselves) and
`--engine ray` (Ray's driver uses pandas), which calls `unblock()` first. The block is lifted when the command's context closes; pyarrow's explicit
pandas entry points (`to_pandas`, `from_pandas`) import pandas again on first use after that.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["block", "unblock"]


_BLOCKED = frozenset({"pandas", "dateutil"})


class _PandasMissing:
    """Answers an import of `pandas` (or `dateutil`) with ImportError before any other finder runs (a
    meta path finder needs only `find_spec`; importlib.abc would load importlib.resources,
    tempfile and random for nothing)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:  # noqa: ARG002
        top = fullname.partition(".")[0]
        if top in _BLOCKED and top not in sys.modules:  # a loaded package's submodules stay importable
            raise ImportError(f"{top} is not used by this rcard command", name=fullname)
        return None


def block() -> None:
    """From now on `import pandas` (and dateutil) fails, unless pandas is already loaded (then
    pyarrow's probes have nothing left to save)."""
    if "pandas" not in sys.modules and not any(isinstance(f, _PandasMissing) for f in sys.meta_path):
        sys.meta_path.insert(0, _PandasMissing())


def unblock() -> None:
    """Undo `block()` (idempotent)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _PandasMissing)]
