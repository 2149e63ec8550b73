"""rollout_cards: reproducible agent and eval results.

A rollout card keeps every episode and step, declares each reporting rule as data
that can be replayed, lists everything dropped, and states the release scope.

    import rollout_cards as rc
    card = rc.open("fixtures/cards/synthetic")
    card.episodes(columns=["agent", "status"])
"""

from . import errors
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
from .tables import FORMAT, StepKind, TerminalStatus
from .validate import Report, validate

__version__ = "0.1.0"

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
