"""OpenHands *resolver* `output.jsonl` lines (`ResolverOutput`) to episodes.

The issue resolver (openhands/resolver/issue_resolver.py, since the Nov 2024 merge into
OpenHands) appends one `ResolverOutput.model_dump_json()` per issue or PR to
`<output_dir>/output.jsonl`, the file name the evaluation harness uses too: `issue` (`owner`,
`repo`, `number`, `title`, `body`, ...), `issue_type` ("issue" / "pr"), `instruction`,
`base_commit`, `git_patch`, `history`, `metrics`, `success` (the resolver's LLM judgement of
the patch, `guess_success`), `comment_success` (per review comment, PRs), `result_explanation`,
`error`. One line is one episode `<owner>/<repo>#<number>`.

Its `history` is `[dataclasses.asdict(event) for event in state.history]`: each event's own
dataclass fields (`action` or `observation`, `content`, `command`, `thought`, ...) without the
event's id, cause, source or timestamp (properties over private attributes, which `asdict`
leaves out). So a call and its result are linked by order (OpenHands V0 runs one action at a
time: its observation is the next observation of the same type, or an `error`), a message's
role is known only for the first event (the resolver starts the run with the instruction as
the user's `MessageAction`), and both are declared.
"""

from __future__ import annotations

from typing import Any

from .steps import StepBuffer, json_text

__all__ = ["is_resolver_line", "resolver_episode"]

_KNOWN = frozenset(("issue", "issue_type", "instruction", "base_commit", "git_patch", "history", "metrics",
                    "success", "comment_success", "result_explanation", "error"))
# an observation that answers whatever action is pending (ErrorObservation, NullObservation, a rejection)
_ANY_ACTION = frozenset(("error", "null", "user_rejected"))


def is_resolver_line(record: Any) -> bool:
    """Whether a line is a ResolverOutput (an `issue` object and `issue_type`, no `instance_id`)."""
    return (isinstance(record, dict) and "instance_id" not in record and isinstance(record.get("issue"), dict)
            and "issue_type" in record)


def resolver_episode(record: dict[str, Any], steps_for: Any, stats: dict[str, int]) -> tuple[dict[str, Any],
                                                                                             StepBuffer]:
    """The episode row and steps of one ResolverOutput line (`steps_for(episode_id, instance)`
    gives the located StepBuffer; metrics, error and patch are mapped by the caller)."""
    issue = record["issue"]
    owner, repo, number = issue.get("owner"), issue.get("repo"), issue.get("number")
    probe = steps_for("", None)
    for field, value in (("owner", owner), ("repo", repo)):
        if not isinstance(value, str) or not value:
            raise probe.error(f"issue.{field} is {value!r}, expected the repository's {field} (a resolver line)")
    if isinstance(number, bool) or not isinstance(number, int):
        raise probe.error(f"issue.number is {number!r}, expected the issue or PR number (a resolver line)")
    episode_id = f"{owner}/{repo}#{number}"
    steps = steps_for(episode_id, episode_id)
    row: dict[str, Any] = {"episode_id": episode_id, "task_id": episode_id, "trial": 0,
                           "task.instance": json_text(issue), "meta.issue_type": _text(record.get("issue_type"))}
    if isinstance(record.get("instruction"), str):
        row["task.instruction"] = record["instruction"]
    if isinstance(record.get("base_commit"), str) and record["base_commit"]:
        row["meta.base_commit"] = record["base_commit"]
    success = record.get("success")
    if success is not None:
        if not isinstance(success, bool):
            raise steps.error(f"success is {success!r}, expected true or false (the resolver's guess_success)")
        row["score.success"] = success
    comments = record.get("comment_success")
    if comments is not None:
        if not isinstance(comments, list) or not all(isinstance(c, bool) for c in comments):
            raise steps.error(f"comment_success is {comments!r}, expected a list of true/false per review comment")
        row["meta.comment_success"] = json_text(comments)
        row["score.comments_resolved"] = sum(comments)
        row["score.comments"] = len(comments)
    if record.get("result_explanation") is not None:
        row["meta.result_explanation"] = _text(record["result_explanation"])
    history = record.get("history")
    if history is not None:
        if not isinstance(history, list):
            raise steps.error(f"history is {type(history).__name__}, expected a list of events")
        _history(history, steps, stats)
    rest = {k: v for k, v in record.items() if k not in _KNOWN}
    if rest:
        row["meta.record"] = json_text(rest)
    stats["resolver_lines"] += 1
    return row, steps


def _history(history: list[Any], steps: StepBuffer, stats: dict[str, int]) -> None:
    pending: tuple[str, str] | None = None  # (action type, call id) of the action awaiting its observation
    for i, event in enumerate(history):
        if not isinstance(event, dict):
            raise steps.error(f"history[{i}] is not an object")
        if "action" in event:
            action = event["action"]
            if not isinstance(action, str):
                raise steps.error(f"history[{i}].action is not text")
            fields = {k: v for k, v in event.items() if k != "action"}
            if action in ("message", "system"):
                role = "system" if action == "system" else "user" if i == 0 else None
                if role is None:
                    stats["resolver_roles"] += 1
                content = fields.pop("content", None)
                steps.add("message", role=role, content=_text(content), payload=fields or None)
                continue
            thought = fields.pop("thought", None)
            call_id = f"history[{i}]"  # the event's id is not in asdict's output
            steps.tool_call(action, json_text(fields), call_id, role="assistant", content=_text(thought))
            pending = (action, call_id)
        elif "observation" in event:
            obs = event["observation"]
            fields = {k: v for k, v in event.items() if k != "content"}
            content = _text(event.get("content"))
            is_error = obs == "error" or event.get("success") is False
            if pending is not None and (obs == pending[0] or obs in _ANY_ACTION):
                steps.tool_result(pending[1], content, role="tool", name=_text(obs), is_error=is_error,
                                  payload=fields)
                pending = None
            else:
                steps.add("observation", role="tool", name=_text(obs), content=content, is_error=is_error,
                          payload=fields)
        else:
            steps.add("annotation", name="event", payload=event)


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json_text(value)
