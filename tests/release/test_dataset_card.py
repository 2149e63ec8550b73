"""Dataset card: front matter, sections rendered from the manifest, offline checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

import rollout_cards as rc
from rollout_cards.io.finalize import refresh_manifest
from rollout_cards.release.dataset_card import (
    check_dataset_card,
    front_matter,
    hf_license,
    render_dataset_card,
    write_dataset_card,
)
from tests.conftest import FIXTURE_CARDS


def _front(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text[4 : text.index("\n---\n", 4)])


def test_front_matter_of_the_synthetic_card() -> None:
    card = rc.open(FIXTURE_CARDS / "synthetic")
    text = render_dataset_card(card)
    front = _front(text)
    assert front["license"] == "cc-by-4.0"
    assert front["pretty_name"] == card.manifest.title
    assert "rollout-card" in front["tags"]
    configs = {c["config_name"]: c["data_files"][0]["path"] for c in front["configs"]}
    assert configs == {"episodes": ["episodes.parquet"], "steps": ["steps.parquet"]}
    assert "extra_gated_prompt" not in front
    assert check_dataset_card(text, card) == []


def test_sections_carry_the_fixture_numbers() -> None:
    card = rc.open(FIXTURE_CARDS / "synthetic")
    text = render_dataset_card(card)
    rule = yaml.safe_load(card.rule_files()["synthetic.success_rate"])
    for reported in rule["reported"]:
        # fixtures/make.py computed the published numbers without the engine; the card shows the
        # engine's value, its interval, n and unit, and the reported value at the end of the row.
        row = next(line for line in text.splitlines() if line.startswith(f"| agent={reported['group']['agent']} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == f"{reported['value']}" and cells[6] == f"{reported['value']}"
        assert cells[2].startswith("[") and "cluster_t 0.95" in cells[2]
        assert cells[3] == "107" and cells[5] == "task_id (36)" and cells[4] in ("cancelled 1", "skipped 1")
    assert "recomputed" in text
    # Terminal states per agent: the counts of the summary.
    from rollout_cards.summary import summarize

    for agent, counts in summarize(card)["status_by_agent"].items():
        row = f"| {agent} | " + " | ".join(str(v) for v in counts.values()) + f" | {sum(counts.values())} |"
        assert row in text
    assert "steps.cost_usd" in text and "216 episodes expected, 216 recorded" in text
    assert "alpha-model-1" in text and "synthetic-harness" in text


def test_gated_scope_adds_gated_fields(synthetic_copy: Path) -> None:
    manifest = json.loads((synthetic_copy / "card.json").read_text())
    scope = {**manifest["scope"], "access": "gated", "gate_prompt": "Agree to the terms",
             "gate_fields": {"Affiliation": "text"}, "license": "MIT OR Apache-2.0"}
    refresh_manifest(synthetic_copy, scope=scope)
    card = rc.open(synthetic_copy)
    front = front_matter(card)
    assert front["extra_gated_prompt"] == "Agree to the terms"
    assert front["extra_gated_fields"] == {"Affiliation": "text"}
    assert front["license"] == "other" and front["license_name"] == "mit-or-apache-2.0"
    assert check_dataset_card(render_dataset_card(card), card) == []


def test_check_finds_bad_license_missing_paths_and_gating(synthetic_copy: Path) -> None:
    card = rc.open(FIXTURE_CARDS / "synthetic")
    text = render_dataset_card(card)
    bad = text.replace("license: cc-by-4.0", "license: cc-by-9.9").replace("- steps.parquet", "- steps/x.parquet")
    problems = {p.location: p.message for p in check_dataset_card(bad, card)}
    assert "not an SPDX" in problems["license"]
    assert any("steps/x.parquet" in m for m in problems.values())
    mit = text.replace("license: cc-by-4.0", "license: mit")
    assert "differs" in check_dataset_card(mit, card)[0].message
    assert check_dataset_card("# no front matter\n", card)[0].location == "front matter"
    manifest = json.loads((synthetic_copy / "card.json").read_text())
    refresh_manifest(synthetic_copy, scope={**manifest["scope"], "access": "gated"})
    gated = rc.open(synthetic_copy)
    missing = {p.location for p in check_dataset_card(text, gated)}
    assert {"extra_gated_prompt", "extra_gated_fields"} <= missing


def test_card_content_cannot_break_the_markdown_or_yaml(synthetic_copy: Path) -> None:
    refresh_manifest(synthetic_copy, title="x | y\n---\nlicense: mit <script>")
    card = rc.open(synthetic_copy)
    text = render_dataset_card(card)
    front = _front(text)
    assert front["license"] == "cc-by-4.0" and front["pretty_name"] == card.manifest.title
    body = text[text.index("\n---\n", 4) + 5 :]
    assert "<script>" not in body and "\n---\n" not in body
    assert check_dataset_card(text, card) == []


def test_no_license_is_reported(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE_CARDS / "minimal", tmp_path / "m")
    result = write_dataset_card(tmp_path / "m", tmp_path / "README.md")
    assert _front((tmp_path / "README.md").read_text())["license"] == "unknown"
    assert [p.location for p in result.problems] == ["license"]
    assert hf_license(None) == {"license": "unknown"}
    assert write_dataset_card(tmp_path / "m", check=tmp_path / "README.md").problems == result.problems


def test_rules_the_engine_cannot_replay_are_shown_as_reported(synthetic_copy: Path) -> None:
    rule = synthetic_copy / "rules" / "synthetic.success_rate.yaml"
    rule.write_text(rule.read_text().replace('score: "score.success"', 'score: "score.nonexistent"'))
    refresh_manifest(synthetic_copy)
    text = render_dataset_card(rc.open(synthetic_copy))
    assert "as reported, not recomputed" in text and "| agent=alpha | 0.3925 | not recomputed |" in text


def test_unreadable_rule_is_not_described_with_defaults(synthetic_copy):
    from rollout_cards.release.dataset_card import render_dataset_card

    rule = synthetic_copy / "rules" / "synthetic.success_rate.yaml"
    rule.write_text(rule.read_text().replace("aggregate:", "agregate:"))
    refresh_manifest(synthetic_copy)
    text = render_dataset_card(rc.open(synthetic_copy))
    assert "The rule file cannot be read" in text
    assert "independent unit: `episode_id`" not in text


def test_mismatched_reported_value_is_flagged(synthetic_copy):
    from rollout_cards.release.dataset_card import render_dataset_card

    rule = synthetic_copy / "rules" / "synthetic.success_rate.yaml"
    rule.write_text(rule.read_text().replace("value: 0.3925", "value: 0.4925"))
    refresh_manifest(synthetic_copy)
    text = render_dataset_card(rc.open(synthetic_copy))
    assert "0.4925 (does NOT match the recomputation)" in text


def test_into_writes_the_readme_inside_and_the_card_still_validates(synthetic_copy: Path) -> None:
    from rollout_cards.cli import main

    assert main(["card", str(synthetic_copy), "--into"]) == 0
    readme = synthetic_copy / "README.md"
    manifest = json.loads((synthetic_copy / "card.json").read_text())
    listed = {f["path"]: f for f in manifest["inventory"]["files"]}
    assert "README.md" in listed and listed["README.md"]["bytes"] == readme.stat().st_size
    assert rc.validate(synthetic_copy).valid
    front = _front(readme.read_text())
    defaults = [c["config_name"] for c in front["configs"] if c.get("default")]
    assert defaults == ["episodes"]
    assert front["size_categories"] == ["n<1K"] and front["task_categories"]
    # The root digest covers the README, so the README cannot quote it.
    assert manifest["inventory"]["root_digest"] not in readme.read_text()
    assert check_dataset_card(readme.read_text(), rc.open(synthetic_copy)) == []
    # A second --into needs --overwrite; a packed card is refused.
    assert main(["card", str(synthetic_copy), "--into"]) == 2
    assert main(["card", str(synthetic_copy), "--into", "--overwrite"]) == 0
    assert rc.validate(synthetic_copy).valid


def test_size_categories_follow_the_hub_buckets() -> None:
    from rollout_cards.release.dataset_card import _size_category

    assert [_size_category(n) for n in (0, 999, 1000, 99_999, 100_000, 2_000_000)] == [
        "n<1K", "n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M"]


def test_front_matter_fields_of_another_shape_are_problems_not_crashes() -> None:
    """`configs: 5` raised TypeError (an internal error of `rcard card --check`), and a
    `data_files` written as one string (which the Hub accepts) was read character by character."""
    card = rc.open(FIXTURE_CARDS / "synthetic")
    head = "---\nlicense: cc-by-4.0\npretty_name: x\n"
    problems = check_dataset_card(head + "configs: 5\n---\n", card)
    assert ("configs", "is int '5'; expected a list") in {(p.location, p.message) for p in problems}
    one = "configs:\n- config_name: episodes\n  data_files: episodes.parquet\n- config_name: steps\n  data_files: {path: 7}\n"
    problems = {(p.location, p.message) for p in check_dataset_card(head + one + "---\n", card)}
    assert problems == {("configs[1].data_files[0]", "is int '7'; expected a list")}


def test_a_front_matter_syntax_error_names_the_line_of_readme() -> None:
    card = rc.open(FIXTURE_CARDS / "synthetic")
    lines = render_dataset_card(card).splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("license:"))
    lines[at] = "license: a: b\n"  # a mapping value where a scalar is: PyYAML blames this very line
    (problem,) = check_dataset_card("".join(lines), card)
    # The line in README.md (1-based), counting the opening '---' above the YAML; it read one too few.
    assert problem.location == "front matter"
    assert problem.message.startswith(f"line {at + 1}: not valid YAML: "), problem.message
