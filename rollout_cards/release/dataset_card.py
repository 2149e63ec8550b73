"""A dataset card (README.md with Hugging Face front matter) generated from a card's manifest.

`render_dataset_card(card)` returns the Markdown; `check_dataset_card(text, card)` checks
its front matter offline (an SPDX license id that matches the card's, every data path
present in the card, gated-access fields when the scope is gated) and returns the
problems found. Every value taken from the card goes through `_cell`/`_text`, so a
title or reason cannot break the Markdown layout or the YAML front matter.

Each declared rule is recomputed by the rule engine (`rollout_cards.rules.apply_rule`):
value, interval, n and unit per group, next to the card's `reported` value; when the
engine cannot replay the rules, the reported values are shown labelled "as reported,
not recomputed".
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression

from ..display import markdown_cell
from ..errors import CardFormatError, Problem, RolloutCardError
from ..io.finalize import refresh_manifest
from ..io.reader import Card, open_card
from ..io.targets import file_target, write_output
from ..summary import summarize
from ..tables import TerminalStatus
from ..yamldoc import StrictYamlError, load_strict_yaml
from ._files import read_small_file

__all__ = ["DatasetCard", "check_dataset_card", "front_matter", "hf_license", "render_dataset_card",
           "write_dataset_card"]

_STATUSES = [s.value for s in TerminalStatus]
MAX_README_BYTES = 4 * 1024 * 1024


def hf_license(spdx: str | None) -> dict[str, str]:
    """Front-matter license fields: a single SPDX id lower-cased (as the Hub lists them),
    `other` with `license_name` for a compound expression, `unknown` when none is declared."""
    if not spdx:
        return {"license": "unknown"}
    if any(op in f" {spdx} " for op in (" OR ", " AND ", " WITH ")) or spdx.startswith("LicenseRef-"):
        return {"license": "other", "license_name": spdx.lower().replace(" ", "-")}
    return {"license": spdx.lower()}


def front_matter(card: Card) -> dict[str, Any]:
    """The YAML front matter of the dataset card, as data."""
    m = card.manifest
    tags = ["rollout-card", "agent-evaluation"]
    if m.provenance.environment is not None:
        tags.append(m.provenance.environment.name)
    data: dict[str, Any] = {
        **hf_license(m.scope.license),
        "pretty_name": m.title,
        "tags": tags,
        "task_categories": ["other"],
        "size_categories": [_size_category(m.tables.episodes.rows)],
        # The episodes config is the one the Hub's viewer opens first.
        "configs": [
            {"config_name": table, "data_files": [{"split": "train", "path": list(getattr(m.tables, table).paths)}],
             **({"default": True} if table == "episodes" else {})}
            for table in ("episodes", "steps")
        ],
    }
    if m.scope.access.value == "gated":
        data["extra_gated_prompt"] = m.scope.gate_prompt or (
            f"Access to {m.title} is gated. Read the release scope below before requesting access.")
        data["extra_gated_fields"] = dict(m.scope.gate_fields) or {"I agree to the release terms": "checkbox"}
    return data


#: Hugging Face size_categories buckets (upper bounds, exclusive) and their names.
_SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
          (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B"))


def _size_category(rows: int) -> str:
    """The Hub's size category of a dataset of `rows` examples (episodes)."""
    return next((name for bound, name in _SIZES if rows < bound), "n>1T" if rows >= 10**12 else "1B<n<10B")


def _cell(value: Any) -> str:
    return "" if value is None else markdown_cell(value)


def _text(value: Any) -> str:
    return "\n".join(line.replace("<", "&lt;") for line in str(value).splitlines())


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out + [""]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "n/a" if value is None else str(value)


def _recomputed(card: Card) -> tuple[dict[str, Any], str | None]:
    """Rule id -> RuleRun from the rule engine, and why some could not be recomputed."""
    try:
        from ..rules import apply_rule, declared_rules

        return {rule.rule: apply_rule(card, rule, file=path) for rule, path in declared_rules(card)}, None
    except RolloutCardError as exc:
        return {}, str(exc)


