"""What every import does, whatever the source format.

An `ImportSession` writes the card into a hidden temporary directory beside the
output (`.<name>.rcard-import-<hex>`, with an owner marker) and renames it into place
only when the import succeeded, so a failed or interrupted import leaves nothing
behind; one killed outright (SIGKILL) leaves its directory to the next import or
writer in the same parent, which sweeps it away (`io.staging.sweep_stale`). It

- hands episodes and steps to `CardWriter`'s bulk path in chunks (`chunks`), so
  memory stays bounded by the chunk, not by the source;
- records each source file's sha256, size and URL in provenance;
- with `keep_going`, turns records that cannot be mapped into one
  `source_malformed` drop per file with their count (otherwise the first bad
  record stops the import with an error naming the file and the record); a rule's
  reported number the card then no longer gives back is taken out of `reported` and
  the drop names the rule (`left_out`);
- declares rules (`add_rule`), artifacts, drops, provenance, plan and notes.

Source values reach the rule files, drop selectors and card.json the session writes
(a model name becomes a rule's reported group, task names its `select`, ids a drop's
selector). Each of those has a limit a reader enforces, so the session checks them
before writing, for every importer: a rule value over the YAML scalar limit or an
expression over the expression limit, and a card.json over its size limit, are a
`SourceFormatError` naming the sources and the place; a drop selector over the
expression limit is left out (the drop then covers its count, like an importer's
selector over too many ids) and the reason says so.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from .. import progress
from ..errors import ImporterError, SourceFormatError, WriterError
from ..expr import MAX_LENGTH as MAX_EXPRESSION_CHARS
from ..io import staging
from ..io.finalize import refresh_manifest
from ..io.hashing import sha256_file
from ..io.manifest import MAX_MANIFEST_BYTES
from ..io.targets import refuse_link
from ..io.value_sizes import MAX_VALUE_BYTES
from ..io.writer import CardWriter
from ..model.card import MAX_RULE_ID, AgentInfo, Drop, Plan, Provenance, Software, SourceFile
from ..yamldoc import MAX_SCALAR_CHARS
from .chunks import ChunkedTables
from .steps import StepBuffer

__all__ = ["ImportResult", "ImportSession", "MalformedRecord", "SourceVersion", "read_source"]

#: A source file's (size, mtime in ns, inode): recorded when it is hashed, checked again before the tables are written.
SourceVersion = tuple[int, int, int]

_SHOWN_BAD = 5
#: In the reason of each drop of records --keep-going left out (`_malformed_drops`).
_KEPT_GOING = "(imported with --keep-going)"
#: Keys of a rule document whose values are expressions (a mapping's values for `features`).
_EXPRESSION_KEYS = frozenset(("select", "score", "features"))


@dataclass(frozen=True)
class MalformedRecord:
    """A source record that could not be mapped (kept out of the card under --keep-going)."""

    file: str
    record: str | None
    message: str


@dataclass
class ImportResult:
    """What an import produced: where the card is and what went into it."""

    path: Path
    card_id: str
    format: str
    sources: list[SourceFile]
    episodes: int
    steps: int
    statuses: dict[str, int]
    rules: list[dict[str, Any]]
    drops: list[Drop]
    malformed: list[MalformedRecord]
    notes: list[str]
    #: what a reader must not miss, e.g. a source's own number that its records do not give
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON data (for `rcard import --format json`)."""
        return {
            "card": str(self.path),
            "id": self.card_id,
            "format": self.format,
            "sources": [s.model_dump(mode="json", exclude_none=True) for s in self.sources],
            "episodes": self.episodes,
            "steps": self.steps,
            "statuses": dict(sorted(self.statuses.items())),
            "rules": self.rules,
            "drops": [d.model_dump(mode="json", exclude_none=True) for d in self.drops],
            "malformed": [{"file": m.file, "record": m.record, "message": m.message} for m in self.malformed],
            "notes": self.notes,
            "warnings": self.warnings,
        }


@dataclass
class _Header:
    provenance: dict[str, Any] = field(default_factory=dict)
    agents: dict[str, AgentInfo] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)
    plan: Plan | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    description: str | None = None


