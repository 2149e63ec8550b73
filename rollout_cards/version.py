"""The package's and the format's versions: plain constants, importable without pyarrow
(`rcard --version` prints them before anything heavy is loaded)."""

from __future__ import annotations

__all__ = ["FORMAT", "FORMAT_NAME", "FORMAT_VERSION", "__version__"]

#: Kept equal to pyproject.toml's `version` (tests/test_package.py checks it).
__version__ = "0.1.0"

FORMAT_NAME = "rollout-card"
#: 0.2 added the optional steps columns `parent_seq` and `depth` (nested agents); a 0.1 card
#: has neither, and readers treat them as null.
FORMAT_VERSION = (0, 2)
FORMAT = f"{FORMAT_NAME}/{FORMAT_VERSION[0]}.{FORMAT_VERSION[1]}"
