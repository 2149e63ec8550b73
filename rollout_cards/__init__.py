"""rollout_cards: reproducible agent and eval results.

A rollout card keeps every episode and step, declares each reporting rule as data
that can be replayed, lists everything dropped, and states the release scope.

    import rollout_cards as rc
    card = rc.open("fixtures/cards/synthetic")
    card.episodes(columns=["agent", "status"])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import errors
from ._lazy import install
from .errors import (
    CardFormatError,
    ExpressionError,
    ImporterError,
    ManifestError,
    RedactionSpecError,
    RolloutCardError,
    RuleError,
    SignatureError,
    SourceFormatError,
    StatisticsError,
    TableSchemaError,
    UnsafeArchiveError,
    UnsupportedFormatError,
    WriterError,
)
from .version import FORMAT, __version__

# The rest loads on first use: `import rollout_cards` and `rcard --help` need neither
# pyarrow nor pydantic. Public name -> (module, attribute).
_NAMES = {
    "ImportResult": (".importers", "ImportResult"),
    "import_source": (".importers", "import_source"),
    "pack_card": (".io.archive", "pack_card"),
    "unpack_card": (".io.archive", "unpack_card"),
    "recover_card": (".io.finalize", "recover_card"),
    "Card": (".io.reader", "Card"),
    "open": (".io.reader", "open_card"),
    "CardWriter": (".io.writer", "CardWriter"),
    "EpisodeWriter": (".io.writer", "EpisodeWriter"),
    "CardManifest": (".model.card", "CardManifest"),
    "Drop": (".model.card", "Drop"),
    "Plan": (".model.card", "Plan"),
    "Provenance": (".model.card", "Provenance"),
    "Scope": (".model.card", "Scope"),
    "Rule": (".model.rule", "Rule"),
    "redact_card": (".release.redact", "redact_card"),
    "GroupComparison": (".rules", "GroupComparison"),
    "GroupResult": (".rules", "GroupResult"),
    "RankChange": (".rules", "RankChange"),
    "RescoreReport": (".rules", "RescoreReport"),
    "RuleDifference": (".rules", "RuleDifference"),
    "RuleRun": (".rules", "RuleRun"),
    "load_rule": (".rules", "load_rule"),
    "rescore": (".rules", "rescore"),
    "StepKind": (".tables", "StepKind"),
    "TerminalStatus": (".tables", "TerminalStatus"),
    "Report": (".validate", "Report"),
    "validate": (".validate", "validate"),
}

if TYPE_CHECKING:  # what type checkers and IDEs see
    from .importers import ImportResult, import_source
    from .io.archive import pack_card, unpack_card
    from .io.finalize import recover_card
    from .io.reader import Card
    from .io.reader import open_card as open
    from .io.writer import CardWriter, EpisodeWriter
    from .model.card import CardManifest, Drop, Plan, Provenance, Scope
    from .model.rule import Rule
    from .release.redact import redact_card
    from .rules import (
        GroupComparison,
        GroupResult,
        RankChange,
        RescoreReport,
        RuleDifference,
        RuleRun,
        load_rule,
        rescore,
    )
    from .tables import StepKind, TerminalStatus
    from .validate import Report, validate


install(__name__, _NAMES)

__all__ = [
    "FORMAT",
    "Card",
    "CardFormatError",
    "CardManifest",
    "CardWriter",
    "Drop",
    "EpisodeWriter",
    "ExpressionError",
    "GroupComparison",
    "GroupResult",
    "ImportResult",
    "ImporterError",
    "ManifestError",
    "Plan",
    "Provenance",
    "RankChange",
    "RedactionSpecError",
    "Report",
    "RescoreReport",
    "RolloutCardError",
    "Rule",
    "RuleDifference",
    "RuleError",
    "RuleRun",
    "Scope",
    "SignatureError",
    "SourceFormatError",
    "StatisticsError",
    "StepKind",
    "TableSchemaError",
    "TerminalStatus",
    "UnsafeArchiveError",
    "UnsupportedFormatError",
    "WriterError",
    "__version__",
    "errors",
    "import_source",
    "load_rule",
    "open",
    "pack_card",
    "recover_card",
    "redact_card",
    "rescore",
    "unpack_card",
    "validate",
]
