"""Redaction: values replaced, digests kept, drops/version/scope updated, nothing written on bad specs."""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rollout_cards as rc
from rollout_cards.errors import ExpressionError, RedactionSpecError, RolloutCardError
from rollout_cards.io.archive import pack_card
from rollout_cards.release.redact import (
    HMAC_PREFIX,
    MARKER,
    bump_minor,
    episode_digest_line,
    load_redaction_spec,
    redact_card,
)
from tests.conftest import FIXTURE_CARDS

SYNTHETIC = FIXTURE_CARDS / "synthetic"
KEY = b"0123456789abcdef0123456789abcdef"
USER_CONTENT = {"target": "steps.content", "where": "role == 'user'", "reason": "user text"}


def spec(*entries: dict) -> dict:
    return {"redact": list(entries)}


def test_where_selects_rows_and_digests_keep_every_original(tmp_path: Path) -> None:
    result = redact_card(SYNTHETIC, spec(USER_CONTENT), tmp_path / "out")
    before = rc.open(SYNTHETIC).steps(columns=["role", "content"])
    after = rc.open(tmp_path / "out").steps(columns=["role", "content", "meta.digest.content"])
    user = pc.equal(before.column("role"), "user").to_pylist()
    n_user = sum(1 for u, v in zip(user, before.column("content").to_pylist(), strict=True) if u and v is not None)
    assert result.counts == [n_user] and n_user > 0
    for u, old, new, digest in zip(user, before.column("content").to_pylist(), after.column("content").to_pylist(),
                                   after.column("meta.digest.content").to_pylist(), strict=True):
        assert new == (MARKER if (u and old is not None) else old)
        assert digest == (None if old is None else hashlib.sha256(old.encode()).hexdigest())


def test_digest_action_uses_hmac_with_the_key(tmp_path: Path) -> None:
    entry = {"target": "steps.args", "action": "digest", "reason": "booking refs"}
    redact_card(SYNTHETIC, spec(entry), tmp_path / "out", key=KEY)
    before = rc.open(SYNTHETIC).steps(columns=["args"]).column(0).to_pylist()
    after = rc.open(tmp_path / "out").steps(columns=["args"]).column(0).to_pylist()
    expected = [None if v is None else HMAC_PREFIX + hmac.new(KEY, v.encode(), hashlib.sha256).hexdigest()
                for v in before]
    assert after == expected and any(v is not None for v in after)


def test_manifest_records_the_redaction(tmp_path: Path) -> None:
    redact_card(SYNTHETIC, spec(USER_CONTENT, {"target": "episodes.task.category", "reason": "x",
                                               "loss_class": "confidential"}), tmp_path / "out")
    original = rc.open(SYNTHETIC).manifest
    m = rc.open(tmp_path / "out").manifest
    assert m.version == "1.1.0" and original.version == "1.0.0"
    assert m.drops[: len(original.drops)] == original.drops
    content, category = m.drops[len(original.drops):]
    assert (content.target, content.action.value, content.declaration.value, content.loss_class) == (
        "steps.content", "redacted", "author_declared", "privacy")
    assert content.selector == "role == 'user'" and content.digest_column == "meta.digest.content"
    assert category.loss_class == "confidential" and category.digest_column == "meta.digest.task.category"
    assert category.count == original.tables.episodes.rows
    assert len(m.scope.redactions) == 2 and "steps.content" in m.scope.redactions[0]
    assert m.created == original.created and m.rules == original.rules


def test_affects_lists_only_rules_reading_the_column(tmp_path: Path) -> None:
    redact_card(SYNTHETIC, spec(USER_CONTENT), tmp_path / "a")
    assert rc.open(tmp_path / "a").manifest.drops[-1].affects == []
    # The fixture's rule scores score.success and groups by agent; a rule reading task.category:
    card = tmp_path / "card"
    import shutil

    shutil.copytree(SYNTHETIC, card)
    (card / "rules" / "by_category.yaml").write_text(
        "rule: by_category\nscore: \"task.category == 'booking'\"\naggregate: {group_by: [agent]}\n")
    from rollout_cards.io.finalize import refresh_manifest

    refresh_manifest(card)
    redact_card(card, spec({"target": "episodes.task.category", "reason": "x"}), tmp_path / "b")
    assert rc.open(tmp_path / "b").manifest.drops[-1].affects == ["by_category"]


def test_tables_not_redacted_are_copied_byte_for_byte(tmp_path: Path) -> None:
    redact_card(SYNTHETIC, spec({"target": "episodes.task.category", "reason": "x"}), tmp_path / "out")
    assert (tmp_path / "out" / "steps.parquet").read_bytes() == (SYNTHETIC / "steps.parquet").read_bytes()
    assert (tmp_path / "out" / "rules").is_dir()


