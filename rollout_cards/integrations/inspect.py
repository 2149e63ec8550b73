"""An Inspect AI hook that writes a rollout card while `inspect eval` runs.

Installed with the `inspect` extra, the hook is registered through Inspect's
`inspect_ai` entry point group; it is switched on by the environment variable
`RCARD_INSPECT_CARDS=<directory>`:

    RCARD_INSPECT_CARDS=cards inspect eval task.py --model openai/gpt-4o

One card per task (eval) is written to `<directory>/<task>-<eval id>`:

- `on_task_start` opens a `CardWriter` there (the crash-safe writer: if the eval
  process dies, `rcard recover <card>` finishes it with every ended sample);
- `on_sample_end` maps the sample exactly as `rcard import inspect` maps it from the
  log (the same code: `importers.inspect_ai`) and writes it as one ended episode;
- `on_task_end` declares the rules that replay Inspect's metrics from the finished
  log's results, and closes the card.

Inspect only logs a hook's exceptions as warnings, so a failure here is made loud: it
is logged as an error, and the card records each failed sample in its drops (which
`rcard info` and `rcard validate` show), naming the sample and the exception.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from inspect_ai.hooks import Hooks, SampleEnd, TaskEnd, TaskStart, hooks

from ..importers.inspect_ai import VALUE_MAP, _declare_rules, _episode, _log_meta
from ..importers.inspect_log import InspectLog
from ..importers.inspect_replay import ImportedScores
from ..importers.json_stream import parse_json, parse_json_items
from ..importers.rule_files import rule_id_part
from ..io.finalize import refresh_manifest
from ..io.writer import CardWriter

__all__ = ["ENV", "RolloutCardHook"]

#: The environment variable naming the directory the hook writes cards into.
ENV = "RCARD_INSPECT_CARDS"
logger = logging.getLogger(__name__)


@dataclass
class _Run:
    """The card of one eval being written."""

    path: Path
    writer: CardWriter
    log: InspectLog
    agent: str
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    scores: ImportedScores = field(default_factory=ImportedScores)
    episodes: int = 0


class _RuleSink:
    """What `_declare_rules` needs of an import session: notes and rules, into the live card."""

    def __init__(self, run: _Run):
        self._run = run

    def note(self, text: str) -> None:
        if text not in self._run.notes:
            self._run.notes.append(text)

    def warn(self, text: str) -> None:
        if text not in self._run.warnings:
            self._run.warnings.append(text)
            logger.warning("rollout_cards: %s", text)

    def add_rule(self, doc: dict[str, Any]) -> str:
        text = yaml.safe_dump(dict(doc), sort_keys=False, allow_unicode=True, width=100, default_flow_style=None)
        rule_id = self._run.writer.add_rule(f"rules/{doc.get('rule')}.yaml", text=text)
        self._run.rules.append(rule_id)
        return rule_id


def _json(model: Any, what: str) -> Any:
    """An Inspect pydantic object as the JSON the log recorder writes (NaN kept)."""
    return parse_json(model.model_dump_json(exclude_none=True), what, constants=True)


@hooks(name="rollout_cards", description="Writes a rollout card while the eval runs (RCARD_INSPECT_CARDS=dir)")
class RolloutCardHook(Hooks):
    """See the module docstring."""

    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}

    def enabled(self) -> bool:
        return bool(os.environ.get(ENV))

    async def on_task_start(self, data: TaskStart) -> None:
        try:
            spec = _json(data.spec, "eval spec")
            root = Path(os.environ[ENV]) / f"{rule_id_part(spec['task'])}-{data.eval_id}"
            writer = CardWriter(root, id=root.name, title=f"Inspect eval of {spec['task']}", timestamps=False,
                                provenance={"generator": _generator()})
            log = InspectLog(root, "inspect-live", {"eval": spec, "plan": _json(data.plan, "plan")}, iter(()))
            self._runs[data.eval_id] = _Run(root, writer, log, spec["model"])
        except Exception:
            logger.exception("rollout_cards: the Inspect hook could not start a card; no card is written")
            raise

    async def on_sample_end(self, data: SampleEnd) -> None:
        run = self._runs.get(data.eval_id)
        if run is None:
            return
        sample = data.sample
        label = f"sample {sample.id!r} epoch {sample.epoch}"
        try:
            # the recorder's serialisation of the sample, so each event's payload is the text the log holds
            value, events = parse_json_items(sample.model_dump_json(exclude_none=True), label, key="events",
                                             constants=True)
            row, steps, _moved = _episode(value, run.log, run.agent, label, events)
            _write(run.writer, row, steps)
            run.scores.add(row)
            run.episodes += 1
        except Exception as exc:  # Inspect would only warn: record it in the card, loudly
            run.failures.append(f"{label}: {type(exc).__name__}: {exc}")
            logger.error("rollout_cards: the Inspect hook could not write %s to %s: %s", label, run.path, exc)

    async def on_task_end(self, data: TaskEnd) -> None:
        run = self._runs.pop(data.eval_id, None)
        if run is None:
            return
        try:
            header = _json(data.log.model_copy(update={"samples": None, "reductions": None}), "eval log")
            # named after the log file, so the rules read exactly as `rcard import` of that log writes them
            run.log = InspectLog(Path(data.log.location or run.path), "inspect-live", header, iter(()))
            run.log.found = run.episodes
            _declare_rules(_RuleSink(run), run.log, run.agent, set(), run.scores)  # type: ignore[arg-type]
            if run.failures:
                more = len(run.failures) - 5
                shown = "; ".join(run.failures[:5]) + (f"; and {more} more" if more > 0 else "")
                run.writer.add_drop({
                    "target": "episodes", "action": "omitted", "declaration": "source_malformed",
                    "loss_class": "malformed_record", "count": len(run.failures), "affects": run.rules,
                    "reason": f"the rollout-cards Inspect hook failed on {len(run.failures)} sample(s), which are "
                              f"not in this card: {shown}. Inspect's numbers, computed with them, do not replay "
                              "here, so the rules do not declare them as reported (see meta.import.warnings); "
                              "import the finished log (rcard import inspect) for a complete card.",
                })
            run.writer.close()
            refresh_manifest(run.path, meta={
                "inspect": {"value_to_float": VALUE_MAP, "logs": [_log_meta(run.log)]},
                "import": {"format": "inspect-live", "notes": run.notes,
                           **({"warnings": run.warnings} if run.warnings else {})},
            })
        except Exception:
            logger.exception("rollout_cards: the Inspect hook could not finish %s; `rcard recover` it", run.path)
            raise


def _write(writer: CardWriter, row: dict[str, Any], steps: Any) -> None:
    """One imported episode row and its steps through the writer's crash-safe episode path."""
    extras = {k: v for k, v in row.items() if k.startswith(("score.", "task.", "meta.", "cond."))}
    ep = writer.episode(task_id=row["task_id"], agent=row["agent"], trial=row["trial"], episode_id=row["episode_id"],
                        run_id=row.get("run_id"), started_at=_time(row.get("started_at")))
    for (_eid, _seq, kind, t, role, agent, name, call_id, content, args, is_error, tin, tout, cost, payload,
         parent, depth) in steps.rows:
        ep.step(kind, content=content, role=role, name=name, call_id=call_id, args=args, is_error=is_error,
                agent=agent, t=_time(t), input_tokens=tin, output_tokens=tout, cost_usd=cost, payload=payload,
                parent_seq=parent, depth=depth)
    for column, value in extras.items():
        if value is not None:
            ep.set(column, value)
    ep.usage(input_tokens=row.get("input_tokens"), output_tokens=row.get("output_tokens"),
             total_tokens=row.get("total_tokens"), cost_usd=row.get("cost_usd"))
    ep.end(row["status"], error_type=row.get("error_type"), message=row.get("error_message"),
           traceback=row.get("error_traceback"), t=_time(row.get("ended_at")))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _time(micros: int | None) -> datetime | None:
    return None if micros is None else _EPOCH + timedelta(microseconds=micros)


def _generator() -> dict[str, Any]:
    from .. import __version__

    return {"name": "rollout-cards Inspect hook", "version": __version__}

