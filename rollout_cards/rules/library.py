"""The rule library: reporting rules that papers and harnesses regrade with, shipped
as data in the package (`library_rules/<id>.yaml`, listed in `library_rules/index.yaml`).

    library_rules() -> [LibraryRule]          every entry of the index, with its rule
    library_rule(id) -> LibraryRule           one entry; RuleError naming the closest ids
    LIBRARY_PREFIX = "lib:"                   `load_rule("lib:tau_bench.write_set")`

Each entry gives the rule (parsed and validated like any rule file), its source
(paper or harness), the data it applies to, and the test that pins its value on real
data. Rule ids come from the index only, so `lib:<id>` never names a path.
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass
from importlib import resources

from ..errors import RuleError
from ..model.rule import Rule
from ..yamldoc import StrictYamlError, load_strict_yaml
from .loader import MAX_RULE_BYTES, parse_rule

__all__ = [
    "LIBRARY_PREFIX",
    "LibraryRule",
    "library_rule",
    "library_rules",
    "render_library",
    "render_rule_yaml",
]

LIBRARY_PREFIX = "lib:"

_PACKAGE = "rollout_cards.rules"
_DIRECTORY = "library_rules"


@dataclass(frozen=True)
class LibraryRule:
    """One rule of the library with where it comes from."""

    id: str
    rule: Rule
    definition: str
    source: str
    applies_to: str
    test: str

    @property
    def file(self) -> str:
        """How errors and reports name the rule's file."""
        return f"{LIBRARY_PREFIX}{self.id}"



def _read(name: str) -> str:
    data = resources.files(_PACKAGE).joinpath(_DIRECTORY, name).read_bytes()
    if len(data) > MAX_RULE_BYTES:  # pragma: no cover - the shipped files are small
        raise RuleError("library file is too large", file=f"{_DIRECTORY}/{name}")
    return data.decode("utf-8")


@functools.cache
def library_rules() -> tuple[LibraryRule, ...]:
    """Every rule of the library, in index order (each file parsed and validated)."""
    index_file = f"{_DIRECTORY}/index.yaml"
    try:
        index, _ = load_strict_yaml(_read("index.yaml"))
    except StrictYamlError as exc:  # pragma: no cover - checked by the tests
        raise RuleError(exc.message, file=index_file, line=exc.line) from None
    out = []
    for entry in index["rules"]:
        rule_id = entry["id"]
        rule = parse_rule(_read(f"{rule_id}.yaml"), file=f"{LIBRARY_PREFIX}{rule_id}")
        if rule.rule != rule_id:  # pragma: no cover - checked by the tests
            raise RuleError(f"the file declares rule {rule.rule!r}", file=index_file, key=rule_id)
        out.append(
            LibraryRule(
                rule_id,
                rule,
                entry["definition"],
                entry["source"],
                entry["applies_to"],
                entry["test"],
            )
        )
    return tuple(out)


def library_rule(name: str) -> LibraryRule:
    """The library rule `name` (with or without the `lib:` prefix)."""
    rule_id = name.removeprefix(LIBRARY_PREFIX)
    rules = {r.id: r for r in library_rules()}
    if rule_id in rules:
        return rules[rule_id]
    close = difflib.get_close_matches(rule_id, list(rules), n=3, cutoff=0.5)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    raise RuleError(
        f"no rule {rule_id!r} in the rule library; {hint}`rcard rules` lists them",
        file=f"{LIBRARY_PREFIX}{rule_id}",
    )


def render_library(entries: tuple[LibraryRule, ...], format: str = "table") -> str:
    """The library as a table (id, kind, definition) or as JSON (every field)."""
    if format == "json":
        rows = [
            {
                "id": e.id,
                "kind": e.rule.kind.value,
                "version": e.rule.version,
                "definition": e.definition,
                "description": " ".join(e.rule.description.split()),
                "source": e.source,
                "applies_to": e.applies_to,
                "test": e.test,
                "use": f"--rule {e.file}",
            }
            for e in entries
        ]
        return json.dumps({"rules": rows}, indent=1, ensure_ascii=False) + "\n"
    width = max(len(e.id) for e in entries)
    lines = [f"{'id'.ljust(width)}  kind     definition", f"{'-' * width}  -------  ----------"]
    for e in entries:
        lines.append(f"{e.id.ljust(width)}  {e.rule.kind.value.ljust(7)}  {e.definition}")
    lines.append("")
    lines.append(
        f"{len(entries)} rules; use one with `rcard rescore CARD --rule lib:ID`, "
        "see one with `rcard rules --show ID`"
    )
    return "\n".join(lines) + "\n"


def render_rule_yaml(entry: LibraryRule) -> str:
    """The rule file of a library rule as shipped, with its source as a comment."""
    head = f"# {entry.file}: {entry.source}\n# applies to: {entry.applies_to}\n"
    return head + _read(f"{entry.id}.yaml")
