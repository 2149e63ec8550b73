"""AgentLab / BrowserGym experiment directories and study result tables to a rollout card.

A BrowserGym experiment directory (`<date>_<time>_<agent>_on_<task>_<seed>[_<hash> | _<n>]`)
holds `summary_info.json` (the episode's outcome and cumulative stats), pickled
configuration and steps (`exp_args.pkl`, `step_<n>.pkl.gz`, `goal_object.pkl.gz`),
`package_versions.txt`, `experiment.log` and screenshots. A study adds
`result_df*.csv` (one row per experiment: AgentLab's `load_result_df`, i.e. the
experiment's flattened configuration and its summary_info).

Sources may be experiment directories, study directories (every experiment directory
below them and their result CSVs), `summary_info.json` files or result CSVs. One
experiment is one episode, id = the experiment's name. Pickles are never opened:
unpickling runs code, so the steps they hold are declared dropped, with their count.

Terminal state, in AgentLab's order (its `summarize` counts an error as finished):
`err_msg` set → error (`error_message`, `error_traceback` = `stack_trace`); else
`truncated` → limit (the episode hit its step budget); else `terminated` → completed;
else cancelled (the experiment never finished).
"""

from __future__ import annotations

import csv
import math
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SourceFormatError
from .base import ImportRequest
from .compression import HEAD_BYTES, compressed_error
from .json_stream import read_document
from .rule_files import rule_document
from .session import ImportSession
from .steps import StepBuffer, json_text

__all__ = ["AgentLabImporter", "parse_experiment_name", "terminal_state"]

# `<date>_<exp_name>` + a BrowserGym-era `_<hex id>`, or (AgentLab loop.py @69cd893 _make_dir) `_<i>`,
# i in 1..998, when a directory of that name and second already exists; the tag follows the date prefix
_NAME = re.compile(
    r"^(?:(?P<date>\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d)_)?(?P<agent>.+?)_on_(?P<task>.+?)_(?P<seed>\d+)"
    r"(?:_[0-9a-f]{6,}|(?(date)_[1-9]\d{0,2}))?$"
)
_SUMMARY = "summary_info.json"
_MAX_SUMMARY = 64 << 20
_MAX_CSV_FIELD = 16 << 20
_MAX_ENTRIES = 200_000
_TOKENS = (("stats.cum_input_tokens", "stats.cum_openai_prompt_tokens"),
           ("stats.cum_output_tokens", "stats.cum_openai_completion_tokens"))
_COST = ("stats.cum_cost", "stats.cum_openai_total_cost")
_STARTED = ("exp_args.pkl", "experiment.log")  # what ExpArgs writes when an experiment starts
_OUTCOME = ("n_steps", "cum_reward", "cum_raw_reward", "err_msg", "stack_trace", "terminated", "truncated")


def parse_experiment_name(name: str) -> tuple[str, str, int] | None:
    """(agent, task, seed) of a BrowserGym experiment directory name, or None."""
    m = _NAME.match(name)
    return (m["agent"], m["task"], int(m["seed"])) if m else None


def terminal_state(summary: dict[str, Any]) -> tuple[str, str | None]:
    """(status, error_message) from a summary_info's err_msg / truncated / terminated."""
    err = summary.get("err_msg")
    if err not in (None, ""):
        return "error", str(err)
    if summary.get("truncated") is True:
        return "limit", "truncated: the episode reached its step budget before the task ended"
    if summary.get("terminated") is True:
        return "completed", None
    return "cancelled", "the experiment neither terminated nor was truncated (it did not finish)"


@dataclass
class _Experiment:
    name: str
    summary: dict[str, Any] | None = None
    summary_file: str | None = None
    row: dict[str, Any] | None = None
    row_file: str | None = None
    files: dict[str, int] = field(default_factory=dict)  # kind -> count of files not read


