"""The report: catalogue, safe text, capping, counts, rendering, JSON Schema, documentation."""

from __future__ import annotations

import json
import re

import jsonschema
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from rollout_cards.validate import validate
from rollout_cards.validate.report import (
    CODES,
    HARD_CAP,
    CheckRun,
    Finding,
    Findings,
    Location,
    Report,
    Severity,
    build_report,
    check_run,
    excerpt,
    render_json,
    render_text,
    safe_text,
)
from tests.conftest import FIXTURE_CARDS, REPO
from tests.model.test_construct import same

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def test_codes_are_kebab_case_with_a_group_and_summary():
    for code, entry in CODES.items():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", code)
        assert entry.group in {"layout", "manifest", "inventory", "parquet", "semantics", "coverage", "rules", "signature",
                               "internal"}
        assert entry.summary and isinstance(entry.severity, Severity)


def test_docs_describe_every_code_with_its_severity():
    text = (REPO / "docs" / "validation.md").read_text()
    for code, entry in CODES.items():
        assert f"| `{code}` | {entry.severity.value} |" in text, code


@given(st.text(max_size=500))
def test_excerpt_keeps_at_most_40_characters_on_one_line(value):
    shown = excerpt(value)
    assert not _CONTROL.search(shown)
    assert eval(shown.removesuffix("…")) == value[:40]  # noqa: S307 - a repr we produced
    assert shown.endswith("…") == (len(value) > 40)


@given(st.text(max_size=1000))
def test_safe_text_is_one_line_and_bounded(value):
    out = safe_text(value, 200)
    assert not _CONTROL.search(out)
    assert len(value) <= 200 or out.endswith("…")


def test_a_secret_cell_never_reaches_the_report_whole(minimal_copy):
    import bad_cards
    import pyarrow as pa
    import pyarrow.parquet as pq

    secret = "my social security number is 078-05-1120 and my password is hunter2 " * 3
    table = pq.read_table(minimal_copy / "episodes.parquet")
    i = table.schema.get_field_index("status")
    table = table.set_column(i, pa.field("status", pa.string()), pa.array([secret, "completed"]))
    pq.write_table(table, minimal_copy / "episodes.parquet")
    bad_cards.rehash(minimal_copy)
    report = validate(minimal_copy)
    assert report.codes() == {"enum-invalid"}
    dumped = render_json(report) + render_text(report)
    assert secret[:40] in dumped and secret[:41] not in dumped


def test_findings_past_the_cap_are_counted_not_listed():
    f = Findings(max_findings=2)
    for i in range(5):
        f.add("file-unlisted", f"file {i}", file=f"x{i}")
    f.omit("file-unlisted", 10)
    assert len(f.items) == 2 and f.omitted == {"file-unlisted": 13} and f.count("file-unlisted") == 15
    report = build_report("card", f, [], card_id=None, strict=False, max_findings=2)
    assert report.counts[Severity.ERROR] == 15 and report.capped and not report.valid
    assert "13 more file-unlisted" in render_text(report)


def test_the_hard_cap_applies_without_max_findings():
    assert Findings().cap == HARD_CAP and Findings(10**9).cap == HARD_CAP


def test_merge_applies_the_cap_of_the_receiver():
    a, b = Findings(3), Findings(3)
    for i in range(3):
        a.add("file-unlisted", "a", file=str(i))
        b.add("file-unlisted", "b", file=str(i))
    a.merge(b)
    assert len(a.items) == 3 and a.omitted == {"file-unlisted": 3}


def test_strict_turns_warnings_into_invalid_and_info_never_counts():
    f = Findings()
    f.add("scope-license-missing", "no license")
    f.add("replay-unavailable", "not replayed")
    assert build_report("c", f, [], card_id=None, strict=False, max_findings=None).valid
    strict = build_report("c", f, [], card_id=None, strict=True, max_findings=None)
    assert not strict.valid and strict.outcome == "invalid"
    info_only = Findings()
    info_only.add("replay-unavailable", "x")
    assert build_report("c", info_only, [], card_id=None, strict=True, max_findings=None).valid


def test_internal_error_is_its_own_outcome():
    f = Findings()
    f.add("internal-error", "boom")
    report = build_report("c", f, [CheckRun(name="x", status="crashed")], card_id=None, strict=False,
                          max_findings=None)
    assert report.outcome == "internal-error" and not report.valid
    assert "internal error" in render_text(report)


def test_locations_and_messages_are_escaped():
    f = Findings()
    f.add("file-unlisted", "line\nbreak\x1b[31m", file="evil\n\x1b[2Jname", column="c\u202e")
    finding = f.items[0]
    for text in (finding.message, finding.location.file, finding.location.column):
        assert not _CONTROL.search(text)


def test_json_report_satisfies_the_shipped_schema_and_round_trips(bad_corpus):
    schema = json.loads((REPO / "schemas" / "report-0.2.schema.json").read_text())
    root, expected = bad_corpus
    for path in [FIXTURE_CARDS / "synthetic", root / "plan-episode-missing", root / "manifest-invalid-json"]:
        data = json.loads(render_json(validate(path, max_findings=1)))
        jsonschema.validate(data, schema)
        assert Report.model_validate(data).to_json_dict() == data


