"""Every field of an Inspect .eval log, set to each of a few hostile values, through `rcard import`.

Usage: python scripts/eval_field_sweep.py [SAMPLE_PATHS_PER_VALUE] [SEED]

Walks the header (fixtures/sources/inspect/synthetic.json without its samples) and one
sample: each node (object, list or scalar) in turn is replaced by null, a wrong-typed
value, a huge integer, 1e999, a lone surrogate escape, a deep nest, or deleted; the log is
written as a .eval archive and imported in-process (CliRunner). A case is BAD when the
import exits 2, prints a traceback or "internal error", raises, or exits 1 without naming
the .eval file. Header fields are swept exhaustively; sample fields by a seeded choice.
"""
import json
import pathlib
import random
import sys
import tempfile
import zipfile

from json_mutations import MISSING, paths, with_value  # scripts/ is sys.path[0]
from typer.testing import CliRunner

from rollout_cards.cli import app

per = int(sys.argv[1]) if len(sys.argv) > 1 else 60
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 0)  # noqa: S311 (reproducible, not a secret)
SRC = pathlib.Path(__file__).resolve().parents[1] / "fixtures/sources/inspect/synthetic.json"
# raw JSON texts: json.dumps cannot write some of them (1e999, big ints, lone surrogates)
HOSTILE = ["null", '"x"', '""', "0", "-1", "1.5", "true", "[]", "{}", "1e999", "123456789012345678901234567890",
           '"\\ud800"', "[" * 200 + "]" * 200, '{"a": ' * 100 + "1" + "}" * 100, '"' + "y" * 100000 + '"',
           '["a", 1, null]', "-0.0", '"2024-13-45T99:99:99"', MISSING]


log = json.loads(SRC.read_text())
samples = log.pop("samples")
tmp = pathlib.Path(tempfile.mkdtemp(prefix="eval_field_sweep."))
runner = CliRunner()


def run(header_text, sample_texts, label):
    path = tmp / "log.eval"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("header.json", header_text)
        for name, t in sample_texts:
            zf.writestr(name, t)
    out_dir = tmp / "card"
    res = runner.invoke(app, ["import", "inspect", str(path), "-o", str(out_dir), "--overwrite"])
    out = res.output
    exc = res.exception and not isinstance(res.exception, SystemExit)
    bad = (exc or res.exit_code == 2 or "internal error" in out or "Traceback" in out
           or (res.exit_code == 1 and str(path) not in out and "log.eval" not in out))
    if bad:
        print("BAD", label, res.exit_code, out[-400:].replace("\n", " | "), repr(res.exception)[:300], flush=True)
    return res.exit_code, bool(bad)


def names(ss):
    return [(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s)) for s in ss]


codes, bad, n = {}, 0, 0
plain_samples = names(samples)
for p in list(paths(log))[1:]:
    for raw in HOSTILE:
        code, b = run(with_value(log, p, raw), plain_samples, f"header {p} = {str(raw)[:40]}")
        codes[code] = codes.get(code, 0) + 1
        bad += b
        n += 1
sample_paths = list(paths(samples[0]))[1:]
for raw in HOSTILE:
    for p in rng.sample(sample_paths, min(per, len(sample_paths))):
        first = samples[0]
        text = with_value(first, p, raw)
        name = f"samples/{first['id']}_epoch_{first['epoch']}.json"
        code, b = run(json.dumps(log), [(name, text)] + plain_samples[1:], f"sample {p} = {str(raw)[:40]}")
        codes[code] = codes.get(code, 0) + 1
        bad += b
        n += 1
print("cases", n, "bad", bad, "exit codes", dict(sorted(codes.items())))
