"""Seeded sweep of hostile rule files through `rcard rescore` (in-process, CliRunner).

Usage: python scripts/rule_text_sweep.py N SEED [CARD] [--in-card] [-v]

--in-card: instead of `rescore CARD --rule FILE`, the hostile text replaces the card's own
rule file in a copy of the card, its inventory re-hashed as a publisher's tool would
(fixtures/bad_cards.rehash), and `rcard validate` runs on it: there a bad rule is a finding,
so only exit 0 or 1 is right.

Unlike tests/rules' structural mutations, this writes the rule *text*: random expressions
from a grammar over the synthetic card's columns (with type mismatches, deep nesting, huge
literals, bad regexes, control and wide characters, lone surrogates), and YAML-level hazards
(anchors and aliases, tags, duplicate keys, flow/blocks mixed). A case is BAD when the CLI
exits 2 without naming the file, prints a Python repr, a traceback or "internal error", raises, or takes more than 20 s.
"""
import pathlib
import random
import shutil
import sys
import tempfile
import time

from typer.testing import CliRunner

from rollout_cards.cli import app

n, seed = int(sys.argv[1]), int(sys.argv[2])
args = [a for a in sys.argv[3:] if not a.startswith("-")]
card = pathlib.Path(args[0] if args else "fixtures/cards/synthetic").resolve()
in_card = "--in-card" in sys.argv
if in_card:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures"))
    import bad_cards
rng = random.Random(seed)  # noqa: S311 (a reproducible sweep, not a secret)
EP = ["score.success", "score.profit", "agent", "task_id", "status", "trial", "n_steps", "cost_usd",
      "started_at", "ended_at", "error_message", "cond.difficulty", "task.category", "`score.success`",
      "episode_id", "nope", "`a-b`", "x"]
ST = ["kind", "name", "content", "args", "seq", "is_error", "t", "role", "payload", "depth",
      "episode.agent", "agent"]
LIT = ["1", "0", "-1", "2.5", "1e999", "-1e999", "9" * 400, "1" + "0" * 30, "0x10", "1_000", "null",
       "true", "false", "'a'", "''", "'\\x00'", "'名前'", "'e\u0301'", "'\u202e'", "r'\\d+'", "\"dq\"",
       "'" + "a" * 5000 + "'", "[]", "['a', 'b']", "[1, 'a']", "[[1]]", "[null]", "'\\ud800'", ".5", "1.",
       "'it''s'", "'\t'"]
RX = ["r'(?<=a)b'", "r'(a)\\1'", "r'['", "r'(?P<n>x)'", "r'a{1000}{1000}'", "r'\\C'", "''", "r'(?i)X'",
      "r'" + "(" * 300 + ")" * 300 + "'", "agent", "r'\\p{Han}'", "r'a{2,1}'", "r'\\'"]
FN1 = ["is_null", "lower", "upper", "len", "abs", "round", "number", "json_list", "canonical", "sort",
       "distinct", "not"]
FN2 = ["coalesce", "contains", "startswith", "endswith", "min", "max", "json_get", "at", "index_of",
       "round", "regex_match", "regex_extract"]
