"""Pydantic models of `card.json`: identity, provenance, plan, scope, drops, rules, inventory.

Every field has a docstring; pydantic copies it into the generated JSON Schema
(`schemas/card-0.2.schema.json`), so the docstrings are the field reference.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    field_validator,
    model_validator,
)

from ..tables import FORMAT, parse_format


def empty_list() -> list[Any]:
    """Default of list fields. Pydantic inspects a default factory's signature; for the
    builtin `list` that parses its text signature with the tokenize module, whose first use
    compiles its regular expressions (5-9 ms of every command that builds the models)."""
    return []


def empty_dict() -> dict[Any, Any]:
    """Default of dict fields (see `empty_list`)."""
    return {}

__all__ = [
    "Access",
    "AgentInfo",
    "Author",
    "CardManifest",
    "DeclarationKind",
    "Drop",
    "DropAction",
    "FileEntry",
    "MAX_RULE_BYTES",
    "MAX_RULE_ID",
    "Inventory",
    "PersonalData",
    "Plan",
    "Provenance",
    "RuleRef",
    "Scope",
    "Software",
    "SourceFile",
    "TableRef",
    "Tables",
]

SHA256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
CARD_ID = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
#: Longest rule id, in characters.
MAX_RULE_ID = 128
RULE_ID = Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)*$",
                               max_length=MAX_RULE_ID)]
#: A rule file larger than this is refused before it is parsed (a rule is a short document).
MAX_RULE_BYTES = 1024 * 1024


#: The longest file or directory name (in UTF-8 bytes) the common file systems store (NAME_MAX):
#: a card path with a longer component could not be unpacked or written anywhere.
MAX_COMPONENT_BYTES = 255


def _relative_path(value: str) -> str:
    parts = value.split("/")
    if value.startswith("/") or re.match(r"^[A-Za-z]:", value) or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"path {value[:80]!r} must be relative, inside the card, without '.', '..' or empty parts")
    long = next((p for p in parts if len(p.encode("utf-8", "surrogatepass")) > MAX_COMPONENT_BYTES), None)
    if long is not None:
        raise ValueError(f"path {value[:80]!r} has a component of {len(long.encode('utf-8', 'surrogatepass'))} "
                         f"bytes; file systems store at most {MAX_COMPONENT_BYTES} (NAME_MAX): shorten the name")
    return value


# Relative POSIX path inside the card; the validator does the full safety checks
# (links, devices, Unicode collisions) on the files themselves.
REL_PATH = Annotated[
    str,
    Field(pattern=r"^[^/\\\x00][^\\\x00]*$", max_length=1024),
    AfterValidator(_relative_path),
]
# ASCII digits only, at most 19 per part (a part must fit int64 to be bumped); fullmatch, so no
# trailing newline; pre-release and build parts bounded by the field's max_length.
_SEMVER = re.compile(r"(0|[1-9][0-9]{0,18})\.(0|[1-9][0-9]{0,18})\.(0|[1-9][0-9]{0,18})"
                     r"(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")


class _Model(BaseModel):
    # defer_build: a model's validator is compiled on its first use, not at import. Every model
    # here is part of CardManifest's tree, so a command builds one validator for the tree instead
    # of one per class (~0.1 s of `rcard validate`'s start-up; bench_startup.py).
    model_config = ConfigDict(extra="forbid", validate_assignment=True, defer_build=True)


class Author(_Model):
    """A person or organisation responsible for the card."""

    name: str = Field(min_length=1)
    """Full name."""
    email: str | None = None
    """Contact e-mail address."""
    affiliation: str | None = None
    """Institution or company."""
    orcid: str | None = None
    """ORCID iD, e.g. 0000-0002-1825-0097."""


class Software(_Model):
    """A program or package, with enough to find the exact version again."""

    name: str = Field(min_length=1)
    """Name of the program or package."""
    version: str | None = None
    """Version string as the software reports it."""
    url: str | None = None
    """Where the software can be obtained."""
    revision: str | None = None
    """Source revision (e.g. git commit) of the software."""


class AgentInfo(_Model):
    """An agent or model that produced episodes."""

    name: str = Field(min_length=1)
    """Value of the `agent` column for this agent's episodes."""
    model: str | None = None
    """Underlying model identifier, e.g. gpt-4o-2024-08-06."""
    provider: str | None = None
    """Who served the model, e.g. openai, anthropic, local."""
    version: str | None = None
    """Agent or model version."""
    revision: str | None = None
    """Source revision of the agent scaffold."""
    parameters: dict[str, JsonValue] = Field(default_factory=empty_dict)
    """Generation and scaffold parameters (temperature, max turns, ...)."""