def _rules_section(card: Card) -> list[str]:
    lines = ["## Reporting rules", ""]
    if not card.manifest.rules:
        return lines + ["No reporting rules are declared.", ""]
    runs, failure = _recomputed(card)
    if failure is None:
        lines += ["Each number is **recomputed** from the tables by the rule engine (`rcard rescore`), "
                  "next to the value the card reports.", ""]
    else:
        lines += ["Numbers are **as reported, not recomputed**: the rule engine could not replay the rules "
                  f"({_cell(failure[:200])}).", ""]
    from ..rules.loader import parse_rule
    from ..rules.replay import check_reported

    texts = card.rule_files()
    for number, ref in enumerate(card.manifest.rules, 1):
        lines += [f"### Rule {number}: `{_cell(ref.id)}` ({_cell(ref.kind or 'unspecified kind')})", ""]
        try:
            rule = parse_rule(texts[ref.id], file=ref.path)
        except RolloutCardError as exc:
            # Never show defaults for a rule we could not read: say it cannot be described.
            lines += [f"The rule file cannot be read ({_cell(str(exc)[:200])}); its numbers are not shown.", ""]
            continue
        agg = rule.aggregate
        unit = agg.unit if isinstance(agg.unit, str) else ", ".join(agg.unit or []) or "episode_id"
        if rule.description:
            lines += [_text(rule.description), ""]
        lines += [f"Statistic: {_cell(agg.statistic.value)}; interval: {_cell(agg.interval.method.value)} at level "
                  f"{_cell(agg.interval.level)}; independent unit: `{_cell(unit)}`.", ""]
        reported = {tuple(sorted(rep.group.items())): rep.value for rep in rule.reported if rep.stratum is None}
        run = runs.get(ref.id)
        if run is not None:
            failed = {tuple(sorted(c.group.items())) for c in check_reported(rule, run) if not c.ok}
            rows = []
            for g in run.results:
                label = ", ".join(f"{k}={v}" for k, v in {**g.group, **(g.stratum or {})}.items()) or "(all)"
                iv = g.interval
                ci = (f"[{_fmt(iv.low)}, {_fmt(iv.high)}] {iv.method} {iv.level:g}" if iv.defined
                      else f"undefined ({iv.reason or iv.method})")
                key = tuple(sorted(g.group.items()))
                as_reported = _fmt(reported[key]) if g.stratum is None and key in reported else ""
                if as_reported and key in failed:
                    as_reported += " (does NOT match the recomputation)"
                excluded = ", ".join(f"{k} {v}" for k, v in sorted(g.excluded_by_status.items())) or "0"
                rows.append([label, _fmt(g.value), ci, g.n, excluded, f"{g.unit} ({iv.n_units})", as_reported])
            lines += _table(["group", "value", "interval", "n", "excluded", "unit (units)", "as reported"], rows)
        elif reported:
            rows = [[", ".join(f"{k}={v}" for k, v in key) or "(all)", _fmt(value), "not recomputed",
                     "not recomputed", unit] for key, value in reported.items()]
            lines += _table(["group", "value (as reported, not recomputed)", "interval", "n", "unit"], rows)
        else:
            lines += ["This rule declares no reported numbers.", ""]
    return lines


