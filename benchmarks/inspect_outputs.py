"""Byte-for-byte check of the Inspect importer's output, for speed work that must not change it.

    python benchmarks/inspect_outputs.py write OUT [--code DIR] [--samples 3000]
    python benchmarks/inspect_outputs.py compare A B

`write` imports, each into OUT/<case>/: every real Inspect log of ../shared/data/external/inspect/
alone, all of them together, and the 3,000-sample `.eval` and `.json` logs of the import benchmark
(`_inspect_eval.py`; written once to benchmarks/_work/inspect-outputs/ and reused). Each real
log's card must `rcard validate` with exit 0 (checked, printed). `--code DIR`: import the
`rollout_cards` of DIR instead (e.g. `git archive main | tar -x -C DIR`), to write the reference.
A failed import is kept as OUT/<case>/error.txt, so it is compared too.

`compare` says, case by case, whether the two trees hold the same files with the same bytes,
card.json compared without its `created` time; exit 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REAL = HERE.parents[1] / "shared" / "data" / "external" / "inspect"
LOGS = HERE / "_work" / "inspect-outputs"


def _cases(samples: int) -> dict[str, list[Path]]:
    real = sorted(p for p in REAL.rglob("*") if p.suffix in (".eval", ".json") and p.is_file())
    if not real:
        raise SystemExit(f"no Inspect logs under {REAL}")
    cases = {p.relative_to(REAL).as_posix().replace("/", "__"): [p] for p in real}
    cases["all-real"] = real
    big = {"eval": LOGS / f"log-{samples}.eval", "json": LOGS / f"log-{samples}.json"}
    if not all(p.exists() for p in big.values()):
        sys.path.insert(0, str(HERE))
        from _inspect_eval import make_eval, make_json

        make_eval(big["eval"], samples)
        make_json(big["eval"], big["json"])
    cases.update({f"big-{fmt}": [p] for fmt, p in big.items()})
    return cases


def write(out: Path, code: Path | None, samples: int) -> int:
    if code is not None:
        sys.path.insert(0, str(code.resolve()))
    import rollout_cards
    from rollout_cards.errors import RolloutCardError
    from rollout_cards.importers import import_source

    print(f"rollout_cards from {Path(rollout_cards.__file__).parent}")
    env = None
    if code is not None:
        import os

        env = {**os.environ, "PYTHONPATH": str(code.resolve())}
    bad = 0
    for case, sources in _cases(samples).items():
        card = out / case
        try:
            result = import_source("inspect", sources, card)
        except RolloutCardError as exc:
            card.mkdir(parents=True, exist_ok=True)
            (card / "error.txt").write_text(f"{type(exc).__name__}: {exc}\n", encoding="utf-8")
            print(f"{case}: import failed: {exc}")
            bad += 1
            continue
        line = f"{case}: {result.episodes} episodes, {result.steps} steps"
        if not case.startswith("big-"):
            check = subprocess.run([sys.executable, "-m", "rollout_cards", "validate", str(card)],
                                   capture_output=True, text=True, env=env, check=False)
            line += f", validate exit {check.returncode}"
            bad += check.returncode != 0
        print(line)
    return 1 if bad else 0


def _files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def _card(path: Path) -> dict:
    doc = json.loads(path.read_bytes())
    doc.pop("created", None)
    return doc


def compare(a: Path, b: Path) -> int:
    cases = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    differ = 0
    for case in cases:
        fa, fb = _files(a / case), _files(b / case)
        problems = [f"only in {a.name if n in fa else b.name}: {n}" for n in sorted(fa.keys() ^ fb.keys())]
        for name in sorted(fa.keys() & fb.keys()):
            if name == "card.json":
                same = _card(fa[name]) == _card(fb[name])
            else:
                same = fa[name].read_bytes() == fb[name].read_bytes()
            if not same:
                problems.append(f"differs: {name}")
        print(f"{case}: {'same' if not problems else '; '.join(problems)} ({len(fa)} files)")
        differ += bool(problems)
    print(f"{len(cases) - differ} of {len(cases)} cases the same")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("out", type=Path)
    w.add_argument("--code", type=Path, default=None)
    w.add_argument("--samples", type=int, default=3000)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = parser.parse_args()
    if args.command == "write":
        return write(args.out, args.code, args.samples)
    return compare(args.a, args.b)


if __name__ == "__main__":
    raise SystemExit(main())
