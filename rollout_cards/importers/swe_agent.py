"""SWE-agent trajectories (`.traj`, 0.x and 1.x) to a rollout card.

Sources: `.traj` files, predictions files (`all_preds.jsonl`, `preds.json`), or run
directories holding them (`<instance>/<instance>.traj` or `<instance>.traj`, and the
predictions at the top). One episode per trajectory, `task_id` = the file stem (the
instance id), `episode_id` = `<agent>/<instance>`. Both shapes are read: 0.x
(`environment` "swe_main", `history` of plain chat messages with `thought`/`action`,
demonstrations marked `is_demo`) and 1.x (`history` with `message_type`, OpenAI
`tool_calls` and `tool_call_ids`, `replay_config`).

| info.exit_status                                              | status    |
|---------------------------------------------------------------|-----------|
| submitted; exit_command, exit_forfeit (the agent ended the run itself, also autosubmitted) | completed |
| exit_cost, exit_context, exit_format (also "submitted (exit_cost)" …: autosubmitted at the limit) | limit |
| exit_total_execution_time, exit_command_timeout (and autosubmitted) | timeout |
| skipped                                                       | skipped   |
| exit_error, exit_api, exit_environment_error, any other value (an exception) | error |
| null / absent, early_exit (a trajectory saved mid-run: the run stopped before it ended) | error (`incomplete`) |

SWE-agent publishes no score of its own (grading is the SWE-bench harness's), so no
rule is declared; the predictions (`all_preds.jsonl`, `preds.json`, per-instance
`<instance>.pred`) and `run_batch_exit_statuses.yaml` give the plan (an instance predicted
or listed without a trajectory is a declared drop).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import SourceFormatError
from ..model.card import Software
from .base import ImportRequest
from .json_stream import iter_records, read_document
from .openai_chat import ChatMapping, add_chat_messages
from .session import ImportSession
from .source_dir import UNRECORDED, children, directory_name, exit_statuses, regular_file
from .source_values import integer, number, text
from .steps import StepBuffer, json_text

__all__ = ["SweAgentImporter", "add_history", "read_trajectory", "run_tokens", "terminal_state"]

_MAX_FILE_CHARS = 512 * 1024 * 1024
_LIMITS = ("exit_cost", "exit_context", "exit_format")
_AGENT_ENDED = ("submitted", "exit_command", "exit_forfeit")  # the agent stopped the run itself
_INCOMPLETE = "early_exit"  # 0.x: a run that stopped before it ended (SWE-agent redoes such instances)
_STATUS_YAML = "run_batch_exit_statuses.yaml"
_MAX_YAML_BYTES = 256 * 1024 * 1024
_TIMEOUTS = ("exit_total_execution_time", "exit_command_timeout")
_AUTOSUBMIT = re.compile(r"^(?:submitted|skipped) \((\w+)\)$")
_PRED_NAMES = ("all_preds.jsonl", "preds.json")
_SELECTOR_IDS = 50
_PLAN = "every instance with a trajectory, a prediction or a line in run_batch_exit_statuses.yaml"


def terminal_state(exit_status: str | None) -> str:
    """The card status of a SWE-agent `info.exit_status` (see the module table); None is a trajectory
    saved mid-run (SWE-agent writes it after every step, the exit status only at the end)."""
    if exit_status is None or exit_status == _INCOMPLETE:
        return "error"
    if exit_status.startswith("skipped"):  # run_batch: "skipped (<the earlier run's exit status>)"
        return "skipped"
    match = _AUTOSUBMIT.match(exit_status)
    reason = match.group(1) if match else exit_status
    if reason in _AGENT_ENDED:
        return "completed"
    if reason in _LIMITS:
        return "limit"
    if reason in _TIMEOUTS:
        return "timeout"
    if reason == "skipped":
        return "skipped"
    return "error"


class SweAgentImporter:
    """SWE-agent `.traj` files (0.x and 1.x), with the run's predictions."""

    name = "swe-agent"
    summary = "SWE-agent .traj trajectories (0.x history/trajectory and 1.x), with all_preds.jsonl / preds.json"
    options: dict[str, str] = {}
    directories = True

    def read(self, request: ImportRequest, session: ImportSession) -> None:
        """Import every trajectory; predictions files among the sources give the patches and the plan."""
        request.check_options(self.name, self.options)
        session.set_software("harness", Software(name="SWE-agent", url="https://github.com/SWE-agent/SWE-agent"))
        trajs: list[tuple[Path, str | None]] = []
        preds: dict[str, dict[str, Any]] = {}
        listed: dict[str, str] = {}

        def read_preds(p: Path, url: str | None) -> None:
            session.add_source(p, "swe-agent-predictions", url)
            for iid, pred in _predictions(session, p).items():
                preds.setdefault(iid, pred)  # the merged file (read first) wins over a per-instance .pred

        def read_statuses(p: Path, url: str | None) -> None:
            session.add_source(p, "swe-agent-exit-statuses", url)
            listed.update(exit_statuses(p, max_bytes=_MAX_YAML_BYTES))

        for index, path in enumerate(request.sources):
            url = request.url(index)
            if path.is_dir():
                entries = list(children(path))
                for name, p, is_dir in entries:
                    if name in _PRED_NAMES and not is_dir:
                        read_preds(p, url)
                    elif name == _STATUS_YAML and not is_dir:
                        read_statuses(p, url)
                for name, p, is_dir in entries:
                    if is_dir:  # 1.x run_batch: <instance>/<instance>.traj and <instance>.pred
                        nested = p / f"{name}.traj"
                        if nested.exists() or nested.is_symlink():
                            trajs.append((regular_file(nested, what="trajectory"), url))
                        pred_file = p / f"{name}.pred"
                        if pred_file.exists() or pred_file.is_symlink():
                            read_preds(regular_file(pred_file, what="prediction"), url)
                    elif name.endswith(".traj"):
                        trajs.append((p, url))
            elif path.name in _PRED_NAMES or path.suffix in (".jsonl", ".pred"):
                read_preds(path, url)
            elif path.name.endswith("exit_statuses.yaml"):
                read_statuses(path, url)
            else:
                trajs.append((path, url))
        if not trajs:
            # predictions alone hold patches, not runs: no steps and no exit status, so no episode
            why = (f": its {len(preds)} prediction(s) say what was submitted, not how a run went (steps, exit status); "
                   "import the run directory that holds the .traj files, or give the .traj files with it"
                   if preds else "")
            raise SourceFormatError(f"holds no SWE-agent trajectory (.traj){why}", file=str(request.sources[0]))
        counts = ChatMapping()
        planned: dict[tuple[str, str], None] = {}
        seen: set[str] = set()
        untimed = 0
        demos: list[str] = []  # history-only trajectories (demonstrations)
        for path, url in trajs:
            session.add_source(path, self.name, url)
            iid = path.name.removesuffix(".traj")
            pred = preds.get(iid)
            agent = request.agent or (pred.get("model_name_or_path") if pred else None) or directory_name(path.parent)
            planned[(iid, agent)] = None
            seen.add(iid)
            with session.record():
                untimed += _episode(session, path, iid, agent, pred, counts, listed.get(iid), demos)
        for iid, pred in preds.items():
            if iid not in seen:
                planned[(iid, request.agent or pred.get("model_name_or_path") or "swe-agent")] = None
        default_agent = request.agent or (agents[0] if len(agents := sorted({a for _, a in planned})) == 1
                                          else "swe-agent")
        for iid in listed:
            if iid not in seen and iid not in preds:
                planned[(iid, default_agent)] = None
        for note in counts.notes():
            session.note(note)
        if session.episodes_written:
            _finish(session, list(planned), seen, untimed, listed, demos)


