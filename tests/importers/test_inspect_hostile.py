"""Hostile Inspect .eval archives: exit 1 naming the file, the member or sample and the field."""

from __future__ import annotations

import json
import zipfile

import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from tests.importers.conftest import SOURCES

SYNTHETIC = SOURCES / "inspect" / "synthetic.json"


def _eval(path, sample_text: str | None = None, header_text: str | None = None) -> None:
    log = json.loads(SYNTHETIC.read_text())
    samples = log.pop("samples")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("header.json", header_text if header_text is not None else json.dumps(log))
        for s in samples:
            zf.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
        if sample_text is not None:
            zf.writestr("samples/9_epoch_1.json", sample_text)


def _sample(**changes) -> str:
    sample = json.loads(SYNTHETIC.read_text())["samples"][0]
    sample.update(id=9, epoch=1)
    for name, value in changes.get("scores", {}).items():
        sample["scores"][name]["value"] = value
    text = json.dumps(sample)
    for old, new in changes.get("replace", []):
        assert old in text
        text = text.replace(old, new, 1)
    return text


def _import(tmp_path, path):
    return CliRunner().invoke(app, ["import", "inspect", str(path), "-o", str(tmp_path / "card")])


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        (_sample(replace=[('"input_tokens": 20', '"input_tokens": 1e999')]), "outside the range of a 64-bit float"),
        (_sample(replace=[('"input_tokens": 20', '"input_tokens": 99999999999999999999999')]), "64-bit range"),
        (_sample(replace=[('"What is', '"\\ud800What is')]), "lone surrogate"),
        (_sample(replace=[('"input_tokens": 20', '"input_tokens": "twenty"')]), "input_tokens"),
        (_sample(replace=[('"epoch": 1', '"epoch": "one"')]), "epoch"),
        (_sample(scores={"match": float("inf")}), "not a finite number"),  # json.dumps writes Infinity
        # found by scripts/eval_field_sweep.py: both were internal errors (TypeError, KeyError: 0)
        (_sample(replace=[('"choices": [{', '"choices": 1.5, "x": [{')]),
         "events[2].output.choices is float, not a list of choices"),
        (_sample(replace=[('"choices": [{', '"choices": {"a": 1}, "x": [{')]),
         "events[2].output.choices is dict, not a list of choices"),
    ],
    ids=["1e999", "big-int", "lone-surrogate", "tokens-wrong-type", "epoch-wrong-type", "infinite-score",
         "choices-number", "choices-object"],
)
def test_hostile_sample_is_exit_1_naming_file_and_member(tmp_path, sample, expected):
    path = tmp_path / "hostile.eval"
    _eval(path, sample_text=sample)
    result = _import(tmp_path, path)
    assert result.exit_code == 1, result.output
    assert "hostile.eval" in result.output and "samples/9_epoch_1.json" in result.output
    assert expected in result.output
    assert not (tmp_path / "card").exists()


def test_a_header_that_inflates_past_its_budget_is_exit_1(tmp_path, monkeypatch):
    from rollout_cards.importers import inspect_log

    monkeypatch.setattr(inspect_log, "MAX_HEADER_BYTES", 4096)  # the 64 MiB budget, scaled down
    log = json.loads(SYNTHETIC.read_text())
    log.pop("samples")
    log["eval"]["metadata"] = {"pad": " " * 100_000}
    path = tmp_path / "big-header.eval"
    _eval(path, header_text=json.dumps(log))
    result = _import(tmp_path, path)
    assert result.exit_code == 1 and "header.json" in result.output and "budget" in result.output, result.output


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        (("eval", "config", "epochs"), -1, "eval.config.epochs is -1, not an integer of at least 1"),
        (("eval", "config", "epochs"), 0, "eval.config.epochs is 0, not an integer of at least 1"),
        (("eval", "config", "epochs"), "3", "eval.config.epochs is str, not an integer"),
        (("eval", "dataset"), "x", "eval.dataset is str, not an object"),
        (("eval", "dataset"), [1], "eval.dataset is list, not an object"),
        (("results",), 1.5, "results is 1.5, not an object"),
        (("results", "scores"), True, "results.scores is True, not a list of scores"),
        (("results", "scores"), {"a": 1}, "results.scores is dict, not a list of scores"),
    ],
    ids=["epochs-negative", "epochs-zero", "epochs-text", "dataset-text", "dataset-list", "results-number",
         "scores-bool", "scores-object"],
)
def test_a_header_field_of_the_wrong_type_is_exit_1_naming_file_and_field(tmp_path, field, value, expected):
    # found by scripts/eval_field_sweep.py: each was an internal error (exit 2) before, a negative
    # epoch count a negative planned episode count refused by the card model
    log = json.loads(SYNTHETIC.read_text())
    log.pop("samples")
    node = log
    for key in field[:-1]:
        node = node.setdefault(key, {})
    node[field[-1]] = value
    path = tmp_path / "typed.eval"
    _eval(path, header_text=json.dumps(log))
    result = _import(tmp_path, path)
    assert result.exit_code == 1, result.output
    assert "typed.eval" in result.output and expected in result.output
    assert not (tmp_path / "card").exists()