def test_text_report_has_one_line_per_finding_and_a_verdict():
    report = validate(FIXTURE_CARDS / "minimal")
    lines = render_text(report).splitlines()
    assert lines[0].endswith("VALID — 0 errors, 1 warning, 0 info")
    assert sum(line.startswith("  warning") for line in lines) == 1
    assert any("[skipped] coverage.plan" in line for line in lines)


# -- reports constructed without validation (report.py: check_run, Findings.add, build_report) ----

def test_catalogue_codes_match_the_finding_model_s_own_pattern():
    """Findings.add constructs a Finding without validating its code: every catalogue code must
    be one the model accepts."""
    (pattern,) = [m.pattern for m in Finding.model_fields["code"].metadata if hasattr(m, "pattern")]
    assert all(re.search(pattern, code) and not code.endswith("\n") for code in CODES)


def test_reports_of_the_bad_corpus_are_those_the_models_validate(bad_corpus):
    """A constructed report equals the one pydantic validates from its own dump (types included:
    Severity keys and members, nested models), and to_json_dict is model_dump(mode="json")."""
    root, expected = bad_corpus
    paths = [FIXTURE_CARDS / "minimal", FIXTURE_CARDS / "synthetic", *sorted(root / name for name in expected if (root / name).exists())]
    for path in paths:
        report = validate(path, max_findings=2)
        assert report.to_json_dict() == report.model_dump(mode="json"), path
        # (validated from a full dump every field is set; what the validator sets is checked below)
        same(report, Report.model_validate(report.model_dump()), str(path), fields_set=False)
        assert report.model_fields_set == {"card", "card_id", "valid", "outcome", "strict", "counts", "findings",
                                           "omitted", "max_findings", "checks"}
        assert json.loads(render_json(report)) == report.model_dump(mode="json")


severities = st.sampled_from(list(Severity))
locations = st.builds(Location, file=st.none() | st.text(max_size=8), pointer=st.none() | st.text(max_size=8),
                      row=st.none() | st.integers(0, 2**63 - 1), column=st.none() | st.text(max_size=8))
finding_models = st.builds(Finding, code=st.sampled_from(sorted(CODES)), severity=severities,
                           message=st.text(max_size=20), location=locations)
check_runs = st.builds(CheckRun, name=st.text(max_size=8), status=st.sampled_from(
    ["passed", "warned", "failed", "skipped", "crashed"]), note=st.none() | st.text(max_size=8))
report_models = st.builds(
    Report, card=st.text(max_size=8), card_id=st.none() | st.text(max_size=8), valid=st.booleans(),
    outcome=st.sampled_from(["valid", "invalid", "internal-error"]), strict=st.booleans(),
    counts=st.dictionaries(severities | st.sampled_from([s.value for s in Severity]), st.integers(0, 10)),
    findings=st.lists(finding_models, max_size=3), omitted=st.dictionaries(st.sampled_from(sorted(CODES)),
                                                                           st.integers(0, 5)),
    max_findings=st.none() | st.integers(1, 10), checks=st.lists(check_runs, max_size=3),
    ignored=st.dictionaries(st.sampled_from(sorted(CODES)), st.integers(0, 5)))


@given(report_models)
def test_to_json_dict_is_model_dump(report):
    assert report.to_json_dict() == report.model_dump(mode="json")


@given(st.text(max_size=8), st.sampled_from(["passed", "warned", "failed", "skipped", "crashed"]),
       st.none() | st.text(max_size=8))
def test_check_run_constructs_what_the_model_validates(name, status, note):
    given = {"name": name, "status": status} | ({} if note is None else {"note": note})
    same(check_run(name, status, note), CheckRun(**given))


@given(st.sampled_from(sorted(CODES)), st.text(max_size=30), st.none() | st.text(max_size=30),
       st.none() | st.text(max_size=30), st.none() | st.integers(0, 2**63 - 1), st.none() | st.text(max_size=30))
def test_findings_add_constructs_what_the_model_validates(code, message, file, pointer, row, column):
    f = Findings()
    f.add(code, message, file=file, pointer=pointer, row=row, column=column)
    validated = Finding(code=code, severity=CODES[code].severity, message=safe_text(message, 400), location=Location(
        file=None if file is None else safe_text(file), pointer=None if pointer is None else safe_text(pointer, 300),
        row=row, column=None if column is None else safe_text(column, 120)))
    same(f.items[0], validated)


def test_values_of_another_type_still_go_through_validation():
    """What a caller passes that is not plainly valid is validated as before (public behaviour)."""
    with pytest.raises(ValidationError):
        check_run("x", "bogus")
    f = Findings()
    with pytest.raises(ValidationError):
        f.add("file-missing", "m", row=-1)
    f.add("file-missing", "m", row=np.int64(3))  # converted by pydantic, as before
    assert type(f.items[0].location.row) is int
    report = build_report("c", Findings(), [], card_id=None, strict=1, max_findings=None)
    assert report.strict is True
    with pytest.raises(ValidationError):
        Finding(code="Not A Code", severity="error", message="m")
