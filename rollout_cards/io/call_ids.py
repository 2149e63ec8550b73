"""Tool-call ids within one episode: the one rule the writer and every importer follow.

The format needs each `tool_call`'s `call_id` unique within its episode and each
`tool_result` linked to one earlier call. Providers reuse ids within a conversation
(OpenAI models do: 49 of the 200 tau-bench GPT-4o airline episodes), so ids are
stored as follows:

- a call is stored under its source id X when no call of the episode is stored as X;
- otherwise as `X#n`, n the smallest integer from 2 (counting on from X's earlier
  suffixes) that no stored id of the episode has taken; its step's payload keeps the
  source id as `source_call_id`;
- a result with source id X pairs with the latest call whose source id is X (the order
  the source gives) and carries that call's stored id (and `source_call_id` when the two
  differ).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["CallIds", "with_source_call_id"]


class CallIds:
    """The call ids of one episode. `stored_id` proposes the id of a new call; `add` records
    it once its step was written, so a call that failed to be written takes no id."""

    __slots__ = ("_latest", "_next", "_stored", "reused")

    def __init__(self) -> None:
        self._latest: dict[str, str] = {}  # source id -> stored id of its latest call
        self._stored: set[str] = set()
        self._next: dict[str, int] = {}  # source id -> the next suffix to try
        self.reused = 0
        """Calls whose source id an earlier call of the episode had already used."""

    def stored_id(self, source_id: str) -> str:
        """The id a new call with `source_id` is stored under."""
        if source_id not in self._stored:
            return source_id
        n = self._next.get(source_id, 2)
        while f"{source_id}#{n}" in self._stored:
            n += 1
        return f"{source_id}#{n}"

    def add(self, source_id: str, stored: str) -> None:
        """Record a call written under `stored` (from `stored_id(source_id)`)."""
        if source_id in self._latest:
            self.reused += 1
        if stored != source_id:
            self._next[source_id] = int(stored.rsplit("#", 1)[1]) + 1
        self._stored.add(stored)
        self._latest[source_id] = stored

    def result_id(self, source_id: str) -> str | None:
        """The stored id of the latest call with `source_id`; None when no call had it."""
        return self._latest.get(source_id)


def with_source_call_id(payload: Any, source_id: str) -> dict[str, Any]:
    """`payload` (None, a JSON object, or its JSON text) with `source_call_id` set.

    Raises ValueError when the payload is not a JSON object or already names another id.
    """
    if payload is None:
        return {"source_call_id": source_id}
    if isinstance(payload, str):
        try:
            payload = json.loads(payload)
        except ValueError:
            raise ValueError("payload given as text is not valid JSON") from None
    if not isinstance(payload, dict):
        raise ValueError(
            f"payload is a JSON {type(payload).__name__}, but a reused call id needs a JSON object "
            "to keep the source id in payload.source_call_id"
        )
    seen = payload.get("source_call_id", source_id)
    if seen != source_id:
        raise ValueError(f"payload.source_call_id is {seen!r}, but the source call id is {source_id!r}")
    return {**payload, "source_call_id": source_id}