class AgentLabImporter:
    """AgentLab / BrowserGym experiment directories, summary_info.json files and study result CSVs."""

    name = "agentlab"
    summary = "AgentLab / BrowserGym experiment or study directories (summary_info.json, result_df CSV)"
    options: dict[str, str] = {}
    directories = True

    def read(self, request: ImportRequest, session: ImportSession) -> None:
        """Gather every experiment of the sources, then map each to an episode."""
        request.check_options(self.name, self.options)
        experiments: dict[str, _Experiment] = {}
        unfinished: list[str] = []
        for index, path in enumerate(request.sources):
            if path.is_dir():
                self._directory(path, session, experiments, request.url(index), unfinished)
            elif path.name.endswith(".csv"):
                self._csv(path, session, experiments, request.url(index))
            else:
                self._summary(path, path.parent.name, session, experiments, url=request.url(index))
        if not experiments:
            raise SourceFormatError("holds no AgentLab experiment (no summary_info.json, no result CSV rows)"
                                    + (": its experiment directories have not finished (no summary_info.json)"
                                       if unfinished else ""), file=str(request.sources[0]))
        unfinished = [name for name in unfinished if name not in experiments]  # a CSV row gives its outcome
        if unfinished:
            session.add_drop(target="episodes", action="unobserved", declaration="source_missing",
                             loss_class="missing_summary",
                             reason=f"{len(unfinished)} experiment directory(ies) have AgentLab's start files "
                             "(exp_args.pkl / experiment.log) but no summary_info.json, which ExpArgs.run writes "
                             "when the episode ends: still running or killed, so how they ended is unknown: "
                             + ", ".join(unfinished[:5]) + (" …" if len(unfinished) > 5 else ""),
                             count=len(unfinished))
        rewards: dict[str, list[float]] = {}
        unread: dict[str, int] = {}
        non_finite: dict[tuple[str, str], int] = {}  # (source key, column) -> experiments where it is NaN / Inf
        for exp in experiments.values():
            for kind, n in exp.files.items():
                unread[kind] = unread.get(kind, 0) + n
            with session.record():
                row, steps, odd = _episode(exp, request.agent)
                session.add_episode(row, steps)
                if row.get("score.cum_reward") is not None:
                    rewards.setdefault(row["agent"], []).append(row["score.cum_reward"])
                for key, column in odd.items():
                    non_finite[key, column] = non_finite.get((key, column), 0) + 1
        _declare(session, rewards, unread)
        _declare_non_finite(session, non_finite, "agentlab.avg_reward" if rewards else None)

    # -- gathering -----------------------------------------------------------------------
    def _directory(self, root: Path, session: ImportSession, experiments: dict[str, _Experiment],
                   url: str | None, unfinished: list[str]) -> None:
        for directory, names in _walk(root):
            if _SUMMARY not in names and any(n in _STARTED for n in names):
                unfinished.append(directory.name)
            if _SUMMARY in names:
                exp = self._summary(directory / _SUMMARY, directory.name, session, experiments, url=url)
                for name in names:
                    if name != _SUMMARY:
                        exp.files[_kind(name)] = exp.files.get(_kind(name), 0) + 1
            for name in names:
                if name.endswith(".csv") and name.startswith("result_df"):
                    self._csv(directory / name, session, experiments, url)

    def _summary(self, path: Path, name: str, session: ImportSession, experiments: dict[str, _Experiment],
                 *, url: str | None = None) -> _Experiment:
        session.add_source(path, self.name, url)
        record = f"experiment {name}"
        summary = _read_summary(path, record)
        exp = experiments.setdefault(name, _Experiment(name))
        if exp.summary is not None:
            raise SourceFormatError(f"experiment {name!r} is given twice", file=str(path), record=record)
        exp.summary, exp.summary_file = summary, str(path)
        return exp

    def _csv(self, path: Path, session: ImportSession, experiments: dict[str, _Experiment], url: str | None) -> None:
        session.add_source(path, self.name, url)
        for number, row in session.guard(_csv_rows(path)):
            with session.record():
                exp_dir = row.get("exp_dir") or row.get("exp_name")
                if not exp_dir:
                    raise SourceFormatError("has no exp_dir or exp_name", file=str(path), record=f"row {number}")
                name = str(exp_dir).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
                exp = experiments.setdefault(name, _Experiment(name))
                if exp.row is not None:
                    raise SourceFormatError(f"experiment {name!r} has two rows", file=str(path), record=f"row {number}")
                exp.row, exp.row_file = row, f"{path}, row {number}"