def test_steps_redaction_sets_episode_digests_of_the_original_steps(tmp_path: Path) -> None:
    redact_card(SYNTHETIC, spec(USER_CONTENT), tmp_path / "out")
    card = rc.open(tmp_path / "out")
    table = card.episodes(columns=["episode_id", "episode_digest"])
    digests = dict(zip(table.column(0).to_pylist(), table.column(1).to_pylist(), strict=True))
    source = rc.open(SYNTHETIC)
    eid = "alpha-task-03-1"
    steps = source.episode_steps(eid)
    h = hashlib.sha256()
    for row in steps.to_pylist():
        t = row["t"]
        micros = None if t is None else int(pa.scalar(t, pa.timestamp("us", tz="UTC")).value)
        h.update(episode_digest_line([row["seq"], row["kind"], micros, *[row[c] for c in (
            "role", "agent", "name", "call_id", "content", "args", "is_error", "input_tokens", "output_tokens",
            "cost_usd", "payload")]]))
    assert digests[eid] == h.hexdigest()
    assert card.episodes(columns=["episode_digest"]).column(0).null_count == 0


def test_redacting_a_packed_card_gives_the_same_card(tmp_path: Path) -> None:
    pack_card(SYNTHETIC, tmp_path / "s.rcard")
    redact_card(tmp_path / "s.rcard", spec(USER_CONTENT), tmp_path / "from-packed")
    redact_card(SYNTHETIC, spec(USER_CONTENT), tmp_path / "from-dir")
    assert rc.open(tmp_path / "from-packed").manifest == rc.open(tmp_path / "from-dir").manifest


def test_redacting_twice_keeps_the_first_digests(tmp_path: Path) -> None:
    redact_card(SYNTHETIC, spec(USER_CONTENT), tmp_path / "once")
    result = redact_card(tmp_path / "once", spec({"target": "steps.content", "reason": "all"}), tmp_path / "twice")
    once = rc.open(tmp_path / "once").steps(columns=["meta.digest.content"])
    twice = rc.open(tmp_path / "twice").steps(columns=["content", "meta.digest.content"])
    assert twice.column("meta.digest.content").equals(once.column("meta.digest.content"))
    assert set(twice.column("content").drop_null().to_pylist()) == {MARKER}
    assert rc.open(tmp_path / "twice").manifest.version == "1.2.0"
    assert result.counts[0] < rc.open(SYNTHETIC).manifest.tables.steps.rows


@pytest.mark.parametrize(
    ("entry", "error", "match"),
    [
        ({"target": "steps.contnet", "reason": "x"}, RedactionSpecError, "did you mean content"),
        ({"target": "episodes.score.profit", "reason": "x"}, RedactionSpecError, "only text columns"),
        ({"target": "steps.episode_id", "reason": "x"}, RedactionSpecError, "cannot be redacted"),
        ({"target": "steps.content", "where": "role ==", "reason": "x"}, ExpressionError, "redact\\[0\\].where"),
        ({"target": "steps.content", "where": "seq + 1", "reason": "x"}, ExpressionError, "boolean"),
        ({"target": "steps.content", "where": "nope == 1", "reason": "x"}, ExpressionError, "nope"),
        ({"target": "steps.content", "action": "digest", "reason": "x"}, RedactionSpecError, "needs a key"),
        ({"target": "tables.content", "reason": "x"}, RedactionSpecError, "target"),
        ({"target": "steps.content"}, RedactionSpecError, "reason"),
        ({"target": "steps.content", "reason": "x", "surprise": 1}, RedactionSpecError, "surprise"),
    ],
)
def test_bad_specs_are_refused_before_anything_is_written(tmp_path: Path, entry, error, match) -> None:
    with pytest.raises(error, match=match):
        redact_card(SYNTHETIC, spec(entry), tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_spec_files_are_read_safely(tmp_path: Path) -> None:
    evil = tmp_path / "evil.yaml"
    evil.write_text("redact: !!python/object/apply:os.system ['echo owned']\n")
    with pytest.raises(RedactionSpecError, match="YAML"):
        load_redaction_spec(evil)
    big = tmp_path / "big.yaml"
    big.write_text("#" * 300_000)
    with pytest.raises(RedactionSpecError, match="limit"):
        load_redaction_spec(big)
    good = tmp_path / "good.yaml"
    good.write_text("redact:\n  - target: steps.content\n    reason: r\n")
    assert load_redaction_spec(good).redact[0].column == "content"


def test_output_must_be_new_and_outside_the_source(tmp_path: Path, synthetic_copy: Path) -> None:
    (tmp_path / "taken").mkdir()
    with pytest.raises(RolloutCardError, match="exists"):
        redact_card(synthetic_copy, spec(USER_CONTENT), tmp_path / "taken")
    with pytest.raises(RolloutCardError, match="inside the source"):
        redact_card(synthetic_copy, spec(USER_CONTENT), synthetic_copy / "out")


def test_short_keys_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RedactionSpecError, match="at least"):
        redact_card(SYNTHETIC, spec({"target": "steps.args", "action": "digest", "reason": "x"}),
                    tmp_path / "o", key=b"short")