def test_nan_anywhere_in_the_header_does_not_make_the_log_unimportable(tmp_path):
    log = json.loads(SYNTHETIC.read_text())
    samples = log.pop("samples")
    log["results"]["scores"][0]["metrics"]["stderr"] = {"name": "stderr", "value": float("nan")}
    path = tmp_path / "nan.eval"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("header.json", json.dumps(log))  # Python's json writes NaN, as Inspect's recorder does
        zf.writestr("reductions.json", json.dumps([{"scorer": "match", "samples": [{"value": float("nan")}]}]))
        for s in samples:
            zf.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
    result = _import(tmp_path, path)
    assert result.exit_code == 0, result.output


def test_keep_going_does_not_claim_unread_samples_were_never_written(tmp_path):
    from tests.importers.conftest import run_import

    log = json.loads(SYNTHETIC.read_text())
    samples = log.pop("samples")
    whole = json.dumps({**log, "samples": samples})
    path = tmp_path / "cut.json"  # a .json log that breaks off 40 characters into its second sample
    path.write_text(whole[: len(json.dumps({**log, "samples": samples[:1]})) + 40])
    result, card = run_import("inspect", [path], tmp_path / "card", keep_going=True)
    reasons = " ".join(d.reason for d in card.manifest.drops if d.target == "episodes")
    assert "were not read" in reasons and "the others were never written" not in reasons


@pytest.mark.parametrize("name", ["../../escape.json", "samples/../../x_epoch_1.json", "/abs/1_epoch_1.json"])
def test_a_zip_slip_member_name_is_exit_1_naming_file_and_member(tmp_path, name):
    path = tmp_path / "slip.eval"
    _eval(path)
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr(name, "{}")
    result = _import(tmp_path, path)
    assert result.exit_code == 1, result.output
    assert "slip.eval" in result.output and name in result.output
    assert not (tmp_path / "card").exists() and not (tmp_path / "escape.json").exists()


def test_a_zip_bomb_sample_is_exit_1_before_it_is_inflated(tmp_path):
    """A member far beyond the compression-ratio cap is refused from its directory entry."""
    path = tmp_path / "bomb.eval"
    _eval(path)
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("samples/9_epoch_1.json", b" " * (64 << 20))  # 64 MiB of spaces deflate to ~64 KB
    result = _import(tmp_path, path)
    assert result.exit_code == 1, result.output
    assert "bomb.eval" in result.output and "samples/9_epoch_1.json" in result.output, result.output


@pytest.mark.parametrize(("field", "value"), [("model", 12), ("model", True), ("origin", 7), ("commit", ["x"]),
                                            ("role", [1, {}]), ("role", {"a": [None]}), ("attachment", [1, {}])])
def test_a_wrong_type_in_a_text_field_is_never_an_internal_error(tmp_path, field, value):
    """Fuzz counterexamples (RCARD_FUZZ_SCALE=20, wrong-type): a model event's `model` of 12 reached
    the steps' name column as an int (ArrowTypeError, exit 2); an output message's role [1, {}] was
    hashed (TypeError); an attachment that is not text became task.input (exit 2); a non-text
    revision likewise."""
    log = json.loads(SYNTHETIC.read_text())
    event = next(e for s in log["samples"] for e in s["events"] if e["event"] == "model")
    if field == "model":
        event["model"] = value
    elif field == "role":
        event["output"]["choices"][0]["message"]["role"] = value
    elif field == "attachment":
        sample = next(s for s in log["samples"] if s.get("attachments"))
        sample["attachments"][next(iter(sample["attachments"]))] = value
    else:
        log["eval"].setdefault("revision", {"type": "git"})[field] = value
    path = tmp_path / "typed.json"
    path.write_text(json.dumps(log))
    result = _import(tmp_path, path)
    assert result.exit_code in (0, 1) and "internal error" not in result.output, result.output
    if result.exit_code == 1:
        assert "typed.json" in result.output


