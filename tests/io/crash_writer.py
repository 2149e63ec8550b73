"""Child process of the crash fuzzer (tests/io/test_crash.py): runs a writer and SIGKILLs it.

Run as `python crash_writer.py`; it imports rollout_cards once, then reads one JSON
command per line from stdin and, for each, forks a child that runs `scenario` and dies by
SIGKILL at the chosen point, so a case costs a fork, not an interpreter start:

- `{"dir": D, "log": L, "seed": S, "phase": P, "after": N}` kills the child just before the
  N-th line of rollout_cards/io/ it executes from the start of phase P of `scenario` on
  (without "phase" it runs to the end, and the log gets each phase's first line number,
  so the fuzzer can learn how long each phase is);
- `{"dir": D, "log": L, "seed": S, "delay": T}` kills it T seconds in, wherever it is
  (inside pyarrow's C++ code too: a half-written batch, a torn journal line).

The child appends what it has finished to the log L with unbuffered writes (an episode
after its `with` block, a rule after `add_rule` returned, ...), so the fuzzer knows what
the recovered card must hold. Replies one JSON line per command: how the child ended.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import sys
import threading

import pyarrow as pa

import rollout_cards as rc

IO_DIR = os.path.join(os.path.dirname(rc.__file__), "io") + os.sep
RULES = (
    "rule: crash.reward\nscore: \"score.reward\"\n",
    "rule: crash.by_agent\nscore: \"score.reward\"\naggregate:\n  group_by: [agent]\n",
)
PHASES = ("init", "rules", "episodes", "bulk", "artifacts", "drops", "close")


class Log:
    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.lines = 0  # lines of rollout_cards/io/ executed so far
        self.phase = ""

    def enter(self, phase: str) -> None:
        self.phase = phase
        self("phase", phase, self.lines)

    def __call__(self, *words: object) -> None:
        os.write(self.fd, (" ".join(str(w) for w in words) + "\n").encode())


def scenario(path: str, rng: random.Random, log: Log) -> None:
    """A small but complete use of the writer: every kind of write it does."""
    log.enter("init")
    card = rc.CardWriter(path, id="crash", title="Killed at random", flush_rows=rng.choice([1, 3, 8, 1000]),
                         scope={"license": "CC-BY-4.0"})
    log.enter("rules")
    for text in RULES[: rng.randint(0, 2)]:
        log("rule", card.add_rule("rule.yaml", text=text))
    log.enter("episodes")
    for i in range(rng.randint(1, 5)):
        status = rng.choice(["completed", "completed", "error", "timeout"])
        with card.episode(task_id=f"t{i % 3}", agent=rng.choice(["a", "b"]), trial=i // 3, episode_id=f"e{i}",
                          cond={"wind": rng.choice(["calm", "gusty"])}) as ep:
            ep.message("user", f"task {i}")
            for _ in range(rng.randint(0, 4)):
                call = ep.tool_call("search", {"q": i}, call_id=rng.choice(["c0", "c1"]))  # ids get reused
                ep.tool_result(call, "ok")
            ep.score("reward", float(rng.random() < 0.5))
            if status != "completed":
                ep.end(status, error_type="Boom" if status == "error" else None, message="it failed")
        log("ended", ep.episode_id, ep._seq, status)
    left_open = card.episode(task_id="t9", agent="a", episode_id="open-0")
    for j in range(rng.randint(0, 5)):
        left_open.message("assistant", f"thinking {j}")
    log.enter("bulk")
    bulk(card, rng, log)
    log.enter("artifacts")
    for k in range(rng.randint(0, 2)):
        data = f"artifact {k} of seed {rng.random()}".encode()
        assert card.add_artifact(data) == hashlib.sha256(data).hexdigest()
        log("artifact", hashlib.sha256(data).hexdigest())
    log.enter("drops")
    card.add_drop({"target": "steps.t", "action": "unobserved", "declaration": "source_missing",
                   "loss_class": "unavailable_source_field", "reason": "crash-test drop"})
    log("drop", "crash-test drop")
    log.enter("close")
    card.close()
    log("closed")


def bulk(card: rc.CardWriter, rng: random.Random, log: Log) -> None:
    """The bulk path: episode tables and step tables, each write_steps call an iterable of
    several tables, the steps of one episode split across calls (in seq order), episodes
    written before or after their steps."""
    n_steps = {f"b{i}": rng.randint(0, 5) for i in range(rng.randint(1, 4))}
    episodes = pa.table({
        "episode_id": list(n_steps), "task_id": ["bt"] * len(n_steps), "agent": ["bulk"] * len(n_steps),
        "status": [rng.choice(["completed", "error"]) for _ in n_steps], "n_steps": list(n_steps.values()),
        "score.reward": [float(rng.random() < 0.5) for _ in n_steps],
    })
    rows = [(eid, seq) for eid, n in n_steps.items() for seq in range(n)]
    cuts = sorted(rng.sample(range(1, len(rows)), min(len(rows) - 1, rng.randint(0, 4)))) if len(rows) > 1 else []
    pieces = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True)] if rows else []

    def tables(chunk):
        for piece in chunk:
            yield pa.table({"episode_id": [e for e, _ in piece], "seq": [q for _, q in piece],
                            "kind": ["message"] * len(piece), "content": [f"{e}/{q}" for e, q in piece]})

    def write_episodes():
        card.write_episodes(episodes)
        for eid, n, status in zip(n_steps, n_steps.values(), episodes.column("status").to_pylist(), strict=True):
            log("bulk-episode", eid, n, status)

    steps_first = rng.random() < 0.3
    if not steps_first:
        write_episodes()
    calls = [pieces[i:i + 2] for i in range(0, len(pieces), 2)]
    for chunk in calls:
        card.write_steps(tables(chunk))
        for piece in chunk:
            for eid, _ in piece:
                log("bulk-step", eid)
    if steps_first:
        write_episodes()


def _child(command: dict) -> None:
    log = Log(command["log"])
    rng = random.Random(command["seed"])
    phase, after, since = command.get("phase"), command.get("after", 0), 0
    if "delay" in command:
        threading.Timer(command["delay"], os.kill, (os.getpid(), signal.SIGKILL)).start()
    else:
        def line(frame, event, arg):  # noqa: ARG001
            nonlocal phase, since
            if event == "line":
                log.lines += 1
                if phase is not None and log.phase == phase:
                    phase = None  # counting from here on, into later phases if this one is shorter
                if phase is None and after:
                    since += 1
                    if since == after:
                        os.kill(os.getpid(), signal.SIGKILL)
            return line

        sys.settrace(lambda frame, event, arg: line if frame.f_code.co_filename.startswith(IO_DIR) else None)
    scenario(command["dir"], rng, log)
    sys.settrace(None)
    log("lines", log.lines)


def main() -> None:
    for raw in sys.stdin:
        command = json.loads(raw)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _child(command)
            except BaseException as exc:  # noqa: BLE001 - reported to the fuzzer, which fails the case
                os.write(2, f"writer raised {type(exc).__name__}: {exc}\n".encode())
                code = 3
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        print(json.dumps({"killed": killed, "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}),
              flush=True)


if __name__ == "__main__":
    main()
