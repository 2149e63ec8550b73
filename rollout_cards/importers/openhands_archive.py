"""The sub-agent conversations an OpenHands V1 evaluation archived beside its output.jsonl.

Layout (OpenHands/benchmarks `benchmarks/utils/evaluation.py` `_capture_conversation_archive`;
software-agent-sdk `conversation/persistence_const.py`, `tools/delegate/impl.py`,
`tools/task/manager.py`):

    <dir of output.jsonl>/conversations/<instance_id>.tar.gz   (`tar -czf - workspace/conversations`)
        workspace/conversations/<conversation id hex>/base_state.json
        workspace/conversations/<conversation id hex>/events/event-<idx:05d>-<event id>.json
        workspace/conversations/<conversation id hex>/subagents/<sub id hex>/{base_state.json,events/}
        (sub-agents of sub-agents one `subagents/` deeper; meta.json, lock files and the like are not read)

The parent conversation is the top-level one whose event files carry the ids of the line's
history events. A sub-agent conversation receives one user `MessageEvent` per task it is
given (the TaskTool prompt, the DelegateTool task text; a resumed task or a second
delegation to the same agent appends to it): each such message starts a *run*, the events
up to the next one. Only the files under `subagents/` are read (the parent's events are
the line's history); each event file is strict JSON (`json_stream.parse_json`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import SourceFormatError
from .json_stream import parse_json
from .openai_chat import content_text
from .tar_reader import TarLimits, read_tar_gz

__all__ = ["Conversation", "ConversationArchive", "Run", "archive_path", "naive_time"]

_EVENT = re.compile(r"^event-(?P<idx>\d{5,})-(?P<id>[0-9a-fA-F-]{8,})\.json$")
_SUB = "/subagents/"
#: sub-agents of sub-agents this deep at most
MAX_DEPTH = 32


def archive_path(output: Path, instance_id: str) -> Path | None:
    """The archive of `instance_id`'s conversations when there is an entry there (the benchmarks
    harness names the file after the id; a link is returned too, for the reader to refuse), else
    None — also when the id cannot be one file name, so the harness could not have written it."""
    if not instance_id or "/" in instance_id or "\\" in instance_id or instance_id in (".", "..") \
            or "\x00" in instance_id:
        return None
    path = output.parent / "conversations" / f"{instance_id}.tar.gz"
    try:
        os.lstat(path)
    except OSError:  # absent, or a name longer than the file system takes
        return None
    return path


def naive_time(value: Any) -> datetime | None:
    """An OpenHands event time (ISO 8601, no zone) for ordering only; None when absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t.replace(tzinfo=None)


@dataclass
class Run:
    """The events a sub-agent conversation ran for one task message (and those before its first)."""

    conversation: Conversation
    index: int
    text: str | None
    time: datetime | None
    events: list[dict[str, Any]] = field(default_factory=list)
    members: list[str] = field(default_factory=list)  # the archive member of each event