class _CountingList(list):
    """A list that tallies its work: a search or copy costs its length, a push or pop one."""

    work = 0

    def __contains__(self, item):
        _CountingList.work += len(self)
        return super().__contains__(item)

    def index(self, *args):
        _CountingList.work += len(self)
        return super().index(*args)

    def __getitem__(self, key):
        _CountingList.work += len(self) if isinstance(key, slice) else 1
        return super().__getitem__(key)

    def __delitem__(self, key):
        _CountingList.work += len(self)  # a delete shifts what follows
        return super().__delitem__(key)

    def append(self, item):
        _CountingList.work += 1
        return super().append(item)

    def pop(self, *args):
        _CountingList.work += 1
        return super().pop(*args)


def test_nested_spans_ended_oldest_first_cost_linear_work(tmp_path, monkeypatch):
    """20,000 agent spans nested in one another and ended oldest first (the worst order for a
    stack): the open-span bookkeeping does O(spans) work, not O(spans^2), and every step's depth
    is what a plain walk of the nesting gives (span i is at depth i; its span_end is its parent's)."""
    from rollout_cards.importers import inspect_spans
    from rollout_cards.validate import validate

    plain_init = inspect_spans.Spans.__init__

    def counting_init(self):
        plain_init(self)
        self._open = _CountingList()

    monkeypatch.setattr(inspect_spans.Spans, "__init__", counting_init)
    n = 20_000
    sample = json.loads(_sample())
    stamp = "2025-01-01T00:00:{:02d}.{:06d}+00:00"
    events = []
    for i in range(n):  # no span ids: the spans nest in the order they begin and end
        events.append({"event": "span_begin", "id": f"s{i}", "type": "agent", "name": f"a{i}",
                       "timestamp": stamp.format(10, 2 * i), "working_start": 0.0})
        if i % 97 == 0:
            events.append({"event": "model", "model": "m", "input": [], "output": {"choices": []},
                           "timestamp": stamp.format(10, 2 * i + 1), "working_start": 0.0})
    events += [{"event": "span_end", "id": f"s{i}", "timestamp": stamp.format(40, i), "working_start": 0.0}
               for i in range(n)]
    sample["events"] = events
    path = tmp_path / "deep.eval"
    _eval(path, json.dumps(sample))
    _CountingList.work = 0
    result = _import(tmp_path, path)
    assert result.exit_code == 0, result.output
    assert _CountingList.work < 10 * n  # the per-end search and reversed copy cost ~n^2 / 2 = 2e8
    assert validate(tmp_path / "card").valid

    import rollout_cards as rc

    steps = rc.open(tmp_path / "card").steps().to_pylist()
    depth: dict[str, list[int]] = {}  # plain walk: a0 is the task's own agent, each a(i+1) a sub-agent inside a(i)
    for step in steps:
        if step["episode_id"].endswith("/9/1"):
            depth.setdefault(step["kind"], []).append(step["depth"])
    assert depth["span_begin"] == [max(i - 1, 0) for i in range(n)]  # a span's own steps are its parent's
    assert depth["message"] == list(range(0, n, 97))
    assert sorted(depth["span_end"]) == sorted(max(i - 1, 0) for i in range(n))


@pytest.mark.parametrize("name", [f"samples/1_epoch_{'9' * 5000}.json", f"samples/{'7' * 5000}_epoch_1.json",
                                  "samples/\u00b2_epoch_1.json"])
def test_a_sample_name_with_a_huge_or_odd_number_is_never_an_internal_error(tmp_path, name):
    path = tmp_path / "digits.eval"
    _eval(path)
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr(name, _sample())
    result = _import(tmp_path, path)
    assert result.exit_code in (0, 1), result.output
    assert "internal error" not in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("reducer", ["pass_at_" + "9" * 5000, "pass_k_٣", "pass_at_0", "pass_at_1000000000"])
def test_a_pass_at_reducer_without_a_usable_k_reproduces_no_rule(reducer):
    """int() of a reducer's 5,000-digit k raised ValueError (an internal error of the import);
    '٣' read as 3 and k=0 made a rule no engine accepts: none of them is a pass@k reducer."""
    from rollout_cards.importers.inspect_ai import _reduce

    assert _reduce(reducer, "score.match", 3) == (False, "score.match")
    assert _reduce("pass_at_2", "score.match", 3)[0]["k"] == 2
