"""NeMo Agent Toolkit `nat eval` output: ATIF samples and the evaluators' scores beside them.

With `eval.general.output.write_atif_workflow_output`, `nat eval` writes
`<output_dir>/workflow_output_atif.json`: a JSON array of AtifEvalSample objects
(`item_id`, `trajectory` = an ATIF trajectory, `expected_output_obj`, `output_obj`,
`metadata`), and for each evaluator `<output_dir>/<evaluator>_output.json`: an EvalOutput
(`average_score`, `eval_output_items[]` of `id`, `score`, `reasoning`, `error`). Read from
NVIDIA/NeMo-Agent-Toolkit @201f3dcc: nvidia_nat_eval runtime/evaluate.py (the writer),
evaluator/atif_evaluator.py (AtifEvalSample), data_models/evaluator_io.py (EvalOutput),
evaluator/base_evaluator.py and atif_base_evaluator.py (average_score = the mean of the
items' numeric scores rounded to 2 decimals; an evaluator exception scores the item 0.0).

This module only recognises a sample and reads the evaluator files; `chat_jsonl` makes the
episodes (the trajectory as any ATIF record) and calls `EvalScores` for their scores and rules.
"""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SourceFormatError
from .json_stream import read_document
from .rule_files import rule_document, rule_id_part
from .session import ImportSession
from .source_values import literals
from .steps import json_text

__all__ = ["SAMPLES_FILE", "EvalScores", "sample_columns", "unwrap_sample"]

SAMPLES_FILE = "workflow_output_atif.json"
_OUTPUT_SUFFIX = "_output.json"
_MAX_OUTPUT_CHARS = 256 << 20
#: average_score is round(mean, 2) (base_evaluator.py): a mean within half a unit of the last digit replays.
_ROUNDING = 0.005 + 1e-9
_SAMPLE_KEYS = ("item_id", "trajectory", "expected_output_obj", "output_obj", "metadata")


