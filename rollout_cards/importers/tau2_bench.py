"""tau2-bench `Results` to a rollout card.

A source is a monolithic results JSON (`timestamp`, `info`, `tasks`, `simulations`),
or the directory format: a directory (or its `results.json`) holding the metadata and
`simulation_index`, with one `simulations/<id>.json` per simulation. Each simulation is
one episode, `episode_id` = its `id`. The monolithic file is streamed (simulation by
simulation); when `simulations` precedes `info`/`tasks` in the file, a second pass
reads them.

Terminal state from `termination_reason`:

| termination_reason                                          | status    |
|-------------------------------------------------------------|-----------|
| user_stop, agent_stop                                       | completed |
| max_steps, context_window_exceeded                          | limit     |
| timeout                                                     | timeout   |
| too_many_errors, agent_error, user_error, infrastructure_error, unexpected_error | error (the reason kept) |

Rules replay tau2's own `compute_metrics`: the mean reward and pass^k over the
simulations that are not infrastructure errors, per agent and domain.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any

import msgspec

from ..errors import ImporterError, SourceFormatError
from ..io.writer import to_micros
from ..jsondoc import fast_texts
from ..model.card import Software
from .base import ImportRequest
from .json_stream import JsonStream
from .rule_files import rule_document
from .session import ImportSession
from .source_dir import children, regular_file
from .source_values import INT64_MAX, integer, number, text
from .steps import StepBuffer, decoded_json_text, json_text
from .tau_bench import pass_hat_k

__all__ = ["STATUS", "Tau2BenchImporter"]

STATUS = {
    "user_stop": "completed", "agent_stop": "completed",
    "max_steps": "limit", "context_window_exceeded": "limit",
    "timeout": "timeout",
    "too_many_errors": "error", "agent_error": "error", "user_error": "error",
    "infrastructure_error": "error", "unexpected_error": "error",
}
_INFRA = "infrastructure_error"
_SUCCESS_EPS = 1e-6  # tau2's is_successful: 1 - 1e-6 <= reward <= 1 + 1e-6
#: Simulation keys mapped to their own columns; every other key goes to meta.<key> (JSON text).
_SIM_KEYS = frozenset(("id", "task_id", "trial", "seed", "timestamp", "start_time", "end_time", "duration",
                       "termination_reason", "agent_cost", "user_cost", "reward_info", "messages"))
#: Message keys mapped to step columns; the rest go to the step's payload.
_MSG_KEYS = frozenset(("role", "content", "tool_calls", "usage", "cost", "id", "error", "errors"))
#: Keys of a tool message that are not its result's payload.
_RESULT_KEYS = ("role", "content", "id", "error")


class _Message(msgspec.Struct, forbid_unknown_fields=True):
    """A tau2 message as the stream decodes it: msgspec's typed decode of the keys tau2 writes, which
    makes fewer objects than a dict (a simulation decodes in ~0.55x the time). Every value is `Any`,
    as a JSON decoder gives it: the mapping checks it, as it checks a dict's. A message with another
    key is decoded as a dict, and `_split` makes it this with the other keys apart."""

    role: Any = None
    content: Any = None
    tool_calls: Any = None
    usage: Any = None
    cost: Any = None
    id: Any = None
    error: Any = None
    errors: Any = None
    timestamp: Any = None
    turn_idx: Any = None
    reasoning: Any = None
    raw_data: Any = None
    requestor: Any = None
    tool_messages: Any = msgspec.UNSET  # a MultiToolMessage's (present, even as null)


class _Simulation(msgspec.Struct, forbid_unknown_fields=True):
    """A tau2 simulation as the stream decodes it (see `_Message`): the keys of `_SIM_KEYS`."""

    id: Any = None
    task_id: Any = None
    trial: Any = None
    seed: Any = None
    timestamp: Any = None
    start_time: Any = None
    end_time: Any = None
    duration: Any = None
    termination_reason: Any = None
    agent_cost: Any = None
    user_cost: Any = None
    reward_info: Any = None
    messages: list[_Message] | None = None


assert frozenset(_Simulation.__struct_fields__) == _SIM_KEYS
_SIM_FIELDS = frozenset(_Simulation.__struct_fields__)
_MSG_FIELDS = frozenset(_Message.__struct_fields__)
_RESULT_PAYLOAD = tuple(f for f in _Message.__struct_fields__ if f not in _RESULT_KEYS)


def _split(value: dict[str, Any], typ: type[Any], fields: frozenset[str]) -> tuple[Any, dict[str, Any]]:
    """A decoded object as `typ` (the Struct the stream decodes it as where it fits) and its other keys."""
    return typ(**{k: v for k, v in value.items() if k in fields}), {k: v for k, v in value.items() if k not in fields}
_MAX_HEADER_CHARS = 256 * 1024 * 1024
_SELECTOR_KEYS = 50


class Tau2BenchImporter:
    """tau2-bench `Results` (a results JSON, or a results.json + simulations/ directory)."""

    name = "tau2-bench"
    summary = "tau2-bench Results: a results JSON (info, tasks, simulations) or a results.json + simulations/ directory"
    options: dict[str, str] = {}
    directories = True

    def read(self, request: ImportRequest, session: ImportSession) -> None:
        """Import every source; the agent is `--agent`, else `info.agent_info.llm` (or its implementation)."""
        request.check_options(self.name, self.options)
        state = _State()
        for index, path in enumerate(request.sources):
            _import_source(session, state, path, request.url(index), request.agent)
        if session.episodes_written == 0:
            _declare_plan(session, state)  # the planned simulations it lacks are why the import fails
            return
        state.finish(session)


class _State:
    """What the whole import accumulates: per (agent, domain) rewards, the plan, drop counts."""

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str], _Group] = {}
        self.planned: set[tuple[str, str, int]] = set()
        self.present: set[tuple[str, str, int]] = set()
        self.tasks: dict[str, None] = {}
        self.trials = 0
        self.runs: list[dict[str, Any]] = []
        self.untimed_steps = 0
        self.untimed_episodes = 0
        self.unpriced_episodes = 0
        self.unpriced_steps = 0
        self.untokened_steps = 0
        self.untokened_episodes = 0
        self.no_reward = 0
        self.missing_files: list[str] = []
        self.ticks_only: list[str] = []
        self.rules: list[str] = []
        self.unknown_tasks = 0

    def finish(self, session: ImportSession) -> None:
        self.rules = _declare_rules(session, self.groups)
        _declare_plan(session, self)
        _declare_missing(session, self)
        session.set_meta("tau2", {"runs": self.runs})


class _Group:
    __slots__ = ("num_trials", "rewards", "tasks")

    def __init__(self, num_trials: int) -> None:
        self.num_trials = num_trials
        self.rewards: list[float] = []  # non-infrastructure simulations with a reward
        self.tasks: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # task -> [trials, successes]


# -- sources -------------------------------------------------------------------------------------
def _import_source(session: ImportSession, state: _State, path: Path, url: str | None, agent: str | None) -> None:
    if path.is_dir():
        meta_path, sims_dir = path / "results.json", path / "simulations"
        regular_file(meta_path, what="results.json")
    else:
        meta_path, sims_dir = path, path.parent / "simulations"
    session.add_source(meta_path, "tau2-bench", url)
    with open(meta_path, "rb") as fh:
        stream = JsonStream(fh, str(meta_path), max_value_chars=_MAX_HEADER_CHARS)
        header: dict[str, Any] = {}
        run: _Run | None = None
        deferred = broken = False
        for key in stream.object_keys():
            if key == "simulations":
                if "info" in header and "tasks" in header:
                    run = run or _Run(session, state, meta_path, header, agent)
                    if not run.stream(stream.array_items(label="simulations[{}]", typed=_Simulation)):
                        broken = True
                        break
                else:
                    stream.skip_value()
                    deferred = True
            elif key == "tasks":
                header["tasks"] = _tasks(stream, meta_path)
            else:
                stream.record = key
                header[key] = stream.read_value()
                stream.record = None
        if not broken:
            stream.end()
    if "info" not in header or "tasks" not in header:
        raise SourceFormatError("is not a tau2-bench Results file (it needs info and tasks)", file=str(meta_path))
    run = run or _Run(session, state, meta_path, header, agent)
    if deferred:
        with open(meta_path, "rb") as fh:
            stream = JsonStream(fh, str(meta_path), max_value_chars=_MAX_HEADER_CHARS)
            for key in stream.object_keys():
                if key == "simulations":
                    if not run.stream(stream.array_items(label="simulations[{}]", typed=_Simulation)):
                        break
                else:
                    stream.skip_value()
    index = header.get("simulation_index")
    if run.count == 0 and (index is not None or (sims_dir.is_dir() and not sims_dir.is_symlink())):
        _directory_format(session, run, meta_path, sims_dir, index)
    run.close()


def _tasks(stream: JsonStream, path: Path) -> tuple[list[bytes], list[str]]:
    """The task definitions as UTF-8 JSON text (kept until the header artifact is written) and their ids."""
    out: list[bytes] = []
    ids: list[str] = []
    for i, task in stream.array_items(label="tasks[{}]"):
        if not isinstance(task, dict) or not isinstance(task.get("id"), (str, int)) or isinstance(task.get("id"), bool):
            raise SourceFormatError("is not a task with an id", file=str(path), record=f"tasks[{i}]")
        out.append(decoded_json_text(task).encode("utf-8"))
        ids.append(str(task["id"]))
    return out, ids


def _header_artifact(session: ImportSession, header: dict[str, Any]) -> tuple[str, list[str]]:
    """Store the results file without its simulations as one artifact; returns (sha256, task ids).
    The artifact's bytes are joined once from the tasks' bytes (no text of the whole, and no
    intermediate copies): 20,000 replica tasks are ~51 MB, and each copy was held at once."""
    texts, ids = header["tasks"]
    header["tasks"] = ([], ids)  # the texts are freed once the artifact is written
    rest = {k: v for k, v in header.items() if k != "tasks"}
    body = json_text(rest).encode("utf-8")
    parts = [body[:-1] + (b"," if len(body) > 2 else b"") + b'"tasks":[']
    for task in texts:
        parts += task, b","
    if texts:
        parts.pop()
    parts.append(b"]}")
    return session.add_artifact(b"".join(parts)), ids


def _directory_format(session: ImportSession, run: _Run, meta_path: Path, sims_dir: Path, index: Any) -> None:
    if index is not None and not isinstance(index, list):
        raise SourceFormatError("simulation_index is not a list", file=str(meta_path), record="simulation_index")
    listed: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(index or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise SourceFormatError("is not an index entry with an id", file=str(meta_path),
                                    record=f"simulation_index[{i}]")
        listed[entry["id"]] = entry
    on_disk: dict[str, Path] = {}
    if sims_dir.exists():
        if sims_dir.is_symlink():
            raise SourceFormatError("is a symbolic link; links are not followed out of a source", file=str(sims_dir))
        on_disk = {name[:-5]: p for name, p, is_dir in children(sims_dir) if not is_dir and name.endswith(".json")}
    for sim_id in sorted(set(listed) - set(on_disk)):
        run.missing(sim_id, listed[sim_id])
    extra = sorted(set(on_disk) - set(listed)) if index is not None else []
    if extra:
        session.note(f"{meta_path.name}: {len(extra)} simulation file(s) are not in simulation_index "
                     f"(tau2 refuses such a directory); imported: {', '.join(extra[:5])}")
    for sim_id in sorted(on_disk):
        path = on_disk[sim_id]
        session.add_source(path, "tau2-bench")
        with open(path, "rb") as fh:
            stream = JsonStream(fh, str(path))
            stream.record = "simulation"
            run.stream(_one(session, stream))


def _one(session: ImportSession, stream: JsonStream) -> Iterator[tuple[int, Any]]:
    value = stream.read_value(_Simulation)
    stream.end()
    yield 0, value


# -- one results file ------------------------------------------------------------------------------
class _Run:
    """One Results file: its info, tasks and the simulations mapped so far."""

    def __init__(self, session: ImportSession, state: _State, path: Path, header: dict[str, Any], agent: str | None):
        self.session, self.state, self.path, self.file = session, state, path, str(path)
        probe = StepBuffer("", file=self.file, record="info")
        info = header["info"]
        if not isinstance(info, dict):
            raise probe.error("info is not an object")
        agent_info = info.get("agent_info") if isinstance(info.get("agent_info"), dict) else {}
        user_info = info.get("user_info") if isinstance(info.get("user_info"), dict) else {}
        env = info.get("environment_info") if isinstance(info.get("environment_info"), dict) else {}
        self.agent = agent or text(probe, agent_info.get("llm"), "info.agent_info.llm") or text(
            probe, agent_info.get("implementation"), "info.agent_info.implementation") or path.stem
        self.domain = text(probe, env.get("domain_name"), "info.environment_info.domain_name") or "unknown"
        self.num_trials = integer(probe, info.get("num_trials"), "info.num_trials", minimum=1)
        self.artifact, task_ids = _header_artifact(session, header)
        self.tasks = set(task_ids)
        key = (self.agent, self.domain)
        if key in state.groups:
            raise ImporterError(f"two results files map to agent {self.agent!r} in domain {self.domain!r}; "
                                "import them separately or name them apart with --agent")
        self.group = state.groups[key] = _Group(self.num_trials or 1)
        self.count = 0
        self.seen: set[tuple[str, int]] = set()
        self.missing_index: list[str] = []
        git_commit = info.get("git_commit") if isinstance(info.get("git_commit"), str) else None
        session.set_software("harness", Software(name="tau2-bench", revision=git_commit,
                                                 url="https://github.com/sierra-research/tau2-bench"))
        session.add_agent({"name": self.agent, "model": agent_info.get("llm") if isinstance(agent_info.get("llm"), str) else None,
                           "parameters": {k: v for k, v in agent_info.items() if k in ("implementation", "llm_args")}})
        state.runs.append({
            "file": path.name, "timestamp": header.get("timestamp"), "agent": self.agent, "domain": self.domain,
            **{k: info.get(k) for k in ("git_commit", "num_trials", "max_steps", "max_errors", "seed") if k in info},
            "agent_info": {k: v for k, v in agent_info.items() if k != "voice_settings"},
            "user_info": {k: v for k, v in user_info.items() if k in ("implementation", "llm", "llm_args")},
            "header_artifact": self.artifact,
            "tasks": len(task_ids),
        })
        for task_id in task_ids:
            state.tasks.setdefault(task_id)
            for trial in range(self.num_trials or 0):
                state.planned.add((task_id, self.agent, trial))
        state.trials = max(state.trials, self.num_trials or 0)

    def stream(self, items: Iterator[tuple[int, Any]]) -> bool:
        """Map each simulation; False when the stream broke (--keep-going counted its rest as malformed)."""
        session = self.session
        before = len(session.malformed)
        for i, sim in session.guard(items):
            with session.record():
                self.simulation(sim, i)
        after = session.malformed
        return not (len(after) > before and after[-1].message.endswith("the rest of the file was not read"))

    def simulation(self, sim: Any, index: int) -> None:
        probe = StepBuffer("", file=self.file, record=f"simulations[{index}]")
        if type(sim) is dict:  # a simulation with other keys (or the strict decoder's)
            sim, extra = _split(sim, _Simulation, _SIM_FIELDS)
        elif type(sim) is _Simulation:
            extra = {}
        else:
            raise probe.error("is not a JSON object")
        sim_id = sim.id
        if type(sim_id) is not str or not sim_id:
            raise probe.error("id is missing or not a string")
        steps = StepBuffer(sim_id, file=self.file, record=f"simulation {sim_id}")
        task_id = sim.task_id
        if type(task_id) is int:
            task_id = str(task_id)
        if type(task_id) is not str or not task_id:
            raise steps.error("task_id is missing or not a string")
        reason = sim.termination_reason
        status = STATUS.get(reason) if type(reason) is str else None
        if status is None:
            raise steps.error(f"termination_reason {reason!r} is not one tau2-bench defines "
                              f"({', '.join(STATUS)})")
        trial = integer(steps, sim.trial, "trial")
        state = self.state
        row: dict[str, Any] = {
            "episode_id": sim_id, "task_id": task_id, "agent": self.agent, "trial": trial, "status": status,
            "seed": integer(steps, sim.seed, "seed", minimum=None),
            "task.domain": self.domain, "meta.termination_reason": reason, "meta.results_artifact": self.artifact,
        }
        if task_id not in self.tasks:
            state.unknown_tasks += 1
        reward_info = sim.reward_info
        reward = None
        if reward_info is not None:
            if type(reward_info) is not dict:
                raise steps.error("reward_info is not an object")
            reward = number(steps, reward_info.get("reward"), "reward_info.reward")
            row["score.reward"] = reward
            breakdown = reward_info.get("reward_breakdown")
            if isinstance(breakdown, dict):
                for basis, value in breakdown.items():
                    row[f"score.{str(basis).lower()}"] = number(steps, value, f"reward_info.reward_breakdown.{basis}")
            basis = reward_info.get("reward_basis")
            if isinstance(basis, list):
                row["meta.reward_basis"] = ",".join(str(b) for b in basis)
            row["meta.reward_info"] = decoded_json_text(reward_info)  # reward_info holds nulls
        if reward is None:
            state.no_reward += 1
        note = reward_info.get("info", {}).get("note") if isinstance(reward_info, dict) and isinstance(
            reward_info.get("info"), dict) else None
        if status != "completed":
            row["error_message"] = f"termination_reason {reason}" + (f": {note}" if isinstance(note, str) else "")
            if status == "error":
                row["error_type"] = reason
        started, ended = _time(steps, sim.start_time, "start_time"), _time(steps, sim.end_time, "end_time")
        row["started_at"], row["ended_at"] = started, ended
        if started is None or ended is None:
            state.untimed_episodes += 1
        for key, value in (("start_time", sim.start_time), ("end_time", sim.end_time), ("timestamp", sim.timestamp)):
            if value is not None:
                row[f"meta.{key}"] = text(steps, value, key)
        row["meta.duration"] = number(steps, sim.duration, "duration")
        row["meta.user_cost"] = number(steps, sim.user_cost, "user_cost")
        messages = sim.messages
        if messages is None:
            if extra.get("ticks") is not None:
                state.ticks_only.append(sim_id)
            tokens, used = None, 0
        else:
            t_in, t_out, complete, untimed, untokened = _add_messages(steps, messages, state)
            tokens, used = ((t_in, t_out) if complete else None), t_in + t_out
            state.untimed_steps += untimed
            state.untokened_steps += untokened
        if tokens is None:
            state.untokened_episodes += 1
        else:
            row["input_tokens"], row["output_tokens"] = tokens
            row["total_tokens"] = tokens[0] + tokens[1]
        cost = number(steps, sim.agent_cost, "agent_cost")
        if cost == 0.0 and used > 0:
            cost = None  # tau2 writes 0.0 for a model litellm cannot price: unknown, not free
            state.unpriced_episodes += 1
        row["cost_usd"] = cost
        for key, value in extra.items():
            if value is not None:
                row[f"meta.{key}"] = value if type(value) is str else json_text(value)
        self.session.add_episode(row, steps)
        self.count += 1
        if trial is not None:
            state.present.add((task_id, self.agent, trial))
            self.seen.add((task_id, trial))
        if reason != _INFRA:
            group = self.group
            if reward is not None:
                group.rewards.append(reward)
            tally = group.tasks[task_id]
            tally[0] += 1
            tally[1] += reward is not None and 1 - _SUCCESS_EPS <= reward <= 1 + _SUCCESS_EPS

    def missing(self, sim_id: str, entry: dict[str, Any]) -> None:
        """A simulation the index lists whose file is absent."""
        self.missing_index.append(sim_id)
        self.state.missing_files.append(f"{self.path.name}: simulations/{sim_id}.json (task {entry.get('task_id')!r}, "
                                        f"trial {entry.get('trial')!r})")

    def close(self) -> None:
        if self.count == 0 and not self.missing_index and not self.session.malformed:
            self.session.note(f"{self.path.name} holds no simulations")


def _time(steps: StepBuffer, value: Any, field: str) -> int | None:
    """Epoch microseconds of a timestamp with a UTC offset; None when absent or without one
    (tau2 writes local times without an offset: the instant is unknown, the text is kept)."""
    if value is None:
        return None
    if type(value) is not str:
        raise steps.error(f"{field} is not a string")
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise steps.error(f"{field} {value[:40]!r} is not an ISO 8601 timestamp") from None
    return None if t.tzinfo is None else to_micros(t)


_payload_text = json.JSONEncoder(sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


_quote = encode_basestring  # JSON string literal, UTF-8 kept (C)


def _payload(steps: StepBuffer, payload: Any, where: str) -> str | None:
    """JSON text of a payload, as `json_text` writes it; flat objects of text and integers
    (most messages' payloads) are written directly, which is several times faster."""
    if not payload:
        return None
    if type(payload) is dict:
        parts = []
        for key in sorted(payload):
            value = payload[key]
            kind = type(value)
            if kind is str and type(key) is str:
                parts.append(f"{_quote(key)}:{_quote(value)}")
            elif kind is int and type(key) is str:
                parts.append(f"{_quote(key)}:{value}")
            else:
                break
        else:
            return "{" + ",".join(parts) + "}"
    try:
        return _payload_text(payload)
    except ValueError as exc:
        raise steps.error(f"{where}: {exc}") from None


def _tokens(steps: StepBuffer, usage: Any, where: str) -> tuple[int | None, int | None]:
    if usage is None:
        return None, None
    if type(usage) is not dict:
        raise steps.error(f"{where}.usage is not an object")
    t_in, t_out = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not (type(t_in) is int and 0 <= t_in <= INT64_MAX):
        t_in = integer(steps, t_in, f"{where}.usage.prompt_tokens")
    if not (type(t_out) is int and 0 <= t_out <= INT64_MAX):
        t_out = integer(steps, t_out, f"{where}.usage.completion_tokens")
    return t_in, t_out


def _add_messages(steps: StepBuffer, messages: Any, state: _State) -> tuple[int, int, bool, int, int]:
    """Append the steps of a tau2 message list; returns the agent's (input, output) tokens over
    the assistant messages with usage, whether every assistant message had usage, and how many
    of the steps have no time and no usage.

    The hot loop of a large import: each step is gathered as a tuple, its payload and arguments
    as the source's dicts; they go to the StepBuffer as columns at the end (`_extend`, every
    payload and argument text encoded in one go) — the same steps and the same first error as
    `add` / `tool_call` / `tool_result` step by step.
    """
    if type(messages) is not list:
        raise steps.error("messages is not a list")
    tokens_in = tokens_out = 0
    complete = True
    # One tuple per step: kind, t, role, name, call_id, content, args, is_error, input_tokens,
    # output_tokens, cost_usd, payload; `calls`: the tool calls and results with a call id;
    # `args_at`: (step, message, call) of the tool calls with arguments.
    out: list[tuple[Any, ...]] = []
    calls: list[int] = []
    args_at: list[tuple[int, int, int]] = []
    try:
        for i, msg in enumerate(messages):
            if type(msg) is _Message:
                extra = None
            elif type(msg) is dict:  # a message with other keys (or the strict decoder's)
                msg, extra = _split(msg, _Message, _MSG_FIELDS)
            else:
                raise steps.error(f"messages[{i}] is not an object")
            role = msg.role
            if role == "tool":
                parts = msg.tool_messages
                if parts is not msgspec.UNSET:  # a MultiToolMessage
                    if type(parts) is not list:
                        raise steps.error(f"messages[{i}].tool_messages is not a list")
                    for j, part in enumerate(parts):
                        if type(part) is not dict:
                            raise steps.error(f"messages[{i}].tool_messages[{j}] is not an object")
                        _tool_result(steps, *_split(part, _Message, _MSG_FIELDS), f"messages[{i}].tool_messages[{j}]",
                                     out, calls)
                else:
                    _tool_result(steps, msg, extra, f"messages[{i}]", out, calls)
                continue
            if type(role) is not str:
                raise steps.error(f"messages[{i}] has no role")
            content = msg.content
            if content is not None and type(content) is not str:
                raise steps.error(f"messages[{i}].content is not text")
            usage = msg.usage
            if usage is None:
                t_in = t_out = None
            elif type(usage) is dict and type(t_in := usage.get("prompt_tokens")) is int and type(
                    t_out := usage.get("completion_tokens")) is int and 0 <= t_in <= INT64_MAX and 0 <= t_out <= INT64_MAX:
                pass  # the usual usage, checked inline (the hot loop)
            else:
                t_in, t_out = _tokens(steps, usage, f"messages[{i}]")
            if role == "assistant":
                if t_in is None or t_out is None:
                    complete = False
                else:
                    tokens_in += t_in
                    tokens_out += t_out
            cost = msg.cost
            if cost is not None:
                if type(cost) is not float or not math.isfinite(cost):
                    cost = number(steps, cost, f"messages[{i}].cost")
                if cost == 0.0 and (t_in or t_out):
                    cost = None
                    state.unpriced_steps += 1
            errors = msg.errors
            # the keys not in _MSG_KEYS but raw_data, whose finish_reason alone is kept
            payload = {} if extra is None else {k: v for k, v in extra.items() if v is not None}
            stamp = msg.timestamp
            if stamp is not None:
                payload["timestamp"] = stamp
            if msg.turn_idx is not None:
                payload["turn_idx"] = msg.turn_idx
            if msg.reasoning is not None:
                payload["reasoning"] = msg.reasoning
            if msg.requestor is not None:
                payload["requestor"] = msg.requestor
            if msg.tool_messages is not None and msg.tool_messages is not msgspec.UNSET:
                payload["tool_messages"] = msg.tool_messages
            raw = msg.raw_data
            if type(raw) is dict and raw.get("finish_reason") is not None:
                payload["finish_reason"] = raw["finish_reason"]
            if errors:
                payload["errors"] = errors
            if usage is not None and len(usage) > 2:
                payload["usage"] = usage
            is_error = True if errors else None
            t = None if stamp is None else _time(steps, stamp, f"messages[{i}].timestamp")
            body: dict[str, Any] | None = payload  # the message's payload, on its first step
            tool_calls = msg.tool_calls
            if content or not tool_calls:
                out.append(("message", t, role, None, None, content, None, is_error, t_in, t_out, cost, payload or None))
                body = t_in = t_out = cost = is_error = None
            if tool_calls:
                if type(tool_calls) is not list:
                    raise steps.error(f"messages[{i}].tool_calls is not a list")
                for j, call in enumerate(tool_calls):
                    if type(call) is not dict or type(call.get("name")) is not str:
                        raise steps.error(f"messages[{i}].tool_calls[{j}] is not a tool call with a name")
                    call_id = call.get("id") or None
                    if call_id is not None and type(call_id) is not str:
                        raise steps.error(f"messages[{i}].tool_calls[{j}].id is not a string")
                    extra = body or {}
                    if len(call) > 4 or call.get("requestor", role) != role:
                        extra = {**extra, **{k: v for k, v in call.items() if k not in ("id", "name", "arguments")
                                             and not (k == "requestor" and v == role)}}
                    if call_id is not None:
                        calls.append(len(out))
                    arguments = call.get("arguments") or None  # as _payload: empty arguments have no text
                    if arguments is not None:
                        args_at.append((len(out), i, j))
                    out.append(("tool_call", t, role, call["name"], call_id, None, arguments, is_error, t_in, t_out,
                                cost, extra or None))
                    body = t_in = t_out = cost = is_error = None
    except SourceFormatError:
        _extend(steps, out, calls, args_at)  # a bad step before the bad message fails first, as step by step
        raise
    _extend(steps, out, calls, args_at)
    return tokens_in, tokens_out, complete, sum(r[1] is None for r in out), sum(r[8] is None for r in out)


def _extend(steps: StepBuffer, out: list[tuple[Any, ...]], calls: list[int], args_at: list[tuple[int, int, int]]) -> None:
    """`steps.extend` of the step tuples `out` (as `StepBuffer.extend_rows`) with the payloads and
    the tool calls' arguments (at `args_at`) as JSON text, as `_payload` writes them: all encoded
    in one `fast_texts` call, one by one where that cannot be. One call, not one for the arguments
    and one in extend_rows, and no tuple rebuilt per tool call: the hot path of a large import.
    `finite`: this module's JsonStream refuses NaN and Infinity, so no value holds one."""
    if not out:
        return
    kind, t, role, name, call_id, content, args, is_error, t_in, t_out, cost, payload = map(list, zip(*out, strict=True))
    n = len(payload)
    texts = fast_texts(payload + [args[k] for k, _, _ in args_at], finite=True)
    if texts is not None:
        # a None payload stays None (fast_texts writes it 'null')
        payload = [p if p is None or text is None else text for p, text in zip(payload, texts[:n], strict=True)]
    for at, (k, i, j) in enumerate(args_at):
        encoded = None if texts is None else texts[n + at]
        args[k] = _payload(steps, args[k], f"messages[{i}].tool_calls[{j}]") if encoded is None else encoded
    none = [None] * n
    steps.extend((kind, t, role, none, name, call_id, content, args, is_error, t_in, t_out, cost, payload, none, none),
                 calls)


def _tool_result(steps: StepBuffer, msg: _Message, extra: dict[str, Any] | None, where: str,
                 out: list[tuple[Any, ...]], calls: list[int]) -> None:
    content = msg.content
    if content is not None and type(content) is not str:
        raise steps.error(f"{where}.content is not text")
    error = msg.error
    if error is not None and type(error) is not bool:
        raise steps.error(f"{where}.error is not true or false")
    payload = {} if extra is None else {k: v for k, v in extra.items() if v is not None}
    for key in _RESULT_PAYLOAD:  # every key but _RESULT_KEYS
        value = getattr(msg, key)
        if value is not None and value is not msgspec.UNSET:
            payload[key] = value
    call_id = msg.id or None
    stamp = msg.timestamp
    t = None if stamp is None else _time(steps, stamp, f"{where}.timestamp")
    if call_id is None:
        out.append(("observation", t, "tool", None, None, content, None, error, None, None, None, payload or None))
    elif type(call_id) is not str:
        raise steps.error(f"{where}.id is not a string")
    else:
        calls.append(len(out))
        out.append(("tool_result", t, "tool", None, call_id, content, None, error, None, None, None, payload or None))


# -- rules, plan, drops ------------------------------------------------------------------------------
def _declare_rules(session: ImportSession, groups: dict[tuple[str, str], _Group]) -> list[str]:
    on_status = {"completed": "score", "limit": "score", "timeout": "score", "error": "score",
                 "cancelled": "exclude", "skipped": "exclude"}
    aggregate = {"statistic": "mean", "group_by": ["agent", "task.domain"], "unit": "task_id",
                 "interval": {"method": "auto", "level": 0.95}}
    select = f"meta.termination_reason != '{_INFRA}'"
    reported = [{"group": {"agent": a, "task.domain": d}, "value": math.fsum(g.rewards) / len(g.rewards)}
                for (a, d), g in sorted(groups.items()) if g.rewards]
    ids = [session.add_rule(rule_document(
        rule="tau2_bench.avg_reward", kind="original",
        description="tau2-bench's avg_reward: the mean reward of the simulations that are not "
        "infrastructure errors (tau2 leaves those out as never run), per agent and domain; a simulation "
        "without a reward is left out, as pandas' mean skips it. Every other termination keeps its reward.",
        select=select, score="score.reward", on_status=on_status, on_missing="exclude", aggregate=aggregate,
        reported=reported,
    ))]
    evaluated = [g for g in groups.values() if g.tasks]
    if not evaluated:
        return ids
    max_k = min(min(g.num_trials, min(n for n, _ in g.tasks.values())) for g in evaluated)
    for k in range(1, max_k + 1):
        ids.append(session.add_rule(rule_document(
            rule=f"tau2_bench.pass_hat_{k}", kind="original",
            description=f"tau2-bench's pass^{k}: per task, C(c,{k})/C(n,{k}) over its trials (a trial succeeds "
            "when its reward is 1 within 1e-6), averaged over tasks; infrastructure errors left out.",
            select=select, score="score.reward >= 0.999999 and score.reward <= 1.000001",
            on_status=on_status, on_missing=0, reduce={"by": ["task_id"], "with": "pass_hat_k", "k": k},
            aggregate=aggregate,
            reported=[{"group": {"agent": a, "task.domain": d},
                       "value": pass_hat_k([c for _, c in g.tasks.values()], [n for n, _ in g.tasks.values()], k)}
                      for (a, d), g in sorted(groups.items()) if g.tasks],
        )))
    return ids


def _declare_plan(session: ImportSession, state: _State) -> None:
    agents = sorted({a for _, a, _ in state.planned})
    tasks = list(state.tasks)
    grid = {(t, a, r) for t in tasks for a in agents for r in range(state.trials)}
    absent = sorted(state.planned - state.present)
    if state.planned and grid == state.planned and not session.malformed:
        session.set_plan({"tasks": tasks, "agents": agents, "trials": state.trials,
                          "description": "every task of each results file x info.num_trials"})
    else:
        session.set_plan({"expected_episodes": len(state.planned | state.present) + len(session.malformed),
                          "description": "every task of each results file x info.num_trials, and any "
                          "simulation outside that grid"})
    if absent:
        shown = "; ".join(state.missing_files[:5])
        session.add_drop(
            target="episodes", action="unobserved", declaration="source_missing", loss_class="missing_episode",
            reason=f"{len(absent)} planned simulation(s) (task x trial of info.num_trials) are not in the source"
            + (f"; the index lists files that are absent: {shown}" if shown else ""),
            selector=_selector(absent) if len(absent) <= _SELECTOR_KEYS else None, count=len(absent),
            affects=state.rules,
        )


def _selector(keys: list[tuple[str, str, int]]) -> str:
    def q(s: str) -> str:
        return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return " or ".join(f"(task_id == {q(t)} and agent == {q(a)} and trial == {r})" for t, a, r in keys)


def _declare_missing(session: ImportSession, state: _State) -> None:
    if state.untimed_episodes:
        session.declare_missing("episodes.started_at", "tau2-bench writes start_time/end_time as local times "
                                "without a UTC offset, so the instant is unknown; the text is kept in "
                                "meta.start_time / meta.end_time", count=state.untimed_episodes)
        session.declare_missing("episodes.ended_at", "as episodes.started_at", count=state.untimed_episodes)
    if state.untimed_steps:
        session.declare_missing("steps.t", "tau2-bench message timestamps are local times without a UTC "
                                "offset (or absent); the text is kept in the step's payload.timestamp",
                                count=state.untimed_steps)
    if state.untokened_steps:
        reason = ("tau2-bench records usage and cost per model message: they are on the first step a message "
                  "produces; tool results and a message's further tool calls have none")
        session.declare_missing("steps.input_tokens", reason, count=state.untokened_steps)
        session.declare_missing("steps.output_tokens", reason, count=state.untokened_steps)
    if state.untokened_steps or state.unpriced_steps:
        session.declare_missing("steps.cost_usd", "as steps.input_tokens; and 0.0 on a model message that used "
                                "tokens (a model litellm cannot price) is unknown, not free",
                                count=state.untokened_steps + state.unpriced_steps)
    if state.untokened_episodes:
        for column in ("input_tokens", "output_tokens", "total_tokens"):
            session.declare_missing(f"episodes.{column}", "an assistant message of the simulation has no usage, "
                                    "so the agent's total is unknown", count=state.untokened_episodes)
    if state.unpriced_episodes:
        session.declare_missing("episodes.cost_usd", "tau2-bench wrote agent_cost 0.0 although the agent used "
                                "tokens: litellm had no price for the model, so the cost is unknown, not 0",
                                count=state.unpriced_episodes)
    if state.no_reward:
        session.declare_missing("episodes.score.reward", "the simulation has no reward_info", count=state.no_reward)
    if state.ticks_only:
        session.add_drop(target="steps", action="omitted", declaration="author_declared",
                         loss_class="unmapped_source_field",
                         reason=f"{len(state.ticks_only)} full-duplex (voice) simulation(s) store ticks, not "
                         "messages; this importer does not map ticks, so their steps are absent",
                         count=len(state.ticks_only))
