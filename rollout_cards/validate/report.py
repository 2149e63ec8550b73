"""The validation report: finding codes, findings, the per-check collector, text and JSON forms.

Every finding has a stable kebab-case `code` from `CODES` (its severity is fixed
there), a one-line message that says what to fix, and a location: a file, and
either a JSON pointer (card.json) or a row index and column (tables). Anything
taken from the package (cell values, names, paths) enters a message only through
`excerpt` or `safe_text`, so CI logs never hold more than 40 characters of it,
escaped, and never a control character.

The JSON form is `Report.to_json_dict()` (what `model_dump(mode="json")` gives, written out
without compiling the serializers); its schema is shipped as
`schemas/report-0.2.schema.json` (registered below) and documented in
docs/validation.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..display import one_line
from ..model.card import empty_dict, empty_list
from ..model.schemas import register_document

__all__ = [
    "CODES",
    "HARD_CAP",
    "REPORT_FORMAT",
    "CheckRun",
    "Code",
    "Finding",
    "Findings",
    "Location",
    "Report",
    "Severity",
    "check_run",
    "excerpt",
    "render_json",
    "render_text",
    "safe_text",
]

REPORT_FORMAT = "rollout-card-report/0.1"

#: Findings kept per code when no smaller `max_findings` is given; the rest are counted.
HARD_CAP = 10_000

_EXCERPT_CHARS = 40


class Severity(StrEnum):
    """How much a finding matters: errors make a card invalid, warnings only under --strict."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Code:
    """One entry of the catalogue: severity, the check group that emits it, and a summary."""

    severity: Severity
    group: str
    summary: str


E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO  # noqa: E741 - catalogue shorthand