@given(st.from_regex(r"\A(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})(-rc\.1)?\Z"))
@settings(max_examples=50)
def test_bump_minor_increases_minor_and_resets_patch(version: str) -> None:
    major, minor, _ = version.split("-")[0].split(".")
    assert bump_minor(version) == f"{major}.{int(minor) + 1}.0"


def test_redacted_card_validates_when_the_validator_is_available(tmp_path: Path) -> None:
    validate = pytest.importorskip("rollout_cards.validate")
    fn = getattr(validate, "validate_card", None) or getattr(validate, "validate", None)
    if fn is None:
        pytest.skip("rollout_cards.validate has no validate function yet")
    redact_card(SYNTHETIC, spec(USER_CONTENT), tmp_path / "out")
    report = fn(tmp_path / "out")
    assert getattr(report, "valid", getattr(report, "ok", None)) is True, report


# -- exact markers and copies (issue 9 item 6) -----------------------------------------------------


def _steps_card(tmp_path: Path, contents: list[str], payload_copies: bool) -> Path:
    out = tmp_path / "src"
    with rc.CardWriter(out, id="leaks", title="leaks", scope={"license": "CC-BY-4.0"},
                       created=datetime.fromisoformat("2026-01-01T00:00:00+00:00")) as card:
        with card.episode(task_id="t", agent="a", trial=0) as ep:
            for text in contents:
                payload = {"event": "model", "message": {"role": "user", "content": text}} if payload_copies else None
                ep.message("user", text, payload=payload)
            ep.score("reward", 1.0)
    return out


def test_a_value_that_only_starts_with_the_hmac_prefix_is_redacted(tmp_path: Path) -> None:
    secret = "hmac-sha256:my-api-key-in-plain-text"
    real = HMAC_PREFIX + "0" * 64
    src = _steps_card(tmp_path, [secret, real, MARKER, "plain"], payload_copies=False)
    result = redact_card(src, spec({"target": "steps.content", "reason": "r"}), tmp_path / "out")
    after = rc.open(tmp_path / "out").steps(columns=["content"]).column(0).to_pylist()
    assert after == [MARKER, real, MARKER, MARKER] and result.counts == [2]
    from tests.release.leaks import find_leaks

    assert find_leaks(tmp_path / "out", [secret, "plain"]) == []


def test_copies_in_payload_are_refused_with_where_they_are(tmp_path: Path) -> None:
    src = _steps_card(tmp_path, ["my address is 1 Main St", "ok"], payload_copies=True)
    with pytest.raises(RedactionSpecError, match=r"redact\[0\]: steps.payload holds a copy of 2 value\(s\)") as info:
        redact_card(src, spec({"target": "steps.content", "reason": "r"}), tmp_path / "out")
    assert "episode_id" in str(info.value) and "copies: redact" in str(info.value)
    assert not (tmp_path / "out").exists()


def test_copies_redact_covers_every_copy_and_the_card_validates(tmp_path: Path) -> None:
    from rollout_cards.validate import validate
    from tests.release.leaks import find_leaks

    secrets = ["my address is 1 Main St", 'quote " and \\ and caf\u00e9 \u2603']
    src = _steps_card(tmp_path, secrets, payload_copies=True)
    assert find_leaks(src, secrets)  # the search itself finds them before redaction
    result = redact_card(src, spec({"target": "steps.content", "reason": "r", "copies": "redact"}), tmp_path / "out")
    assert [d.target for d in result.drops] == ["steps.content", "steps.payload"]
    assert result.counts == [2, 2]
    assert find_leaks(tmp_path / "out", secrets) == []
    report = validate(tmp_path / "out")
    assert report.valid, [str(f) for f in report.findings]


def test_an_entry_on_the_copy_column_covers_it(tmp_path: Path) -> None:
    src = _steps_card(tmp_path, ["my address is 1 Main St"], payload_copies=True)
    redact_card(src, spec({"target": "steps.content", "reason": "r"}, {"target": "steps.payload", "reason": "r"}),
                tmp_path / "out")
    assert rc.open(tmp_path / "out").steps(columns=["payload"]).column(0).to_pylist() == [MARKER]