class SourceFile(_Model):
    """A file that data was imported from."""

    name: str = Field(min_length=1)
    """File name as given to the importer (no directories of the importing machine)."""
    format: str
    """Importer format name, e.g. tau-bench, inspect-eval."""
    sha256: SHA256
    """sha256 of the source file's bytes."""
    bytes: int = Field(ge=0)
    """Size of the source file."""
    url: str | None = None
    """Where the source file was published, when known."""


class Provenance(_Model):
    """Where the episodes came from and what produced the card."""

    generator: Software
    """The tool that wrote the card (rollout-cards and its version, or an importer)."""
    harness: Software | None = None
    """The evaluation harness that ran the episodes."""
    environment: Software | None = None
    """The task environment or benchmark, with its version."""
    agents: list[AgentInfo] = Field(default_factory=empty_list)
    """Agents and models that produced episodes."""
    sources: list[SourceFile] = Field(default_factory=empty_list)
    """Source files of imported data."""
    packages: dict[str, str] = Field(default_factory=empty_dict)
    """Versions of relevant packages at run time (name -> version)."""
    notes: str | None = None
    """Anything else about how the data was produced."""


class Plan(_Model):
    """The experimental grid that was intended, so missing episodes can be detected.

    With `tasks`, `agents` and `trials` the plan is their product, keyed by
    (task_id, agent, trial); `expected_episodes` alone only fixes a count.
    """

    tasks: list[str] | None = None
    """Task ids that were meant to run."""
    agents: list[str] | None = None
    """Agents that were meant to run every task."""
    trials: int | None = Field(default=None, ge=1)
    """Trials per task and agent (trial indices 0 .. trials-1)."""
    expected_episodes: int | None = Field(default=None, ge=0)
    """Total number of episodes that were meant to run."""
    description: str | None = None
    """The plan in words (sampling, conditions, stopping rules)."""

    @model_validator(mode="after")
    def _consistent(self) -> Plan:
        if self.tasks is not None and len(set(self.tasks)) != len(self.tasks):
            raise ValueError("plan.tasks lists a task id more than once")
        if self.agents is not None and len(set(self.agents)) != len(self.agents):
            raise ValueError("plan.agents lists an agent more than once")
        grid = self.grid_size()
        if grid is not None and self.expected_episodes is not None and grid != self.expected_episodes:
            raise ValueError(
                f"expected_episodes is {self.expected_episodes} but tasks x agents x trials is {grid}"
            )
        return self

    def grid_size(self) -> int | None:
        """Size of the tasks x agents x trials grid, or None when the plan has no full grid."""
        if self.tasks is None or self.agents is None:
            return None
        return len(self.tasks) * len(self.agents) * (self.trials or 1)

    def expected_count(self) -> int | None:
        """How many episodes the plan expects, or None when it does not say."""
        grid = self.grid_size()
        return grid if grid is not None else self.expected_episodes


class Access(StrEnum):
    """Who may obtain the release."""

    PUBLIC = "public"
    GATED = "gated"
    RESTRICTED = "restricted"


class PersonalData(_Model):
    """What personal or sensitive data the release contains."""

    contains: str = Field(pattern=r"^(none|pseudonymous|personal|sensitive|unknown)$")
    """One of none, pseudonymous, personal, sensitive, unknown."""
    statement: str | None = None
    """What kind of data, whose, and how it was handled."""


