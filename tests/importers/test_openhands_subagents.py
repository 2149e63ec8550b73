"""OpenHands V1 sub-agent conversations read from the harness's conversations/<instance>.tar.gz and
nested under the call that launched them (fixtures/openhands_conversations.py mirrors the real layout)."""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from rollout_cards.errors import SourceFormatError
from tests.conftest import REPO
from tests.importers.conftest import assert_valid, run_import


def _script():
    spec = importlib.util.spec_from_file_location("openhands_conversations",
                                                  REPO / "fixtures" / "openhands_conversations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


OH = _script()


def _archive_events(path: Path) -> dict[str, list[dict]]:
    """Plain tarfile + json over the archive: each sub-conversation's events in file order."""
    convs: dict[str, list[tuple[int, dict]]] = {}
    with tarfile.open(path, "r:gz") as tar:
        for m in tar.getmembers():
            parts = m.name.split("/")
            if m.isfile() and "subagents" in parts and parts[-2] == "events" and parts[-1].startswith("event-"):
                conv = parts[-3]
                convs.setdefault(conv, []).append((int(parts[-1].split("-")[1]), json.load(tar.extractfile(m))))
    return {c: [e for _, e in sorted(evs, key=lambda x: x[0])] for c, evs in convs.items()}


def _split(events: list[dict]) -> list[list[dict]]:
    """Runs: a new one at each user MessageEvent (events before the first belong to it)."""
    runs: list[list[dict]] = []
    lead: list[dict] = []
    for e in events:
        if e["kind"] == "MessageEvent" and e["source"] == "user":
            runs.append([*lead, e])
            lead = []
        elif runs:
            runs[-1].append(e)
        else:
            lead.append(e)
    return runs


def _steps(card, episode):
    rows = card.steps(columns=["episode_id", "seq", "kind", "name", "agent", "depth", "parent_seq", "call_id",
                               "payload"]).to_pylist()
    return [dict(r, payload=json.loads(r["payload"]) if r["payload"] else {}) for r in rows
            if r["episode_id"] == episode]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("oh")
    src = OH.write(root / "run")
    result, card = run_import("openhands", [src], root / "card")
    return root, src, result, card


def test_the_paired_runs_are_nested_under_their_launching_call(imported):
    root, src, _result, card = imported
    convs = _archive_events(src.parent / "conversations" / "nest-1.tar.gz")
    t, u, lo, si, x = (f"{n:032x}" for n in (0xB1, 0xB2, 0xB3, 0xB4, 0xB5))
    runs = {c: _split(evs) for c, evs in convs.items()}
    steps = _steps(card, "nest-1")
    by_id = {s["payload"].get("id"): s for s in steps if s["payload"].get("id")}
    spans = {s["seq"]: s for s in steps if s["kind"] == "span_begin"}
    # (conversation, run, launching call id, depth, agent) as the fixture's docstring lays them out
    expected = [(t, 0, "call_t1", 1, "code_explorer"), (u, 0, "call_u1", 2, "counter"),
                (lo, 0, "call_d1", 1, "lodging"), (si, 0, "call_d1", 1, "sights"), (t, 1, "call_t2", 1, "code_explorer")]
    for conv, k, call, depth, agent in expected:
        events = runs[conv][k]
        placed = [by_id[e["id"]] for e in events]
        assert {(p["depth"], p["agent"]) for p in placed} == {(depth, agent)}
        [span_seq] = {p["parent_seq"] for p in placed}
        span = spans[span_seq]
        assert span["payload"]["conversation_id"] == conv and span["payload"]["run"] == k
        assert span["name"] == agent and span["payload"]["task"] == events[[e["kind"] for e in events].index(
            "MessageEvent")]["llm_message"]["content"][0]["text"]
        launch = steps[span["payload"]["launch_call_seq"]]
        assert launch["kind"] == "tool_call" and launch["call_id"] == call
        # the span sits between the launching call and that call's result
        result = next(s for s in steps if s["kind"] == "tool_result" and s["call_id"] == call)
        assert launch["seq"] < span_seq < result["seq"]
        assert [p["seq"] for p in placed] == sorted(p["seq"] for p in placed)  # in the archive's order
    # ambiguous (runs 1 of lodging and sights) and never-launched (x) runs are not in the card
    for conv, k in ((lo, 1), (si, 1), (x, 0)):
        assert not [e for e in runs[conv][k] if e["id"] in by_id]
    assert sum(len(runs[c][k]) for c, k, *_ in expected) == sum(
        1 for s in steps if s["depth"] and s["kind"] not in ("span_begin", "span_end"))
    ends = [s for s in steps if s["kind"] == "span_end"]
    assert len(ends) == len(spans) == 5 and {e["payload"]["conversation_execution_status"] for e in ends} == {
        "finished"}


def test_what_is_not_nested_is_declared_with_its_count(imported):
    _root, _src, result, card = imported
    exp = OH.EXPECTED
    by_class: dict[str, list] = {}
    for d in card.manifest.drops:
        if d.target == "steps":
            by_class.setdefault(d.loss_class, []).append(d)
    assert [d.count for d in by_class["ambiguous_sub_agent_run"]] == [exp["ambiguous"]]
    assert [d.count for d in by_class["unlinked_sub_agent_run"]] == [exp["unlaunched_runs"]]
    missing = {d.reason.split("; ", 1)[1]: d.count for d in by_class["unavailable_source_field"]}
    assert len(missing) == 3
    for phrase, count in (("no such archive", exp["no_archive"]), ("holds no conversation whose", exp[
            "unmatched_archive"]), ("no sub-agent conversation in the archive", exp["not_found"])):
        assert [c for text, c in missing.items() if phrase in text] == [count]
    notes = " ".join(card.manifest.meta["import"]["notes"])
    assert f"{exp['nested']} of {exp['launched']} V1 sub-agent run(s) nested" in notes
    nested = exp["launched"] - exp["nested"]
    assert nested == exp["ambiguous"] + exp["not_found"] + exp["no_archive"] + exp["unmatched_archive"]
    assert {s.name for s in card.manifest.provenance.sources} == {"output.jsonl", "nest-1.tar.gz", "nest-3.tar.gz"}
    assert_valid(_root / "card")


def test_without_the_archives_the_parents_steps_are_the_same(imported, tmp_path):
    root, src, _result, card = imported
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "output.jsonl").write_bytes(src.read_bytes())
    _r, plain = run_import("openhands", [alone / "output.jsonl"], tmp_path / "c")
    for episode in ("nest-1", "nest-2", "nest-3"):
        with_subs = [(s["kind"], s["name"], s["call_id"], s["payload"].get("id")) for s in _steps(card, episode)
                     if not s["depth"] and s["kind"] not in ("span_begin", "span_end")]
        assert with_subs == [(s["kind"], s["name"], s["call_id"], s["payload"].get("id"))
                             for s in _steps(plain, episode)]
    [drop] = [d for d in plain.manifest.drops if "no such archive" in d.reason]
    assert drop.count == 10 - 1  # every launch of the three lines, but the one launched inside a sub-agent