def _release_freed_memory() -> None:
    """Give the memory the import freed back to the OS before finalize (writing Parquet) makes
    the import's peak: Arrow's pool and glibc's malloc keep freed pages for reuse, so they would
    count twice in the peak (20,000-instance mini-swe-agent replica: peak RSS 464 -> 404 MB).
    Where libc has no malloc_trim (musl, macOS) only Arrow's pool is asked."""
    pa.default_memory_pool().release_unused()
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)


@functools.cache
def _libc() -> object:
    try:
        return ctypes.CDLL(None)  # the symbols already loaded into the process, libc's among them
    except (OSError, TypeError):  # no such handle (Windows)
        return None


class ImportSession:
    """One import into a card directory `out` (see the module docstring)."""

    def __init__(
        self,
        out: str | os.PathLike[str],
        *,
        format: str,
        card_id: str,
        title: str,
        keep_going: bool = False,
        overwrite: bool = False,
        created: datetime | None = None,
        license: str | None = None,
        chunk_episodes: int = 1000,
        chunk_steps: int = 50_000,
        max_value_bytes: int = MAX_VALUE_BYTES,
    ):
        self.out = Path(out)
        self.format = format
        #: Counts added episodes (run.py shows it as the import's progress).
        self.progress: progress.Task = progress.IDLE
        self.keep_going = keep_going
        self._overwrite = overwrite
        refuse_link(self.out)
        if self.out.exists() and (not self.out.is_dir() or any(self.out.iterdir())):
            if not overwrite:
                raise WriterError(f"{self.out} exists and is not empty; choose a new directory or pass --overwrite")
            if not (self.out / "card.json").is_file():
                raise WriterError(f"{self.out} is not a rollout card; refusing to overwrite it")
        # Parents created here are removed again by abort(): a failed import leaves nothing.
        self._made_parents = [p for p in reversed(self.out.parents) if not p.exists()]
        self.out.parent.mkdir(parents=True, exist_ok=True)
        staging.sweep_stale(self.out.parent)
        try:
            self._tmp = staging.claim_sibling(self.out.parent, self.out.name, "import", uuid.uuid4().hex[:12])
        except OSError as exc:
            self._remove_made_parents()
            raise WriterError(f"cannot write beside {self.out}: {exc.strerror or exc}") from None
        try:
            self._writer = CardWriter(
                self._tmp,
                id=card_id,
                title=title,
                timestamps=False,
                created=created,
                provenance={"generator": _generator(format)},
                scope={"license": license} if license else None,
                max_value_bytes=max_value_bytes,
            )
        except BaseException:
            shutil.rmtree(self._tmp, ignore_errors=True)
            staging.release_sibling(self._tmp)
            self._remove_made_parents()
            raise
        self.card_id = card_id
        self._tables = ChunkedTables(self._writer, chunk_episodes=chunk_episodes, chunk_steps=chunk_steps)
        self._sources: list[SourceFile] = []
        self._bad: list[MalformedRecord] = []
        self._rules: list[dict[str, Any]] = []
        self._docs: dict[str, dict[str, Any]] = {}  # rule id -> document, replayed when records were left out
        self._drops: list[Drop] = []
        self._notes: list[str] = []
        #: Tool results whose call the source does not hold (StepBuffer.orphan_results): count, episodes.
        self._orphans = [0, 0]
        self._warnings: list[str] = []
        self._header = _Header()
        self._done = False
        #: Each source's (size, mtime, inode) when it was hashed: finish() checks none changed since.
        self._versions: list[tuple[Path, SourceVersion]] = []

    # -- provenance, plan, notes ---------------------------------------------------------
    def add_source(self, path: Path, format: str, url: str | None = None, *, data: bytes | None = None,
                   version: SourceVersion | None = None) -> SourceFile:
        """Hash a source file and record it in provenance (name only, no local directories);
        `data`: the file's bytes, when the importer has read them (hashed, not read again), with
        `version`: the file's version taken before that read (`read_source` returns both), so a
        rewrite between the read and this call is seen."""
        if (data is None) != (version is None):
            raise TypeError("add_source: data and the version taken before reading it go together")
        try:
            before = version if version is not None else _version_of(path)
            if data is not None:
                sha, size = hashlib.sha256(data).hexdigest(), len(data)
            else:
                sha, size = sha256_file(path)
            after = _version_of(path)
        except OSError as exc:
            raise SourceFormatError(f"cannot be read: {exc.strerror or exc}", file=str(path)) from None
        if before != after or size != after[0]:
            raise _changed(path, before, after)
        source = SourceFile(name=path.name, format=format, sha256=sha, bytes=size, url=url)
        self._sources.append(source)
        self._versions.append((path, after))
        return source

    def set_software(self, key: str, software: Software | Mapping[str, Any] | None) -> None:
        """Set provenance `harness` or `environment`."""
        if key not in ("harness", "environment"):
            raise ValueError(f"unknown provenance field {key!r}")
        if software is not None:
            self._header.provenance[key] = Software.model_validate(software).model_dump(mode="json", exclude_none=True)

    def add_agent(self, info: AgentInfo | Mapping[str, Any]) -> None:
        """Record an agent or model in provenance (the first description of a name wins)."""
        if isinstance(info, Mapping) and info.get("name") == "":
            raise SourceFormatError("an agent's name is empty; name the agent with --agent NAME")
        agent = AgentInfo.model_validate(info)
        self._header.agents.setdefault(agent.name, agent)

    def add_packages(self, packages: Mapping[str, str]) -> None:
        """Record package versions; conflicting versions of one package are all kept."""
        for name, version in packages.items():
            seen = self._header.packages.get(name)
            if seen is None:
                self._header.packages[name] = str(version)
            elif str(version) not in seen.split(" | "):
                self._header.packages[name] = f"{seen} | {version}"

    def set_plan(self, plan: Plan | Mapping[str, Any] | None) -> None:
        """Declare the intended grid (validated now)."""
        self._header.plan = None if plan is None else Plan.model_validate(plan)

    def set_meta(self, key: str, value: Any) -> None:
        """Set a card-level `meta` entry (free-form JSON that no tool interprets)."""
        self._header.meta[key] = value

    def set_description(self, text: str) -> None:
        """The card's description."""
        self._header.description = text

    def note(self, text: str) -> None:
        """Something of the source that was not mapped or needs a reader's attention."""
        if text not in self._notes:
            self._notes.append(text)

    def warn(self, text: str) -> None:
        """Something a reader must not miss (kept in the card's meta.import.warnings, printed)."""
        if text not in self._warnings:
            self._warnings.append(text)

    # -- episodes ---------------------------------------------------------------------------
    def declare(self, column: str, kind: str) -> None:
        """Fix the type of an extra column ('bool', 'int', 'float' or 'str') before any value."""
        self._tables.declare(column, kind)

    def add_episode(self, row: Mapping[str, Any], steps: StepBuffer) -> None:
        """Add one episode row (standard columns and score./cond./task./meta. extras) and its
        steps; `n_steps` is derived. Raises SourceFormatError for a duplicate id or a column
        whose type changes between records."""
        self._tables.add(row, steps)
        if steps.orphan_results:
            self._orphans[0] += steps.orphan_results
            self._orphans[1] += 1
        self.progress.advance()

    @property
    def episodes_written(self) -> int:
        """Episodes added so far."""
        return self._tables.episodes

    @property
    def steps_written(self) -> int:
        """Steps added so far."""
        return self._tables.steps

    def has_episode(self, episode_id: str) -> bool:
        """Whether an episode with this id was added."""
        return episode_id in self._tables.ids

    # -- bad records ---------------------------------------------------------------------------
    @contextmanager
    def record(self) -> Iterator[None]:
        """Map one source record inside this block: with keep_going, a SourceFormatError raised
        in it is counted as a malformed record and the import goes on; otherwise it propagates."""
        try:
            yield
        except SourceFormatError as exc:
            if not self.keep_going or exc.record is None:
                raise
            self._bad.append(MalformedRecord(exc.file or "?", exc.record, _reason(exc)))

    def guard(self, items: Iterator[Any]) -> Iterator[Any]:
        """Iterate a source stream; with keep_going, a broken stream (truncated file, syntax
        error) ends the file and counts its unreadable rest as one malformed record."""
        while True:
            try:
                item = next(items)
            except StopIteration:
                return
            except SourceFormatError as exc:
                if not self.keep_going or exc.record is None:
                    raise
                self._bad.append(
                    MalformedRecord(exc.file or "?", exc.record, _reason(exc) + "; the rest of the file was not read")
                )
                return
            yield item

    @property
    def malformed(self) -> list[MalformedRecord]:
        """Records counted as malformed so far."""
        return list(self._bad)

    # -- rules, artifacts, drops ----------------------------------------------------------------
    def add_rule(self, doc: Mapping[str, Any]) -> str:
        """Write a rule (a dict in the rule-file layout) to rules/<id>.yaml; returns its id.

        A value the sources put in it that no rule file can hold (a scalar over the YAML
        limit, an expression over the expression limit) is a SourceFormatError, checked
        before the document is rendered (PyYAML takes minutes over a 3 MiB scalar)."""
        rule_id = doc.get("rule")
        if isinstance(rule_id, str) and len(rule_id) > MAX_RULE_ID:
            raise SourceFormatError(
                f"the rule id {rule_id[:80]!r}… built from the source's names is {len(rule_id):,} characters, more "
                f"than the {MAX_RULE_ID} a rule id may have", file=self._source_names())
        for where, value, limit, what in _rule_values(doc):
            if len(value) > limit:
                raise SourceFormatError(
                    f"the rule {str(doc.get('rule'))[:80]!r} built from the sources would hold {what} of "
                    f"{len(value):,} characters at {where} ({_excerpt(value)}), more than the limit of {limit:,}; "
                    "a name, task or metric of the source is that long", file=self._source_names())
        rule_id = self._writer.add_rule(f"rules/{doc.get('rule')}.yaml", text=_rule_text(doc))
        self._rules.append({"rule": rule_id, "kind": doc.get("kind"), "reported": doc.get("reported", [])})
        self._docs[rule_id] = dict(doc)
        return rule_id

    def add_artifact(self, data: bytes) -> str:
        """Store a blob under artifacts/<sha256>; returns the sha256."""
        return self._writer.add_artifact(data)

    def add_drop(self, **fields: Any) -> None:
        """Declare something the card does not contain (fields of `Drop`). A selector longer
        than an expression may be is left out, and the reason says so."""
        selector = fields.get("selector")
        if isinstance(selector, str) and len(selector) > MAX_EXPRESSION_CHARS:
            fields = {**fields, "selector": None,
                      "reason": f"{fields.get('reason', '')} (the selector naming these rows would be "
                      f"{len(selector):,} characters, more than an expression may be ({MAX_EXPRESSION_CHARS:,}); "
                      "it is left out)".lstrip()}
        drop = Drop.model_validate(fields)
        self._writer.add_drop(drop)
        self._drops.append(drop)

    def declare_missing(self, target: str, reason: str, *, count: int | None = None) -> None:
        """A column the source does not record at all (`source_missing`, `unavailable_source_field`)."""
        self.add_drop(
            target=target,
            action="unobserved",
            declaration="source_missing",
            loss_class="unavailable_source_field",
            reason=reason,
            count=count,
        )

    def _malformed_drops(self) -> None:
        by_file: dict[str, list[MalformedRecord]] = {}
        for bad in self._bad:
            by_file.setdefault(bad.file, []).append(bad)
        for file, bad in by_file.items():
            shown = "; ".join(f"record {b.record}: {b.message}" for b in bad[:_SHOWN_BAD])
            more = f"; and {len(bad) - _SHOWN_BAD} more" if len(bad) > _SHOWN_BAD else ""
            self.add_drop(
                target="episodes",
                action="omitted",
                declaration="source_malformed",
                loss_class="malformed_record",
                reason=f"{len(bad)} record(s) of {Path(file).name} could not be mapped and were left out "
                f"{_KEPT_GOING}: {shown}{more}",
                count=len(bad),
            )

    def _orphan_drops(self) -> None:
        results, episodes = self._orphans
        if results:
            self.declare_missing(
                "steps",
                f"{results} tool result(s) in {episodes} episode(s) answer a tool call the source does not "
                "hold (a history trimmed to fit the context, or a call that was never logged): each is kept as a "
                "message step with role 'tool' and the source's call id in payload.source_call_id; the calls "
                "themselves (tool name and arguments) are not in the card",
                count=results,
            )

    # -- finishing ----------------------------------------------------------------------------
    def finish(self) -> ImportResult:
        """Write the tables and manifest and move the card into place; returns the result."""
        if self._tables.episodes == 0:
            detail = f"; {len(self._bad)} malformed record(s) were left out" if self._bad else ""
            # the importer's own account of the episodes it could not make (a log that holds no
            # samples, a run that wrote none) says why, where the bare message did not
            why = [d.reason for d in self._drops if d.target == "episodes"]
            if why:
                detail += ": " + "; ".join(why[:3]) + (f" (and {len(why) - 3} more)" if len(why) > 3 else "")
            raise SourceFormatError(
                f"no episodes could be imported from {', '.join(s.name for s in self._sources) or 'the sources'}{detail}"
            )
        for path, seen in self._versions:
            try:
                now = _version_of(path)
            except OSError as exc:
                raise SourceFormatError(f"was removed or became unreadable while it was imported: "
                                        f"{exc.strerror or exc}", file=str(path)) from None
            if now != seen:
                raise _changed(path, seen, now)
        self._tables.finish()
        self._malformed_drops()
        self._orphan_drops()
        if self._tables.time_inversions:
            self.note(f"{self._tables.time_inversions} step(s) carry a timestamp earlier than the step before them; "
                      "steps keep the source's order and the source's times")
        _release_freed_memory()
        self._writer.close()
        files, drops = self._withhold_unreplayed() if self._bad else ({}, None)
        header = self._header
        provenance = Provenance.model_validate(
            {
                "generator": _generator(self.format),
                **header.provenance,
                "agents": [a.model_dump(mode="json", exclude_none=True) for a in header.agents.values()],
                "sources": [s.model_dump(mode="json", exclude_none=True) for s in self._sources],
                "packages": dict(sorted(header.packages.items())),
            }
        )
        meta = dict(header.meta)
        meta["import"] = {"format": self.format, "notes": list(self._notes)}
        if self._warnings:
            meta["import"]["warnings"] = list(self._warnings)
        changes: dict[str, Any] = {
            "provenance": provenance.model_dump(mode="json", exclude_none=True),
            "meta": meta,
        }
        if header.plan is not None:
            changes["plan"] = header.plan.model_dump(mode="json", exclude_none=True)
        if header.description:
            changes["description"] = header.description
        if drops is not None:
            changes["drops"] = drops
        try:
            manifest = refresh_manifest(self._tmp, files=files, **changes)
        except ValueError as exc:  # pydantic: the importer built an invalid header
            raise ImporterError(f"the imported card's manifest is invalid: {exc}") from None
        size = (self._tmp / "card.json").stat().st_size
        if size > MAX_MANIFEST_BYTES:
            raise SourceFormatError(
                f"the card's card.json would be {size:,} bytes, more than readers accept ({MAX_MANIFEST_BYTES:,}): "
                "the header values taken from the sources (metadata, agents, drops' reasons) are that large",
                file=self._source_names())
        self._move_into_place()
        self._done = True
        return ImportResult(
            path=self.out,
            card_id=manifest.id,
            format=self.format,
            sources=list(self._sources),
            episodes=self._tables.episodes,
            steps=self._tables.steps,
            statuses=dict(self._tables.statuses),
            rules=list(self._rules),
            drops=list(manifest.drops),
            malformed=list(self._bad),
            notes=list(self._notes),
            warnings=list(self._warnings),
        )

    def _withhold_unreplayed(self) -> tuple[dict[str, bytes], list[dict[str, Any]] | None]:
        """Records were left out (--keep-going): the reported numbers the closed card does not give
        back are taken out of their rules (`left_out`), which the malformed-record drops then name in
        `affects`. Returns the rule files to rewrite and the manifest's drops (None: unchanged)."""
        from ..io.reader import open_card
        from .left_out import replay_reported, without_unreplayed

        card = open_card(self._tmp, verify=False)  # written by this process a moment ago
        failed = replay_reported(card, self._docs)
        if not failed:
            return {}, None
        files = sorted({Path(b.file).name for b in self._bad})
        left_out = (f"--keep-going left out {len(self._bad)} record(s) of {', '.join(files[:3])}"
                    f"{' ...' if len(files) > 3 else ''} that the source's numbers may count (the source_malformed "
                    "drop)")
        out = {}
        for rule in self._rules:
            if rule["rule"] in failed:
                doc = without_unreplayed(self._docs[rule["rule"]], failed[rule["rule"]], left_out)
                out[f"rules/{rule['rule']}.yaml"] = _rule_text(doc).encode("utf-8")
                rule["reported"] = doc.get("reported", [])
                self.warn(f"{rule['rule']}: not declared as reported: {'; '.join(failed[rule['rule']].values())}; "
                          f"{left_out}")
        drops = [(d.model_copy(update={"affects": sorted({*d.affects, *failed})}) if d.loss_class == "malformed_record"
                  and _KEPT_GOING in d.reason else d).model_dump(mode="json", exclude_none=True)
                 for d in card.manifest.drops]
        return out, drops

    def _move_into_place(self) -> None:
        # The card replaced is renamed aside with an owner marker: if we die between the two
        # renames, the next sweep puts it back.
        old = None
        if self.out.exists():
            if any(self.out.iterdir()):
                old = staging.claim_sibling(self.out.parent, self.out.name, "replaced", uuid.uuid4().hex[:12])
                os.rename(self.out, old)
            else:
                self.out.rmdir()
        os.rename(self._tmp, self.out)
        staging.release_sibling(self._tmp)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
            staging.release_sibling(old)

    def abort(self) -> None:
        """Throw away everything written so far."""
        if self._done:
            return
        self._done = True
        try:
            self._writer.abort()
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)
            staging.release_sibling(self._tmp)
            self._remove_made_parents()

    def _source_names(self) -> str:
        """The sources read so far, for an error about a value the session cannot place in one."""
        names = [s.name for s in self._sources]
        return ", ".join(names[:3]) + (f" (and {len(names) - 3} more)" if len(names) > 3 else "") or "the sources"

    def _remove_made_parents(self) -> None:
        for parent in reversed(self._made_parents):
            try:
                parent.rmdir()
            except OSError:
                break


