"""`nat eval` output directories, written deterministically in the shape NeMo Agent Toolkit writes them.

As NVIDIA/NeMo-Agent-Toolkit @201f3dcc: nvidia_nat_eval runtime/evaluate.py writes
`workflow_output_atif.json` = json.dumps([AtifEvalSample.model_dump(mode="json")], indent=2) and
`<evaluator>_output.json` = EvalOutput.model_dump_json(indent=2); the trajectories are shaped as
nvidia_nat_core utils/atif_converter.py makes them (session_id = the adapter's cache key, ISO times
with +00:00, extra.ancestry / extra.invocation); average_score = round(mean of numeric scores, 2)
(evaluator/base_evaluator.py), computed here in plain Python.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def trajectory(item_id: Any, question: str, answer: str) -> dict[str, Any]:
    key = f"builtins.{type(item_id).__qualname__}:{item_id!r}"
    return {
        "schema_version": "ATIF-v1.7", "session_id": key,
        "agent": {"name": "react_agent", "version": "1.0.0", "model_name": "meta/llama-3.1-70b-instruct"},
        "steps": [
            {"step_id": 1, "timestamp": "2026-01-03T00:00:02+00:00", "source": "user", "message": question},
            {"step_id": 2, "timestamp": "2026-01-03T00:00:03+00:00", "source": "agent", "message": "",
             "model_name": "meta/llama-3.1-70b-instruct",
             "tool_calls": [{"tool_call_id": f"call-{item_id}", "function_name": "calculator_multiply",
                             "arguments": {"a": 2, "b": 3},
                             "extra": {"ancestry": {"function_id": "fn-calc", "function_name": "calculator_multiply",
                                                    "parent_id": "fn-agent", "parent_name": "react_agent"}}}],
             "observation": {"results": [{"source_call_id": f"call-{item_id}", "content": "6"}]},
             "metrics": {"prompt_tokens": 120, "completion_tokens": 12},
             "extra": {"ancestry": {"function_id": "fn-agent", "function_name": "react_agent"},
                       "invocation": {"start_timestamp": 1767398402.0, "end_timestamp": 1767398403.0,
                                      "framework": "langchain"}}},
            {"step_id": 3, "timestamp": "2026-01-03T00:00:04+00:00", "source": "agent", "message": answer,
             "metrics": {"prompt_tokens": 140, "completion_tokens": 9},
             "extra": {"ancestry": {"function_id": "fn-agent", "function_name": "react_agent"}}},
        ],
        "final_metrics": {"total_prompt_tokens": 260, "total_completion_tokens": 21, "total_steps": 3},
    }


def write_run(root: Path, items: list[tuple[Any, str, str, str]], scores: dict[str, dict[Any, Any]],
              *, average: dict[str, Any] | None = None) -> Path:
    """items: (item_id, question, expected, answer); scores: evaluator -> item_id -> score (or
    ("error", message): the evaluator raised, so nat eval scores the item 0.0)."""
    root.mkdir(parents=True, exist_ok=True)
    samples = [{"item_id": i, "trajectory": trajectory(i, q, a), "expected_output_obj": e, "output_obj": a,
                "metadata": {}} for i, q, e, a in items]
    (root / "workflow_output_atif.json").write_text(json.dumps(samples, indent=2))
    (root / "workflow_output.json").write_text(json.dumps([{"id": i, "question": q} for i, q, _e, _a in items]))
    for name, by_item in scores.items():
        out = []
        for item_id, score in by_item.items():
            if isinstance(score, tuple):
                out.append({"id": item_id, "score": 0.0, "reasoning": {"error": f"Evaluator error: {score[1]}"}})
            else:
                out.append({"id": item_id, "score": score, "reasoning": {"explanation": "judged"}})
        numeric = [o["score"] for o in out if isinstance(o["score"], (int, float))]
        avg = round(sum(numeric) / len(numeric), 2) if numeric else None
        if average and name in average:
            avg = average[name]
        (root / f"{name}_output.json").write_text(json.dumps({"average_score": avg, "eval_output_items": out},
                                                             indent=2))
    return root / "workflow_output_atif.json"
