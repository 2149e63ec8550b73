"""The `trajs/` of a SWE-bench experiments-style submission, merged into its instances' episodes.

Each file is dispatched by its shape, not its name (submissions use either agent, and
other scaffolds):

| file under `trajs/` | read as | the instance's episode |
|---|---|---|
| `<instance>.traj`, `<instance>.json`, `<instance>.traj.json`, or `<instance>/<instance>.<same>`: an object with `info` and `messages` | mini-swe-agent trajectory (`trajectory_format` mini-swe-agent-1.x, when given) | steps as `rcard import mini-swe-agent` maps `messages` |
| the same names: an object with `info` and `history` | SWE-agent trajectory (0.x or 1.x) | steps as `rcard import swe-agent` maps `history` |
| the same names: a JSON array of chat messages (objects with a `role`) | OpenHands' submission trajectory (`convert_oh_folder_to_swebench_submission.sh`: the `messages` of the latest LLM completion log) | steps as OpenAI chat messages (openai_chat); the last call's response is not in the file: a drop |
| `<instance>.md`, `.txt`, `.log` (Agentless logs, reasoning reports) | free text | no steps; the file whole as artifact `meta.trajectory_artifact`, declared |
| another JSON shape (Moatless `transitions`, …); another name | not read | a `steps` drop counts the files, by kind |

The episode also gets `meta.trajectory` (the file's path under the submission),
`meta.trajectory_format`, `meta.traj_exit_status` (the agent's own exit status), `meta.traj_info`
(the trajectory's `info` as JSON text), and tokens and cost from it (SWE-agent: `info.model_stats`
`tokens_sent` / `tokens_received` / `instance_cost`; mini-swe-agent: the messages' usage and
`instance_cost`). Status and scores stay the harness's (results.json).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .mini_swe_agent import MessageCounts, add_messages, check_trajectory_format
from .openai_chat import ChatMapping, add_chat_messages
from .session import ImportSession
from .source_dir import children, regular_file
from .source_values import number, text
from .steps import StepBuffer, json_text
from .swe_agent import add_history, read_trajectory, run_tokens

__all__ = ["Trajectories"]

_SUFFIXES = (".traj.json", ".traj", ".json")
#: Free-text traces (Agentless logs, markdown or plain-text reports): kept whole as an artifact.
_TEXT_SUFFIXES = (".md", ".txt", ".log")
_MAX_TEXT_BYTES = 64 * 1024 * 1024
_SELECTOR_IDS = 50
#: Why a file under trajs/ is not read, by the kind of file it is.
_UNREAD_WHY = {
    "name": "a name that is neither <instance>.traj / .traj.json / .json / .md / .txt / .log nor "
            "<instance>/<instance>.<the same>",
    "second": "a second trajectory of an instance (the first one found, by name, is read)",
    "moatless": "Moatless Tools' search-tree format (an object with `transitions`), which rollout-cards "
                "does not import",
    "json": "a JSON shape of no format rollout-cards imports (neither an object with info + messages or "
            "info + history, nor an array of chat messages)",
    "large": f"a free-text trace over {_MAX_TEXT_BYTES // (1024 * 1024)} MiB",
}


def _instance(name: str) -> tuple[str | None, bool]:
    """(instance id, is free text) of a file name under trajs/."""
    for suffix in _SUFFIXES + _TEXT_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], suffix in _TEXT_SUFFIXES
    return None, False


class Trajectories:
    """The trajectory files of one submission directory, by instance id."""

    def __init__(self, submission: Path, session: ImportSession) -> None:
        self.root = submission
        self.session = session
        self.files: dict[str, Path] = {}
        self.unread: list[tuple[str, str]] = []  # (file under trajs/, kind in _UNREAD_WHY) not read
        self.texts: list[str] = []  # instances whose trajectory is free text (an artifact, no steps)
        self.missing: list[str] = []  # instances of the submission without a trajectory
        self.merged = self.with_tokens = self.with_cost = self.untimed = self.untokened = 0
        self.prompt_only = 0  # chat-message arrays: the last model call's prompt, without its response
        self.formats: dict[str, int] = {}
        self.asked: set[str] = set()
        self.chat = ChatMapping()
        self.mini = MessageCounts()
        trajs = submission / "trajs"
        if not (trajs.is_dir() and not trajs.is_symlink()):
            return
        for name, path, is_dir in children(trajs):
            found = [(n, p) for n, p, d in children(path) if not d] if is_dir else [(name, path)]
            for file_name, file_path in found:
                iid, _text = _instance(file_name)
                if iid is None or (is_dir and iid != name):
                    self.unread.append((self._rel(file_path), "name"))
                elif iid in self.files:
                    session.note(f"{self._rel(file_path)}: a second trajectory of instance {iid} (the first: "
                                 f"{self._rel(self.files[iid])}); not read")
                    self.unread.append((self._rel(file_path), "second"))
                else:
                    self.files[iid] = file_path

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def fill(self, iid: str, steps: StepBuffer, row: dict[str, Any]) -> StepBuffer:
        """The steps of instance `iid` from its trajectory (or `steps` unchanged), with its row fields."""
        self.asked.add(iid)
        path = self.files.get(iid)
        if path is None:
            self.missing.append(iid)
            return steps
        self.session.add_source(path, "swe-bench-experiments-trajectory", None)
        if _instance(path.name)[1]:
            return self._text(iid, path, steps, row)
        doc = read_trajectory(path)
        out = StepBuffer(steps.episode_id, file=str(path), record=iid)
        info = doc.get("info") if isinstance(doc, dict) else None
        if isinstance(doc, list) and doc and all(type(m) is dict and type(m.get("role")) is str for m in doc):
            # OpenHands' convert_oh_folder_to_swebench_submission.sh: the `messages` of the
            # instance's latest LLM completion log, i.e. the prompt of the agent's last model call
            add_chat_messages(out, doc, self.chat, field="trajectory")
            info, stats, tokens, fmt = None, {}, None, "chat-messages"
            self.prompt_only += 1
        elif not isinstance(info, dict) or not isinstance(doc.get("messages", doc.get("history")), list):
            self.unread.append((self._rel(path), "moatless" if isinstance(doc, dict) and "transitions" in doc
                                else "json"))
            self.missing.append(iid)
            return steps
        else:
            stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
            if isinstance(doc.get("messages"), list):
                check_trajectory_format(out, doc)
                tokens = add_messages(out, doc["messages"], self.mini)
                fmt = "mini-swe-agent"
            else:
                add_history(out, doc["history"], self.chat)
                t_in, t_out = run_tokens(out, stats)
                tokens = (t_in, t_out) if t_in is not None and t_out is not None else None
                fmt = "swe-agent"
        cost = number(out, stats.get("instance_cost"), "info.model_stats.instance_cost")
        row["meta.trajectory"] = self._rel(path)
        row["meta.trajectory_format"] = fmt
        if info is not None:
            row["meta.traj_exit_status"] = text(out, info.get("exit_status"), "info.exit_status")
            row["meta.traj_info"] = json_text(info)
        if tokens is not None:
            row["input_tokens"], row["output_tokens"] = tokens
            row["total_tokens"] = tokens[0] + tokens[1]
            self.with_tokens += 1
        if cost is not None:
            row["cost_usd"] = cost
            self.with_cost += 1
        self.merged += 1
        self.formats[fmt] = self.formats.get(fmt, 0) + 1
        self.untimed += sum(1 for r in out.rows if r[3] is None)
        self.untokened += sum(1 for r in out.rows if r[11] is None)
        return out

    def _text(self, iid: str, path: Path, steps: StepBuffer, row: dict[str, Any]) -> StepBuffer:
        """A free-text trace: the file whole as the episode's artifact, no steps."""
        size = regular_file(path, what="trajectory").stat().st_size
        if size > _MAX_TEXT_BYTES:
            self.unread.append((self._rel(path), "large"))
            self.missing.append(iid)
            return steps
        row["meta.trajectory"] = self._rel(path)
        row["meta.trajectory_format"] = "text"
        row["meta.trajectory_artifact"] = self.session.add_artifact(path.read_bytes())
        self.texts.append(iid)
        self.merged += 1
        self.formats["text"] = self.formats.get("text", 0) + 1
        return steps

    def declare(self, session: ImportSession, agent: str, episodes: int) -> None:
        """Notes and drops of the merge (after every instance's episode)."""
        if self.merged:
            shown = ", ".join(f"{n} {f}" for f, n in sorted(self.formats.items()))
            session.note(f"{self.root.name}: {self.merged} trajectory file(s) under trajs/ merged into their "
                         f"instances' episodes ({shown})")
        for note in self.chat.notes():
            session.note(note)
        if self.missing:
            quoted = ", ".join(_q(f"{agent}/{i}") for i in self.missing)
            session.add_drop(
                target="steps", action="unobserved", declaration="source_missing", loss_class="missing_trajectory",
                reason=f"{len(self.missing)} instance(s) of the submission have no trajectory under trajs/ that "
                "could be read (none, or one of a format not read: see the unsupported_format drop); their "
                "episodes have no steps: " + ", ".join(self.missing[:5]) + (" …" if len(self.missing) > 5 else ""),
                selector=f"episode_id in [{quoted}]" if len(self.missing) <= _SELECTOR_IDS else None,
                count=len(self.missing))
        if self.unread:
            kinds: dict[str, list[str]] = {}
            for name, kind in self.unread:
                kinds.setdefault(kind, []).append(name)
            why = "; ".join(f"{len(names)} {_UNREAD_WHY[kind]} ({', '.join(names[:3])}"
                            + (" …)" if len(names) > 3 else ")") for kind, names in sorted(kinds.items()))
            session.add_drop(
                target="steps", action="omitted", declaration="source_missing", loss_class="unsupported_format",
                reason=f"{len(self.unread)} file(s) under trajs/ are not read: " + why, count=len(self.unread))
        if self.texts:
            session.add_drop(
                target="steps", action="unobserved", declaration="source_missing", loss_class="unstructured_source",
                reason=f"{len(self.texts)} instance(s) have a free-text trajectory (.md, .txt, .log: e.g. Agentless "
                "logs, markdown reasoning traces) with no message or tool-call structure to map to steps; each "
                "file is kept whole as the artifact meta.trajectory_artifact: " + ", ".join(self.texts[:5])
                + (" …" if len(self.texts) > 5 else ""),
                selector=(f"episode_id in [{', '.join(_q(f'{agent}/{i}') for i in self.texts)}]"
                          if len(self.texts) <= _SELECTOR_IDS else None), count=len(self.texts))
        if self.prompt_only:
            session.add_drop(
                target="steps", action="unobserved", declaration="source_missing", loss_class="missing_final_response",
                reason=f"{self.prompt_only} trajectory file(s) are an array of chat messages: what OpenHands' "
                "convert_oh_folder_to_swebench_submission.sh writes (the `messages` of the instance's latest LLM "
                "completion log), i.e. the prompt of the agent's last model call. That call's response (the "
                "final assistant turn), usage and cost are not in the file, and turns a condenser summarised "
                "before that call appear as the prompt had them", count=self.prompt_only)
        extra = sorted(set(self.files) - self.asked)
        if extra:
            session.note(f"{self.root.name}: {len(extra)} trajectory file(s) under trajs/ are of instances the "
                         f"submission does not list ({', '.join(extra[:5])}); not read")
        if self.untimed:
            session.declare_missing("steps.t", "SWE-agent trajectories, chat-message arrays and mini-swe-agent's "
                                    "prompts record no timestamps", count=self.untimed)
        if self.untokened:
            for column in ("input_tokens", "output_tokens", "cost_usd"):
                session.declare_missing(f"steps.{column}", "the trajectories record usage per run or per model "
                                        "response (chat-message arrays: none), not on every step", count=self.untokened)
        if self.mini.response_choices:
            session.add_drop(target="steps.payload", action="omitted", declaration="author_declared",
                             loss_class="duplicate_source_field",
                             reason="extra.response.choices of each mini-swe-agent model message repeats the "
                             "message's content, tool calls and reasoning, which are mapped; the rest of the response "
                             "is kept in the payload", count=self.mini.response_choices)
        for column, have in (("input_tokens", self.with_tokens), ("output_tokens", self.with_tokens),
                             ("total_tokens", self.with_tokens), ("cost_usd", self.with_cost)):
            if episodes > have:
                session.declare_missing(f"episodes.{column}", "neither the report nor a trajectory of the "
                                        f"instance records {column}", count=episodes - have)


def _q(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