@dataclass
class Conversation:
    """One persisted conversation: its directory in the archive, events by index, sub-conversations."""

    path: str
    event_files: list[tuple[int, str, str]] = field(default_factory=list)  # (idx, event id, member)
    children: list[Conversation] = field(default_factory=list)
    state: dict[str, Any] | None = None
    runs: list[Run] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class ConversationArchive:
    """The conversations of one archive (module doc); errors name the archive and the member."""

    def __init__(self, path: Path, name: str, *, limits: TarLimits | None = None):
        self.name = name
        contents = read_tar_gz(path, name, want=_wanted, limits=limits or TarLimits())
        self._members = contents.members
        convs: dict[str, Conversation] = {}
        for member, kind in contents.kinds.items():
            if kind != "file":
                continue
            head, _, base = member.rpartition("/")
            if base == "base_state.json":
                convs.setdefault(head, Conversation(head))
            elif head.endswith("/events") or head == "events":
                match = _EVENT.match(base)
                if match:
                    conv_path = head[: -len("/events")]
                    conv = convs.setdefault(conv_path, Conversation(conv_path))
                    conv.event_files.append((int(match["idx"]), match["id"], member))
        self.top: list[Conversation] = []
        for path_, conv in sorted(convs.items()):
            conv.event_files.sort()
            _check_indices(conv, name)
            parent, sep, _ = path_.rpartition(_SUB)
            if sep and parent in convs:
                if path_.count(_SUB) > MAX_DEPTH:
                    raise SourceFormatError(f"nests sub-agent conversations more than {MAX_DEPTH} deep",
                                            file=name, record=f"member {path_!r}")
                convs[parent].children.append(conv)
            else:
                self.top.append(conv)
        self._loaded: set[str] = set()

    def parent_of(self, history_ids: set[str]) -> tuple[Conversation | None, str]:
        """The top-level conversation holding the history's events, else (None, why not)."""
        overlap = [(len(history_ids & {e for _, e, _ in c.event_files}), c) for c in self.top]
        best = max((n for n, _ in overlap), default=0)
        found = [c for n, c in overlap if n == best and n > 0]
        if len(found) == 1:
            return found[0], ""
        if not found:
            return None, "none of its conversations holds the events of the line's history"
        return None, f"{len(found)} of its conversations hold the line's history events equally"

    def load(self, conv: Conversation) -> None:
        """Read the state and the runs of `conv`'s sub-conversations (once)."""
        for child in conv.children:
            if child.path in self._loaded:
                continue
            self._loaded.add(child.path)
            state = self._members.get(f"{child.path}/base_state.json")
            if state is not None:
                value = parse_json(state, self.name, f"member '{child.path}/base_state.json'")
                child.state = value if isinstance(value, dict) else None
            child.runs = _runs(child, [(m, self._event(m)) for _, _, m in child.event_files])

    def load_tree(self, conv: Conversation) -> list[Conversation]:
        """`load` every conversation below `conv`; returns them (depth first)."""
        found: list[Conversation] = []
        stack = [conv]
        while stack:
            current = stack.pop()
            self.load(current)
            found += current.children
            stack += current.children
        return found

    def _event(self, member: str) -> dict[str, Any]:
        value = parse_json(self._members[member], self.name, f"member {member!r}")
        if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
            raise SourceFormatError("is not an OpenHands SDK event (an object with a `kind`)", file=self.name,
                                    record=f"member {member!r}")
        return value


def _wanted(member: str) -> bool:
    """Files of sub-agent conversations: their base_state.json and event files."""
    if _SUB not in member and not member.startswith("subagents/"):
        return False
    head, _, base = member.rpartition("/")
    return base == "base_state.json" or (head.endswith("/events") and _EVENT.match(base) is not None)


def _check_indices(conv: Conversation, name: str) -> None:
    seen: set[int] = set()
    for idx, _, member in conv.event_files:
        if idx in seen:
            raise SourceFormatError(f"is a second event file with index {idx} in its conversation (the order of "
                                    "the events is ambiguous)", file=name, record=f"member {member!r}")
        seen.add(idx)


def _runs(conv: Conversation, events: list[tuple[str, dict[str, Any]]]) -> list[Run]:
    """Split a sub-conversation at each user MessageEvent; events before the first belong to it."""
    runs: list[Run] = []
    lead: list[tuple[str, dict[str, Any]]] = []
    for member, event in events:
        if event.get("kind") == "MessageEvent" and event.get("source") == "user":
            message = event.get("llm_message") if isinstance(event.get("llm_message"), dict) else {}
            text, _ = content_text(message.get("content"))
            lead.append((member, event))
            runs.append(Run(conv, len(runs), text, naive_time(event.get("timestamp")), [e for _, e in lead],
                            [m for m, _ in lead]))
            lead = []
        elif runs:
            runs[-1].events.append(event)
            runs[-1].members.append(member)
        else:
            lead.append((member, event))
    if lead:  # a conversation that never got its task message: a run nothing can launch
        runs.append(Run(conv, len(runs), None, None, [e for _, e in lead], [m for m, _ in lead]))
    return runs