def _walk(root: Path) -> Iterator[tuple[Path, list[str]]]:
    """(directory, regular file names) below `root`, depth first; links are refused, never followed."""
    seen = 0
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            raise SourceFormatError(f"cannot be listed: {exc.strerror or exc}", file=str(directory)) from None
        seen += len(entries)
        if seen > _MAX_ENTRIES:
            raise SourceFormatError(f"holds more than {_MAX_ENTRIES:,} entries", file=str(root))
        files, subdirs = [], []
        for entry in entries:
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                raise SourceFormatError("is a symbolic link; links are not followed out of a source",
                                        file=str(directory / entry.name))
            if stat.S_ISDIR(mode):
                subdirs.append(directory / entry.name)
            elif stat.S_ISREG(mode):
                files.append(entry.name)
        yield directory, files
        stack.extend(reversed(subdirs))


def _kind(name: str) -> str:
    if name.endswith((".pkl", ".pkl.gz", ".pickle")):
        return "pickle"
    if name.endswith((".png", ".jpg", ".jpeg", ".webp")):
        return "image"
    if name == "package_versions.txt":
        return "packages"
    return "other"


def _read_summary(path: Path, record: str) -> dict[str, Any]:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise SourceFormatError(f"cannot be read: {exc.strerror or exc}", file=str(path)) from None
    if size > _MAX_SUMMARY:
        raise SourceFormatError(f"is {size:,} bytes; a summary_info.json over {_MAX_SUMMARY:,} is refused",
                                file=str(path), record=record)
    # AgentLab's json.dump writes numpy NaN as NaN (loop.py _aggregate_episode_stats: np.nanmax of a stat
    # that was None at every step); read, then null (_number)
    value = read_document(path, record=record, constants=True)
    if not isinstance(value, dict):
        raise SourceFormatError("is not a JSON object (an AgentLab summary_info)", file=str(path), record=record)
    return value


def _csv_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    csv.field_size_limit(_MAX_CSV_FIELD)
    try:
        fh = open(path, encoding="utf-8", newline="")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise SourceFormatError(f"cannot be read: {exc.strerror or exc}", file=str(path)) from None
    with fh:
        reader = csv.reader(fh)
        number = 0
        try:
            header = next(reader, None)
            if header and "cum_reward" not in header and "exp_dir" not in header and "avg_reward" in header:
                # AgentLab's summary_df / study_summary.csv (inspect_results.summarize_study): one row per
                # agent and benchmark, averages only
                raise SourceFormatError(
                    "is an AgentLab study summary (avg_reward, n_completed per agent: averages, no experiment "
                    "rows); import the study directory, its result_df*.csv or its experiment directories",
                    file=str(path), record="header")
            if not header or "cum_reward" not in header and "exp_dir" not in header:
                error = SourceFormatError("is not an AgentLab result table (no exp_dir / cum_reward column); import "
                                          "a study or experiment directory, a summary_info.json or a result_df*.csv",
                                          file=str(path), record="header")
                with open(path, "rb") as raw:  # a Git LFS pointer is a one-column CSV: name it as one
                    raise compressed_error(str(path), raw.read(HEAD_BYTES)) or error
            if len(set(header)) != len(header):
                raise SourceFormatError("repeats a column name", file=str(path), record="header")
            for number, cells in enumerate(reader, start=1):
                if len(cells) != len(header):
                    raise SourceFormatError(f"has {len(cells)} cells for {len(header)} columns",
                                            file=str(path), record=f"row {number}")
                yield number, {k: _cell(v) for k, v in zip(header, cells, strict=True) if k}
        except (csv.Error, UnicodeDecodeError) as exc:
            error = SourceFormatError(f"is not a readable CSV file: {exc}", file=str(path), record=f"row {number + 1}")
            with open(path, "rb") as raw:
                raise compressed_error(str(path), raw.read(HEAD_BYTES)) or error from None


