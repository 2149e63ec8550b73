"""Validation replays `reported` numbers: fixtures validate, tampering and broken rules are caught."""

from __future__ import annotations

from rollout_cards.io.finalize import refresh_manifest
from rollout_cards.validate import validate
from tests.conftest import FIXTURE_CARDS

RULE = "rules/synthetic.success_rate.yaml"


def test_every_fixture_card_validates_with_replay():
    for card in sorted(FIXTURE_CARDS.iterdir()):
        report = validate(card)
        assert report.valid, [f.message for f in report.findings]
        assert not report.codes() & {"reported-mismatch", "rule-invalid", "replay-unavailable"}


def test_a_tampered_reported_value_is_a_mismatch_with_both_numbers(synthetic_copy):
    path = synthetic_copy / RULE
    path.write_text(path.read_text().replace("value: 0.3925", "value: 0.4025"))
    refresh_manifest(synthetic_copy)  # a careful forger re-hashes: only the replay can tell
    report = validate(synthetic_copy)
    (finding,) = [f for f in report.findings if f.code == "reported-mismatch"]
    assert not report.valid
    assert finding.location.file == RULE and finding.location.pointer == "/reported/0/value"
    assert "0.4025" in finding.message and "0.3925233645" in finding.message and "tolerance 5e-05" in finding.message
    assert "reported-mismatch" not in validate(synthetic_copy, replay=False).codes()


def test_a_rule_that_does_not_compile_or_fit_the_card_is_rule_invalid(synthetic_copy):
    path = synthetic_copy / RULE
    path.write_text(path.read_text().replace('score: "score.success"', 'score: "score.sucess"'))
    refresh_manifest(synthetic_copy)
    (finding,) = [f for f in validate(synthetic_copy).findings if f.code == "rule-invalid"]
    assert finding.location.file == RULE
    line = _line_of(path, "score:")
    assert finding.message.startswith(f"score, line {line}: unknown column 'score.sucess'"), finding.message


def _line_of(path, start: str) -> int:
    """The 1-based line of the file that starts with `start` (plain text, not the YAML loader)."""
    return next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.startswith(start))


def test_a_rule_invalid_finding_names_the_yaml_line_of_the_key(synthetic_copy):
    """The finding said "score: ... (column 4 of the expression)" or "features.n.value: unknown
    column ..." without the line of the rule file (rescore said file:line); it now gives the
    line the strict loader recorded for the key, checked here against the file's text."""
    path = synthetic_copy / RULE
    text = path.read_text()
    cases = {  # how the rule is broken -> the key the finding names, and the line it starts with
        "parse": (text.replace('score: "score.success"', 'score: "score.success +"'), "score", "score:"),
        "feature": (text.replace('score: "score.success"', 'features:\n  n:\n    from: steps\n'
                                 '    agg: count\n    where: "kind == 1 and nosuch.col"\nscore: "score.success"'),
                    "features.n.where", "    where:"),
    }
    for name, (rule, key, start) in cases.items():
        path.write_text(rule)
        refresh_manifest(synthetic_copy)
        found = [f for f in validate(synthetic_copy).findings if f.code == "rule-invalid"]
        assert len(found) == 1, (name, [f.message for f in found])
        line = _line_of(path, start)
        assert found[0].message.startswith(f"{key}, line {line}: "), (name, found[0].message)


def test_scores_whose_squares_overflow_make_the_rule_invalid_not_the_validator_crash(synthetic_copy):
    """score.success = 1e308 is finite (valid) but its square is not: the replay's statistics
    refused it (StatisticsError) and the validator reported an internal error (exit 2); now the
    rule's scores are bounded where they are computed (rules/scoring.MAX_ABS_SCORE)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(synthetic_copy / "episodes.parquet")
    i = table.schema.get_field_index("score.success")
    table = table.set_column(i, pa.field("score.success", pa.float64()), pa.array([1e308] * table.num_rows))
    pq.write_table(table, synthetic_copy / "episodes.parquet")
    refresh_manifest(synthetic_copy)
    report = validate(synthetic_copy)
    assert report.outcome == "invalid" and "rule-invalid" in report.codes(), report.codes()
    [finding] = [f for f in report.findings if f.code == "rule-invalid"]
    assert finding.location.file == "rules/synthetic.success_rate.yaml" and "score beyond ±1e+100" in finding.message
