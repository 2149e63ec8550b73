"""Rule files: every rule listed in card.json is a size-capped, UTF-8, safe-YAML mapping whose
`rule` id matches card.json and its file name `rules/<id>.yaml`; no unlisted file under rules/.

Each rule is then compiled by the rule engine's loader (`rule-invalid`: unknown key,
malformed expression, ...) and, unless replay is off, its `reported` numbers are
recomputed on the card's episodes (`reported-mismatch`, with both numbers and the
tolerance; `rule-invalid` when the rule does not fit the card's columns).
Presence and digests of rule files are checked by `inventory` like any other file.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..errors import (
    CardFormatError,
    DecodeLimitError,
    ExpressionError,
    RuleError,
    StatisticsError,
    TableSchemaError,
)
from ..io.reader import Card
from ..model.card import MAX_RULE_BYTES
from .context import CheckContext
from .layout import MANIFEST
from .report import excerpt

__all__ = ["MAX_RULE_BYTES", "check_replay", "check_rule_files", "load_rule_yaml"]


def load_rule_yaml(text: str) -> Any:
    """Parse rule-file text with the strict loader (no aliases, no duplicate keys); raises yaml.YAMLError."""
    return _load_with_lines(text)[0]


def _load_with_lines(text: str) -> tuple[Any, dict]:
    from ..yamldoc import load_strict_yaml  # PyYAML is imported only for a card with rules

    return load_strict_yaml(text)


def _yaml_problem(exc: Exception) -> str:
    # Only the problem and its position: PyYAML's full message quotes lines of the file.
    from ..yamldoc import StrictYamlError

    if isinstance(exc, StrictYamlError):
        return f"{exc.message.removeprefix('not valid YAML: ')}" + (f" at line {exc.line}" if exc.line else "")
    problem = getattr(exc, "problem", None) or type(exc).__name__
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def check_rule_files(ctx: CheckContext) -> None:
    """Each listed rule file parses as a safe-YAML mapping with the id card.json gives it."""
    if ctx.manifest is None:
        ctx.skip("card.json does not validate")
    f = ctx.findings
    listed = {ref.path for ref in ctx.manifest.rules}
    for path in sorted(p for p in ctx.hashable if p.startswith("rules/") and p not in listed):
        f.add("rule-unlisted", "is under rules/ but not listed in card.json's rules; list it (with its id and "
              "sha256) or remove it", file=path)
    parsed: dict[str, Any] = {}
    compiled: dict[str, Any] = {}
    for k, ref in enumerate(ctx.manifest.rules):
        pointer = f"/rules/{k}"
        if ref.path != f"rules/{ref.id}.yaml":
            f.add("rule-id-mismatch", f"rule {excerpt(ref.id)} is stored at {excerpt(ref.path)}; store it at "
                  f"rules/<id>.yaml", file=MANIFEST, pointer=f"{pointer}/path")
        if ref.path not in ctx.readable:
            continue  # absent or not a regular file: reported by the layout and inventory checks
        size = ctx.entries[ref.path].size
        if size > MAX_RULE_BYTES:
            f.add("rule-too-large", f"is {size:,} bytes, more than the limit of {MAX_RULE_BYTES:,}; a rule is a "
                  "short declaration", file=ref.path)
            continue
        data = ctx.source.read_bytes(ref.path, limit=MAX_RULE_BYTES)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            f.add("rule-not-utf8", f"byte {exc.start} is not valid UTF-8; save the rule file as UTF-8",
                  file=ref.path)
            continue
        import yaml  # here, not at the top: PyYAML costs ~0.08 s, and only a card with rules needs it

        try:
            doc, lines = _load_with_lines(text)
        except (yaml.YAMLError, RecursionError, ValueError) as exc:
            f.add("rule-yaml-invalid", f"is not valid YAML: {_yaml_problem(exc)}", file=ref.path)
            continue
        if not isinstance(doc, dict):
            f.add("rule-yaml-invalid", "must hold a YAML mapping with a `rule:` id at the top", file=ref.path)
            continue
        if doc.get("rule") != ref.id:
            f.add("rule-id-mismatch", f"declares rule {excerpt(doc.get('rule'))} but card.json lists it as "
                  f"{excerpt(ref.id)}; make the ids agree", file=ref.path)
            continue
        parsed[ref.id] = doc
        try:
            from ..rules.loader import parse_rule  # the engine loads only for a card with rules

            compiled[ref.id] = (parse_rule(text, file=ref.path, parsed=(doc, lines)), ref.path, lines)
        except RuleError as exc:
            f.add("rule-invalid", _rule_problem(exc, lines), file=ref.path)
    ctx.facts["rules"] = parsed
    ctx.facts["compiled_rules"] = compiled


def _rule_problem(exc: RuleError, lines: dict) -> str:
    """Key, line and reason of a rule error, without echoing the package's text at length.

    The line is the YAML line of the key (`lines`, from the strict loader): an expression error
    knows only its column, and an error raised where the rule meets the card's columns (replay)
    knows only its key, yet the finding should say where in the file to look, as rescore does."""
    from ..rules.loader import line_of_key

    reason = exc.reason if isinstance(exc, ExpressionError) else str(exc).rsplit(f"{exc.key}: ", 1)[-1]
    if isinstance(exc, ExpressionError) and exc.column is not None:
        reason += f" (column {exc.column} of the expression)"
    line = exc.line or (line_of_key(exc.key, lines) if exc.key else None)
    where = ", ".join(x for x in (exc.key, f"line {line}" if line else None) if x)
    return f"{where}: {reason}" if where else reason


def check_replay(ctx: CheckContext) -> None:
    """Recompute every `reported` number of every compiled rule and compare within its tolerance."""
    if not ctx.replay:
        ctx.skip("replay was turned off (--no-replay)")
    if "compiled_rules" not in ctx.facts:
        ctx.skip("the rule files were not read (see rules.files), so nothing was replayed")
    compiled: dict[str, Any] = ctx.facts["compiled_rules"]
    pending = {rule_id: entry for rule_id, entry in compiled.items() if entry[0].reported}
    if not pending:
        return
    episodes = ctx.table_state.get("episodes")
    if ctx.manifest is None or episodes is None or not episodes.has("episode_id", "task_id", "status"):
        ctx.skip(f"{len(pending)} rule(s) with reported numbers were not replayed: the episodes table cannot be read")
    # inventory.digests hashes every file in this run (and reports a mismatch), so the
    # replay reads unchecked instead of hashing the tables a second time.
    card = Card(ctx.source, ctx.manifest, verify=False)
    index = {ref.id: k for k, ref in enumerate(ctx.manifest.rules)}
    f = ctx.findings
    for rule_id, (rule, path, lines) in pending.items():
        try:
            from ..rules.replay import replay_rule

            checks = replay_rule(card, rule, file=path,
                                 step_features=ctx.engine.step_features(card) if ctx.engine else None)
        except RuleError as exc:
            f.add("rule-invalid", _rule_problem(exc, lines), file=path)
            continue
        except StatisticsError as exc:  # the card's values give the rule no statistic (e.g. squares overflow)
            f.add("rule-invalid", f"replaying rule {excerpt(rule_id)} on this card's values: {str(exc)[:200]}",
                  file=path)
            continue
        except DecodeLimitError as exc:
            f.add("parquet-decode-limit", f"replaying rule {excerpt(rule_id)}: {exc}", file=path)
            continue
        except TableSchemaError:  # the reader refuses a table with a standard column of another type
            f.add("replay-unavailable", f"the reported numbers of rule {excerpt(rule_id)} could not be recomputed: "
                  "a table the rule reads has a column the format does not allow or part files of different "
                  "schemas (its table-column-* or table-parts-inconsistent finding says which)", file=MANIFEST, pointer=f"/rules/{index.get(rule_id, 0)}")
            continue
        except (CardFormatError, pa.ArrowException, OSError) as exc:
            f.add("replay-unavailable", f"the reported numbers of rule {excerpt(rule_id)} could not be recomputed: "
                  f"{type(exc).__name__}: {str(exc)[:160]}", file=MANIFEST, pointer=f"/rules/{index.get(rule_id, 0)}")
            continue
        for check in checks:
            if not check.ok:
                f.add("reported-mismatch", check.message, file=path, pointer=check.pointer)