def test_the_script_is_deterministic():
    assert OH.files() == OH.files()


def _rewrite(src: Path, instance: str, mutate) -> None:
    """Rewrite one archive of the fixture with `mutate(list of (TarInfo, bytes))`."""
    path = src.parent / "conversations" / f"{instance}.tar.gz"
    with tarfile.open(path, "r:gz") as tar:
        entries = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]
    entries = mutate(entries)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, None if data is None else io.BytesIO(data))
    path.write_bytes(gzip.compress(raw.getvalue(), mtime=0))


def _with_link(entries):
    link = tarfile.TarInfo(entries[1][0].name + "/subagents/evil")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc"
    return [*entries, (link, None)]


def test_a_hostile_archive_is_refused_naming_it_and_the_member(tmp_path):
    src = OH.write(tmp_path / "run")
    _rewrite(src, "nest-1", _with_link)
    with pytest.raises(SourceFormatError, match="symbolic link") as info:
        run_import("openhands", [src], tmp_path / "card")
    assert info.value.file.endswith("conversations/nest-1.tar.gz") and "subagents/evil" in info.value.record
    assert not (tmp_path / "card").exists()


def test_keep_going_imports_the_line_without_the_refused_archives_runs(tmp_path):
    src = OH.write(tmp_path / "run")
    _rewrite(src, "nest-1", _with_link)
    _r, card = run_import("openhands", [src], tmp_path / "card", keep_going=True)
    assert card.episodes(columns=["episode_id"]).num_rows == 3
    assert not [s for s in _steps(card, "nest-1") if s["depth"]]
    [drop] = [d for d in card.manifest.drops if d.declaration == "source_malformed"]
    assert drop.count == 7 and "symbolic link" in drop.reason and "nest-1.tar.gz" in drop.reason
    assert_valid(tmp_path / "card")