#: The catalogue of finding codes (docs/validation.md explains each and how to fix it).
CODES: dict[str, Code] = {
    # layout
    "manifest-missing": Code(E, "layout", "card.json is not at the root of the package"),
    "path-unsafe": Code(E, "layout", "a path is absolute, has '..', a drive letter, a backslash or a control character"),
    "path-symlink": Code(E, "layout", "a member is a symbolic link"),
    "path-hardlink": Code(E, "layout", "a file has more than one hard link"),
    "path-special": Code(E, "layout", "a member is a device, FIFO, socket or other special file"),
    "path-collision": Code(E, "layout", "two names are equal after Unicode normalisation or case folding"),
    "card-unfinished": Code(E, "layout", "the writer's staging area is still present"),
    "archive-unsafe": Code(E, "layout", "a packed card breaks a safety rule"),
    # manifest
    "manifest-too-large": Code(E, "manifest", "card.json exceeds the size limit"),
    "manifest-not-utf8": Code(E, "manifest", "card.json is not UTF-8"),
    "manifest-invalid-json": Code(E, "manifest", "card.json is not valid JSON"),
    "manifest-duplicate-key": Code(E, "manifest", "card.json repeats a key in an object"),
    "manifest-schema": Code(E, "manifest", "card.json violates the schema"),
    "format-unsupported": Code(E, "manifest", "card.json declares another format or major version"),
    "format-too-new": Code(E, "manifest", "card.json declares a newer minor version than this validator reads"),
    "scope-license-missing": Code(W, "manifest", "the release scope declares no license"),
    # inventory
    "file-missing": Code(E, "inventory", "a listed file is absent"),
    "file-unlisted": Code(E, "inventory", "a file is not listed in the inventory"),
    "file-size-mismatch": Code(E, "inventory", "a file's size differs from the inventory"),
    "file-digest-mismatch": Code(E, "inventory", "a file's sha256 differs from the inventory"),
    "root-digest-mismatch": Code(E, "inventory", "the root digest does not match the inventory"),
    "reference-unlisted": Code(E, "inventory", "a table or rule file is not in the inventory"),
    "rule-digest-mismatch": Code(E, "inventory", "a rule's sha256 differs from its inventory entry"),
    # parquet
    "parquet-unreadable": Code(E, "parquet", "a table file is not readable Parquet"),
    "parquet-limit-exceeded": Code(E, "parquet", "a Parquet footer declares sizes beyond the limits"),
    "parquet-decode-limit": Code(E, "parquet", "a table decodes to far more bytes than it stores (a decompression bomb)"),
    "parquet-metadata-forbidden": Code(E, "parquet", "a Parquet file carries metadata other than the Arrow schema"),
    "table-column-missing": Code(E, "parquet", "a required column is absent"),
    "table-column-type": Code(E, "parquet", "a column has the wrong type"),
    "table-column-unknown": Code(E, "parquet", "a column is neither standard nor under an allowed prefix"),
    "table-column-duplicate": Code(E, "parquet", "a column name appears twice"),
    "table-extension-type": Code(E, "parquet", "a column uses an Arrow extension type"),
    "table-parts-inconsistent": Code(E, "parquet", "the part files of a table have different schemas"),
    "table-rows-mismatch": Code(E, "parquet", "a table's row count differs from card.json"),
    # semantics
    "value-null": Code(E, "semantics", "a required value is null"),
    "enum-invalid": Code(E, "semantics", "a status or kind is outside its enum"),
    "value-not-finite": Code(E, "semantics", "a number is NaN or infinite"),
    "value-negative": Code(E, "semantics", "a count (n_steps, trial, tokens) is negative"),
    "episode-id-duplicate": Code(E, "semantics", "an episode_id appears more than once"),
    "episode-time-reversed": Code(E, "semantics", "an episode ends before it starts"),
    "episode-step-count-mismatch": Code(E, "semantics", "n_steps differs from the episode's rows in steps"),
    "step-episode-missing": Code(E, "semantics", "a step belongs to no episode"),
    "step-seq-not-contiguous": Code(E, "semantics", "an episode's seq values are not 0, 1, 2, ..."),
    "step-time-decreasing": Code(E, "semantics", "a step's time is earlier than the step before it"),
    "tool-result-orphan": Code(E, "semantics", "a tool_result's call_id was issued by no earlier tool_call"),
    "tool-call-id-duplicate": Code(E, "semantics", "two tool_calls of one episode store the same call_id"),
    "step-parent-invalid": Code(E, "semantics", "a step's parent_seq is not an earlier step, or its depth contradicts it"),
    "step-depth-mismatch": Code(E, "semantics", "a nested step's depth is not its parent step's depth + 1"),
    # coverage and drops
    "plan-episode-missing": Code(E, "coverage", "a planned episode is absent and no drop covers it"),
    "episode-unplanned": Code(W, "coverage", "an episode is outside the declared plan"),
    "drop-target-unknown": Code(E, "coverage", "a drop names a target that does not exist"),
    "drop-selector-invalid": Code(E, "coverage", "a drop's selector is not a valid boolean expression"),
    "drop-rule-unknown": Code(E, "coverage", "a drop affects a rule the card does not have"),
    "drop-filtered-inconsistent": Code(E, "coverage", "a filtered drop's selector matches rows still present"),
    "drop-redaction-not-applied": Code(E, "coverage", "a redacted or hashed column still holds values"),
    "drop-digest-missing": Code(E, "coverage", "a redacted column has no digest for a redacted value"),
    "drop-digest-invalid": Code(E, "coverage", "a digest column holds something other than sha256 hex"),
    "redaction-copy-remains": Code(E, "coverage", "a redacted value is still readable elsewhere: another column of its row, "
                                   "its episode's row or steps, card.json, a rule file or an artifact"),
    # rules
    "rule-unlisted": Code(E, "rules", "a file under rules/ is not listed in card.json's rules"),
    "rule-too-large": Code(E, "rules", "a rule file exceeds 1 MiB"),
    "rule-not-utf8": Code(E, "rules", "a rule file is not UTF-8"),
    "rule-yaml-invalid": Code(E, "rules", "a rule file is not a safe-YAML mapping"),
    "rule-id-mismatch": Code(E, "rules", "a rule's id differs from card.json or its file name"),
    "rule-invalid": Code(E, "rules", "a rule does not compile or does not fit the card's columns"),
    "reported-mismatch": Code(E, "rules", "a reported number differs from its replay beyond the tolerance"),
    "replay-unavailable": Code(I, "rules", "reported numbers were not recomputed"),
    "signature-invalid": Code(E, "signature", "the detached signature does not verify with the given public key"),
    # the validator itself
    "internal-error": Code(E, "internal", "a check failed because of a bug in the validator"),
}


