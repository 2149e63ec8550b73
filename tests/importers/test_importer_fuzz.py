"""Every registered importer against mutated copies of its seed inputs.

For each format of the `rollout_cards.importers` entry-point group, SEEDS gives a small
valid input (fixture sources, or files written here). Each round mutates a copy of it —
truncation, broken JSON/JSONL/YAML syntax, invalid UTF-8, lone surrogates, `1e999`,
integers beyond int64, wrong types, deep nesting, a huge line, a renamed key, a missing referenced
file — runs `rcard import` and checks: exit 0 or 1 (never 2), no traceback and no
"internal error", an exit 1 names a file of the input, bounded time and Python heap,
and an exit-0 card validates.

Adding an importer: add one SEEDS entry (format -> function writing its seed under a
directory and returning the `rcard import` arguments). An importer without one fails
`test_every_registered_importer_has_seeds`.
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
import shutil
import tarfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollout_cards.cli import app
from rollout_cards.importers import available_formats
from tests.conftest import REPO
from tests.fuzzing import cases, seed

SOURCES = REPO / "fixtures" / "sources"


@dataclass
class Seed:
    """The inputs of one import: the sources and the other files its options name."""

    sources: list[Path]
    options: list[str] = field(default_factory=list)
    referenced: list[Path] = field(default_factory=list)
    #: files a source is built from after a mutation (an archive's members), and the builder
    members: list[Path] = field(default_factory=list)
    pack: Callable[[], None] | None = None

    def files(self) -> list[Path]:
        """Every regular file of the input (inside directory sources too), and the members."""
        out = list(self.referenced) + [m for m in self.members if m.exists()]
        for s in self.sources:
            out += sorted(p for p in s.rglob("*") if p.is_file()) if s.is_dir() else [s]
        return out


def _copy(rel: str, into: Path) -> Path:
    target = into / Path(rel).name
    shutil.copyfile(SOURCES / rel, target)
    return target


def _chat(into: Path) -> Seed:
    mapping = _copy("chat/mapping.yaml", into)
    return Seed([_copy("chat/chat.jsonl", into)], ["--mapping", str(mapping)], [mapping])


def _swe(into: Path) -> Seed:
    predictions = _copy("swe-bench/predictions.jsonl", into)
    return Seed([_copy("swe-bench/demo-model.demo-run.json", into)], ["--predictions", str(predictions)],
                [predictions])


def _agentbench(into: Path) -> Seed:
    d = into / "outputs" / "gpt-x" / "webshop-std"
    d.mkdir(parents=True)
    lines = [{"index": i, "error": None, "info": None,
              "output": {"index": i, "status": "completed" if i % 3 else "agent invalid action", "result": "[1]",
                         "history": [{"role": "user", "content": f"question {i}"},
                                     {"role": "agent", "content": "FINISH([1])"}]},
              "time": {"timestamp": 1737158137875 + i, "str": "2025-01-17 15:55:37"}} for i in range(4)]
    path = d / "runs.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return Seed([path])


def _agentlab(into: Path) -> Seed:
    study = into / "study"
    for i, reward in enumerate([1.0, 0.0]):
        d = study / f"2025-01-01_00-00-00_MyAgent_on_miniwob.task-{i}_{i}"
        d.mkdir(parents=True)
        (d / "summary_info.json").write_text(json.dumps({
            "n_steps": 2, "cum_reward": reward, "cum_raw_reward": 0, "err_msg": None, "stack_trace": None,
            "stats.cum_input_tokens": 10, "stats.cum_output_tokens": 2, "stats.cum_cost": 0.01,
            "stats.cum_step_elapsed": 1.5, "terminated": True, "truncated": False}))
    return Seed([study])


def _openhands(into: Path) -> Seed:
    # The SDK history of tests/importers/test_openhands.py, which imports as it is.
    history = [
        {"kind": "SystemPromptEvent", "source": "agent", "system_prompt": {"type": "text", "text": "be good"}},
        {"kind": "MessageEvent", "source": "user", "llm_message": {"role": "user",
                                                                 "content": [{"type": "text", "text": "hi"}]}},
        {"kind": "ActionEvent", "source": "agent", "tool_name": "bash", "tool_call_id": "c1",
         "tool_call": {"id": "c1", "name": "bash", "arguments": "{\"command\": \"ls\"}"},
         "thought": [{"type": "text", "text": "look"}]},
        {"kind": "AgentErrorEvent", "source": "agent", "tool_call_id": "c1", "error": "bash crashed"},
        {"kind": "PauseEvent", "source": "user"},
    ]
    path = into / "output.jsonl"
    lines = [{"instance_id": f"i{i}", "instruction": "do", "metadata": {"llm": {"model": "m"}}, "history": history,
              "metrics": None, "error": None, "test_result": {}} for i in range(2)]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return Seed([path])


def _openhands_conversations(into: Path) -> Seed:
    """An output.jsonl whose sub-agents' conversations are archived beside it
    (fixtures/openhands_conversations.py); the archive and its JSON members are mutated."""
    spec = importlib.util.spec_from_file_location("oh_conversations", REPO / "fixtures" / "openhands_conversations.py")
    oh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oh)
    source = oh.write(into / "run")
    archive = into / "run" / "conversations" / "nest-1.tar.gz"
    with tarfile.open(archive, "r:gz") as tar:
        entries = [(m.name, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]
    members_dir = into / "members"
    members: list[Path] = []
    for name, data in entries:
        if data is not None and name.endswith(".json") and "/subagents/" in name:
            members.append(members_dir / name)
            members[-1].parent.mkdir(parents=True, exist_ok=True)
            members[-1].write_text(json.dumps(json.loads(data), indent=1))  # spaced, so every mutation applies

    def pack() -> None:
        kept = [(n, (members_dir / n).read_bytes() if (members_dir / n) in members else d) for n, d in entries
                if not ((members_dir / n) in members and not (members_dir / n).exists())]
        archive.write_bytes(oh.tar_gz(kept))

    pack()
    return Seed([source], referenced=[archive], members=members, pack=pack)


def _tau2(into: Path) -> Seed:
    def sim(i: int, reason: str) -> dict:
        return {"id": f"s{i}", "task_id": f"t{i}", "trial": 0, "seed": i, "timestamp": "2026-01-01T00:00:09",
                "start_time": "2026-01-01T00:00:00", "end_time": "2026-01-01T00:00:09", "duration": 9.0,
                "termination_reason": reason, "agent_cost": 0.01, "user_cost": 0.0,
                "reward_info": {"reward": float(i % 2), "reward_basis": ["DB"], "reward_breakdown": {"DB": float(i % 2)}},
                "messages": [
                    {"role": "user", "content": "hi", "turn_idx": 0, "timestamp": "2026-01-01T00:00:01"},
                    {"role": "assistant", "content": None, "cost": 0.01, "turn_idx": 1,
                     "usage": {"prompt_tokens": 10, "completion_tokens": 3},
                     "tool_calls": [{"id": "c1", "name": "find", "arguments": {"q": i}, "requestor": "assistant"}]},
                    {"role": "tool", "id": "c1", "content": "ok", "requestor": "assistant", "error": False}]}
    doc = {"timestamp": "2026-01-01T00:00:00",
           "info": {"git_commit": "abc", "num_trials": 1, "max_steps": 30, "max_errors": 10,
                    "agent_info": {"implementation": "llm_agent", "llm": "m"}, "user_info": {"implementation": "u"},
                    "environment_info": {"domain_name": "retail"}},
           "tasks": [{"id": f"t{i}"} for i in range(3)],
           "simulations": [sim(0, "user_stop"), sim(1, "max_steps"), sim(2, "agent_error")]}
    path = into / "results.json"
    path.write_text(json.dumps(doc, indent=1))
    return Seed([path])


def _mini_swe_agent(into: Path) -> Seed:
    run = into / "run"
    run.mkdir()
    (run / "exit_statuses_1.yaml").write_text(
        "instances_by_exit_status:\n  Submitted:\n  - a\n  LimitsExceeded:\n  - b\n")
    (run / "preds.json").write_text(json.dumps({i: {"model_name_or_path": "m", "instance_id": i, "model_patch": "d"}
                                                for i in ("a", "b")}, indent=1))
    (run / "a").mkdir()
    (run / "a" / "a.traj.json").write_text(json.dumps({
        "info": {"model_stats": {"instance_cost": 0.1, "api_calls": 1}, "exit_status": "Submitted", "submission": "d",
                 "mini_version": "2.0"},
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "task"},
                     {"role": "assistant", "content": "", "tool_calls": [
                         {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}],
                      "extra": {"timestamp": 1.7e9, "cost": 0.1,
                                "response": {"usage": {"prompt_tokens": 5, "completion_tokens": 2}}}},
                     {"role": "tool", "tool_call_id": "c1", "content": "x",
                      "extra": {"returncode": 0, "timestamp": 1.7e9 + 1}},
                     {"role": "exit", "content": "d", "extra": {"exit_status": "Submitted", "submission": "d"}}],
        "trajectory_format": "mini-swe-agent-1.1", "instance_id": "a"}, indent=1))
    return Seed([run])


def _swe_agent(into: Path) -> Seed:
    traj = into / "x__y-1.traj"
    traj.write_text(json.dumps({
        "environment": "main",
        "history": [{"role": "system", "content": "s", "agent": "main"},
                    {"role": "assistant", "content": "look", "agent": "main", "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\": \"ls\"}"}}]},
                    {"role": "tool", "content": "out", "agent": "main", "tool_call_ids": ["c1"]}],
        "trajectory": [{"action": "ls", "observation": "out", "response": "look", "thought": "t", "execution_time": 0.1}],
        "info": {"exit_status": "submitted", "submission": "diff",
                 "model_stats": {"instance_cost": 0.1, "tokens_sent": 5, "tokens_received": 2, "api_calls": 1}}}, indent=1))
    preds = into / "all_preds.jsonl"
    preds.write_text(json.dumps({"model_name_or_path": "m", "instance_id": "x__y-1", "model_patch": "diff"}) + "\n")
    return Seed([traj, preds])


def _swe_bench_experiments(into: Path) -> Seed:
    """An experiments-style submission whose trajs/ holds one file of each kind swe_bench_trajs reads."""
    sub = into / "evaluation" / "lite" / "20250101_m"
    (sub / "results").mkdir(parents=True)
    ids = ["a__b-1", "a__b-2", "a__b-3", "a__b-4", "a__b-5"]
    (sub / "all_preds.jsonl").write_text("".join(json.dumps({"model_name_or_path": "m", "instance_id": i,
                                                             "model_patch": "diff"}) + "\n" for i in ids))
    (sub / "results" / "results.json").write_text(json.dumps({"resolved": ids[:2], "generated": ids,
                                                              "no_apply": ids[4:]}, indent=1))
    (sub / "metadata.yaml").write_text("info:\n  name: M\ntags:\n  model:\n  - m\n  os_model: true\n")
    (sub / "logs" / ids[0]).mkdir(parents=True)
    (sub / "logs" / ids[0] / "report.json").write_text(json.dumps({ids[0]: {
        "resolved": True, "patch_exists": True, "patch_successfully_applied": True,
        "tests_status": {"FAIL_TO_PASS": {"success": ["t1"], "failure": []},
                         "PASS_TO_PASS": {"success": ["t2"], "failure": []}}}}, indent=1))
    trajs = sub / "trajs"
    trajs.mkdir()
    (into / "swe").mkdir()
    _swe_agent(into / "swe")  # the SWE-agent seed's .traj, as instance 1's
    (into / "swe" / "x__y-1.traj").rename(trajs / f"{ids[0]}.traj")
    shutil.rmtree(into / "swe")
    (into / "mini").mkdir()
    _mini_swe_agent(into / "mini")  # the mini-swe-agent seed's trajectory, as instance 5's
    (into / "mini" / "run" / "a" / "a.traj.json").rename(trajs / f"{ids[4]}.traj.json")
    shutil.rmtree(into / "mini")
    (trajs / f"{ids[1]}.json").write_text(json.dumps([
        {"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "task"}]},
        {"role": "assistant", "content": "look", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "execute_bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "execute_bash", "content": "out"}], indent=1))
    (trajs / f"{ids[2]}.log").write_text("### localize\nfile.py\n")
    (trajs / f"{ids[3]}.json").write_text(json.dumps({"transitions": [{"name": "SearchCode"}]}, indent=1))
    return Seed([sub])


def _lm_eval(into: Path) -> Seed:
    run = into / "run"
    run.mkdir()
    ts = "2026-01-01T00-00-00.000001"
    samples = [{"doc_id": i, "doc": {"q": i}, "target": "1", "arguments": {"gen_args_0": {"arg_0": "q?", "arg_1": "1"}},
                "resps": [[["-1.5", "True"]]], "filtered_resps": [["-1.5", "True"]], "filter": "none",
                "metrics": ["acc"], "acc": str(float(i % 2))} for i in range(3)]
    (run / f"samples_demo_{ts}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in samples))
    (run / f"results_{ts}.json").write_text(
        '{"results": {"demo": {"acc,none": 0.3333333333333333, "acc_stderr,none": NaN}}, '
        '"n-samples": {"demo": {"original": 3, "effective": 3}}, "model_name": "m", "lm_eval_version": "0.4"}')
    return Seed([run])


def _inspect_eval(into: Path) -> Seed:
    """A zstd `.eval` (method 93, as Inspect 0.3.285 writes them) of the synthetic log: a mutation
    of a member's JSON is packed into the archive again; one of the archive's bytes is not."""
    from tests.importers.conftest import zstd_zip

    log = json.loads((SOURCES / "inspect" / "synthetic.json").read_text())
    members_dir = into / "members"
    (members_dir / "samples").mkdir(parents=True)
    members = []
    for sample in log.pop("samples"):
        members.append(members_dir / "samples" / f"{sample['id']}_epoch_{sample['epoch']}.json")
        members[-1].write_text(json.dumps(sample, indent=1))
    members.append(members_dir / "header.json")
    members[-1].write_text(json.dumps(log, indent=1))
    archive = into / "log.eval"

    def pack() -> None:
        zstd_zip(archive, {m.relative_to(members_dir).as_posix(): m.read_bytes() for m in members if m.exists()})

    pack()
    return Seed([archive], members=members, pack=pack)


def _harbor_job(into: Path) -> Seed:
    """A Harbor job directory (tests/importers/harbor_jobs.py): result.json, trials with trajectories."""
    from tests.importers.harbor_jobs import Trial, write_job

    trials = [Trial(f"task-{i}", f"Ab{i:05d}", reward=float(i % 2), exception=None if i else "AgentTimeoutError")
              for i in range(3)]
    return Seed([write_job(into / "job", trials, trajectory=SOURCES / "atif" / "trajectory.json")])


def _nemo_eval(into: Path) -> Seed:
    """A `nat eval` output directory's workflow_output_atif.json with two evaluators' outputs."""
    from tests.importers.nemo_eval_runs import write_run

    items = [(1, "2*3?", "6", "6"), (2, "4*5?", "20", "21"), ("q-3", "1+1?", "2", "2")]
    return Seed([write_run(into / "run", items, {"accuracy": {1: 1.0, 2: 0.0, "q-3": 1.0},
                                                  "trajectory": {1: 0.5, 2: ("error", "boom"), "q-3": 0.75}})])


def _lm_eval_v03(into: Path) -> Seed:
    """lm-eval 0.3: results.json + one <task>_write_out_info.json (evaluator.py @80ae5a8b6)."""
    run = into / "out"
    run.mkdir()
    entries = [{"doc_id": i, "prompt_0": f"Q{i} A", "prompt_1": f"Q{i} B", "logit_0": -1.5, "logit_1": -0.5,
                "truth": 1, "acc": str(i % 2 == 1)} for i in range(4)]
    (run / "demo_write_out_info.json").write_text(json.dumps(entries, indent=4))
    (run / "results.json").write_text(json.dumps({"results": {"demo": {"acc": 0.5, "acc_stderr": 0.28}},
                                                  "versions": {"demo": 0},
                                                  "config": {"model": "hf-causal", "model_args": "pretrained=m"}}))
    return Seed([run])


def _agentbench_v01(into: Path) -> Seed:
    """An AgentBench v0.1 task output directory (src/task.py @873b35a on branch v0.1)."""
    d = into / "outputs" / "2023-10-08-00-09-40" / "os-std"
    d.mkdir(parents=True)
    rows = [({"q": "2+2?"}, "4", "4"), ({"q": "ls"}, "x", None)]
    (d / "generation.jsonl").write_text("".join(json.dumps(
        {"index": i, "input": inp, "output": out, "history": [{"role": "user", "content": inp["q"]},
                                                              {"role": "agent", "content": str(out)}],
         "exception_raised": out is None}) + "\n" for i, (inp, _t, out) in enumerate(rows)))
    (d / "runs.jsonl").write_text("".join(json.dumps({"index": i, "input": inp, "output": out, "target": t}) + "\n"
                                          for i, (inp, t, out) in enumerate(rows)))
    (d / "results.json").write_text(json.dumps({"EM": 0.5}, indent=4))
    return Seed([d])


def _swe_bench_details(into: Path) -> Seed:
    """An experiments submission of the mini-SWE-agent family: per_instance_details.json + metadata.yaml."""
    d = into / "20260217_mini-v2.0.0_model-x"
    d.mkdir()
    (d / "per_instance_details.json").write_text(json.dumps({
        "a__a-1": {"cost": 0.5, "api_calls": 10, "resolved": True},
        "b__b-2": {"cost": 0.25, "api_calls": 4, "resolved": False}}, indent=2))
    (d / "metadata.yaml").write_text("info:\n  name: mini-SWE-agent\ntags:\n  model: [model-x]\n")
    return Seed([d])


#: key -> writes a valid seed input under the given directory: at least one entry per importer,
#: keyed by its format (a second seed of a format is keyed "<format>:<what>").
SEEDS: dict[str, Callable[[Path], Seed]] = {
    "atif": lambda d: Seed([_copy("atif/trajectory.json", d), _copy("atif/trajectories.jsonl", d)],
                           ["--field", "task=extra.task_id", "--field", "score.reward=extra.reward"]),
    "atif:harbor-job": _harbor_job,
    "atif:nemo-eval": _nemo_eval,
    "agentbench:v0.1": _agentbench_v01,
    "lm-eval:v0.3-write-out": _lm_eval_v03,
    "swe-bench:per-instance-details": _swe_bench_details,
    "chat-jsonl": _chat,
    "inspect": lambda d: Seed([_copy("inspect/synthetic.json", d)]),
    "inspect:eval-zstd": _inspect_eval,
    "swe-bench": _swe,
    "swe-bench:experiments": _swe_bench_experiments,
    "tau-bench": lambda d: Seed([_copy("tau-bench/synthetic-agent.json", d)]),
    "agentbench": _agentbench,
    "agentlab": _agentlab,
    "openhands": _openhands,
    "openhands:conversations": _openhands_conversations,
    "tau2-bench": _tau2,
    "mini-swe-agent": _mini_swe_agent,
    "swe-agent": _swe_agent,
    "lm-eval": _lm_eval,
}


def _format(key: str) -> str:
    return key.split(":", 1)[0]


def test_every_registered_importer_has_seeds():
    missing = sorted(set(available_formats()) - {_format(k) for k in SEEDS})
    assert not missing, (f"importer(s) {', '.join(missing)} have no fuzz seeds: add an entry to SEEDS in "
                         "tests/importers/test_importer_fuzz.py (a function writing a small valid input)")


# -- mutations: each takes the bytes of one input file and returns the new bytes, or None when
# -- it does not apply (the file has nothing it could change)


def _at(data: bytes, rng: random.Random, pattern: bytes) -> re.Match[bytes] | None:
    found = list(re.finditer(pattern, data))
    return rng.choice(found) if found else None


def _replace(data: bytes, rng: random.Random, pattern: bytes, new: bytes) -> bytes | None:
    m = _at(data, rng, pattern)
    return None if m is None else data[: m.start()] + new + data[m.end():]


_NUMBER = rb"(?<=[:\[, ])-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?(?=[,}\]\s])"
_STRING_VALUE = rb'(?<=: )"(?:[^"\\\n]|\\.){0,200}"'
_KEY = rb'"[^"\\\n]{1,40}"(?=: )'

MUTATIONS: dict[str, Callable[[bytes, random.Random], bytes | None]] = {
    "truncate": lambda d, r: d[: r.randrange(max(1, len(d)))],
    "syntax": lambda d, r: (lambda i: d[:i] + r.choice([b"{", b"]", b",,", b'"', b":", b"\n}\n", b"- [\n"]) + d[i:])(
        r.randrange(len(d) + 1)),
    "invalid-utf8": lambda d, r: (lambda i: d[:i] + b"\xff\xfe" + d[i:])(r.randrange(len(d) + 1)),
    "lone-surrogate": lambda d, r: _replace(d, r, rb'(?<=: )"', b'"\\ud800'),
    "1e999": lambda d, r: _replace(d, r, _NUMBER, r.choice([b"1e999", b"-1e400", b"1E+309"])),
    "int-beyond-int64": lambda d, r: _replace(d, r, _NUMBER, r.choice([b"9223372036854775808",
                                                                         b"-99999999999999999999999", b"9" * 5000])),
    "wrong-type": lambda d, r: _replace(d, r, _STRING_VALUE, r.choice([b"12", b"[1, {}]", b'{"a": [null]}',
                                                                         b"true", b"null", b"-0.5"])),
    "wrong-type-container": lambda d, r: _replace(d, r, rb"(?<=: )[\[{]", b'"text", "x": ['),
    "deep-nesting": lambda d, r: _replace(d, r, _STRING_VALUE, b"[" * 50_000 + b"]" * 50_000),
    "huge-line": lambda d, r: _replace(d, r, _STRING_VALUE, b'"' + b"x" * (3 << 20) + b'"'),
    # A key renamed: a field the importer reads goes missing, or a key becomes a column,
    # meta key or metric name (3 MiB, past the YAML scalar limit, empty, dotted, NUL).
    "key": lambda d, r: _replace(d, r, _KEY, r.choice([b'"' + b"k" * (3 << 20) + b'"', b'"' + b"k" * 70_000 + b'"',
                                                       b'""', b'"a.b"', b'"\\u0000"', b'"x y\'z"', b'"score"'])),
}
_SCALAR = rb'(?:"(?:[^"\\\n]|\\.)*"|-?[0-9][0-9.eE+-]*|true|false)'


def _everywhere(data: bytes, rng: random.Random, drop: bool) -> bytes | None:
    """One key, in every record that has it: its scalar value made null, or the member removed —
    a field the source leaves empty in all its records (a column every row leaves null)."""
    keys = sorted(set(re.findall(rb'"([^"\\\n]{1,40})":\s*' + _SCALAR, data)))
    if not keys:
        return None
    name = rb'"' + re.escape(rng.choice(keys)) + rb'":'
    member = name + rb"\s*" + _SCALAR
    if drop:
        new = re.sub(member + rb"\s*,\s*", b"", data)
        new = re.sub(rb",\s*" + member + rb"(?=\s*})", b"", new)
        new = re.sub(rb"\{\s*" + member + rb"\s*\}", b"{}", new)
    else:
        new = re.sub(rb"(" + name + rb"\s*)" + _SCALAR, rb"\1null", data)
    return new if new != data else None


MUTATIONS["null-everywhere"] = lambda d, r: _everywhere(d, r, drop=False)
MUTATIONS["dropped-everywhere"] = lambda d, r: _everywhere(d, r, drop=True)

#: Mutations of the input as a whole rather than of one file's bytes.
STRUCTURAL = ("missing-file", "empty-file")


@dataclass
class Outcome:
    code: int
    output: str
    seconds: float
    peak_bytes: int


def _run(fmt: str, inputs: Seed, out: Path) -> Outcome:
    args = ["import", fmt, *map(str, inputs.sources), "-o", str(out), *inputs.options]
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = CliRunner().invoke(app, args)
    finally:
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return Outcome(result.exit_code, result.output, seconds, peak)


def _mutate(inputs: Seed, kind: str, rng: random.Random) -> tuple[str, Path] | None:
    """Apply mutation `kind` to one file of `inputs`: (description, the file), or None when it did not apply."""
    files = inputs.files()
    if kind in STRUCTURAL:
        victim = rng.choice(files)
        if kind == "missing-file":
            victim.unlink()
        else:
            victim.write_bytes(b"")
        _repack(inputs, victim)
        return f"{kind} {victim.name}", victim
    for victim in rng.sample(files, len(files)):
        new = MUTATIONS[kind](victim.read_bytes(), rng)
        if new is not None:
            victim.write_bytes(new)
            _repack(inputs, victim)
            return f"{kind} in {victim.name}", victim
    return None


def _repack(inputs: Seed, victim: Path) -> None:
    if inputs.pack is not None and victim in inputs.members:
        inputs.pack()


def _check(fmt: str, what: str, inputs: Seed, out: Path, outcome: Outcome, size: int,
           option_file: bool = False) -> None:
    label = f"{fmt}: {what}: exit {outcome.code}\n{outcome.output[-2000:]}"
    # A file named by an option (chat-jsonl's --mapping) is a usage error by design
    # (ImporterError, exit 2; tests/importers/test_chat_jsonl.py); sources are exit 0 or 1.
    assert outcome.code in ((0, 1, 2) if option_file else (0, 1)), label
    assert "Traceback" not in outcome.output and "internal error" not in outcome.output, label
    assert outcome.seconds < 60, f"{label}\ntook {outcome.seconds:.1f} s"
    assert outcome.peak_bytes < (256 << 20) + 8 * size, f"{label}\nPython heap peak {outcome.peak_bytes:,} bytes"
    if outcome.code in (1, 2):
        # The path as given, or at least the file's name (some importers name a member by it).
        named = [str(p) for p in (*inputs.sources, *inputs.referenced)] + [p.name for p in inputs.files()]
        assert any(n in outcome.output for n in named), f"{label}\nthe message names none of {named}"
        assert not out.exists() or not any(out.iterdir()), f"{label}\na refused import left {out}"
    else:
        from rollout_cards.validate import validate

        report = validate(out)
        assert report.valid, f"{label}\nthe card does not validate: {[str(f) for f in report.findings][:5]}"


@pytest.mark.parametrize("key", sorted(SEEDS))
def test_the_unmutated_seed_imports_and_validates(key, tmp_path):
    fmt = _format(key)
    if fmt not in available_formats():
        pytest.skip(f"{fmt} is not registered in this installation")
    inputs = SEEDS[key](tmp_path)
    outcome = _run(fmt, inputs, tmp_path / "card")
    assert outcome.code == 0, outcome.output
    _check(fmt, "seed", inputs, tmp_path / "card", outcome, 0)


@pytest.mark.fuzz
@pytest.mark.parametrize("key", sorted(SEEDS))
def test_mutated_inputs_are_refused_cleanly_or_import_validly(key, tmp_path):
    fmt = _format(key)
    if fmt not in available_formats():
        pytest.skip(f"{fmt} is not registered in this installation")
    rng = random.Random(f"{seed()}:{key}")
    kinds = [*MUTATIONS, *STRUCTURAL]
    ran = 0
    for round_ in range(cases(1)):
        for kind in kinds:
            case = tmp_path / f"{round_}-{kind}"
            case.mkdir()
            inputs = SEEDS[key](case)
            size = sum(p.stat().st_size for p in inputs.files())
            mutated = _mutate(inputs, kind, rng)
            if mutated is None:
                continue
            out = case / "card"
            _check(fmt, mutated[0], inputs, out, _run(fmt, inputs, out), size,
                   option_file=mutated[1] in inputs.referenced and fmt == "chat-jsonl")
            ran += 1
            shutil.rmtree(case)
    assert ran >= len(kinds) // 2 * cases(1), f"only {ran} mutations applied to the {fmt} seed"
