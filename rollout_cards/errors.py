"""Exceptions raised by rollout_cards.

The library raises only these; the CLI maps them to messages and exit codes.

    RolloutCardError
    ├── CardFormatError            a card's files do not follow the format
    │   ├── ManifestError          card.json is invalid (lists every problem)
    │   ├── UnsupportedFormatError card.json declares a format version we do not read
    │   ├── IntegrityError         a file read from a card does not match its inventory entry
    │   ├── DecodeLimitError       a table decodes to more bytes than its budget (a decompression bomb)
    │   └── TableSchemaError       a Parquet table does not match the format
    ├── WriterError                the writer API was used in a way the format forbids
    │   └── ValueTooLargeError     one text/JSON value is larger than the per-value cap
    ├── RuleError                  a rule file cannot be read, validated or applied
    │   └── ExpressionError        an expression in a rule cannot be parsed or compiled
    ├── StatisticsError            a statistic is not defined for its input
    ├── SourceFormatError          an importer's source file cannot be mapped
    ├── ImporterError              no importer for the format, or its options cannot be used
    ├── UnsafeArchiveError         a packed card breaks a safety rule (names the member and rule)
    ├── PathError                  a path cannot be used as asked (too long, a link, a file in the way)
    ├── RedactionSpecError         a redaction spec cannot be read or applied to a card
    └── SignatureError             a card's signature is missing, malformed or does not verify
"""

from __future__ import annotations

from dataclasses import dataclass

from .display import one_line, width

__all__ = [
    "CardFormatError",
    "DecodeLimitError",
    "EngineError",
    "ExportError",
    "ExpressionError",
    "ImporterError",
    "IntegrityError",
    "ManifestError",
    "PathError",
    "Problem",
    "RedactionSpecError",
    "RolloutCardError",
    "RuleError",
    "SignatureError",
    "SourceFormatError",
    "StatisticsError",
    "TableSchemaError",
    "UnsafeArchiveError",
    "UnsupportedFormatError",
    "ValueTooLargeError",
    "WriterError",
]


@dataclass(frozen=True)
class Problem:
    """One problem found in a document: where it is and what is wrong."""

    location: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message


class RolloutCardError(Exception):
    """Base class of every error raised by rollout_cards."""


class CardFormatError(RolloutCardError):
    """A card's files do not follow the rollout-card format."""


class ManifestError(CardFormatError):
    """card.json (or another JSON document) is invalid; `problems` lists every problem."""

    def __init__(self, source: str, problems: list[Problem]):
        self.source = source
        self.problems = list(problems)
        # One line per problem: a key or member name from the package may hold a newline, which
        # would otherwise start a line of its own (and could pose as a message of rcard's).
        lines = "\n".join(f"  - {one_line(p)}" for p in self.problems)
        super().__init__(f"{source}: {len(self.problems)} problem(s)\n{lines}")


class UnsupportedFormatError(CardFormatError):
    """card.json declares a format version this library does not read."""


class IntegrityError(CardFormatError):
    """A file read from a card differs from (or is absent from) card.json's inventory;
    `file` names it, `expected` and `actual` are the sha256 digests when both are known."""

    def __init__(self, message: str, *, file: str, expected: str | None = None, actual: str | None = None):
        self.file = file
        self.expected = expected
        self.actual = actual
        super().__init__(message)


class DecodeLimitError(CardFormatError):
    """A table decodes to more bytes than the budget allows for its size (io.decode)."""


class TableSchemaError(CardFormatError):
    """A Parquet table's schema or content does not match the format."""


class ExportError(CardFormatError):
    """`rcard export` cannot write this card in the asked format (what and why is said); an
    input problem like a malformed card, so exit 1."""


class WriterError(RolloutCardError):
    """The writer API was called in a way the format forbids."""


class ValueTooLargeError(WriterError):
    """One text or JSON value given to the writer is larger than its per-value cap
    (`io.value_sizes`); `column`, `size` and `limit` (bytes) say which and by how much, and
    `episode_id` / `seq` where the value sits when the writer knows it. Importers re-raise
    it as a SourceFormatError naming the source file and record."""

    def __init__(
        self,
        message: str,
        *,
        column: str,
        size: int,
        limit: int,
        episode_id: str | None = None,
        seq: int | None = None,
        table: str | None = None,
    ):
        self.column = column
        self.size = size
        self.limit = limit
        self.episode_id = episode_id
        self.seq = seq
        self.table = table
        super().__init__(message)