class Location(BaseModel):
    """Where a finding is: a file and, inside it, a JSON pointer or a row and column."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    file: str | None = None
    """Path inside the card (escaped), or None for the package as a whole."""
    pointer: str | None = None
    """JSON pointer inside the file (card.json), e.g. /inventory/files/2/sha256."""
    row: int | None = Field(default=None, ge=0)
    """0-based row index inside the Parquet file."""
    column: str | None = None
    """Column name (escaped)."""

    def __str__(self) -> str:
        parts = [self.file or "(package)"]
        if self.pointer is not None:
            parts[0] += f"#{self.pointer}"
        if self.row is not None:
            parts.append(f"row {self.row}")
        if self.column is not None:
            parts.append(f"column {self.column}")
        return " ".join(parts)


class Finding(BaseModel):
    """One problem (or note) found in the card."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    code: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    """Stable kebab-case code from the catalogue (docs/validation.md)."""
    severity: Severity
    """error, warning or info (fixed per code)."""
    message: str
    """One line: what is wrong and how to fix it."""
    location: Location = Field(default_factory=Location)
    """Where the problem is."""


class CheckRun(BaseModel):
    """What became of one check."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str
    """Check name, e.g. inventory.digests."""
    status: Literal["passed", "warned", "failed", "skipped", "crashed"]
    """passed (ran to the end, nothing found), warned (warnings only), failed (errors; a `note` says
    what was not checked when the errors stopped the check), skipped (nothing found and the check
    could not run to the end: the reason is in `note`) or crashed (see the internal-error finding)."""
    note: str | None = None
    """Why the check was skipped, or what it did not do."""


class Report(BaseModel):
    """The result of validating a card (`rcard validate --format json`)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    format: Literal["rollout-card-report/0.1"] = REPORT_FORMAT
    """Version of this report's layout."""
    card: str
    """The path (or source name) that was validated."""
    card_id: str | None = None
    """The card's id from card.json, when it could be read."""
    valid: bool
    """True when no error was found (and, with strict, no warning)."""
    outcome: Literal["valid", "invalid", "internal-error"]
    """valid, invalid, or internal-error when the validator itself failed (exit code 2)."""
    strict: bool = False
    """Whether warnings made the card invalid."""
    counts: dict[Severity, int]
    """Number of findings by severity, including findings left out by the cap."""
    findings: list[Finding]
    """The findings, in check order (cheap checks first)."""
    omitted: dict[str, int] = Field(default_factory=empty_dict)
    """Code -> findings counted but not listed because of max_findings (or the hard cap)."""
    max_findings: int | None = None
    """The per-code cap that was requested (None: only the hard cap applies)."""
    checks: list[CheckRun] = Field(default_factory=empty_list)
    """Every check, in the order run, with its status."""
    ignored: dict[str, int] = Field(default_factory=empty_dict)
    """Code -> findings left out of the verdict because the caller asked (`--ignore CODE`)."""

    @property
    def capped(self) -> bool:
        """Whether any finding was left out because of the per-code cap."""
        return bool(self.omitted)

    def codes(self, *severities: Severity) -> set[str]:
        """Codes present in the report (of the given severities; all when none given)."""
        wanted = set(severities) or set(Severity)
        listed = {f.code for f in self.findings if f.severity in wanted}
        return listed | {c for c in self.omitted if CODES[c].severity in wanted}

    def to_json_dict(self) -> dict:
        """The report as plain JSON data (what `model_dump(mode="json")` gives)."""
        if type(self) is not Report:
            return self.model_dump(mode="json")  # a subclass may add fields
        # Written out by hand: model_dump compiles the four models' serializers, and pydantic's
        # schema machinery with them (~30 ms of a small `rcard validate`; issue 14 start-up).
        # tests/validate/test_report.py checks it against model_dump.
        return {
            "format": self.format,
            "card": self.card,
            "card_id": self.card_id,
            "valid": self.valid,
            "outcome": self.outcome,
            "strict": self.strict,
            "counts": {Severity(k).value: n for k, n in self.counts.items()},
            "findings": [
                {"code": f.code, "severity": Severity(f.severity).value, "message": f.message,
                 "location": {"file": f.location.file, "pointer": f.location.pointer, "row": f.location.row,
                              "column": f.location.column}}
                for f in self.findings
            ],
            "omitted": dict(self.omitted),
            "max_findings": self.max_findings,
            "checks": [{"name": c.name, "status": c.status, "note": c.note} for c in self.checks],
            "ignored": dict(self.ignored),
        }