def _cell(text: str) -> Any:
    """A pandas to_csv cell: '' is NaN/None, True/False are booleans, numbers are numbers."""
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    return text


_SCORES = ("cum_reward", "cum_raw_reward")


def _number(steps: StepBuffer, value: Any, name: str, *, integer: bool = False,
            non_finite: dict[str, str] | None = None, source: str | None = None) -> float | int | None:
    """A summary / CSV number; NaN and ±Infinity are None, noted in `non_finite` (the source's key,
    `source` or `name`, -> its literal) except a NaN stat: AgentLab's "no value" (np.nanmax of Nones)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise steps.error(f"{name} is {value[:40]!r}, not a number") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise steps.error(f"{name} is {type(value).__name__}, not a number")
    if not math.isfinite(value):
        # AgentLab's json.dump writes numpy's inf / nan as Infinity / NaN (np.nanmax over an
        # infinite stat, a reward function's nan): a real file, so the value is null in the card
        # (a card holds finite numbers), the literal kept in meta.non_finite and the count declared
        if non_finite is not None and (not math.isnan(value) or name in _SCORES):
            non_finite[source or name] = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        elif non_finite is None and not math.isnan(value):
            raise steps.error(f"{name} is {value}, not a finite number")
        return None  # pandas writes a missing value as NaN
    if integer:
        if value != int(value) or not -(1 << 63) <= value < (1 << 63):
            raise steps.error(f"{name} is {value!r}, not a 64-bit integer")
        return int(value)
    return float(value)


def _flag(steps: StepBuffer, value: Any, name: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise steps.error(f"{name} is {value!r}, not true or false")


def _episode(exp: _Experiment, agent_override: str | None) -> tuple[dict[str, Any], StepBuffer, dict[str, str]]:
    """The episode row and steps of one experiment, and the column of each source key that held NaN / Infinity."""
    where = exp.summary_file or exp.row_file or exp.name
    file, _, rec = where.partition(", ")
    steps = StepBuffer(exp.name, file=file, record=rec or f"experiment {exp.name}")
    summary: dict[str, Any] = dict(exp.row or {})
    summary.update(exp.summary or {})  # summary_info is the experiment's own record; the CSV copies it
    for key in ("err_msg", "stack_trace"):
        if summary.get(key) is not None and not isinstance(summary[key], str):
            raise steps.error(f"{key} is {type(summary[key]).__name__}, expected text")
    for key in ("terminated", "truncated"):
        summary[key] = _flag(steps, summary.get(key), key)
    status, message = terminal_state(summary)
    parsed = parse_experiment_name(exp.name)
    row_agent = (exp.row or {}).get("agent.agent_name")
    row_task = (exp.row or {}).get("env.task_name")
    agent = agent_override or row_agent or (parsed[0] if parsed else None)
    task = row_task or (parsed[1] if parsed else None)
    if not agent or not task:
        raise steps.error(f"cannot tell the agent and task of experiment {exp.name!r}: its name is not "
                          "<agent>_on_<task>_<seed> and no result CSV row names them")
    row: dict[str, Any] = {"episode_id": exp.name, "task_id": str(task), "agent": str(agent), "status": status}
    seed = (exp.row or {}).get("env.task_seed")
    seed = _number(steps, seed, "env.task_seed", integer=True) if seed is not None else (parsed[2] if parsed else None)
    if seed is not None and not -(1 << 63) <= seed < (1 << 63):  # a name's digits can be any number
        raise steps.error(f"the seed {str(seed)[:30]} of experiment {exp.name[:80]!r} does not fit in 64 bits")
    if seed is not None:
        row["seed"] = seed
    if message is not None:
        row["error_message"] = message
    if status == "error" and summary.get("stack_trace"):
        row["error_traceback"] = summary["stack_trace"]
        last = summary["stack_trace"].strip().splitlines()[-1] if summary["stack_trace"].strip() else ""
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b", last):
            row["error_type"] = last.split(":", 1)[0]
    odd: dict[str, str] = {}  # source name -> its non-finite literal
    row["score.cum_reward"] = _number(steps, summary.get("cum_reward"), "cum_reward", non_finite=odd)
    row["score.cum_raw_reward"] = _number(steps, summary.get("cum_raw_reward"), "cum_raw_reward", non_finite=odd)
    row["meta.n_steps"] = _number(steps, summary.get("n_steps"), "n_steps", integer=True)
    row["meta.terminated"], row["meta.truncated"] = summary.get("terminated"), summary.get("truncated")
    for column, names in zip(("input_tokens", "output_tokens"), _TOKENS, strict=True):
        name = next((n for n in names if summary.get(n) is not None), None)
        row[column] = _number(steps, summary.get(name) if name else None, column, integer=True,
                              non_finite=odd, source=name)
    if row["input_tokens"] is not None and row["output_tokens"] is not None:
        row["total_tokens"] = row["input_tokens"] + row["output_tokens"]
    name = next((n for n in _COST if summary.get(n) is not None), None)
    row["cost_usd"] = _number(steps, summary.get(name) if name else None, "cost", non_finite=odd, source=name)
    rest: dict[str, Any] = {}
    for key, value in summary.items():
        if key in _OUTCOME or value is None:
            continue
        if key.startswith("stats."):
            row[f"meta.{key}"] = _number(steps, value, key, non_finite=odd)
        elif key.startswith(("agent.", "env.")) and exp.row is not None and key in exp.row:
            row[f"cond.{key}"] = value if isinstance(value, (str, bool)) else _finite_text(value, key, odd)
        else:
            rest[key] = value
    if rest:
        row["meta.record"] = _finite_text(rest, "", odd)
    if odd:
        row["meta.non_finite"] = json_text(odd)
    return row, steps, {key: _column_of(key, summary, exp.row) for key in odd}


def _column_of(key: str, summary: dict[str, Any], csv_row: dict[str, Any] | None) -> str:
    """The card column a source key that held NaN / Infinity went to (a path inside an object: its JSON text)."""
    if key in _SCORES:
        return f"score.{key}"
    if key.startswith("stats.") and key in summary:
        return f"meta.{key}"
    top = next((k for k in summary if key == k or key.startswith((f"{k}.", f"{k}["))), "")
    if top.startswith(("agent.", "env.")) and csv_row is not None and top in csv_row:
        return f"cond.{top}"
    return "meta.record"


def _finite_text(value: Any, where: str, odd: dict[str, str]) -> str:
    """JSON text of a source value with each NaN / Infinity inside null and noted in `odd` under
    its dotted path (JSON has no such literal)."""
    def walk(v: Any, path: str) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            odd[path] = "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
            return None
        if isinstance(v, list):
            return [walk(x, f"{path}[{i}]") for i, x in enumerate(v)]
        if isinstance(v, dict):
            return {k: walk(x, f"{path}.{k}" if path else str(k)) for k, x in v.items()}
        return v

    return json_text(walk(value, where))


_MAX_NON_FINITE_DROPS = 20  # one drop per source key up to this many, then one for the rest


def _declare_non_finite(session: ImportSession, counts: dict[tuple[str, str], int], rule: str | None) -> None:
    """A drop per source key that held NaN / Infinity: its column is null there (unscored, for a reward)."""
    keys = sorted(counts, key=lambda kc: (kc[0] not in _SCORES, kc))
    for key, column in keys[:_MAX_NON_FINITE_DROPS]:
        n = counts[key, column]
        if key == "cum_reward":
            effect = ("the score is null: those experiments are unscored (agentlab.avg_reward leaves them out; "
                      "AgentLab's pandas mean skips a NaN too, but an infinite reward makes its mean infinite)")
        elif column == "meta.record" or column.startswith("cond."):
            effect = f"the value is null in {column}'s JSON text"
        else:
            effect = f"{column} is null" + (" (and cost_usd / input_tokens / output_tokens where they read it)"
                                            if key in (*_COST, *(k for pair in _TOKENS for k in pair)) else "")
        session.add_drop(target=f"episodes.{column}", action="unobserved", declaration="source_malformed",
                         loss_class="non_finite_value", count=n,
                         affects=[rule] if rule and key == "cum_reward" else [],
                         reason=f"{n} experiment(s) hold {key[:120]} = NaN or ±Infinity (AgentLab's json.dump writes "
                         f"numpy's nan / inf so); {effect}: a card holds finite numbers only. The source's literal "
                         "is kept in meta.non_finite")
    rest = keys[_MAX_NON_FINITE_DROPS:]
    if rest:
        session.add_drop(target="episodes.meta.non_finite", action="unobserved", declaration="source_malformed",
                         loss_class="non_finite_value", count=sum(counts[k] for k in rest),
                         reason=f"{len(rest)} more source key(s) held NaN / Infinity (e.g. {rest[0][0][:80]}); their "
                         "values are null, the literals kept in meta.non_finite")


def _declare(session: ImportSession, rewards: dict[str, list[float]], unread: dict[str, int]) -> None:
    agents = sorted(rewards)
    if agents:
        session.add_rule(rule_document(
            rule="agentlab.avg_reward",
            kind="original",
            description=(
                "AgentLab's avg_reward (inspect_results.summarize): the mean of cum_reward over the experiments "
                "that have one (pandas skips NaN), per agent; errored and truncated experiments keep their reward "
                "(0 for an error)."
            ),
            score="score.cum_reward",
            # Every status scores: AgentLab's mean takes each experiment that has a cum_reward, an
            # unfinished one too (an episode without one is excluded by on_missing).
            on_status={"completed": "score", "error": "score", "limit": "score", "timeout": "score",
                       "cancelled": "score", "skipped": "exclude"},
            on_missing="exclude",
            aggregate={"group_by": ["agent"]},
            reported=[{"group": {"agent": a}, "value": math.fsum(rewards[a]) / len(rewards[a])} for a in agents],
        ))
    n = session.episodes_written
    if unread.get("pickle"):
        session.add_drop(
            target="steps", action="omitted", declaration="author_declared", loss_class="unsafe_format",
            reason=f"{unread['pickle']} pickled file(s) (step_<n>.pkl.gz with each step's observation, action and "
            "agent info; exp_args.pkl; goal_object.pkl.gz) were not read: unpickling runs code, so rollout-cards "
            "never opens them. The card has the experiments' outcomes and cumulative stats, not their steps",
            count=unread["pickle"])
    else:
        session.declare_missing("steps", "AgentLab keeps steps only in pickles (step_<n>.pkl.gz), which were "
                                "not given and are never opened")
    if unread.get("image"):
        session.add_drop(target="artifacts", action="omitted", declaration="author_declared",
                         loss_class="channel_excluded", count=unread["image"],
                         reason=f"{unread['image']} screenshot(s) of the experiments were not imported")
    other = unread.get("other", 0) + unread.get("packages", 0)
    if other:
        session.add_drop(target="artifacts", action="omitted", declaration="author_declared",
                         loss_class="channel_excluded", count=other,
                         reason=f"{other} other file(s) of the experiment directories (experiment.log, "
                         "package_versions.txt, …) were not imported")
    session.declare_missing("episodes.started_at", "summary_info has elapsed times, not clock times; the "
                            "directory name's date has no time zone", count=n)
    session.declare_missing("episodes.ended_at", "summary_info records no end time", count=n)
    session.note("n_steps is the source's step count (meta.n_steps); the card's n_steps counts stored steps, "
                 "which are none (AgentLab's steps are pickled)")
