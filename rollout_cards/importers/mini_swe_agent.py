"""mini-swe-agent batch output directories to a rollout card.

A source is the directory `mini-extra swebench` writes: `preds.json` (instance id ->
{model_name_or_path, instance_id, model_patch}), `exit_statuses_<time>.yaml`
(`instances_by_exit_status`) and `<instance>/<instance>.traj.json` (trajectory format
mini-swe-agent-1.x); a single `.traj.json` file is accepted too. One episode per
instance the exit statuses or the predictions list (and per trajectory found),
`episode_id` = `<agent>/<instance>`.

mini-swe-agent 2.x writes the same trajectory format; with a Responses API model its
messages are response objects and `function_call_output` items (`_from_responses_api`).

Before 1.0 (up to 1.0.0.dev3, until "Share output file logic", 2025-07-11) mini-swe-agent
saved a trajectory as `agent.messages` alone: a bare JSON list of {role, content} messages,
with no exit status, submission, cost or version. Such a file imports as the messages' steps;
its exit status is the exit statuses file's when that lists the instance, else it is not known:
status `error` with error_type `unrecorded_exit_status`, declared in the drops and noted —
never one guessed from the messages.

| exit status                         | status    |
|-------------------------------------|-----------|
| Submitted                           | completed |
| Timeout, TimeExceeded               | timeout   |
| LimitsExceeded                      | limit     |
| anything else (an exception name)   | error     |

An instance the exit statuses list whose trajectory file is absent keeps its episode
(status from the exit statuses, no steps) and a `steps` drop names it; one the
predictions list with neither an exit status nor a trajectory has no known terminal
state: it is left out and declared (a planned episode, so plan coverage sees it).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from ..errors import SourceFormatError
from ..jsondoc import MISS, fast_decode
from ..model.card import Software
from .base import ImportRequest
from .json_stream import JsonStream, parse_json, read_document, reject_constant
from .rule_files import rule_document
from .session import ImportSession, read_source
from .source_dir import UNRECORDED, children, directory_name, exit_statuses, regular_file
from .source_values import INT64_MAX, integer, number, text
from .steps import StepBuffer, decoded_json_text, json_text

__all__ = ["MessageCounts", "MiniSweAgentImporter", "add_messages", "check_trajectory_format",
           "terminal_state"]

_MAX_FILE_CHARS = 512 * 1024 * 1024
_MAX_YAML_BYTES = 64 * 1024 * 1024
#: Trajectories up to this size are read whole (msgspec decodes up to 16 MiB at once, jsondoc).
_WHOLE_BYTES = 16 * 1024 * 1024
_SELECTOR_IDS = 50
_MSG_KEYS = frozenset(("role", "content", "tool_calls", "tool_call_id", "extra"))
#: Keys of a model response kept in the step payload (its `choices` repeat the message).
_RESPONSE_KEEP = ("id", "created", "model", "object", "system_fingerprint", "usage")


def terminal_state(exit_status: str) -> str:
    """The card status of a mini-swe-agent exit status (see the module table)."""
    if exit_status == "Submitted":
        return "completed"
    if exit_status in ("Timeout", "TimeExceeded"):
        return "timeout"
    if exit_status == "LimitsExceeded":
        return "limit"
    return "error"


class MiniSweAgentImporter:
    """mini-swe-agent output directories (preds.json, exit_statuses_*.yaml, <id>/<id>.traj.json)."""

    name = "mini-swe-agent"
    summary = "mini-swe-agent output directories: preds.json, exit_statuses_*.yaml and <instance>/<instance>.traj.json"
    options: dict[str, str] = {}
    directories = True

    def read(self, request: ImportRequest, session: ImportSession) -> None:
        """Import every source directory (or trajectory file)."""
        request.check_options(self.name, self.options)
        session.set_software("harness", Software(name="mini-swe-agent", url="https://github.com/SWE-agent/mini-swe-agent"))
        state = _State()
        for index, path in enumerate(request.sources):
            if path.is_dir():
                _import_dir(session, state, path, request.url(index), request.agent)
            else:
                data = _add_trajectory_source(session, path, request.url(index))
                with session.record():
                    _import_traj(session, state, path, data, request.agent, directory_name(path.parent), None, None,
                                 path.name)
        if session.episodes_written:
            state.finish(session)


class MessageCounts:
    """What `add_messages` counts over the trajectories it maps, for the importer's drops."""

    def __init__(self) -> None:
        #: model messages whose extra.response.choices were left out (they repeat the message)
        self.response_choices = 0
        #: steps with tokens whose cost 0.0 was read as unknown (a model the price table lacks)
        self.unpriced_steps = 0


