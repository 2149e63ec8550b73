"""Do the mini-swe-agent and tau2-bench importers still write the same cards? (a guard for speed work)

    python benchmarks/same_cards.py --save /tmp/cards-before.json     # on the code before a change
    python benchmarks/same_cards.py --compare /tmp/cards-before.json  # after it: exit 1 on any difference

Imports every real tau2-bench results file and the real mini-swe-agent run of
../shared/data/external (the run as copied, flat, and laid out as mini-swe-agent writes it,
<id>/<id>.traj.json; each of its trajectories alone), and replicas of them
(`_replicas.py`: 1,500 simulations, a 1,500-instance run with 1 trajectory in 5 and one with
every instance's), each into a fresh card with a fixed `created`. It records the sha256 of every
file of each card — the Parquet tables, the rules, the artifacts — and of card.json with every
`created` key removed (the inventory inside it names the other files' digests, so it is compared
whole otherwise). Equal digests mean the change is invisible to a reader of the cards.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import WORK  # noqa: E402
from _replicas import EXTERNAL, MINI_DIR, mini_swe_agent_source, tau2_source  # noqa: E402

CREATED = datetime(2026, 1, 1, tzinfo=UTC)
REPLICA_EPISODES = 1500


def _without_created(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_created(v) for k, v in value.items() if k != "created"}
    if isinstance(value, list):
        return [_without_created(v) for v in value]
    return value


_SANS_PARQUET = "card.json (sans Parquet inventory)"


def _rows_digest(path: Path) -> str:
    """sha256 of a Parquet file's Arrow schema and rows as Python values (not of its layout)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    digest = hashlib.sha256(str(table.schema.remove_metadata()).encode())
    for batch in table.to_batches(max_chunksize=4096):  # row by row: batches follow the row groups
        for row in batch.to_pylist():
            digest.update(json.dumps(row, sort_keys=True, default=repr).encode() + b"\n")
    return digest.hexdigest()


def card_digests(card: Path) -> dict[str, str]:
    """sha256 of every file of `card` by relative path; card.json's without its `created` keys;
    `rows:<path>` of each Parquet file's rows, and card.json without the Parquet inventory."""
    out = {}
    for path in sorted(p for p in card.rglob("*") if p.is_file()):
        rel = path.relative_to(card).as_posix()
        data = path.read_bytes()
        if rel == "card.json":
            doc = _without_created(json.loads(data))
            data = json.dumps(doc, sort_keys=True).encode()
            files = doc.get("inventory", {}).get("files", [])
            doc["inventory"]["files"] = [f for f in files if not str(f.get("path", "")).endswith(".parquet")]
            doc["inventory"].pop("root_digest", None)  # a digest over every file's
            out[_SANS_PARQUET] = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
        elif rel.endswith(".parquet"):
            out[f"rows:{rel}"] = _rows_digest(path)
        out[rel] = hashlib.sha256(data).hexdigest()
    return out


def _layout_only(changed: list[str]) -> bool:
    """Whether the keys that differ are only Parquet files' bytes and card.json by their digests."""
    return all(k.endswith(".parquet") and not k.startswith("rows:") or k == "card.json" for k in changed)


def _sources(work: Path) -> dict[str, tuple[str, list[Path]]]:
    mini = EXTERNAL / MINI_DIR
    if not mini.is_dir():
        raise SystemExit(f"{mini} is absent: this check imports the real files of ../shared/data/external")
    nested = work / "mini-nested"
    nested.mkdir()
    for p in sorted(mini.iterdir()):
        if p.name.endswith(".traj.json"):
            (nested / p.name.removesuffix(".traj.json")).mkdir()
            shutil.copy(p, nested / p.name.removesuffix(".traj.json") / p.name)
        else:
            shutil.copy(p, nested / p.name)
    out: dict[str, tuple[str, list[Path]]] = {
        "mini-flat": ("mini-swe-agent", [mini]),
        "mini-nested": ("mini-swe-agent", [nested]),
    }
    for p in sorted(mini.glob("*.traj.json")):
        out[f"mini-file-{p.name}"] = ("mini-swe-agent", [p])
    tau2 = sorted((EXTERNAL / "tau2-bench").glob("*.json"))
    for p in tau2:
        out[f"tau2-{p.name}"] = ("tau2-bench", [p])
    out["tau2-all"] = ("tau2-bench", tau2)
    tau2_source(work / "tau2-replica.json", REPLICA_EPISODES)
    out["tau2-replica"] = ("tau2-bench", [work / "tau2-replica.json"])
    mini_swe_agent_source(work / "mini-replica", REPLICA_EPISODES)
    out["mini-replica"] = ("mini-swe-agent", [work / "mini-replica"])
    mini_swe_agent_source(work / "mini-replica-full", REPLICA_EPISODES, with_every_trajectory=True)
    out["mini-replica-full"] = ("mini-swe-agent", [work / "mini-replica-full"])
    return out


def digests() -> dict[str, dict[str, str]]:
    from rollout_cards.importers import import_source

    work = WORK / "same-cards"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        result = {}
        for label, (fmt, paths) in _sources(work).items():
            card = work / "cards" / "card"
            import_source(fmt, paths, card, created=CREATED)
            result[label] = card_digests(card)
            shutil.rmtree(card)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--save", type=Path, help="write the digests to this JSON file")
    mode.add_argument("--compare", type=Path, help="compare with the digests saved in this JSON file")
    args = parser.parse_args()
    now = digests()
    if args.save:
        args.save.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"{len(now)} cards, {sum(map(len, now.values()))} files: digests written to {args.save}")
        return 0
    before = json.loads(args.compare.read_text())
    differ = layout = 0
    for label in sorted(set(before) | set(now)):
        a, b = before.get(label, {}), now.get(label, {})
        changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        if changed and _layout_only(changed):
            layout += 1
            print(f"{label}: same tables, other Parquet layout ({', '.join(changed[:8])})")
        elif changed:
            differ += 1
            print(f"{label}: {len(changed)} file(s) differ: {', '.join(changed[:8])}")
    verdict = f"{differ} differ" if differ else "all identical" + (f" in their tables ({layout} in another Parquet layout)" if layout else "")
    print(f"{len(now)} cards compared: {verdict}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
