"""The HTML report: same numbers as rescore, every section present, nothing from the package as markup."""

from __future__ import annotations

import html
import html.parser
import json
import re
from pathlib import Path

import pytest

import rollout_cards as rc
from rollout_cards.cli import main
from rollout_cards.report import SampleLimits, build_report, gather
from rollout_cards.report.page import render_html
from tests.conftest import FIXTURE_CARDS, REPO

RULES = REPO / "fixtures" / "rules"


class _Scan(html.parser.HTMLParser):
    """Collects scripts, event-handler attributes and URLs of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[dict[str, str | None]] = []
        self.handlers: list[tuple[str, str]] = []
        self.urls: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "script":
            self.scripts.append(dict(attrs))
        for name, value in attrs:
            if name.startswith("on"):
                self.handlers.append((tag, name))
            if name in ("href", "src", "action", "xlink:href", "formaction"):
                self.urls.append(value or "")


def _scan(text: str) -> _Scan:
    scan = _Scan()
    scan.feed(text)
    return scan


def test_numbers_are_the_rescore_numbers() -> None:
    card = FIXTURE_CARDS / "synthetic"
    alts = [RULES / "errors_excluded.yaml", RULES / "profit_median.yaml"]
    text = build_report(card, alts)
    report = rc.rescore(card, alts)
    for result in report.results:
        # The display string and the method as rescore's text output prints them.
        assert result.display in text, result.label
        assert result.method_label in text
    for diff in report.differences:
        assert f"{diff.difference:.4f}" in text
    assert "synthetic.errors_excluded" in text and "agent=alpha" in text and "agent=beta" in text


def test_sections_and_charts_of_the_synthetic_card() -> None:
    text = build_report(FIXTURE_CARDS / "synthetic",
                        [RULES / "errors_excluded.yaml", RULES / "pass_at_2.yaml", RULES / "profit_mean.yaml"])
    for section in ("headlines", "differences", "ranks", "strata", "attempts", "accounting", "reported",
                    "card", "episodes"):
        assert f"id='{section}'" in text, section
    scan = _scan(text)
    # One forest per rule (4), differences, a slopegraph per moved pair, strata, attempts, accounting.
    assert scan.tags.count("svg") >= 9
    # Terminal-state counts per agent equal a plain count over the episodes table.
    episodes = rc.open(FIXTURE_CARDS / "synthetic").episodes(columns=["agent", "status"]).to_pylist()
    alpha_errors = sum(1 for e in episodes if e["agent"] == "alpha" and e["status"] == "error")
    assert f"agent=alpha: error {alpha_errors} of" in text
    # pass@k curve: k = 1 of pass_at_k equals the plain mean of the scored attempts.
    assert "pass_at_k for k = 1.." in text


def test_hostile_values_never_become_markup(hostile_card: Path) -> None:
    text = build_report(hostile_card, [])
    scan = _scan(text)
    # Exactly two scripts: the JSON data block and the hashed browser script.
    assert [s.get("type") for s in scan.scripts] == ["application/json", None]
    assert scan.handlers == []
    assert not [u for u in scan.urls if u.strip().lower().startswith("javascript:")]
    assert "<script>window.__pwned" not in text and "onerror=\"window" not in text
    # The JSON block cannot be closed from inside: no '<' at all in it.
    block = text.split("id='episodes-data'>", 1)[1].split("</script>", 1)[0]
    assert "<" not in block and "\u2028" not in block
    data = json.loads(block)
    contents = [s.get("content") for steps in data["steps"].values() for s in steps]
    assert any("<script>window.__pwned=1</script>" in (c or "") for c in contents)
    # The CSP allows only the page's own script and style, by hash.
    csp = html.unescape(re.search(r"Content-Security-Policy'? content=\"([^\"]+)\"", text).group(1))
    assert "default-src 'none'" in csp and "'unsafe-inline'" not in csp and "script-src 'sha256-" in csp


def test_episode_sample_is_deterministic_and_says_so(tmp_path: Path) -> None:
    card = FIXTURE_CARDS / "synthetic"
    a = gather(card, limits=SampleLimits(episodes=20), check=False)
    b = gather(card, limits=SampleLimits(episodes=20), check=False)
    assert [r["episode_id"] for r in a.episodes.rows] == [r["episode_id"] for r in b.episodes.rows]
    assert len(a.episodes.rows) == 20 and a.episodes.total == 216 and a.episodes.sampled
    assert "20 of 216 episodes" in a.episodes.rule
    # Every (agent, status) combination of the card appears in the sample.
    table = rc.open(card).episodes(columns=["agent", "status"]).to_pylist()
    cells = {(r["agent"], r["status"]) for r in table}
    assert cells <= {(r["agent"], r["status"]) for r in a.episodes.rows}
    # Steps embedded in order, as stored.
    first = a.episodes.rows[0]["episode_id"]
    stored = rc.open(card).episode_steps(first, columns=["seq"]).column("seq").to_pylist()
    assert [s["seq"] for s in a.episodes.steps.get(first, [])] == stored
    text = render_html(a, generated_by="test")
    assert "20 of 216 episodes" in text


def test_text_budget_cuts_and_says_so() -> None:
    data = gather(FIXTURE_CARDS / "synthetic", limits=SampleLimits(episodes=5, steps_per_episode=2, chars_per_field=10),
                  check=False)
    assert all(len(steps) <= 2 for steps in data.episodes.steps.values())
    assert data.episodes.truncated_steps and any("not embedded" in n for n in data.episodes.notes)


def test_cli_writes_and_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(FIXTURE_CARDS / "minimal"), "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert main(["report", str(FIXTURE_CARDS / "minimal"), "-o", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
    assert main(["report", str(FIXTURE_CARDS / "minimal"), "-o", str(out), "--overwrite"]) == 0
    assert main(["report", str(tmp_path / "nope"), "-o", str(tmp_path / "x.html")]) == 1
    assert not (tmp_path / "x.html").exists()


def test_invalid_card_shows_its_findings(synthetic_copy: Path) -> None:
    (synthetic_copy / "smuggled.txt").write_text("not in the inventory")
    text = build_report(synthetic_copy, [])
    assert "INVALID (error 1" in text and "file-unlisted" in text
    assert "VALID (error 0" in build_report(FIXTURE_CARDS / "synthetic", [])


def test_a_bad_rule_fails_without_waiting_for_the_validation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The validation runs beside the rescore: a rule that cannot be applied is reported while
    the validation is still running (before, the report joined the whole validation first)."""
    import threading

    from rollout_cards.errors import RuleError
    from rollout_cards.report import data

    release, started = threading.Event(), threading.Event()

    def slow_validation(*_args: object) -> dict[str, object]:
        started.set()
        release.wait(60)
        return {}

    monkeypatch.setattr(data, "_validation", slow_validation)
    rule = tmp_path / "bad.yaml"
    rule.write_text("rule: bad.rule\nscore: score.no_such_column\naggregate: {group_by: [agent]}\n", encoding="utf-8")
    # Released after 20 s at the latest: a report that joined the validation first would raise
    # only then, with `release` set.
    timer = threading.Timer(20, release.set)
    timer.start()
    try:
        with pytest.raises(RuleError, match="no_such_column"):
            gather(FIXTURE_CARDS / "synthetic", [rule])
        assert started.is_set() and not release.is_set()  # raised while the validation was blocked
    finally:
        timer.cancel()
        release.set()


def test_a_failing_validation_reaches_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    from rollout_cards.errors import CardFormatError
    from rollout_cards.report import data

    def broken(*_args: object) -> dict[str, object]:
        raise CardFormatError("steps.parquet: unreadable")

    monkeypatch.setattr(data, "_validation", broken)
    with pytest.raises(CardFormatError, match="unreadable"):
        gather(FIXTURE_CARDS / "synthetic")


def test_a_standard_column_of_another_type_is_refused_when_the_report_opens_the_table(
    synthetic_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """steps.content stored as binary: the reader refuses the table (tests/io/test_reader_schema.py);
    before, the episode browser showed the bytes as a note while every other command failed."""
    monkeypatch.syspath_prepend(str(REPO / "fixtures"))
    import bad_cards
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rollout_cards.errors import TableSchemaError

    path = synthetic_copy / "steps.parquet"
    table = pq.read_table(path)
    i = table.schema.get_field_index("content")
    table = table.set_column(i, pa.field("content", pa.binary()), table.column(i).cast(pa.binary()))
    pq.write_table(table, path)
    bad_cards.rehash(synthetic_copy)
    with pytest.raises(TableSchemaError, match="steps.parquet: column 'content' has type 'binary'"):
        build_report(synthetic_copy)
