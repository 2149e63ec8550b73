"""The `trajs/` of a SWE-bench experiments-style submission, merged into its instances' episodes.

Each file is dispatched by its shape, not its name (submissions use either agent, and
other scaffolds):

| file under `trajs/` | read as | steps of the instance's episode |
|---|---|---|
| `<instance>.traj`, `<instance>.json`, `<instance>.traj.json`, or `<instance>/<instance>.<same>`: an object with `info` and `messages` | mini-swe-agent trajectory (`trajectory_format` mini-swe-agent-1.x, when given) | as `rcard import mini-swe-agent` maps `messages` |
| the same names: an object with `info` and `history` | SWE-agent trajectory (0.x or 1.x) | as `rcard import swe-agent` maps `history` |
| another JSON shape; another extension (`.md`, `.log`, `.txt`, …) | not read as steps | a `steps` drop counts the files |

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
from .openai_chat import ChatMapping
from .session import ImportSession
from .source_dir import children
from .source_values import number, text
from .steps import StepBuffer, json_text
from .swe_agent import add_history, read_trajectory, run_tokens

__all__ = ["Trajectories"]

_SUFFIXES = (".traj.json", ".traj", ".json")
_SELECTOR_IDS = 50


def _instance(name: str) -> str | None:
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


class Trajectories:
    """The trajectory files of one submission directory, by instance id."""

    def __init__(self, submission: Path, session: ImportSession) -> None:
        self.root = submission
        self.session = session
        self.files: dict[str, Path] = {}
        self.unread: list[str] = []  # files under trajs/ not read as steps (name or shape)
        self.missing: list[str] = []  # instances of the submission without a trajectory
        self.merged = self.with_tokens = self.with_cost = self.untimed = self.untokened = 0
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
                iid = _instance(file_name)
                if iid is None or (is_dir and iid != name):
                    self.unread.append(self._rel(file_path))
                elif iid in self.files:
                    session.note(f"{self._rel(file_path)}: a second trajectory of instance {iid} (the first: "
                                 f"{self._rel(self.files[iid])}); not read")
                    self.unread.append(self._rel(file_path))
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
        doc = read_trajectory(path)
        out = StepBuffer(steps.episode_id, file=str(path), record=iid)
        info = doc.get("info") if isinstance(doc, dict) else None
        if not isinstance(info, dict) or not isinstance(doc.get("messages", doc.get("history")), list):
            self.unread.append(self._rel(path))
            self.missing.append(iid)
            return steps
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
                "could be read as steps (none, or one of a shape neither SWE-agent's nor mini-swe-agent's); their "
                "episodes have no steps: " + ", ".join(self.missing[:5]) + (" …" if len(self.missing) > 5 else ""),
                selector=f"episode_id in [{quoted}]" if len(self.missing) <= _SELECTOR_IDS else None,
                count=len(self.missing))
        if self.unread:
            session.add_drop(
                target="steps", action="omitted", declaration="source_missing", loss_class="unsupported_format",
                reason=f"{len(self.unread)} file(s) under trajs/ are not a SWE-agent or mini-swe-agent trajectory "
                "(by name or shape) and are not read: " + ", ".join(self.unread[:5])
                + (" …" if len(self.unread) > 5 else ""), count=len(self.unread))
        extra = sorted(set(self.files) - self.asked)
        if extra:
            session.note(f"{self.root.name}: {len(extra)} trajectory file(s) under trajs/ are of instances the "
                         f"submission does not list ({', '.join(extra[:5])}); not read")
        if self.untimed:
            session.declare_missing("steps.t", "SWE-agent trajectories and mini-swe-agent's prompts record no "
                                    "timestamps", count=self.untimed)
        if self.untokened:
            for column in ("input_tokens", "output_tokens", "cost_usd"):
                session.declare_missing(f"steps.{column}", "the trajectories record usage per run or per model "
                                        "response, not on every step", count=self.untokened)
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