def unwrap_sample(record: Any, is_atif: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(trajectory, the sample's other fields) when `record` is an AtifEvalSample, else None."""
    if (isinstance(record, dict) and "item_id" in record and isinstance(record.get("trajectory"), dict)
            and is_atif(record["trajectory"])):
        return record["trajectory"], {k: v for k, v in record.items() if k != "trajectory"}
    return None


def item_key(item_id: Any) -> str:
    """An item id as a key that keeps its JSON type (1 and "1" are different items)."""
    return json_text(literals(item_id))


@dataclass
class _Evaluator:
    name: str
    path: Path
    average: Any
    items: dict[str, dict[str, Any]]
    imported: list[float | None] = field(default_factory=list)


class EvalScores:
    """The evaluator outputs beside one `workflow_output_atif.json`."""

    def __init__(self, samples: Path, session: ImportSession):
        self.run = samples.parent.name or "."
        self.session = session
        self.evaluators: list[_Evaluator] = []
        self.matched: set[str] = set()
        for path in sorted(samples.parent.iterdir()):
            name = path.name
            if not name.endswith(_OUTPUT_SUFFIX) or name == "workflow_output.json":
                continue
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode) or not stat.S_ISREG(mode):
                raise SourceFormatError("is a link or not a regular file beside workflow_output_atif.json; "
                                        "links are not followed", file=str(path))
            doc = read_document(path, max_value_chars=_MAX_OUTPUT_CHARS, constants=True)
            if not (isinstance(doc, dict) and "average_score" in doc and isinstance(doc.get("eval_output_items"),
                                                                                      list)):
                continue  # not an EvalOutput (another tool's file)
            session.add_source(path, "nemo-eval-output")
            evaluator = name[: -len(_OUTPUT_SUFFIX)]
            items: dict[str, dict[str, Any]] = {}
            for i, item in enumerate(doc["eval_output_items"]):
                if not isinstance(item, dict) or "id" not in item:
                    raise SourceFormatError(f"eval_output_items[{i}] has no id", file=str(path), record="document")
                key = item_key(item["id"])
                if key in items:
                    raise SourceFormatError(f"eval_output_items[{i}]: item id {key[:80]} occurs twice",
                                            file=str(path), record="document")
                items[key] = item
            self.evaluators.append(_Evaluator(evaluator, path, doc["average_score"], items))

    def columns(self, item_id: Any) -> dict[str, Any]:
        """The score.<evaluator> and meta.<evaluator>_eval columns of one sample."""
        row: dict[str, Any] = {}
        key = item_key(item_id)
        for ev in self.evaluators:
            part = rule_id_part(ev.name)
            item = ev.items.get(key)
            if item is None:
                row[f"score.{part}"] = None
                continue
            self.matched.add(f"{ev.name}\0{key}")
            score = item.get("score")
            number = None
            if not isinstance(score, bool) and isinstance(score, (int, float)) and math.isfinite(score):
                number = float(score)
            row[f"score.{part}"] = number
            ev.imported.append(number)
            rest = {k: v for k, v in item.items() if k != "id" and not (k == "score" and number is not None)}
            if rest:
                row[f"meta.{part}_eval"] = json_text(literals(rest))  # reasoning, error, a non-number score
        return row

    def declare(self) -> None:
        """One rule per evaluator: the mean of its numeric scores; reported = its average_score."""
        for ev in self.evaluators:
            part = rule_id_part(ev.name)
            unmatched = [k for k in ev.items if f"{ev.name}\0{k}" not in self.matched]
            if unmatched:
                self.session.add_drop(
                    target="episodes", action="omitted", declaration="source_missing", loss_class="missing_episode",
                    count=len(unmatched), reason=f"{ev.path.name} scores items that {SAMPLES_FILE} does not hold "
                    f"(first: {unmatched[0][:80]})")
            numbers = [x for x in ev.imported if x is not None]
            reported = []
            average = ev.average
            if len(ev.imported) > len(numbers):
                self.session.note(f"{ev.path.name}: {len(ev.imported) - len(numbers)} items have a score that is "
                                  "not a finite number (kept in meta); NeMo's average skips non-numbers")
            if (not isinstance(average, bool) and isinstance(average, (int, float)) and math.isfinite(average)
                    and numbers and not unmatched and abs(sum(numbers) / len(numbers) - average) <= _ROUNDING):
                reported.append({"group": {"run_id": self.run}, "value": float(average), "tolerance": _ROUNDING})
            else:
                mean = sum(numbers) / len(numbers) if numbers else None
                self.session.warn(f"{ev.path.name}: average_score {average!r} is not the mean of the imported "
                                  f"items' numeric scores ({mean!r}, {len(numbers)} items); it is not reported")
            self.session.add_rule(rule_document(
                rule=f"nemo_eval.{part}.average_score",
                kind="original",
                description=(f"NeMo Agent Toolkit's average_score of the {ev.name!r} evaluator: the mean of the "
                             "items' numeric scores (an item the evaluator failed on scored 0.0, as nat eval "
                             "does; a score that is not a number is left out), reported rounded to 2 decimals."),
                score=f"score.{part}", on_status={"completed": "score", "error": "score", "timeout": "score",
                                                  "limit": "score", "cancelled": "score", "skipped": "exclude"},
                on_missing="exclude", aggregate={"group_by": ["run_id"]}, reported=reported,
            ))


def sample_columns(sample: dict[str, Any]) -> dict[str, Any]:
    """The meta columns of an AtifEvalSample's fields other than the trajectory and item_id."""
    row: dict[str, Any] = {}
    for key, column in (("expected_output_obj", "meta.expected_output"), ("output_obj", "meta.output"),
                        ("metadata", "meta.sample_metadata")):
        value = sample.get(key)
        if value not in (None, {}, ""):
            row[column] = value if isinstance(value, str) else json_text(literals(value))
    rest = {k: v for k, v in sample.items() if k not in _SAMPLE_KEYS}
    if rest:
        row["meta.sample_record"] = json_text(literals(rest))
    return row
