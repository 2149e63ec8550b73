"""20,000 drops took 58 s (issue 9 item 10): every filtered drop scanned its table on its own,
every selector was parsed twice per check and every drop went through jsonschema. Now one
scan per table, one parse per selector text, and drops the strict model accepts skip jsonschema."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

import rollout_cards as rc
import rollout_cards.expr as expressions
from rollout_cards.model.card import Drop
from rollout_cards.model.schemas import card_schema_problems, schema_problems
from rollout_cards.validate import coverage, semantics
from tests.validate.conftest import bad_cards

BASE = {"target": "episodes", "reason": "r", "declaration": "author_declared", "loss_class": "budget", "count": 1}


def _many(card, n):
    drops = [{**BASE, "action": ("filtered", "omitted")[i % 2], "selector": f"task_id == 'gone-{i}'"}
             for i in range(n)]
    drops[6] = {**drops[6], "selector": "task_id == 'task-00'"}  # filtered, yet matches present rows
    bad_cards.edit_manifest(card, lambda d: d["drops"].extend(drops))


def test_filtered_drops_share_one_scan_and_selectors_are_parsed_once(synthetic_copy, monkeypatch):
    _many(synthetic_copy, 400)
    scans, parses = [], []
    real_chunks, real_parse = semantics.iter_chunks, expressions.parse_expression
    monkeypatch.setattr(coverage, "iter_chunks", lambda *a, **k: scans.append(a[2]) or real_chunks(*a, **k))
    # coverage imports the parser when it meets a selector: patch it where it is imported from
    monkeypatch.setattr(expressions, "parse_expression", lambda *a, **k: parses.append(a[0]) or real_parse(*a, **k))
    coverage._parsed.cache_clear()
    report = rc.validate(synthetic_copy)
    selectors = [p for p in parses if p.startswith("task_id ==")]  # not the rule replay's expressions
    assert scans.count(["task_id"]) == 1 and len(scans) == 2 and len(selectors) == len(set(selectors)) == 400
    (finding,) = [f for f in report.findings if f.code == "drop-filtered-inconsistent"]
    assert finding.location.pointer == "/drops/7/selector" and "matches 6 row(s)" in finding.message


def test_fast_schema_pass_reports_what_jsonschema_reports(synthetic_copy):
    _many(synthetic_copy, 100)
    doc = json.loads((synthetic_copy / "card.json").read_text())
    doc["drops"][30]["count"] = -1
    doc["drops"][60]["action"] = "eaten"
    doc["drops"][90]["colour"] = "red"
    doc["drops"][95]["count"] = 1.0  # an integer to jsonschema, not to strict pydantic: goes the slow way
    assert card_schema_problems(doc) == schema_problems("card", doc)


_values = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=8), st.sampled_from(["omitted", "filtered", "author_declared", "budget", "x_1"]),
                    st.lists(st.text(max_size=4), max_size=2))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from([*Drop.model_fields, "extra"]), _values, max_size=3),
       st.lists(st.sampled_from(sorted(BASE)), max_size=2))
def test_a_drop_the_strict_model_accepts_is_accepted_by_the_schema(changes, removed):
    item = {**BASE, "action": "omitted", **changes}
    for key in removed:
        item.pop(key, None)
    try:
        Drop.model_validate_json(json.dumps(item), strict=True)
    except ValueError:
        return
    doc = {"drops": [item]}
    assert not [p for p in schema_problems("card", doc) if p.location.startswith("/drops")]


def test_the_reader_skips_jsonschema_for_drops_the_model_accepts(synthetic_copy, monkeypatch):
    """rc.open of a card with 20,000 drops took ~30 s on a loaded machine: io.manifest ran
    jsonschema over every drop (the validator already had the fast pass; now both share it)."""
    from rollout_cards.model import schemas

    _many(synthetic_copy, 200)
    seen = []
    real = schemas.schema_problems
    monkeypatch.setattr(schemas, "schema_problems", lambda name, doc: seen.append(len(doc["drops"])) or real(name, doc))
    assert len(rc.open(synthetic_copy).manifest.drops) >= 200
    assert seen == []  # a card the model accepts strictly needs no jsonschema pass at all