class _State(MessageCounts):
    def __init__(self) -> None:
        super().__init__()
        self.planned: list[tuple[str, str]] = []  # (instance, agent)
        self.listed_status: Counter[tuple[str, str]] = Counter()  # (agent, exit status) from the yaml
        self.no_traj: list[tuple[str, str]] = []
        self.unknown: list[tuple[str, str]] = []
        self.untimed_steps = 0
        self.untokened_steps = 0
        self.untokened_episodes = 0
        self.versions: set[str] = set()
        self.agents: set[str] = set()
        self.described: set[tuple[tuple[str, str | None], ...]] = set()  # what _add_agent gave add_agent
        self.bare: list[tuple[str, str]] = []  # (instance, agent) of pre-1.0 trajectories (bare message lists)
        self.unrecorded: list[tuple[str, str]] = []  # those of them no exit statuses file lists

    def finish(self, session: ImportSession) -> None:
        rules = _declare_rule(session, self)
        tasks = sorted({i for i, _ in self.planned})
        agents = sorted({a for _, a in self.planned})
        if len(self.planned) == len(tasks) * len(agents) and not session.malformed:
            session.set_plan({"tasks": tasks, "agents": agents, "trials": 1,
                              "description": "every instance the exit statuses, predictions or trajectories name"})
        else:
            session.set_plan({"expected_episodes": len(self.planned) + len(session.malformed),
                              "description": "every instance the exit statuses, predictions or trajectories name"})
        if self.unknown:
            session.add_drop(
                target="episodes", action="unobserved", declaration="source_missing", loss_class="missing_outcome",
                reason=f"{len(self.unknown)} instance(s) are in preds.json but have neither an exit status nor a "
                "trajectory, so how they ended is unknown; they are left out: " + _shown(self.unknown),
                selector=_selector(self.unknown), count=len(self.unknown), affects=rules,
            )
        if self.no_traj:
            session.add_drop(
                target="steps", action="unobserved", declaration="source_missing", loss_class="missing_trajectory",
                reason=f"{len(self.no_traj)} instance(s) the exit statuses list have no trajectory file "
                "(<instance>/<instance>.traj.json); their episodes have no steps: " + _shown(self.no_traj),
                selector=(f"episode_id in [{', '.join(_q(f'{a}/{i}') for i, a in self.no_traj)}]"
                          if len(self.no_traj) <= _SELECTOR_IDS else None),
                count=len(self.no_traj),
            )
        if self.bare:
            self._bare(session)
        n_ep = session.episodes_written
        for column in ("started_at", "ended_at"):
            session.declare_missing(f"episodes.{column}", "mini-swe-agent records when each message was made, "
                                    "not when the instance started or ended (the steps carry the message times)",
                                    count=n_ep)
        bare = "; a pre-1.0 trajectory (a bare message list) records neither for any message" if self.bare else ""
        if self.untimed_steps:
            session.declare_missing("steps.t", "messages without extra.timestamp (the system and task prompts)"
                                    + bare, count=self.untimed_steps)
        if self.untokened_steps:
            why = ("usage and cost are recorded on model responses only: they are on the first step of each "
                   "assistant message; prompts, observations and further tool calls have none" + bare)
            for column in ("input_tokens", "output_tokens"):
                session.declare_missing(f"steps.{column}", why, count=self.untokened_steps)
            session.declare_missing("steps.cost_usd", why, count=self.untokened_steps + self.unpriced_steps)
        if self.untokened_episodes:
            for column in ("input_tokens", "output_tokens", "total_tokens"):
                session.declare_missing(f"episodes.{column}", "an assistant message has no response usage (or "
                                        "there is no trajectory), so the agent's total is unknown",
                                        count=self.untokened_episodes)
        if self.response_choices:
            session.add_drop(target="steps.payload", action="omitted", declaration="author_declared",
                             loss_class="duplicate_source_field",
                             reason="extra.response.choices of each model message repeats the message's content, "
                             "tool calls and reasoning, which are mapped; the rest of the response (id, model, "
                             "usage with its details, finish reason) is kept in the payload",
                             count=self.response_choices)
        if self.versions:
            session.set_software("harness", Software(name="mini-swe-agent", version=" | ".join(sorted(self.versions)),
                                                     url="https://github.com/SWE-agent/mini-swe-agent"))


    def _bare(self, session: ImportSession) -> None:
        """Declare what a pre-1.0 trajectory (a bare message list) does not record."""
        n = len(self.bare)
        session.note(f"{n} trajectory file(s) are bare message lists, as mini-swe-agent saved them before 1.0 (up "
                     "to 1.0.0.dev3): they hold the messages only — no info (exit status, submission, cost, API "
                     "calls, version); the exit status is the exit statuses file's where it lists the instance"
                     + (f"; {len(self.unrecorded)} are listed nowhere, so how they ended is unknown: status error, "
                        f"error_type {UNRECORDED}: " + _shown(self.unrecorded) if self.unrecorded else ""))
        for column in ("cost_usd", "meta.api_calls"):
            session.declare_missing(f"episodes.{column}", "a pre-1.0 trajectory (a bare message list) has no "
                                    "info.model_stats: " + _shown(self.bare), count=n)
        if self.unrecorded:
            session.add_drop(
                target="episodes.status", action="unobserved", declaration="source_missing",
                loss_class="missing_outcome",
                reason=f"{len(self.unrecorded)} pre-1.0 trajectory file(s) (bare message lists, which hold no exit "
                "status) are of instances no exit_statuses file lists, so how the run ended is not recorded; "
                f"they are kept with status error and error_type {UNRECORDED} (not a status guessed from the "
                "messages): " + _shown(self.unrecorded),
                selector=f"error_type == {_q(UNRECORDED)}", count=len(self.unrecorded),
            )