class RuleError(RolloutCardError):
    """A rule file cannot be read, validated or applied; `file`, `line` and `key` locate it.

    `card` names the card when the rule is one the card declares (its `file` is a name inside
    the card that carries the card's name, as `rules.loader.declared_rules` gives it): the card
    is then what is wrong (invalid input), not the request."""

    def __init__(
        self, message: str, *, file: str | None = None, key: str | None = None, line: int | None = None
    ):
        self.file = file
        self.key = key
        self.line = line
        #: The message without its place (what `at_line` builds the text again from).
        self.detail = message
        self.card: str | None = getattr(file, "card", None)
        super().__init__(self._text())

    def _text(self) -> str:
        file, line = self.file, self.line
        place = f"{file}:{line}" if file and line else (file or (f"line {line}" if line else None))
        where = ": ".join(x for x in (place, self.key) if x)
        return f"{where}: {self.detail}" if where else self.detail

    def at_line(self, line: int) -> None:
        """Name `line` of the file as the place (the message is built again from the fields)."""
        self.line = line
        self.args = (self._text(),)


_WINDOW = 100  # characters of an expression shown above the caret


class ExpressionError(RuleError):
    """An expression cannot be parsed or compiled; `column` is the 1-based offending position."""

    def __init__(
        self,
        message: str,
        *,
        expression: str,
        column: int | None = None,
        file: str | None = None,
        key: str | None = None,
    ):
        self.expression = expression
        self.column = column
        self.reason = message
        pointer = ""
        if column is not None:
            # A window of the expression around the column: an expression may be 10,000
            # characters (a literal of thousands of digits), the message one screen.
            start = max(0, min(column - 1 - _WINDOW // 2, len(expression) - _WINDOW))
            # Shown on one line with controls escaped (a rule's expression may hold a newline or an
            # escape sequence), and the caret placed by terminal width, not by character count.
            shown = one_line(expression[start : start + _WINDOW])
            before = one_line(expression[start : column - 1])
            lead = "..." if start else ""
            tail = "..." if start + _WINDOW < len(expression) else ""
            pointer = f" (column {column})\n    {lead}{shown}{tail}\n    {' ' * width(lead + before)}^"
        super().__init__(f"{message}{pointer}", file=file, key=key)


class EngineError(RolloutCardError):
    """An execution engine cannot run: not installed, unreachable, or its job failed (no result)."""


class StatisticsError(RolloutCardError, ValueError):
    """A statistic or interval is not defined for the given input."""


class SourceFormatError(RolloutCardError):
    """An importer's source file cannot be read or mapped; names the file and the record."""

    def __init__(self, message: str, *, file: str | None = None, record: str | None = None):
        self.file = file
        self.record = record
        where = ", ".join(x for x in (file, f"record {record}" if record is not None else None) if x)
        super().__init__(f"{where}: {message}" if where else message)


class ImporterError(RolloutCardError):
    """No importer is registered for a format, or an importer's options or mapping file are unusable."""


class UnsafeArchiveError(RolloutCardError):
    """A packed card breaks a safety rule (path, link, size, ratio or integrity);
    `member` names the member and `rule` the kebab-case rule it broke."""

    def __init__(self, message: str, *, member: str | None = None, rule: str | None = None,
                 archive: str | None = None):
        self.member = member
        self.rule = rule
        self.reason = message
        self.archive = archive
        text = f"{member}: {message}" if member else message
        if archive and archive != member:
            text = f"{archive}: {text}"
        super().__init__(f"{text} [{rule}]" if rule else text)

    def within(self, archive: str) -> UnsafeArchiveError:
        """The same error naming the archive it was found in (a member's name alone, such as
        '../x', does not say which file to fix)."""
        if self.archive is not None:
            return self
        error = UnsafeArchiveError(self.reason, member=self.member, rule=self.rule, archive=archive)
        for note in getattr(self, "__notes__", ()):
            error.add_note(note)
        return error


class PathError(RolloutCardError):
    """A path given to rollout_cards cannot be used as asked: longer than the file system
    allows, a symbolic link where a new directory must be made, a component that is not a
    directory. The message names the path and the fix."""


class RedactionSpecError(RolloutCardError):
    """A redaction spec is invalid or does not fit the card (names the file and the entry)."""


class SignatureError(RolloutCardError):
    """A card's detached signature is missing, malformed, or does not verify."""
