"""Inspect logs written by inspect-ai itself, for the comparison tests (needs the `inspect` extra).

`run(tmp, fmt)` runs a few small tasks with Inspect's own `eval()` against `rcsim`, an
offline model provider registered here with Inspect's `@modelapi` (Inspect's mockllm
wants to download a tokenizer, which an offline CI cannot). The tasks cover what the
importer must count as Inspect counts: errors, limits, epochs, NaN (unscored) scores,
`score_on_error`, numeric-string and dict-valued scores, the mean / median / max / mode
reducers and `pass_at_<k>`. Everything is deterministic in the sample id and epoch.

`run_nested(tmp, fmt)` runs an agent that launches sub-agents every way Inspect has: a
`handoff()`, an `as_tool()` agent that itself calls an `as_tool()` agent (depth 2), a tool
that runs an `@subtask`, and a tool that calls a model itself; once with `generate()` as
the solver and once with `react()` (an agent span around the whole run). `old_subtasks`
rewrites such a log as older Inspect versions wrote subtasks (their events in the `subtask`
event's own `events` list).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from inspect_ai import Epochs, Task, eval, score
from inspect_ai.agent import AgentState, agent, as_tool, handoff, react
from inspect_ai.dataset import Sample
from inspect_ai.log import read_eval_log, write_eval_log
from inspect_ai.model import (
    ChatMessageUser,
    ModelAPI,
    ModelOutput,
    execute_tools,
    get_model,
    modelapi,
)
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
from inspect_ai.solver import Generate, TaskState, generate, solver, use_tools
from inspect_ai.tool import tool
from inspect_ai.util import subtask

__all__ = ["make_log", "old_subtasks", "rescore", "run", "run_nested"]


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


class _NestSim(ModelAPI):
    """The main agent calls its tools in `_PLAN` order, one per turn, then answers (react: submits);
    the calc agent calls its leaf agent once; every other call answers with text."""

    async def generate(self, input, tools, tool_choice, config):  # noqa: ANN001 - Inspect's signature
        names = {t.name for t in tools}
        done = sum(1 for m in input if m.role == "tool")
        if "calc" in names:
            if done < len(_PLAN):
                return ModelOutput.for_tool_call(self.model_name, *_PLAN[done])
            if "submit" in names:
                return ModelOutput.for_tool_call(self.model_name, "submit", {"answer": "4"})
            return ModelOutput.from_content(self.model_name, "4")
        if "leaf" in names and done == 0:
            return ModelOutput.for_tool_call(self.model_name, "leaf", {"input": "1+1"})
        return ModelOutput.from_content(self.model_name, f"answer {len(input)}")


_PLAN = [("transfer_to_researcher", {}), ("calc", {"input": "2+2"}), ("lookup", {"key": "x"}),
         ("summarize", {"text": "long"})]


@modelapi(name="rcnest")
def _rcnest() -> type[ModelAPI]:
    return _NestSim


async def _answer(state: AgentState, tools: list[Any] | None = None) -> AgentState:
    out = await get_model().generate(state.messages, tools=tools or [])
    state.messages.append(out.message)
    if out.message.tool_calls:
        messages, _ = await execute_tools(state.messages, tools or [])
        state.messages.extend(messages)
        out = await get_model().generate(state.messages)
        state.messages.append(out.message)
    state.output = out
    return state


@agent(description="Researches a question.")
def researcher() -> Any:
    async def execute(state: AgentState) -> AgentState:
        return await _answer(state)

    return execute


@agent(description="Answers a one-line sum.")
def leaf() -> Any:
    async def execute(state: AgentState) -> AgentState:
        return await _answer(state)

    return execute


@agent(description="Calculates, asking the leaf agent.")
def calc() -> Any:
    async def execute(state: AgentState) -> AgentState:
        return await _answer(state, [as_tool(leaf())])

    return execute


@subtask
async def fetch_value(key: str) -> str:
    out = await get_model().generate([ChatMessageUser(content=f"value of {key}")])
    return out.completion


@tool
def lookup() -> Any:
    async def execute(key: str) -> str:
        """Look a key up (in a subtask).

        Args:
            key: The key.
        """
        return await fetch_value(key)

    return execute


@tool
def summarize() -> Any:
    async def execute(text: str) -> str:
        """Summarize a text (the tool calls a model itself).

        Args:
            text: The text.
        """
        return (await get_model().generate(f"summarize {text}")).completion

    return execute


def run_nested(tmp: Path, fmt: str = "eval") -> dict[str, Path]:
    """{"generate": log, "react": log}: the nested-agents task with each solver."""
    out: dict[str, Path] = {}
    for label in ("generate", "react"):
        tools = [handoff(researcher()), as_tool(calc()), lookup(), summarize()]
        chain = [use_tools(*tools), generate()] if label == "generate" else react(name="main", tools=tools)
        t = Task(dataset=[Sample(id=1, input="what is 2+2", target="4"), Sample(id=2, input="and 3+3", target="4")],
                 solver=chain, scorer=match(), name=f"rc_nest_{label}")
        (log,) = eval(t, model="rcnest/model", log_dir=str(tmp / label), log_format=fmt, display="none")
        assert log.status == "success", log.error
        out[label] = Path(log.location)
    return out


def _owner(e: Any, begins: dict[str, Any]) -> str | None:
    """The id of the span event `e` is in (a span's own begin and end: its parent's)."""
    if e.event == "span_begin":
        return e.parent_id
    return begins[e.id].parent_id if e.event == "span_end" else e.span_id


def old_subtasks(path: Path, out: Path) -> Path:
    """The log at `path` as Inspect wrote subtasks before it recorded their events in the main
    transcript: each subtask span (its span_begin and span_end, the `subtask` event and the
    events inside) becomes the `subtask` event alone, where the span began, holding the span's
    other events in its own `events` list (those directly in the span without a span_id).
    Written by Inspect's own write_eval_log (the format from `out`'s suffix)."""
    log = read_eval_log(str(path))
    for sample in log.samples or []:
        events = list(sample.events)
        begins = {e.id: e for e in events if e.event == "span_begin"}

        def inside(e: Any, span_id: str) -> bool:
            own = _owner(e, begins)
            while own is not None and own != span_id:
                own = begins[own].parent_id
            return own == span_id

        for span in [b for b in begins.values() if b.type == "subtask"]:
            members = [e for e in events if inside(e, span.id)]
            (sub,) = [e for e in members if e.event == "subtask"]
            nested = [e.model_copy(update={"span_id": None}) if e.span_id == span.id else e
                      for e in members if e is not sub]
            gone = {id(e) for e in members} | {id(e) for e in events
                                                if e.event in ("span_begin", "span_end") and e.id == span.id}
            at = next(i for i, e in enumerate(events) if e is span)
            old = sub.model_copy(update={"events": nested, "span_id": span.parent_id})
            events = [e for e in events[:at] if id(e) not in gone] + [old] + [
                e for e in events[at:] if id(e) not in gone]
        sample.events = events
    write_eval_log(log, str(out))
    return out


def old_tool_agents(path: Path, out: Path) -> tuple[Path, dict[str, str]]:
    """The log at `path` as older Inspect wrote a tool that ran an agent (`as_tool()`, `handoff()`):
    the tool event holds the agent's events in its own `events` list and names it in `agent`
    (what Inspect's timeline makes an agent span), the agent's span_begin and span_end gone (the
    events directly in it without a span_id). Innermost agents first, so a tool agent inside
    another is in the outer tool event's events. Written by Inspect's own write_eval_log; returns
    it and {uuid of each agent's span_begin: uuid of the tool event that now holds its events}."""
    log = read_eval_log(str(path))
    held: dict[str, str] = {}
    for sample in log.samples or []:
        events = list(sample.events)
        begins = {e.id: e for e in events if e.event == "span_begin"}

        def chain(span_id: str | None) -> list[str]:
            out = []
            while span_id is not None:
                out.append(span_id)
                span_id = begins[span_id].parent_id
            return out

        def launched(tool: Any, span: Any) -> bool:
            parent = begins.get(span.parent_id)
            return tool.agent_span_id == span.id or (
                bool(tool.agent) and tool.agent == span.name and parent is not None and parent.type == "tool"
                and parent.name == tool.function and tool.span_id in chain(parent.parent_id))

        agents = sorted((b for b in begins.values() if b.type == "agent"), key=lambda b: -len(chain(b.id)))
        for span in agents:
            tools = [e for e in events if e.event == "tool" and launched(e, span)]
            if not tools:
                continue
            (tool,) = tools
            members = [e for e in events if span.id in chain(_owner(e, begins))
                       and not (e.event in ("span_begin", "span_end") and e.id == span.id)]
            nested = [e.model_copy(update={"span_id": None}) if e.span_id == span.id else e for e in members]
            gone = {id(e) for e in members} | {id(e) for e in events
                                                if e.event in ("span_begin", "span_end") and e.id == span.id}
            old = tool.model_copy(update={"agent": span.name, "events": nested, "agent_span_id": None})
            held[span.uuid] = tool.uuid
            events = [old if e is tool else e for e in events if id(e) not in gone]
        sample.events = events
    write_eval_log(log, str(out))
    return out, held
