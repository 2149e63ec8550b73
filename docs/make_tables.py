"""Regenerate the generated tables in docs/format.md from the code.

    python docs/make_tables.py          # rewrite the generated blocks in place
    python docs/make_tables.py --check  # exit 1 when docs/format.md is stale

Blocks are delimited by `<!-- generated: NAME -->` and `<!-- end generated -->`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rollout_cards.model.card import CardManifest  # noqa: E402
from rollout_cards.model.docstrings import describe  # noqa: E402
from rollout_cards.tables import (  # noqa: E402
    EPISODE_COLUMNS,
    EXTRA_PREFIXES,
    STEP_COLUMNS,
    StepKind,
    TerminalStatus,
)

FORMAT_MD = ROOT / "docs" / "format.md"


def _columns(columns) -> str:
    lines = ["| column | Arrow type | required | nullable | meaning |", "|---|---|---|---|---|"]
    for c in columns:
        t = "dictionary<int32, string> (enum)" if c.enum else str(c.type)
        lines.append(f"| `{c.name}` | {t} | {'yes' if c.required else 'no'} | {'yes' if c.nullable else 'no'} | {c.doc} |")
    return "\n".join(lines)


def _type_of(spec: dict) -> str:
    if "$ref" in spec:
        return spec["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in spec:
        return " or ".join(_type_of(s) for s in spec["anyOf"] if s.get("type") != "null") + " (optional)"
    if spec.get("type") == "array":
        return f"list of {_type_of(spec.get('items', {}))}"
    if spec.get("type") == "object":
        extra = spec.get("additionalProperties")
        return f"map of {_type_of(extra)}" if isinstance(extra, dict) and extra else "object"
    if "enum" in spec:
        return " \\| ".join(f"`{v}`" for v in spec["enum"])
    return spec.get("type", "any") + (f" ({spec['format']})" if "format" in spec else "")


def _manifest() -> str:
    schema = describe(CardManifest.model_json_schema(mode="validation"), CardManifest)
    defs = schema.get("$defs", {})
    out = []
    for name, definition in [("CardManifest", schema), *sorted(defs.items())]:
        props = definition.get("properties")
        if not props:
            continue
        required = set(definition.get("required", []))
        out.append(f"#### {name}\n\n{definition.get('description', '').strip()}\n")
        out.append("| field | type | required | meaning |\n|---|---|---|---|")
        for field, spec in props.items():
            out.append(
                f"| `{field}` | {_type_of(spec)} | {'yes' if field in required else 'no'} | "
                f"{spec.get('description', '').replace(chr(10), ' ')} |"
            )
        out.append("")
    return "\n".join(out).rstrip()


BLOCKS = {
    "episodes-columns": lambda: _columns(EPISODE_COLUMNS),
    "steps-columns": lambda: _columns(STEP_COLUMNS),
    "enums": lambda: "\n".join([
        "- terminal states (`episodes.status`): " + ", ".join(f"`{s.value}`" for s in TerminalStatus),
        "- step kinds (`steps.kind`): " + ", ".join(f"`{k.value}`" for k in StepKind),
        "- extra-column prefixes: "
        + "; ".join(f"{table}: " + ", ".join(f"`{p}*`" for p in prefixes) for table, prefixes in EXTRA_PREFIXES.items()),
    ]),
    "manifest-fields": _manifest,
}


def render(text: str) -> str:
    def replace(m: re.Match) -> str:
        name = m.group(1)
        if name not in BLOCKS:
            raise SystemExit(f"docs/format.md: unknown generated block {name!r}")
        return f"<!-- generated: {name} -->\n{BLOCKS[name]()}\n<!-- end generated -->"

    return re.sub(r"<!-- generated: ([\w-]+) -->\n.*?<!-- end generated -->", replace, text, flags=re.S)


def main() -> int:
    text = FORMAT_MD.read_text(encoding="utf-8")
    fresh = render(text)
    if "--check" in sys.argv:
        if fresh != text:
            print("docs/format.md is stale: run python docs/make_tables.py")
            return 1
        return 0
    FORMAT_MD.write_text(fresh, encoding="utf-8")
    print("updated docs/format.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