def test_a_bad_event_file_is_located(tmp_path):
    src = OH.write(tmp_path / "run")

    def corrupt(entries):
        out = []
        for info, data in entries:
            if data is not None and "/subagents/" in info.name and "event-00001" in info.name:
                data = b'{"kind": "MessageEvent", '
                info.size = len(data)
            out.append((info, data))
        return out
    _rewrite(src, "nest-1", corrupt)
    with pytest.raises(SourceFormatError, match="not valid JSON") as info:
        run_import("openhands", [src], tmp_path / "card")
    assert "event-00001" in info.value.record and info.value.file.endswith("nest-1.tar.gz")


def test_a_linked_archive_is_not_followed(tmp_path):
    src = OH.write(tmp_path / "run")
    real = src.parent / "conversations" / "nest-1.tar.gz"
    moved = tmp_path / "elsewhere.tar.gz"
    real.rename(moved)
    os.symlink(moved, real)
    with pytest.raises(SourceFormatError, match="symbolic link"):
        run_import("openhands", [src], tmp_path / "card")


def test_without_times_the_same_task_text_twice_is_ambiguous(tmp_path):
    """The resumed task repeats the first task's text; without event times nothing tells the two runs apart."""
    src = OH.write(tmp_path / "run")
    lines = [json.loads(x) for x in src.read_text().splitlines()]
    for e in lines[0]["history"]:
        e.pop("timestamp")
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    _r, card = run_import("openhands", [src], tmp_path / "card")
    spans = [s for s in _steps(card, "nest-1") if s["kind"] == "span_begin"]
    # lodging/sights keep distinct texts; both explore-the-repo launches fit both runs of T (so the
    # counter sub-agent that T's first run launched is not reached either)
    assert sorted(s["name"] for s in spans) == ["lodging", "sights"]
    [amb] = [d for d in card.manifest.drops if d.loss_class == "ambiguous_sub_agent_run"]
    assert amb.count == 2 + 2


def test_keep_going_and_a_bad_event_file_refuse_only_that_archive(tmp_path):
    src = OH.write(tmp_path / "run")

    def corrupt(entries):
        out = []
        for info, data in entries:
            if data is not None and "/subagents/" in info.name and info.name.endswith("base_state.json"):
                data = b"[1, 2"
                info.size = len(data)
            out.append((info, data))
        return out
    _rewrite(src, "nest-1", corrupt)
    _r, card = run_import("openhands", [src], tmp_path / "card", keep_going=True)
    assert card.episodes(columns=["episode_id"]).num_rows == 3
    [drop] = [d for d in card.manifest.drops if d.declaration == "source_malformed"]
    assert drop.count == 7 and "base_state.json" in drop.reason and "not valid JSON" in drop.reason


def test_an_instance_id_no_file_can_be_named_after_is_no_archive(tmp_path):
    src = OH.write(tmp_path / "run")
    lines = [json.loads(x) for x in src.read_text().splitlines()]
    lines[1]["instance_id"] = "i" * 400  # longer than a file name may be: the harness could not have saved it
    lines[2]["instance_id"] = "../nest-1"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    _r, card = run_import("openhands", [src], tmp_path / "card")
    [drop] = [d for d in card.manifest.drops if "no such archive" in d.reason]
    assert drop.count == 2