class Scope(_Model):
    """The release scope: license, access and personal data."""

    license: str | None = None
    """SPDX license expression (e.g. CC-BY-4.0, MIT OR Apache-2.0); stored canonicalized."""
    access: Access = Access.PUBLIC
    """public, gated (accepted terms required) or restricted (by request)."""
    redistribution: str | None = None
    """Terms for redistributing the data, beyond the license."""
    personal_data: PersonalData | None = None
    """Statement on personal and sensitive data."""
    redactions: list[str] = Field(default_factory=empty_list)
    """Redactions applied, in words (each is also a drops entry)."""
    contact: str | None = None
    """Who to contact about the release."""
    citation: str | None = None
    """How to cite the release (BibTeX or text)."""
    gate_prompt: str | None = None
    """Text shown to users who request access to a gated release."""
    gate_fields: dict[str, str] = Field(default_factory=empty_dict)
    """Fields a user fills in to request access (name -> type, e.g. text, checkbox)."""

    @field_validator("license")
    @classmethod
    def _spdx(cls, value: str | None) -> str | None:
        if value is None:
            return None
        # Imported here: packaging's SPDX table costs ~6 ms of start-up, and a card without a
        # license (the minimal one) never needs it (issue 14, start-up within 2x the baseline).
        from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression

        try:
            return str(canonicalize_license_expression(value))
        except InvalidLicenseExpression as exc:
            raise ValueError(
                f"{exc}; use an SPDX license expression such as CC-BY-4.0 or MIT "
                "(see https://spdx.org/licenses/)"
            ) from None


class DropAction(StrEnum):
    """What happened to the data a drops entry describes."""

    OMITTED = "omitted"
    REDACTED = "redacted"
    HASHED = "hashed"
    TRUNCATED = "truncated"
    FILTERED = "filtered"
    MERGED = "merged"
    SAMPLED = "sampled"
    UNOBSERVED = "unobserved"


class DeclarationKind(StrEnum):
    """Who established that the data is missing."""

    AUTHOR_DECLARED = "author_declared"
    SOURCE_MISSING = "source_missing"
    SOURCE_MALFORMED = "source_malformed"


class Drop(_Model):
    """One entry of the drops manifest: something that is not in the release, and why."""

    target: str = Field(min_length=1, max_length=256)
    """What is missing: `table.column` (e.g. steps.t), a table, `episodes`, `artifacts`, or `stream:<name>`."""
    action: DropAction
    """omitted, redacted, hashed, truncated, filtered, merged, sampled or unobserved."""
    declaration: DeclarationKind
    """author_declared, source_missing or source_malformed."""
    loss_class: str = Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)
    """Kind of loss, e.g. unavailable_source_field, channel_excluded, sequence_information_loss, privacy, size, interrupted_run."""
    reason: str = Field(min_length=1)
    """Why it is missing, in words."""
    selector: str | None = None
    """Expression selecting the affected rows, when the drop covers some rows only."""
    count: int | None = Field(default=None, ge=0)
    """How many rows, values or episodes are affected, when known."""
    affects: list[RULE_ID] = Field(default_factory=empty_list)
    """Ids of rules whose numbers are limited by this drop."""
    digest_column: str | None = None
    """For redacted or hashed columns: the column that keeps each original value's sha256."""


class RuleRef(_Model):
    """A reporting rule shipped in the card under rules/."""

    id: RULE_ID
    """The rule id (the `rule` key of the file)."""
    path: REL_PATH
    """Path of the rule file, rules/<id>.yaml."""
    sha256: SHA256
    """sha256 of the rule file's bytes (also in the inventory)."""
    kind: str | None = Field(default=None, pattern=r"^(original|recovered|regrade|diagnostic)$")
    """original, recovered, regrade or diagnostic."""


class FileEntry(_Model):
    """One file of the card with its size and digest."""

    path: REL_PATH
    """Relative POSIX path inside the card."""
    bytes: int = Field(ge=0)
    """Size in bytes."""
    sha256: SHA256
    """sha256 of the file's bytes."""