def _rule_text(doc: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(doc), sort_keys=False, allow_unicode=True, width=100, default_flow_style=None)


def _rule_values(doc: Mapping[str, Any]) -> Iterator[tuple[str, str, int, str]]:
    """(place, text, limit, what) of every string of a rule document, keys included."""
    def walk(value: Any, where: str, expression: bool) -> Iterator[tuple[str, str, int, str]]:
        if isinstance(value, str):
            if expression:
                yield where, value, MAX_EXPRESSION_CHARS, "an expression"
            yield where, value, MAX_SCALAR_CHARS, "a value"
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str):
                    yield f"{where}.{key[:40]}" if where else key[:40], key, MAX_SCALAR_CHARS, "a key"
                yield from walk(item, f"{where}.{str(key)[:40]}" if where else str(key)[:40],
                                expression or (not where and key in _EXPRESSION_KEYS))
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                yield from walk(item, f"{where}[{i}]", expression)

    return walk(doc, "", False)


def _excerpt(text: str) -> str:
    return repr(text[:40]) + ("…" if len(text) > 40 else "")


def _reason(exc: SourceFormatError) -> str:
    text = str(exc)
    where = ", ".join(x for x in (exc.file, f"record {exc.record}" if exc.record is not None else None) if x)
    return text[len(where) + 2 :] if where and text.startswith(where + ": ") else text


