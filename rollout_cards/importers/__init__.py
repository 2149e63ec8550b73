"""Importers: turn the logs other tools wrote into rollout cards.

    from rollout_cards.importers import import_source
    result = import_source("tau-bench", ["gpt-4o-airline.json"], "out/tau")

Built-in formats: `tau-bench`, `inspect` (.eval and .json logs), `swe-bench`,
`chat-jsonl` and `atif`. Other packages add formats through the entry-point group
`rollout_cards.importers` (see `registry`). Every importer records the sources'
sha256, size and URL, never invents a value the source lacks (it declares it in
the drops manifest instead), and leaves nothing behind when it fails.
"""

from .base import Importer, ImportRequest
from .registry import ENTRY_POINT_GROUP, available_formats, get_importer
from .run import import_source
from .session import ImportResult, ImportSession, MalformedRecord

__all__ = [
    "ENTRY_POINT_GROUP",
    "ImportRequest",
    "ImportResult",
    "ImportSession",
    "Importer",
    "MalformedRecord",
    "available_formats",
    "get_importer",
    "import_source",
]