register_document("report", lambda: Report)

# The validator builds its report from values it made itself (catalogue codes and severities,
# escaped text, check names): it constructs the models without compiling their pydantic
# validators (~30 ms of a small `rcard validate`). A value of another type than the field's
# (a caller's) goes through the validating constructor, as before.
_STATUSES = frozenset(("passed", "warned", "failed", "skipped", "crashed"))


def _optional(value: object, kind: type) -> bool:
    return value is None or type(value) is kind


def check_run(name: str, status: str, note: str | None = None) -> CheckRun:
    """`CheckRun(name=..., status=..., note=...)`, constructed when the values are plainly valid."""
    given = {"name": name, "status": status} if note is None else {"name": name, "status": status, "note": note}
    if type(name) is str and status in _STATUSES and _optional(note, str):
        return CheckRun.model_construct(**given)
    return CheckRun(**given)


def _location(file: str | None, pointer: str | None, row: int | None, column: str | None) -> Location:
    if _optional(file, str) and _optional(pointer, str) and _optional(column, str) \
            and (row is None or (type(row) is int and row >= 0)):
        return Location.model_construct(file=file, pointer=pointer, row=row, column=column)
    return Location(file=file, pointer=pointer, row=row, column=column)


# -- safe text ---------------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def safe_text(text: str, limit: int = 200) -> str:
    """`text` on one line with control and bidi characters escaped, cut to `limit` characters."""
    if len(text) > limit:
        text = text[:limit] + "…"
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def excerpt(value: object) -> str:
    """A short, escaped excerpt of a value from the package: at most 40 characters of it, repr-quoted."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = value if isinstance(value, str) else str(value)
    cut = text[:_EXCERPT_CHARS]
    shown = safe_text(repr(cut), 4 * _EXCERPT_CHARS + 8)
    return shown + ("…" if len(text) > _EXCERPT_CHARS else "")


# -- collecting findings -----------------------------------------------------------------------


class Findings:
    """Findings of one check, capped per code: past the cap a finding is only counted."""

    def __init__(self, max_findings: int | None = None):
        self.cap = HARD_CAP if max_findings is None else min(max_findings, HARD_CAP)
        self.items: list[Finding] = []
        self.kept: dict[str, int] = {}
        self.omitted: dict[str, int] = {}

    def room(self, code: str) -> int:
        """How many more findings of `code` will be listed."""
        return max(0, self.cap - self.kept.get(code, 0))

    def add(
        self,
        code: str,
        message: str,
        *,
        file: str | None = None,
        pointer: str | None = None,
        row: int | None = None,
        column: str | None = None,
    ) -> None:
        """Record a finding of catalogue code `code` (listed, or counted when past the cap)."""
        entry = CODES[code]
        if not self.room(code):
            self.omit(code, 1)
            return
        self.kept[code] = self.kept.get(code, 0) + 1
        location = _location(
            safe_text(file) if file is not None else None,
            safe_text(pointer, 300) if pointer is not None else None,
            row,
            safe_text(column, 120) if column is not None else None,
        )
        # Catalogue codes match Finding's pattern (tests/validate/test_report.py): no validator needed.
        self.items.append(Finding.model_construct(code=code, severity=entry.severity, message=safe_text(message, 400),
                                                  location=location))

    def omit(self, code: str, n: int) -> None:
        """Count `n` findings of `code` that are not listed (a check found more than it lists)."""
        CODES[code]  # noqa: B018 - an unknown code is a bug, caught here
        if n > 0:
            self.omitted[code] = self.omitted.get(code, 0) + n

    def count(self, code: str) -> int:
        """Findings of `code` so far, listed or counted."""
        return self.kept.get(code, 0) + self.omitted.get(code, 0)

    def status(self) -> Literal["passed", "warned", "failed"]:
        """passed, warned or failed, by the worst severity recorded."""
        severities = {CODES[c].severity for c in (*self.kept, *self.omitted)}
        if Severity.ERROR in severities:
            return "failed"
        return "warned" if Severity.WARNING in severities else "passed"

    def merge(self, other: Findings) -> None:
        """Append another check's findings, applying this collector's cap."""
        for finding in other.items:
            if self.room(finding.code):
                self.kept[finding.code] = self.kept.get(finding.code, 0) + 1
                self.items.append(finding)
            else:
                self.omit(finding.code, 1)
        for code, n in other.omitted.items():
            self.omit(code, n)


def build_report(
    card: str,
    findings: Findings,
    checks: list[CheckRun],
    *,
    card_id: str | None,
    strict: bool,
    max_findings: int | None,
) -> Report:
    """Assemble the report: counts by severity, validity and outcome."""
    counts = {s: 0 for s in Severity}
    for f in findings.items:
        counts[f.severity] += 1
    for code, n in findings.omitted.items():
        counts[CODES[code].severity] += n
    internal = findings.count("internal-error") > 0
    valid = counts[Severity.ERROR] == 0 and not (strict and counts[Severity.WARNING])
    outcome = "internal-error" if internal else ("valid" if valid else "invalid")
    values = {
        "card": safe_text(card, 300),
        "card_id": card_id,
        "valid": valid,
        "outcome": outcome,
        "strict": strict,
        "counts": counts,
        "findings": list(findings.items),
        "omitted": dict(sorted(findings.omitted.items())),
        "max_findings": max_findings,
        "checks": list(checks),
    }
    plain = _optional(card_id, str) and type(strict) is bool and _optional(max_findings, int) \
        and all(type(f) is Finding for f in findings.items) and all(type(c) is CheckRun for c in checks)
    return Report.model_construct(**values) if plain else Report(**values)


# -- rendering ---------------------------------------------------------------------------------


def render_json(report: Report) -> str:
    """The stable JSON form (sorted keys, two-space indent, final newline)."""
    return json.dumps(report.to_json_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def render_text(report: Report) -> str:
    """The terminal form: a verdict line, then one line per finding, then capping and skipped checks."""
    c = report.counts
    verdict = {"valid": "VALID", "invalid": "INVALID", "internal-error": "VALIDATION FAILED (internal error)"}
    lines = [
        f"{one_line(report.card)}: {verdict[report.outcome]} — {_plural(c[Severity.ERROR], 'error')}, "
        f"{_plural(c[Severity.WARNING], 'warning')}, {c[Severity.INFO]} info"
        + (" (strict: warnings count as errors)" if report.strict else "")
    ]
    width = max((len(f.code) for f in report.findings), default=0)
    for f in report.findings:
        # One line per finding: a location or message quotes the card's names and paths, and a
        # newline in one would print a line that reads as another finding.
        lines.append(f"  {f.severity.value:<7} {f.code:<{width}}  {one_line(f.location)}: {one_line(f.message)}")
    for code, n in report.omitted.items():
        lines.append(f"  ... {n} more {code} finding(s) not listed (cap {report.max_findings or HARD_CAP} per code)")
    for code, n in report.ignored.items():
        lines.append(f"  [ignored] {n} {code} finding(s) left out of the verdict (--ignore {code})")
    for check in report.checks:
        if check.status in ("skipped", "crashed") or check.note:
            lines.append(f"  [{check.status}] {check.name}" + (f": {one_line(check.note)}" if check.note else ""))
    if report.outcome == "internal-error":
        lines.append(
            "  The validator failed internally: this is a bug in rollout-cards, not a verdict on the card; "
            "rerun with RCARD_DEBUG=1 and report it."
        )
    return "\n".join(lines) + "\n"