def render_dataset_card(card: Card, *, inside: bool = False) -> str:
    """The dataset card of `card` as Markdown with YAML front matter.

    `inside`: the README is written into the card, so the inventory's root digest will cover
    it and cannot be quoted in it (the README points to card.json instead)."""
    m = card.manifest
    summary = summarize(card)
    front = yaml.safe_dump(front_matter(card), sort_keys=False, allow_unicode=True, width=1000)
    lines = ["---", front.rstrip("\n"), "---", "", f"# {_cell(m.title)}", ""]
    if m.description:
        lines += [_text(m.description), ""]
    lines += ["This dataset is a rollout card (`rollout-cards`): every episode and step, the reporting "
              "rules that produced its numbers, and a manifest of everything dropped.", ""]
    lines += _table(["card", "version", "format", "created", "episodes", "steps", "root digest"],
                    [[m.id, m.version, m.format, m.created.isoformat(), m.tables.episodes.rows,
                      m.tables.steps.rows,
                      "in card.json (it covers this README)" if inside else f"`{m.inventory.root_digest}`"]])
    lines += ["## What was run", "", "### Plan", ""]
    if m.plan is None:
        lines += ["No plan was declared, so missing episodes cannot be detected.", ""]
    else:
        p = m.plan
        parts = []
        if p.tasks is not None:
            parts.append(f"{len(p.tasks)} tasks")
        if p.agents is not None:
            parts.append(f"agents {', '.join(p.agents)}")
        if p.trials is not None:
            parts.append(f"{p.trials} trial(s) each")
        expected = p.expected_count()
        lines.append(_cell("; ".join(parts) or "explicit count") +
                     (f" — {expected} episodes expected, {m.tables.episodes.rows} recorded." if expected is not None
                      else "."))
        if p.description:
            lines += ["", _text(p.description)]
        lines.append("")
    lines += ["### Agents", ""]
    if m.provenance.agents:
        lines += _table(["agent", "model", "provider", "version", "revision"],
                        [[a.name, a.model, a.provider, a.version, a.revision] for a in m.provenance.agents])
    else:
        lines += ["No agents are described in the provenance.", ""]
    lines += ["### Provenance", ""]
    rows = [[role, s.name, s.version, s.revision, s.url]
            for role, s in (("generator", m.provenance.generator), ("harness", m.provenance.harness),
                            ("environment", m.provenance.environment)) if s is not None]
    lines += _table(["role", "name", "version", "revision", "url"], rows)
    if m.provenance.sources:
        lines += _table(["source file", "format", "bytes", "sha256"],
                        [[s.name, s.format, s.bytes, s.sha256] for s in m.provenance.sources])
    lines += ["## Terminal states per agent", ""]
    lines += _table(["agent", *_STATUSES, "total"],
                    [[agent, *(counts[s] for s in _STATUSES), sum(counts.values())]
                     for agent, counts in summary["status_by_agent"].items()])
    lines += _rules_section(card)
    lines += ["## Drops manifest", ""]
    if m.drops:
        lines += _table(["target", "action", "declaration", "loss class", "count", "rows", "affects", "reason"],
                        [[d.target, d.action.value, d.declaration.value, d.loss_class,
                          d.count if d.count is not None else "unknown", d.selector or "all",
                          ", ".join(d.affects) or "none", d.reason] for d in m.drops])
    else:
        lines += ["Nothing is declared as dropped, redacted or unobserved.", ""]
    s = m.scope
    lines += ["## Release scope", ""]
    lines += _table(["", ""], [
        ["license", s.license or "NOT DECLARED"],
        ["access", s.access.value],
        ["redistribution", s.redistribution or "not stated"],
        ["personal data", f"{s.personal_data.contains}: {s.personal_data.statement or ''}" if s.personal_data
         else "not stated"],
        ["contact", s.contact or "not stated"],
    ])
    if s.redactions:
        lines += ["Redactions applied:", ""] + [f"- {_cell(r)}" for r in s.redactions] + [""]
    if s.citation:
        lines += ["### Citation", "", "```", s.citation.replace("```", "'''"), "```", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _parse_front(text: str) -> tuple[dict[str, Any] | None, list[Problem]]:
    if not text.startswith("---\n"):
        return None, [Problem("front matter", "the file must start with '---' and YAML front matter")]
    end = text.find("\n---\n", 4)
    if end < 0:
        return None, [Problem("front matter", "no closing '---' line")]
    try:
        data = load_strict_yaml(text[4:end])[0]
    except StrictYamlError as exc:
        # The loader counts lines of the front matter alone; README.md has the opening '---' above it.
        where = f"line {exc.line + 1}: " if exc.line else ""
        return None, [Problem("front matter", f"{where}{exc.message}")]
    if not isinstance(data, dict):
        return None, [Problem("front matter", "must be a YAML mapping")]
    return data, []


def _items(value: Any, where: str, problems: list[Problem]) -> list[Any]:
    """A front-matter field that holds one item or a list of them (Hugging Face writes
    `data_files: x.parquet` and `data_files: [x.parquet]` alike) as a list; anything else is a
    problem (iterating an int raised TypeError, and a string was read character by character)."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    if isinstance(value, str | dict):
        return [value]
    problems.append(Problem(where, f"is {type(value).__name__} {str(value)[:40]!r}; expected a list"))
    return []


def check_dataset_card(text: str, card: Card) -> list[Problem]:
    """Offline checks of a dataset card's front matter against `card`; an empty list means it passed."""
    data, problems = _parse_front(text)
    if data is None:
        return problems
    declared = card.manifest.scope.license
    lic = data.get("license")
    if lic == "other":
        if not data.get("license_name"):
            problems.append(Problem("license", "license 'other' needs a license_name"))
    elif lic == "unknown" or lic is None:
        problems.append(Problem("license", "no license is declared; set scope.license in card.json"))
    else:
        try:
            canonical = str(canonicalize_license_expression(str(lic)))
        except InvalidLicenseExpression:
            problems.append(Problem("license", f"{str(lic)[:60]!r} is not an SPDX license id"))
        else:
            if declared is not None and canonical != declared:
                problems.append(Problem("license", f"{lic!r} differs from the card's license {declared!r}"))
    if not data.get("pretty_name"):
        problems.append(Problem("pretty_name", "is missing"))
    listed = {p for t in ("episodes", "steps") for p in getattr(card.manifest.tables, t).paths}
    configs = _items(data.get("configs"), "configs", problems)
    names = {c.get("config_name") for c in configs if isinstance(c, dict)}
    for table in ("episodes", "steps"):
        if table not in names:
            problems.append(Problem("configs", f"no config for the {table} table"))
    for i, config in enumerate(configs):
        files = config.get("data_files") if isinstance(config, dict) else None
        for j, item in enumerate(_items(files, f"configs[{i}].data_files", problems)):
            paths = item.get("path") if isinstance(item, dict) else item
            for path in _items(paths, f"configs[{i}].data_files[{j}]", problems):
                where = f"configs[{i}].data_files[{j}]"
                if not isinstance(path, str) or path not in listed or not card.source.exists(path):
                    problems.append(Problem(where, f"{str(path)[:80]!r} is not a table file of the card"))
    if card.manifest.scope.access.value == "gated":
        for key in ("extra_gated_prompt", "extra_gated_fields"):
            if not data.get(key):
                problems.append(Problem(key, "the card's scope is gated but the front matter has no " + key))
    return problems


@dataclass
class DatasetCard:
    """A rendered dataset card and the problems its front-matter check found."""

    text: str
    problems: list[Problem] = field(default_factory=list)


def write_dataset_card(src: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
                       check: str | os.PathLike[str] | None = None, overwrite: bool = False,
                       into: bool = False, verify: bool = True) -> DatasetCard:
    """Render (and check) the dataset card of the card at `src`; write it to `out` when given.

    With `check`, the existing README at that path is checked instead of a new one rendered.
    With `into`, it is written as the card's own README.md (the Hugging Face layout) and listed
    in the card's inventory, so the card still validates. `verify=False` reads the card's
    tables without checking them against its inventory.
    """
    if into:
        if out is not None or check is not None:
            raise RolloutCardError("--into writes CARD/README.md; it cannot be combined with --output or --check")
        root = Path(src)
        if not root.is_dir() or root.is_symlink():
            raise RolloutCardError(f"{src}: --into needs a card directory (unpack a packed card first)")
        out = root / "README.md"
    if out is not None and os.path.lexists(out) and not overwrite:
        raise RolloutCardError(f"{out} exists; pass --overwrite to replace it")
    if out is not None and not into:
        file_target(out, overwrite=overwrite, inputs=[src], what="the dataset card")
    card = open_card(src, verify=verify)
    card.verify_all(wait=False)  # every table and rule file, hashed while the card is rendered
    if check is not None:
        text = read_small_file(check, MAX_README_BYTES, "README", CardFormatError).decode("utf-8", "replace")
        result = DatasetCard(text, check_dataset_card(text, card))
        card.verify_all()
        return result
    text = render_dataset_card(card, inside=into)
    result = DatasetCard(text, check_dataset_card(text, card))
    card.verify_all()
    if out is not None:
        if into:
            refresh_manifest(Path(src), files={"README.md": text.encode("utf-8")})
        else:
            write_output(out, text, overwrite=overwrite, inputs=[src], what="the dataset card")
    return result

