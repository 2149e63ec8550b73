"""Inspect logs written by inspect-ai itself, for the comparison tests (needs the `inspect` extra).

`run(tmp, fmt)` runs a few small tasks with Inspect's own `eval()` against `rcsim`, an
offline model provider registered here with Inspect's `@modelapi` (Inspect's mockllm
wants to download a tokenizer, which an offline CI cannot). The tasks cover what the
importer must count as Inspect counts: errors, limits, epochs, NaN (unscored) scores,
`score_on_error`, numeric-string and dict-valued scores, the mean / median / max / mode
reducers and `pass_at_<k>`. Everything is deterministic in the sample id and epoch.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from inspect_ai import Epochs, Task, eval, score
from inspect_ai.dataset import Sample
from inspect_ai.log import read_eval_log, write_eval_log
from inspect_ai.model import ModelAPI, ModelOutput, modelapi
from inspect_ai.scorer import (
    Score,
    Target,
    accuracy,
    bootstrap_stderr,
    match,
    mean,
    scorer,
    std,
    stderr,
    var,
)
from inspect_ai.solver import Generate, TaskState, generate, solver

__all__ = ["make_log", "rescore", "run"]


class _Sim(ModelAPI):
    """Answers "<n>" for a prompt "Say <n>", except every third call answers wrongly."""

    calls = 0

    async def generate(self, input, tools, tool_choice, config):  # noqa: ANN001 - Inspect's signature
        _Sim.calls += 1
        prompt = str(input[-1].content) if input else ""
        answer = prompt.removeprefix("Say ").strip()
        if _Sim.calls % 3 == 0:
            answer = f"{answer}x"
        return ModelOutput.from_content(model=self.model_name, content=answer)


@modelapi(name="rcsim")
def _rcsim() -> type[ModelAPI]:
    return _Sim


def _epoch(state: TaskState) -> int:
    return int(state.epoch)


@scorer(metrics=[accuracy(), stderr(), bootstrap_stderr(num_samples=100)])
def exact() -> Any:
    """C/I; NaN (unscored) for sample 4 in epoch 2. bootstrap_stderr: a metric no rule replays."""

    async def score(state: TaskState, target: Target) -> Score:
        if state.sample_id == 4 and _epoch(state) == 2:
            return Score(value=math.nan)
        return Score(value="C" if state.output.completion == target.text else "I")

    return score


@scorer(metrics=[mean(), std(), var(), stderr()])
def closeness() -> Any:
    """Numeric strings ("1", "-1", " 2", "1e-1") that Inspect reads as floats."""

    async def score(state: TaskState, target: Target) -> Score:
        good = state.output.completion == target.text
        pick = ["1", "1e-1", " 2", "-1"][(int(state.sample_id) + _epoch(state)) % 4]
        return Score(value=pick if good else "0")

    return score


@scorer(metrics={"right": [accuracy()], "len": [mean()]})
def parts() -> Any:
    """A dict-valued score: one metric per key."""

    async def score(state: TaskState, target: Target) -> Score:
        right = state.output.completion == target.text
        return Score(value={"right": "C" if right else "I", "len": len(state.output.completion)})

    return score


@solver
def flaky() -> Any:
    """Raises for sample 3 in epoch 1 (an errored sample-epoch)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if state.sample_id == 3 and _epoch(state) == 1:
            raise RuntimeError("flaky tool died")
        return state

    return solve


def _dataset(n: int) -> list[Sample]:
    return [Sample(id=i, input=f"Say {i}", target=str(i)) for i in range(1, n + 1)]


def run(tmp: Path, fmt: str = "eval", labels: list[str] | None = None) -> dict[str, Path]:
    """Run the tasks (all, or those of `labels`); returns {label: log path}."""
    runs: dict[str, dict[str, Any]] = {
        "reducers": {"epochs": Epochs(3, ["mean", "median", "max", "mode", "pass_at_2", "pass_at_3"])},
        "score_on_error": {"epochs": Epochs(2, "mean"), "score_on_error": True},
        "limits": {"epochs": 1, "message_limit": 1},
    }
    out: dict[str, Path] = {}
    for label, options in runs.items():
        if labels is not None and label not in labels:
            continue
        _Sim.calls = 0
        epochs = options.pop("epochs")
        t = Task(dataset=_dataset(6), solver=[flaky(), generate()], scorer=[exact(), closeness(), parts()],
                 epochs=epochs, name=f"rc_{label}")
        (log,) = eval(t, model="rcsim/model", log_dir=str(tmp / label), log_format=fmt, display="none",
                      fail_on_error=False, **options)
        out[label] = Path(log.location)
    return out


def make_log(tmp: Path, fmt: str, samples: int) -> Path:
    """One log of `samples` samples (one epoch, three scorers) written by Inspect (benchmarks)."""
    _Sim.calls = 0
    t = Task(dataset=_dataset(samples), solver=[flaky(), generate()], scorer=[exact(), closeness(), parts()],
             name="rc_bench")
    (log,) = eval(t, model="rcsim/model", log_dir=str(tmp), log_format=fmt, display="none", fail_on_error=False,
                  max_samples=200)
    return Path(log.location)


def rescore(log_path: Path, out: Path) -> Path:
    """What `inspect score <log> --scorer match --action append` writes: the same eval (task_id,
    eval_id and run_id kept) with one more scorer, re-scored by Inspect's own score()."""
    scored = score(read_eval_log(str(log_path)), match(), action="append", display="none")
    write_eval_log(scored, str(out))
    return out