def _shown(keys: list[tuple[str, str]]) -> str:
    return ", ".join(i for i, _ in keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")


def _q(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _selector(keys: list[tuple[str, str]]) -> str | None:
    if len(keys) > _SELECTOR_IDS:
        return None
    by_agent: dict[str, list[str]] = {}
    for iid, agent in keys:
        by_agent.setdefault(agent, []).append(iid)
    return " or ".join(f"(agent == {_q(a)} and task_id in [{', '.join(_q(i) for i in ids)}])"
                       for a, ids in sorted(by_agent.items()))


# -- the output directory -----------------------------------------------------------------------------
def _import_dir(session: ImportSession, state: _State, root: Path, url: str | None, agent: str | None) -> None:
    entries = list(children(root))
    files = {name: p for name, p, is_dir in entries if not is_dir}
    dirs = {name: p for name, p, is_dir in entries if is_dir}
    statuses: dict[str, str] = {}
    yamls = sorted(n for n in files if n.startswith("exit_statuses_") and n.endswith(".yaml"))
    for name in yamls:  # several runs into one dir: the later file (by name = time) wins
        session.add_source(files[name], "mini-swe-agent-exit-statuses", url)
        statuses.update(exit_statuses(files[name], max_bytes=_MAX_YAML_BYTES))
    if len(yamls) > 1:
        session.note(f"{directory_name(root)}: {len(yamls)} exit_statuses files; an instance listed in several takes the "
                     "status of the latest file")
    preds: _Preds | None = None
    if "preds.json" in files:
        session.add_source(files["preds.json"], "mini-swe-agent-preds", url)
        preds = _Preds(session, files["preds.json"])
    try:
        _import_instances(session, state, root, files, dirs, statuses, preds, agent)
    finally:
        if preds is not None:
            preds.close()


def _import_instances(session: ImportSession, state: _State, root: Path, files: dict[str, Path],
                      dirs: dict[str, Path], statuses: dict[str, str], preds: _Preds | None, agent: str | None) -> None:
    trajs: dict[str, Path] = {}
    for name, sub in dirs.items():
        candidate = sub / f"{name}.traj.json"
        if candidate.exists() or candidate.is_symlink():
            trajs[name] = regular_file(candidate, what="trajectory")
    for name, p in files.items():  # a flat layout (<id>.traj.json beside preds.json) is read too
        if name.endswith(".traj.json") and name[: -len(".traj.json")] not in trajs:
            trajs[name[: -len(".traj.json")]] = p
    listed = preds.where if preds is not None else {}
    if not (statuses or listed or trajs):
        raise SourceFormatError("is not a mini-swe-agent output directory (no preds.json, exit_statuses_*.yaml "
                                "or <instance>/<instance>.traj.json)", file=str(root))
    models = sorted(set(preds.models.values())) if preds is not None else []
    default_agent = agent or (models[0] if len(models) == 1 else None)
    # With no model named anywhere the run is named after its directory (that of `.` too).
    run_name = directory_name(root)
    planned_here: list[tuple[str, str]] = []
    for iid in sorted(set(statuses) | set(listed) | set(trajs)):
        pred = preds.get(iid) if preds is not None else None
        who = default_agent or (pred.get("model_name_or_path") if pred else None)
        if iid in trajs:
            path = trajs[iid]
            data = _add_trajectory_source(session, path, None)
            with session.record():
                got = _import_traj(session, state, path, data, who, run_name, statuses.get(iid), pred,
                                   f"{run_name}/{iid}")
                planned_here.append((iid, got))
            continue
        who = who or run_name
        planned_here.append((iid, who))
        if iid not in statuses:
            state.unknown.append((iid, who))
            continue
        with session.record():
            _listed_only(session, state, root, iid, who, statuses[iid], pred)
    state.planned.extend(planned_here)
    for iid, who in planned_here:
        if iid in statuses:
            state.listed_status[(who, statuses[iid])] += 1


class _Preds:
    """preds.json, streamed: each instance's model name and the byte range of its prediction in the
    file, read again (`get`) when the instance's episode is written, so a large run's patches (~19 MB
    at 20,000 instances) are not held through the import. A file changed in between is seen by the
    session's check of every source's version when the import finishes."""

    def __init__(self, session: ImportSession, path: Path):
        self.path = path
        self.where: dict[str, tuple[int, int]] = {}
        self.models: dict[str, str] = {}
        self._fh = open(path, "rb")  # noqa: SIM115 - closed by close(), after the directory is imported
        try:
            self._read(session)
        except BaseException:
            self._fh.close()
            raise

    def _read(self, session: ImportSession) -> None:
        path = self.path
        stream = JsonStream(self._fh, str(path), max_value_chars=_MAX_FILE_CHARS)
        stream.record = "document"
        if stream.peek() != "{":
            stream.read_value()  # a malformed document fails as malformed
            stream.end()
            raise SourceFormatError("is not a JSON object keyed by instance id", file=str(path))
        for iid in stream.object_keys():
            # A repeated key: the last one's value, at the first one's place (as a JSON decoder keeps it).
            self.where.pop(iid, None)
            self.models.pop(iid, None)
            stream.record = iid
            stream.peek()  # past the whitespace before the value
            start = stream.byte_offset()
            pred = stream.read_value()
            end = stream.byte_offset()
            with session.record():
                _check_pred(path, iid, pred)
                self.where[iid] = (start, end)
                if isinstance(pred.get("model_name_or_path"), str):
                    self.models[iid] = pred["model_name_or_path"]
        stream.record = None
        stream.end()
        self._fh.seek(0)

    def get(self, iid: str) -> dict[str, Any] | None:
        """The prediction of `iid` (None when preds.json has none)."""
        at = self.where.get(iid)
        if at is None:
            return None
        self._fh.seek(at[0])
        return parse_json(self._fh.read(at[1] - at[0]), str(self.path), iid)

    def close(self) -> None:
        self._fh.close()


def _check_pred(path: Path, iid: str, pred: Any) -> None:
    if not isinstance(pred, dict):
        raise SourceFormatError("is not a prediction object", file=str(path), record=iid)
    patch = pred.get("model_patch")
    if patch is not None and not isinstance(patch, str):
        raise SourceFormatError("model_patch is not text", file=str(path), record=iid)
    if pred.get("instance_id", iid) != iid:
        raise SourceFormatError(f"instance_id {pred.get('instance_id')!r} differs from its key",
                                file=str(path), record=iid)


def _listed_only(session: ImportSession, state: _State, root: Path, iid: str, agent: str, exit_status: str,
                 pred: dict[str, Any] | None) -> None:
    steps = StepBuffer(f"{agent}/{iid}", file=str(root), record=iid)
    status = terminal_state(exit_status)
    row = {"episode_id": steps.episode_id, "task_id": iid, "agent": agent, "trial": 0, "status": status,
           "meta.exit_status": exit_status, "meta.listed_exit_status": exit_status, "meta.in_exit_statuses": True,
           "error_message": None if status == "completed" else f"exit status {exit_status} (no trajectory file)",
           "error_type": exit_status if status == "error" else None}
    _patch(session, row, pred, None)
    session.add_episode(row, steps)
    state.no_traj.append((iid, agent))
    state.untokened_episodes += 1
    state.agents.add(agent)
    _add_agent(session, state, {"name": agent})


def _patch(session: ImportSession, row: dict[str, Any], pred: dict[str, Any] | None, submission: str | None) -> None:
    patch = pred.get("model_patch") if pred else None
    text_ = patch if patch is not None else submission
    if pred is not None and submission is not None and patch is not None and patch != submission:
        row["meta.submission_differs_from_preds"] = True
    if text_:
        row["meta.patch_artifact"] = session.add_artifact(text_.encode("utf-8"))
    row["meta.patch_empty"] = not text_ if text_ is not None else None


# -- one trajectory ------------------------------------------------------------------------------------
def _add_trajectory_source(session: ImportSession, path: Path, url: str | None) -> bytes | None:
    """Record a trajectory in provenance; its bytes when it is read once to be hashed and decoded
    (None for a file over `_WHOLE_BYTES`: hashed and decoded as streams)."""
    got = read_source(path, _WHOLE_BYTES)
    data, version = got if got is not None else (None, None)
    session.add_source(path, "mini-swe-agent", url, data=data, version=version)
    return data


def _import_traj(session: ImportSession, state: _State, path: Path, data: bytes | None, agent: str | None,
                 fallback: str, listed: str | None, pred: dict[str, Any] | None, label: str) -> str:
    """Map one trajectory; the agent is `agent`, else the trajectory's model, else `fallback`
    (the run's directory name). Returns the agent."""
    doc = read_document(path, max_value_chars=_MAX_FILE_CHARS, data=data)
    probe = StepBuffer("", file=str(path), record=label)
    bare = type(doc) is list  # before 1.0: the messages alone (module docstring)
    if bare:
        doc = {"info": {}, "messages": doc}
    elif not isinstance(doc, dict) or not isinstance(doc.get("info"), dict) or not isinstance(doc.get("messages"), list):
        raise probe.error("is not a mini-swe-agent trajectory (an object with info and messages, or before 1.0 a "
                          "list of messages)")
    info = doc["info"]
    fmt = check_trajectory_format(probe, doc)
    iid = text(probe, doc.get("instance_id"), "instance_id") or path.name.removesuffix(".traj.json")
    config = info.get("config")
    model_cfg = config.get("model") if isinstance(config, dict) and isinstance(config.get("model"), dict) else {}
    model = model_cfg.get("model_name") if isinstance(model_cfg.get("model_name"), str) else None
    agent = agent or model or fallback
    steps = StepBuffer(f"{agent}/{iid}", file=str(path), record=iid)
    exit_status = text(steps, info.get("exit_status"), "info.exit_status") or listed
    if not exit_status and not bare:
        raise steps.error("info.exit_status is empty and no exit_statuses file lists the instance")
    if listed is not None and listed != exit_status:
        session.note(f"{label}: the trajectory's exit status {exit_status} differs from the exit statuses "
                     f"file's {listed}; the trajectory's is used")
    status = terminal_state(exit_status) if exit_status else "error"
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    tokens = add_messages(steps, doc["messages"], state)
    state.untimed_steps += steps.nulls("t")
    state.untokened_steps += steps.nulls("input_tokens")
    row: dict[str, Any] = {
        "episode_id": steps.episode_id, "task_id": iid, "agent": agent, "trial": 0, "status": status,
        "meta.exit_status": exit_status, "meta.trajectory_format": fmt,
        "meta.listed_exit_status": listed, "meta.in_exit_statuses": listed is not None,
        "cost_usd": number(steps, stats.get("instance_cost"), "info.model_stats.instance_cost"),
        "meta.api_calls": integer(steps, stats.get("api_calls"), "info.model_stats.api_calls"),
    }
    if tokens is None:
        state.untokened_episodes += 1
    else:
        row["input_tokens"], row["output_tokens"] = tokens
        row["total_tokens"] = tokens[0] + tokens[1]
    if bare:
        row["meta.trajectory_shape"] = "message-list"
        state.bare.append((iid, agent))
    if not exit_status:  # a bare message list no exit statuses file lists
        row["error_message"] = ("how the run ended is not recorded: the trajectory is a bare message list "
                                "(mini-swe-agent before 1.0) and no exit_statuses file lists the instance")
        row["error_type"] = UNRECORDED
        state.unrecorded.append((iid, agent))
    elif status != "completed":
        message = text(steps, info.get("exception_str"), "info.exception_str")
        row["error_message"] = message or f"exit status {exit_status}"
        row["error_traceback"] = text(steps, info.get("traceback"), "info.traceback")
        if status == "error":
            row["error_type"] = exit_status
    submission = text(steps, info.get("submission"), "info.submission")
    _patch(session, row, pred, submission)
    if config is not None:
        row["meta.config_artifact"] = session.add_artifact(decoded_json_text(config).encode("utf-8"))
    version = info.get("mini_version")
    if isinstance(version, str):
        state.versions.add(version)
        row["meta.mini_version"] = version
    for key, value in stats.items():
        if key not in ("instance_cost", "api_calls") and value is not None:
            row[f"meta.model_stats.{key}"] = json_text(value)
    for key, value in info.items():
        if key not in ("model_stats", "config", "mini_version", "exit_status", "submission", "exception_str",
                       "traceback") and value is not None:
            row[f"meta.info.{key}"] = value if isinstance(value, str) else json_text(value)
    for key, value in doc.items():
        if key not in ("info", "messages", "trajectory_format", "instance_id") and value is not None:
            row[f"meta.{key}"] = value if isinstance(value, str) else json_text(value)
    session.add_episode(row, steps)
    _add_agent(session, state, {"name": agent, "model": model})
    state.agents.add(agent)
    return agent


def _add_agent(session: ImportSession, state: _State, info: dict[str, str | None]) -> None:
    """`session.add_agent(info)` once per distinct `info` (a repeat changes nothing: the first
    description of a name wins), not once per episode."""
    key = tuple(info.items())
    if key not in state.described:
        session.add_agent(info)
        state.described.add(key)


def _time(steps: StepBuffer, value: Any, i: int) -> int:
    """Epoch microseconds of messages[i]'s epoch-seconds timestamp (mini-swe-agent's time.time())."""
    if type(value) not in (int, float) or not math.isfinite(value) or not 0 <= value < 32503680000:
        raise steps.error(f"messages[{i}].extra.timestamp {value!r} is not a time in epoch seconds")
    return round(value * 1_000_000)


def check_trajectory_format(steps: StepBuffer, doc: dict[str, Any]) -> str | None:
    """A trajectory's `trajectory_format` (None when absent); any but mini-swe-agent-1.x is an error."""
    fmt = doc.get("trajectory_format")
    if fmt is not None and (not isinstance(fmt, str) or not fmt.startswith("mini-swe-agent-1")):
        raise steps.error(f"trajectory_format {fmt!r} is not mini-swe-agent-1.x")
    return fmt


def add_messages(steps: StepBuffer, messages: list[Any], counts: MessageCounts) -> tuple[int, int] | None:
    """Map a trajectory's `messages` to steps (table in docs/importers.md, mini-swe-agent).

    Tool calls link to their results by id; usage and cost go on the first step of each model
    message. Returns (input, output) tokens summed over the assistant messages, or None when
    one of them lacks usage (or there is none): the run's total is then unknown.

    The steps are gathered as tuples and handed to the StepBuffer as columns
    (`StepBuffer.extend_rows`, payloads encoded in one go, nulls and all): the same steps, and the same first
    error, as adding them one by one.
    """
    tokens_in = tokens_out = 0
    complete = True
    answered = False  # no assistant message at all (a first call that failed): the usage is unknown
    # One tuple per step: kind, t, role, name, call_id, content, args, is_error, input_tokens,
    # output_tokens, cost_usd, payload (a dict, encoded at the end); `calls`: the tool calls
    # and results, with the source's call ids.
    out: list[tuple[Any, ...]] = []
    put = out.append
    calls: list[int] = []
    try:
        for i, msg in enumerate(messages):
            if type(msg) is not dict:
                raise steps.error(f"messages[{i}] is not an object")
            role = msg.get("role")
            if role is None and (msg.get("object") == "response" or msg.get("type") == "function_call_output"):
                msg = _from_responses_api(steps, msg, i)
                role = msg["role"]
            if type(role) is not str:
                raise steps.error(f"messages[{i}] has no role")
            content = msg.get("content")
            parts = None
            if isinstance(content, list):  # content parts
                parts = content
                content = "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))
            elif content is not None and type(content) is not str:
                raise steps.error(f"messages[{i}].content is not text")
            extra = msg.get("extra")
            if extra is None:
                extra = {}
            elif type(extra) is dict:
                extra = extra.copy()
            else:
                raise steps.error(f"messages[{i}].extra is not an object")
            t = extra.pop("timestamp", None)
            if t is not None:
                t = round(t * 1_000_000) if type(t) is float and 0 <= t < 32503680000 else _time(steps, t, i)
            payload = {k: v for k, v in msg.items() if k not in _MSG_KEYS and v is not None}
            if parts is not None:
                payload["content"] = parts
            if role == "exit":
                status = terminal_state(str(extra.get("exit_status", "")))
                kind = {"completed": "state", "limit": "limit"}.get(status, "error")
                extra.pop("submission", None)  # the episode's patch artifact
                extra.pop("traceback", None)  # the episode's error_traceback
                extra.pop("exception_str", None)  # the episode's error_message
                put((kind, t, "exit", str(extra.pop("exit_status", "")) or None, None, content, None, None, None, None,
                     None, {**payload, **extra} or None))
                continue
            if role == "tool" and msg.get("tool_call_id") is not None:
                call_id = msg["tool_call_id"]
                if type(call_id) is not str:
                    raise steps.error(f"messages[{i}].tool_call_id is not a string")
                raw = extra.get("raw_output")
                if isinstance(raw, str) and content is not None and raw in content:
                    del extra["raw_output"]  # already in the content, verbatim
                returncode = extra.get("returncode")
                is_error = bool(extra.get("exception_info")) or (type(returncode) is int and returncode != 0)
                calls.append(len(out))
                put(("tool_result", t, "tool", None, call_id, content, None, is_error, None, None, None,
                     {**payload, **extra} or None))
                continue
            response = extra.pop("response", None)
            t_in = t_out = None
            if isinstance(response, dict):
                usage = response.get("usage")
                if isinstance(usage, dict):
                    # the Responses API names them input_tokens / output_tokens
                    k_in, k_out = (("input_tokens", "output_tokens") if "prompt_tokens" not in usage
                                   and "input_tokens" in usage else ("prompt_tokens", "completion_tokens"))
                    t_in, t_out = usage.get(k_in), usage.get(k_out)
                    if not (type(t_in) is int and 0 <= t_in <= INT64_MAX):
                        t_in = integer(steps, t_in, f"messages[{i}].extra.response.usage.{k_in}")
                    if not (type(t_out) is int and 0 <= t_out <= INT64_MAX):
                        t_out = integer(steps, t_out, f"messages[{i}].extra.response.usage.{k_out}")
                if "choices" in response:
                    counts.response_choices += 1
                    choices = response.get("choices")
                    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
                        extra["finish_reason"] = choices[0].get("finish_reason")
                if response.get("object") == "response":  # its output is mapped (_from_responses_api): keep the rest
                    extra["response"] = response
                else:
                    extra["response"] = {k: response[k] for k in _RESPONSE_KEEP if k in response}
            elif response is not None:
                extra["response"] = response
            cost = extra.pop("cost", None)
            if cost is not None and not (type(cost) is float and math.isfinite(cost)):
                cost = number(steps, cost, f"messages[{i}].extra.cost")
            if cost == 0.0 and (t_in or t_out):
                cost = None
                counts.unpriced_steps += 1
            if role == "assistant":
                answered = True
                if t_in is None or t_out is None:
                    complete = False
                else:
                    tokens_in += t_in
                    tokens_out += t_out
            reasoning = payload.get("provider_specific_fields")
            if isinstance(reasoning, dict) and reasoning.get("reasoning_content") == payload.get("reasoning_content"):
                reasoning = {k: v for k, v in reasoning.items() if k != "reasoning_content"}
                if reasoning:
                    payload["provider_specific_fields"] = reasoning
                else:
                    del payload["provider_specific_fields"]
            actions = extra.get("actions")
            tool_calls = msg.get("tool_calls")
            if isinstance(actions, list) and tool_calls and all(
                    isinstance(a, dict) and a.keys() <= {"command", "tool_call_id"} for a in actions):
                del extra["actions"]  # the parsed commands of the tool calls below, with their ids
            body = {**payload, **extra} or None
            if content or not tool_calls:
                put(("message", t, role, None, None, content, None, None, t_in, t_out, cost, body))
                body = t_in = t_out = cost = None
            if tool_calls:
                if type(tool_calls) is not list:
                    raise steps.error(f"messages[{i}].tool_calls is not a list")
                for j, call in enumerate(tool_calls):
                    fn = call.get("function") if type(call) is dict else None
                    if type(fn) is not dict or type(fn.get("name")) is not str or type(call.get("id")) is not str:
                        raise steps.error(f"messages[{i}].tool_calls[{j}] is not a tool call with a function name and an id")
                    arguments = fn.get("arguments")
                    rest = {k: v for k, v in call.items() if k not in ("id", "function", "type", "index")}
                    if type(arguments) is str:
                        args = arguments
                        if not _valid_json(arguments):
                            args, rest["arguments"] = None, arguments
                    else:
                        args = None if arguments is None else json_text(arguments)
                    if body:
                        rest = {**body, **rest}
                    calls.append(len(out))
                    put(("tool_call", t, role, fn["name"], call["id"], None, args, None, t_in, t_out, cost, rest or None))
                    body = t_in = t_out = cost = None
    except SourceFormatError:
        steps.extend_rows(out, calls, finite=True)  # a bad step before the bad message fails first, as step by step
        raise
    steps.extend_rows(out, calls, finite=True)  # read_document refuses NaN and Infinity
    return (tokens_in, tokens_out) if complete and answered else None


def _from_responses_api(steps: StepBuffer, msg: dict[str, Any], i: int) -> dict[str, Any]:
    """A message of a Responses API model (mini-swe-agent 2.x `litellm_response`,
    `openrouter_response`, `portkey_response`) in the chat-completions shape `add_messages` maps.

    The model's message is the response object itself — no `role`; its `output` items hold the
    text (`message` items' `output_text` parts) and the calls (`function_call` items: `call_id`,
    `name`, `arguments`). A tool result is `{type: function_call_output, call_id, output}`.
    Nothing is dropped: the response without `output` goes to extra.response (usage read from
    there), the output items other than calls (messages, reasoning) stay in the payload's
    `output`, and a call item's own id and status stay on its tool_call step."""
    extra = msg.get("extra")
    if extra is not None and type(extra) is not dict:
        raise steps.error(f"messages[{i}].extra is not an object")
    if msg.get("type") == "function_call_output":
        rest = {k: v for k, v in msg.items() if k not in ("call_id", "output")}
        return {**rest, "role": "tool", "tool_call_id": msg.get("call_id"), "content": msg.get("output")}
    output = msg.get("output")
    if type(output) is not list:
        raise steps.error(f"messages[{i}] is a Responses API response whose output is not a list")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    kept: list[Any] = []
    for j, item in enumerate(output):
        kind = item.get("type") if type(item) is dict else None
        if kind == "function_call":
            if type(item.get("call_id")) is not str or type(item.get("name")) is not str:
                raise steps.error(f"messages[{i}].output[{j}] is a function_call without a call_id and a name")
            own = {("item_id" if k == "id" else k): v for k, v in item.items()
                   if k not in ("type", "call_id", "name", "arguments")}
            calls.append({**own, "id": item["call_id"],
                          "function": {"name": item["name"], "arguments": item.get("arguments")}})
            continue
        if kind == "message" and isinstance(item.get("content"), list):
            texts.extend(p["text"] for p in item["content"]
                         if type(p) is dict and p.get("type") == "output_text" and isinstance(p.get("text"), str))
        kept.append(item)
    response = {k: v for k, v in msg.items() if k not in ("output", "extra")}
    converted: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None,
                                 "extra": {**(extra or {}), "response": response}}
    if calls:
        converted["tool_calls"] = calls
    if kept:
        converted["output"] = kept
    return converted


def _valid_json(text_: str) -> bool:
    if fast_decode(text_) is not MISS:  # what the strict decoder reads, json.loads reads too
        return True
    try:
        json.loads(text_, parse_constant=reject_constant)
    except (ValueError, RecursionError):
        return False
    return True


def _declare_rule(session: ImportSession, state: _State) -> list[str]:
    """mini-swe-agent's own figure: the share of instances that ended Submitted (its progress
    display and exit-status report); reported from the exit statuses files' counts."""
    totals: Counter[str] = Counter()
    submitted: Counter[str] = Counter()
    for (agent, status), n in state.listed_status.items():
        totals[agent] += n
        submitted[agent] += n if status == "Submitted" else 0
    reported = [{"group": {"agent": a}, "value": submitted[a] / totals[a]} for a in sorted(totals) if totals[a]]
    if not reported:
        return []
    return [session.add_rule(rule_document(
        rule="mini_swe_agent.submitted_rate", kind="diagnostic",
        description="The share of instances whose run ended with exit status Submitted (a patch was handed in), "
        "over every instance the exit statuses list — what mini-swe-agent's exit-status report counts. It is not "
        "a resolved rate: grade the patches with the SWE-bench harness for that.",
        select="meta.in_exit_statuses",
        score="coalesce(meta.listed_exit_status, meta.exit_status) == 'Submitted'",
        on_status={s: "score" for s in ("completed", "error", "timeout", "limit", "cancelled", "skipped")},
        on_missing=0,
        aggregate={"statistic": "mean", "group_by": ["agent"], "unit": "task_id",
                   "interval": {"method": "auto", "level": 0.95}},
        reported=reported,
    ))]