class Inventory(_Model):
    """Every file of the card except card.json, and a digest over all of them."""

    files: list[FileEntry] = Field(default_factory=empty_list)
    """Files sorted by path."""
    root_digest: SHA256
    """sha256 over the lines `<sha256> <bytes> <path>\\n` of the files in path order."""

    @model_validator(mode="after")
    def _unique_sorted(self) -> Inventory:
        paths = [f.path for f in self.files]
        if len(set(paths)) != len(paths):
            raise ValueError("inventory lists a path more than once")
        if paths != sorted(paths):
            raise ValueError("inventory files are not sorted by path")
        return self


class TableRef(_Model):
    """Where a table's data is and how many rows it has."""

    paths: list[REL_PATH] = Field(min_length=1)
    """The Parquet file, or the part files in order (episodes/part-00000.parquet, ...)."""
    rows: int = Field(ge=0)
    """Total number of rows over all parts."""


class Tables(_Model):
    """The two tables of a card."""

    episodes: TableRef
    """One row per episode."""
    steps: TableRef
    """One row per step or event."""


class CardManifest(_Model):
    """card.json: the manifest of a rollout card (format rollout-card/0.2)."""

    format: str = FORMAT
    """Format and version, `rollout-card/<major>.<minor>`."""
    id: CARD_ID
    """Identifier of the card (letters, digits, . _ -)."""
    version: str = Field(default="1.0.0", max_length=256)
    """Semantic version of the card's data; bumped by redaction and other changes."""
    title: str = Field(min_length=1)
    """Human-readable title."""
    description: str = ""
    """What the card contains, in a few sentences."""
    created: AwareDatetime
    """When the card was written (RFC 3339 with offset)."""
    authors: list[Author] = Field(default_factory=empty_list)
    """People or organisations responsible for the card."""
    provenance: Provenance
    """Where the episodes came from and what produced the card."""
    plan: Plan | None = None
    """The intended experimental grid; None when not declared."""
    scope: Scope = Field(default_factory=Scope)
    """Release scope: license, access, personal data."""
    drops: list[Drop] = Field(default_factory=empty_list)
    """The drops manifest: everything dropped, redacted, filtered or unobserved."""
    rules: list[RuleRef] = Field(default_factory=empty_list)
    """Reporting rules shipped under rules/."""
    tables: Tables
    """Locations and row counts of the episodes and steps tables."""
    inventory: Inventory
    """Every file with its size and sha256, and the root digest."""
    meta: dict[str, JsonValue] = Field(default_factory=empty_dict)
    """Free-form metadata that no tool interprets."""

    @field_validator("format")
    @classmethod
    def _format(cls, value: str) -> str:
        if parse_format(value) is None:
            raise ValueError(f"format {value[:40]!r} is not of the form rollout-card/<major>.<minor>")
        return value

    @field_validator("version")
    @classmethod
    def _semver(cls, value: str) -> str:
        if not _SEMVER.fullmatch(value):
            raise ValueError(f"version {value[:40]!r} is not a semantic version (e.g. 1.0.0; ASCII digits, "
                             "at most 19 per part)")
        return value

    @model_validator(mode="after")
    def _rules_unique(self) -> CardManifest:
        ids = [r.id for r in self.rules]
        if len(set(ids)) != len(ids):
            raise ValueError("rules lists a rule id more than once")
        # Each rule has its own file (rules/<id>.yaml): entries sharing one would each be read
        # and parsed again (10,000 of them kept `rcard validate` busy for minutes).
        first: dict[str, int] = {}
        for k, r in enumerate(self.rules):
            if (was := first.setdefault(r.path, k)) != k:
                raise ValueError(f"rules {was} and {k} are both stored in {r.path[:80]!r}; each rule has its own "
                                 "file, rules/<id>.yaml")
        return self

    def to_json_dict(self) -> dict[str, Any]:
        """The manifest as plain JSON data (what card.json holds)."""
        return self.model_dump(mode="json", exclude_none=True)


def utc_now() -> datetime:
    """Current time in UTC with microseconds dropped (what `created` records)."""
    from datetime import UTC

    return datetime.now(UTC).replace(microsecond=0)