def _predictions(session: ImportSession, path: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for label, item in session.guard(iter_records(path)):
        with session.record():
            if isinstance(item, dict) and "instance_id" not in item and item and all(
                    isinstance(v, dict) for v in item.values()):
                items = [(k, {"instance_id": k, **v}) for k, v in item.items()]  # preds.json: keyed by id
            else:
                items = [(label, item)]
            for where, pred in items:
                if not isinstance(pred, dict) or not isinstance(pred.get("instance_id"), str):
                    raise SourceFormatError("is not a prediction with an instance_id", file=str(path), record=where)
                for key in ("model_patch", "model_name_or_path"):
                    if pred.get(key) is not None and not isinstance(pred[key], str):
                        raise SourceFormatError(f"{key} is not text", file=str(path), record=where)
                out[pred["instance_id"]] = pred
    return out


def read_trajectory(path: Path) -> Any:
    """The JSON document of a trajectory file (SWE-agent's or mini-swe-agent's: both are one
    object), read with the strict decoder and at most 512 Mi characters."""
    return read_document(path, max_value_chars=_MAX_FILE_CHARS)


def _episode(session: ImportSession, path: Path, iid: str, agent: str, pred: dict[str, Any] | None,
             counts: ChatMapping, listed: str | None, demos: list[str]) -> int:
    doc = read_trajectory(path)
    steps = StepBuffer(f"{agent}/{iid}", file=str(path), record=iid)
    if not isinstance(doc, dict):
        raise steps.error("is not a SWE-agent trajectory (a JSON object with info and history)")
    if "info" not in doc and isinstance(doc.get("attempts"), list):
        # RetryAgent saves {"attempts": [finished attempts]} after each step and merges the chosen
        # attempt in only at the end: this run stopped before it ended, its last attempt unsaved
        doc = {"info": {}, "history": [], **doc}
        session.note(f"{path.name}: a retry-agent trajectory saved mid-run (attempts only, no chosen attempt); "
                     "the finished attempts are kept in meta.attempts, the running attempt was never saved")
    demo = "info" not in doc and isinstance(doc.get("history"), list)
    if demo:
        # a demonstration (trajectories/demonstrations/function_calling_simple.traj @c37c3234): history
        # only. SWE-agent's inspector reads it with info {} (inspector/server.py @3ea751c0): how it
        # ended and its usage are not recorded, and are declared so (_finish), never guessed
        doc = {**doc, "info": {}}
        demos.append(iid)
    if not isinstance(doc.get("info"), dict):
        raise steps.error("has no info object (how the run ended, its usage): it is not a SWE-agent trajectory")
    info = doc["info"]
    history = doc.get("history")
    if not isinstance(history, list):
        raise steps.error("history is missing or not a list")
    add_history(steps, history, counts)
    exit_status = text(steps, info.get("exit_status"), "info.exit_status") or None
    status = terminal_state(exit_status)
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    t_in, t_out = run_tokens(steps, stats)
    row: dict[str, Any] = {
        "episode_id": steps.episode_id, "task_id": iid, "agent": agent, "trial": 0, "status": status,
        "input_tokens": t_in, "output_tokens": t_out,
        "total_tokens": t_in + t_out if t_in is not None and t_out is not None else None,
        "cost_usd": number(steps, stats.get("instance_cost"), "info.model_stats.instance_cost"),
        "meta.api_calls": integer(steps, stats.get("api_calls"), "info.model_stats.api_calls"),
        "meta.total_cost": number(steps, stats.get("total_cost"), "info.model_stats.total_cost"),
        "meta.exit_status": exit_status,
        "meta.listed_exit_status": listed,
        "meta.environment": text(steps, doc.get("environment"), "environment"),
    }
    if demo:
        row["error_type"] = UNRECORDED
        row["error_message"] = "a demonstration (history only, no info): how it ended is not recorded"
        row["meta.trajectory_shape"] = "demonstration"
    elif exit_status is None or exit_status == _INCOMPLETE:
        row["error_type"] = "incomplete"
        row["error_message"] = (f"the trajectory has {'exit status ' + exit_status if exit_status else 'no exit status'}"
                                ": SWE-agent saves it after every step and sets the exit status when the run ends, "
                                "so this run stopped before it ended" + (f" (run_batch listed it as {listed})"
                                                                         if listed else ""))
    elif status != "completed":
        row["error_message"] = f"exit status {exit_status}"
        if status == "error":
            row["error_type"] = exit_status
    submission = text(steps, info.get("submission"), "info.submission")
    patch = pred.get("model_patch") if pred else None
    if patch is not None and submission is not None and patch != submission:
        session.note(f"{path.name}: the predictions' model_patch differs from info.submission; the prediction is stored")
    chosen = patch if patch is not None else submission
    if chosen:
        row["meta.patch_artifact"] = session.add_artifact(chosen.encode("utf-8"))
    row["meta.patch_empty"] = not chosen
    for key, value in stats.items():
        if key not in ("tokens_sent", "tokens_received", "instance_cost", "api_calls", "total_cost") and value is not None:
            row[f"meta.model_stats.{key}"] = json_text(value)
    for key, value in info.items():
        if key not in ("exit_status", "submission", "model_stats") and value is not None:
            row[f"meta.info.{key}"] = value if isinstance(value, str) else json_text(value)
    trajectory = doc.get("trajectory")
    if isinstance(trajectory, list):
        # action, observation, response and thought repeat the history; the rest is kept
        extra = [{k: v for k, v in t.items() if k not in ("action", "observation", "response", "thought")}
                 for t in trajectory if isinstance(t, dict)]
        if any(extra):
            row["meta.trajectory_extra"] = json_text(extra)
        row["meta.trajectory_steps"] = len(trajectory)
    elif trajectory is not None:
        raise steps.error("trajectory is not a list")
    for key, value in doc.items():
        if key not in ("info", "history", "trajectory", "environment") and value is not None:
            row[f"meta.{key}"] = value if isinstance(value, str) else json_text(value)
    session.add_episode(row, steps)
    session.add_agent({"name": agent})
    return len(steps)


def add_history(steps: StepBuffer, history: list[Any], counts: ChatMapping) -> None:
    """Map a trajectory's `history` (0.x or 1.x) to steps: each message as `add_chat_messages`
    maps an OpenAI chat message, a 1.x tool message's `tool_call_ids` linking it to its call."""
    add_chat_messages(steps, [_chat_message(steps, m, i) for i, m in enumerate(history)], counts, field="history")


def run_tokens(steps: StepBuffer, stats: dict[str, Any]) -> tuple[int | None, int | None]:
    """(input, output) tokens of the run from `info.model_stats` (tokens_sent, tokens_received)."""
    return (integer(steps, stats.get("tokens_sent"), "info.model_stats.tokens_sent"),
            integer(steps, stats.get("tokens_received"), "info.model_stats.tokens_received"))


def _chat_message(steps: StepBuffer, msg: Any, i: int) -> Any:
    """A history message in the OpenAI shape `add_chat_messages` reads: a tool message's
    `tool_call_ids` list becomes its `tool_call_id` (the other ids stay in the payload)."""
    if type(msg) is not dict:
        raise steps.error(f"history[{i}] is not an object")
    ids = msg.get("tool_call_ids")
    if msg.get("role") == "tool" and ids is not None:
        if not isinstance(ids, list) or not ids or not all(isinstance(x, str) for x in ids):
            raise steps.error(f"history[{i}].tool_call_ids is not a list of ids")
        msg = {k: v for k, v in msg.items() if k != "tool_call_ids"}
        msg["tool_call_id"] = ids[0]
        if len(ids) > 1:
            msg["tool_call_ids"] = ids
    elif ids is not None and not msg.get("tool_calls"):
        msg = dict(msg)  # an assistant message's ids without calls: kept in the payload
    return msg


def _finish(session: ImportSession, planned: list[tuple[str, str]], seen: set[str], steps_untimed: int,
            listed: dict[str, str], demos: list[str]) -> None:
    tasks = sorted({i for i, _ in planned})
    agents = sorted({a for _, a in planned})
    if len(planned) == len(tasks) * len(agents) and not session.malformed:
        session.set_plan({"tasks": tasks, "agents": agents, "trials": 1,
                          "description": _PLAN})
    else:
        session.set_plan({"expected_episodes": len(planned) + len(session.malformed),
                          "description": _PLAN})
    missing = [(i, a) for i, a in planned if i not in seen]
    if missing:
        def q(s: str) -> str:
            return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
        session.add_drop(
            target="episodes", action="unobserved", declaration="source_missing", loss_class="missing_trajectory",
            reason=f"{len(missing)} predicted or listed instance(s) have no .traj file among the sources, so "
            "their steps and usage are unknown: " + ", ".join(
                i + (f" (listed as {listed[i]})" if i in listed else "") for i, _ in missing[:5])
            + (" …" if len(missing) > 5 else ""),
            selector=" or ".join(f"(agent == {q(a)} and task_id == {q(i)})" for i, a in missing)
            if len(missing) <= _SELECTOR_IDS else None,
            count=len(missing),
        )
    n_ep = session.episodes_written
    if demos:
        shown = ", ".join(demos[:5]) + (f" and {len(demos) - 5} more" if len(demos) > 5 else "")
        session.add_drop(target="episodes.status", action="unobserved", declaration="source_missing",
                         loss_class="missing_outcome", selector=f"error_type == '{UNRECORDED}'", count=len(demos),
                         reason=f"{len(demos)} trajectory file(s) are demonstrations (a history, no info: no exit "
                         f"status, submission or model_stats); kept with status error and error_type {UNRECORDED}, "
                         "not a status guessed from the messages: " + shown)
        for column in ("input_tokens", "output_tokens", "cost_usd"):
            session.declare_missing(f"episodes.{column}", "a demonstration has no info.model_stats: " + shown,
                                    count=len(demos))
    session.declare_missing("steps.t", "SWE-agent trajectories record no timestamps", count=steps_untimed)
    for column in ("started_at", "ended_at"):
        session.declare_missing(f"episodes.{column}", "SWE-agent trajectories record no timestamps", count=n_ep)
    for column in ("input_tokens", "output_tokens", "cost_usd"):
        session.declare_missing(f"steps.{column}", "SWE-agent records usage per run (info.model_stats), not per "
                                "model call", count=steps_untimed)
    session.add_drop(target="episodes.meta.trajectory_extra", action="omitted", declaration="author_declared",
                     loss_class="duplicate_source_field",
                     reason="each trajectory entry's action, observation, response and thought repeat the "
                     "history messages (mapped to steps); its other fields (execution_time, state) are kept in "
                     "meta.trajectory_extra", count=n_ep)