def test_imported_inspect_card_redacts_with_its_payload_copies(tmp_path: Path) -> None:
    from rollout_cards.importers import import_source
    from rollout_cards.validate import validate
    from tests.release.leaks import find_leaks

    src = tmp_path / "inspect"
    import_source("inspect", [FIXTURE_CARDS.parent / "sources" / "inspect" / "synthetic.json"], src,
                  created=datetime.fromisoformat("2026-01-01T00:00:00+00:00"))
    entry = {"target": "steps.content", "reason": "r"}
    # The error step's text is also the episode's error_message: a copy in the other table.
    with pytest.raises(RedactionSpecError, match="episodes.error_message holds a copy"):
        redact_card(src, spec({**entry, "copies": "redact"}), tmp_path / "refused")
    # Add the episodes columns the refusals name (error text, the scores' JSON holding answers).
    errors: list[dict] = []
    for _ in range(8):
        try:
            redact_card(src, spec({**entry, "copies": "redact"}, *errors), tmp_path / "probe")
            break
        except RedactionSpecError as exc:
            named = str(exc).split(": ", 2)[2].split(" holds a copy")[0]
            assert named.startswith("episodes."), str(exc)
            errors.append({"target": named, "reason": "r"})
    assert {"episodes.error_message"} <= {e["target"] for e in errors}
    with pytest.raises(RedactionSpecError, match="steps.payload holds a copy"):
        redact_card(src, spec(entry, *errors), tmp_path / "refused")
    both = [{**entry, "copies": "redact"}, *errors]
    redact_card(src, spec(*both), tmp_path / "out")
    steps = rc.open(src).steps(columns=["kind", "content"])
    secrets = sorted({c for c in steps.column("content").to_pylist() if c and len(c) >= 8})
    assert secrets and find_leaks(tmp_path / "out", secrets) == []
    assert validate(tmp_path / "out").valid


def _corrupt_column_chunk(path: Path, column: str) -> None:
    """XOR every 7th byte of one column chunk's pages (its page headers no longer parse)."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    group = meta.row_group(0)
    chunk = next(group.column(i) for i in range(group.num_columns) if group.column(i).path_in_schema == column)
    data = bytearray(path.read_bytes())
    for i in range(chunk.data_page_offset, chunk.data_page_offset + chunk.total_compressed_size, 7):
        data[i] ^= 0x55
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("rehash", [False, True])
def test_a_corrupt_column_chunk_is_the_cards_error_not_an_internal_one(tmp_path: Path, synthetic_copy: Path,
                                                                         rehash: bool) -> None:
    """redact read the tables with pyarrow directly, before checking them against the inventory and
    without the reader's checks: a corrupt page of one column chunk was pyarrow's OSError ("Couldn't
    deserialize thrift", "ZSTD decompression failed"), an internal error (exit 2). Found by
    scripts/card_sweep.py 200 1 (5 of 3,543 runs). Now an unhashed change is the digest mismatch
    and a re-hashed one "the steps table cannot be read" (exit 1); nothing is written."""
    from typer.testing import CliRunner

    from rollout_cards.cli import app
    from rollout_cards.io.finalize import refresh_manifest

    _corrupt_column_chunk(synthetic_copy / "steps.parquet", "call_id")
    if rehash:
        refresh_manifest(synthetic_copy)
    spec = tmp_path / "spec.yaml"
    spec.write_text("redact:\n  - target: steps.content\n    reason: personal data\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["redact", str(synthetic_copy), "--spec", str(spec), "-o", str(out)])
    assert result.exit_code == 1, result.output
    expected = "the steps table cannot be read" if rehash else "steps.parquet has sha256"
    assert f"rcard: {synthetic_copy}: {expected}" in result.output, result.output
    assert "internal error" not in result.output and not out.exists()
    assert not list(tmp_path.glob(".out.redacting-*"))


def test_a_decode_bomb_is_refused_within_the_budget_as_the_reader_refuses_it(tmp_path: Path) -> None:
    """redact decoded the tables without the reader's decode budget: a 5 KB episodes part whose
    dictionary page holds one 40 MiB task_id (fixtures/bad parquet-decode-limit) was expanded and
    copied row by row, taking the process past 600 MiB (scripts/card_sweep.py 300 2, case 57), where
    every other command refuses it within the budget. Now redact refuses it the same way (exit 1)."""
    import shutil
    import sys

    from typer.testing import CliRunner

    from rollout_cards.cli import app
    from tests.conftest import REPO

    sys.path.insert(0, str(REPO / "fixtures"))
    import bad_cards

    card = tmp_path / "card"
    shutil.copytree(FIXTURE_CARDS / "minimal", card)
    bad_cards.PACKAGES["parquet-decode-limit"].mutate(card, tmp_path)
    spec = tmp_path / "spec.yaml"
    spec.write_text("redact:\n  - target: steps.content\n    reason: personal data\n")
    result = CliRunner().invoke(app, ["redact", str(card), "--spec", str(spec), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert f"rcard: {card}: the episodes table decodes to more than" in result.output, result.output
    assert "most of it in column 'task_id'" in result.output and not (tmp_path / "out").exists()