def read_source(path: Path, max_bytes: int) -> tuple[bytes, SourceVersion] | None:
    """A source file's bytes and its version, taken on the open file before reading it (give
    both to `ImportSession.add_source`); None for a file over `max_bytes` (hash it and read it
    as a stream)."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if st.st_size > max_bytes:
                return None
            return fh.read(), (st.st_size, st.st_mtime_ns, st.st_ino)
    except OSError as exc:  # as add_source says it
        raise SourceFormatError(f"cannot be read: {exc.strerror or exc}", file=str(path)) from None


def _version_of(path: Path) -> SourceVersion:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns, st.st_ino


def _changed(path: Path, before: SourceVersion, after: SourceVersion) -> SourceFormatError:
    """A source that changed while it was hashed or read: the digest the card would record in
    provenance would not be of the bytes it was built from."""
    sizes = f"{before[0]:,} -> {after[0]:,} bytes" if before[0] != after[0] else f"{after[0]:,} bytes, rewritten"
    return SourceFormatError(f"changed while it was imported ({sizes}); the card's provenance would name a digest "
                             "of other bytes than it read; import a copy that nothing is writing to", file=str(path))


def _generator(format: str) -> dict[str, Any]:
    from .. import __version__

    return {"name": f"rollout-cards import {format}", "version": __version__}