OPS = ["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "and", "or", "in", "not in"]


def expr(cols, d=0):
    r = rng.random()
    if d > 4 or r < 0.25:
        return rng.choice(cols + LIT)
    if r < 0.45:
        return f"{expr(cols, d + 1)} {rng.choice(OPS)} {expr(cols, d + 1)}"
    if r < 0.55:
        f = rng.choice(FN1)
        return f"{f}({expr(cols, d + 1)})" if f != "not" else f"not {expr(cols, d + 1)}"
    if r < 0.7:
        f = rng.choice(FN2)
        a = rng.choice(RX) if f.startswith("regex") else expr(cols, d + 1)
        return f"{f}({expr(cols, d + 1)}, {a})"
    if r < 0.76:
        return f"regex_replace({expr(cols, d + 1)}, {rng.choice(RX)}, {rng.choice(LIT)})"
    if r < 0.82:
        return f"if({expr(cols, d + 1)}, {expr(cols, d + 1)}, {expr(cols, d + 1)})"
    if r < 0.86:
        return f"[{expr(['x'] + cols, d + 1)} for x in {expr(cols, d + 1)} if {expr(['x'] + cols, d + 1)}]"
    if r < 0.9:
        k = rng.choice([50, 200, 1000, 5000]) if d < 2 else 3
        o, c = rng.choice([("(", ")"), ("[", "]"), ("not ", ""), ("-", ""), ("abs(", ")")])
        return o * k + expr(cols, d + 1) + c * k
    if r < 0.93:
        return " + ".join(expr(cols, d + 1) for _ in range(rng.choice([3, 300, 3000]) if d < 2 else 3))
    if r < 0.96:
        s = expr(cols, d + 1)
        i = rng.randrange(len(s) + 1)
        return s[:i] + rng.choice(["\x00", "\x1b[2J", "\n", "\u2028", "\ufeff", "'", "(", ")", ",", "`",
                                   "\\", "#", ": ", "\ud800", "\x7f"]) + s[i:]
    return f"json_get({rng.choice(EP + ST)}, {rng.choice(LIT)}, {rng.choice(LIT)})"


def q(s):
    # a YAML scalar holding s: double-quoted with escapes, single-quoted, or a block
    c = rng.random()
    if c < 0.5:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if c < 0.8:
        return "'" + s.replace("'", "''").replace("\n", " ") + "'"
    return "|-\n  " + s.replace("\n", "\n  ")


def rule_text():
    lines = [f"rule: sweep.r{rng.randrange(10**6)}", "kind: " + rng.choice(["regrade", "diagnostic", "original", "x", "[1]"])]
    if rng.random() < 0.4:
        lines.append("features:")
        for j in range(rng.choice([1, 2])):
            lines.append(f"  f{j}:")
            lines.append(f"    where: {q(expr(EP + ST)).replace(chr(10), chr(10) + '    ')}")
            agg = rng.choice(["count", "sum", "mean", "min", "max", "any", "all", "first", "last", "list", "set", "bogus"])
            lines.append(f"    agg: {agg}")
            if rng.random() < 0.7:
                lines.append(f"    value: {q(expr(ST + EP)).replace(chr(10), chr(10) + '    ')}")
    cols = EP + (["f0", "f1"] if rng.random() < 0.5 else [])
    if rng.random() < 0.4:
        lines.append(f"select: {q(expr(cols))}")
    lines.append(f"score: {q(expr(cols))}")
    if rng.random() < 0.3:
        lines.append("reduce: {by: [" + rng.choice(["task_id", "f0", "score.profit", "nope", "status"]) + "], with: "
                     + rng.choice(["max", "mean", "pass_at_k", "min", "bogus"]) + (", k: " + rng.choice(["2", "0", "-1", "1e999", "'2'"]) if rng.random() < 0.5 else "") + "}")
    lines.append("aggregate:")
    lines.append("  group_by: [" + rng.choice(["agent", "f0", "score.success", "started_at", "status", "cost_usd", "nope"]) + "]")
    if rng.random() < 0.3:
        lines.append("  strata: [" + rng.choice(["cond.difficulty", "f0", "agent", "trial"]) + "]")
    if rng.random() < 0.3:
        lines.append("  statistic: " + rng.choice(["mean", "median", "std", "var", "stderr", "bogus"]))
    text = "\n".join(lines) + "\n"
    # YAML-level hazards
    h = rng.random()
    if h < 0.05:
        text += "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    elif h < 0.1:
        text = text.replace("score:", "score: !!python/object:os.system\n  x:", 1) if rng.random() < 0.5 else text.replace("kind:", "kind: !!binary", 1)
    elif h < 0.15:
        text += "score: \"1\"\n"
    elif h < 0.2:
        text = text.replace("aggregate:", "aggregate: &g\n  x: 1\nother: *g\n<<: *g\nagg2:", 1)
    elif h < 0.25:
        text = "%YAML 1.1\n---\n" + text + "---\nrule: second\n"
    elif h < 0.28:
        text = text.replace("\n", "\r\n")
    elif h < 0.3:
        text = "\ufeff" + text
    elif h < 0.33:
        text = text.replace("score:", "? [score]\n:", 1)
    return text


runner = CliRunner()
tmp = pathlib.Path(tempfile.mkdtemp(prefix="rule_text_sweep."))
bad = 0
codes = {}
worst = 0.0
for i in range(n):
    text = rule_text()
    f = tmp / f"s{seed}_{i}.yaml"
    try:
        f.write_bytes(text.encode("utf-8", "surrogatepass"))
    except UnicodeEncodeError:
        continue  # cannot happen with surrogatepass; kept so one odd case does not end the sweep
    if "-v" in sys.argv:
        print("case", i, f, flush=True)
    t0 = time.perf_counter()
    if in_card:
        copy = tmp / f"card{i}"
        shutil.copytree(card, copy)
        rule = sorted((copy / "rules").glob("*.yaml"))[0]
        # keep the id card.json lists, so validate checks the rule itself, not just the id
        own = next(ln for ln in rule.read_text().splitlines() if ln.startswith("rule:"))
        rule.write_bytes(f.read_bytes().replace(text.split("\n", 1)[0].encode(), own.encode(), 1))
        bad_cards.rehash(copy)
        res = runner.invoke(app, ["validate", str(copy)])
    else:
        res = runner.invoke(app, ["rescore", str(card), "--rule", str(f)])
    dt = time.perf_counter() - t0
    worst = max(worst, dt)
    out = res.output
    codes[res.exit_code] = codes.get(res.exit_code, 0) + 1
    exc = res.exception and not isinstance(res.exception, SystemExit)
    # rescore reports a bad --rule file as a usage error (exit 2) naming the file; any other
    # exit 2, a traceback, a Python repr in the message or a slow case is a bug
    unnamed = res.exit_code == 2 and (in_card or str(f) not in out)
    if in_card:
        shutil.rmtree(copy)
    if exc or unnamed or "internal error" in out or "Traceback" in out or "Node(" in out or dt > 20:
        bad += 1
        print("BAD", f, res.exit_code, f"{dt:.1f}s", out[-500:].replace("\n", " | "), repr(res.exception)[:300], flush=True)
print("cases", n, "bad", bad, "exit codes", dict(sorted(codes.items())), f"slowest {worst:.1f}s")
