"""Every importer against special files where its inputs hold a regular file: a FIFO, a link to
a device, a directory, a dangling link, a link out of the source tree — and against a file that
grows while it is read.

Each case runs `rcard import` in a child process with a timeout (a FIFO opened for reading
blocks until a writer comes, /dev/zero never ends: in-process such a bug would hang the suite)
and checks: exit 0 or 1 (2 for a file named by an option, a usage error by design), never a
hang, a traceback or an internal error; an exit 1 names a file of the input; an exit-0 card
validates. The seeds are the importer fuzzer's (tests/importers/test_importer_fuzz.py SEEDS).
CI runs one random special file per format (`cases(1)`); RCARD_FUZZ_SCALE runs more.
Counterexamples found so far: chat-jsonl's --mapping FIFO hung forever and /dev/zero ran out of
memory (tests/importers/test_hostile_sources.py).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from rollout_cards.importers import available_formats
from tests.fuzzing import cases, seed
from tests.importers.test_importer_fuzz import SEEDS, Seed, _format

TIMEOUT = 120  # seconds; an import of a seed takes 1-5 s, a blocked one never ends
KINDS = ("fifo", "device", "directory", "dangling-link", "link-outside")


def _special(victim: Path, kind: str, outside: Path) -> None:
    victim.unlink()
    if kind == "fifo":
        os.mkfifo(victim)
    elif kind == "device":
        victim.symlink_to("/dev/zero")
    elif kind == "directory":
        victim.mkdir()
    elif kind == "dangling-link":
        victim.symlink_to(victim.parent / "no-such-file")
    else:
        victim.symlink_to(outside)


def _import(fmt: str, inputs: Seed, out: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "rollout_cards", "import", fmt, *map(str, inputs.sources), "-o", str(out),
            *inputs.options]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
                              env={**os.environ, "COLUMNS": "200"})
    except subprocess.TimeoutExpired:
        pytest.fail(f"{fmt}: `{' '.join(argv[3:])}` did not finish in {TIMEOUT} s (blocked on a special file?)")


@pytest.mark.fuzz
@pytest.mark.parametrize("key", sorted(SEEDS))
def test_special_files_are_refused_cleanly_or_skipped_with_a_drop(key, tmp_path):
    fmt = _format(key)
    if fmt not in available_formats():
        pytest.skip(f"{fmt} is not registered in this installation")
    rng = random.Random(f"{seed()}:special:{key}")
    outside = tmp_path / "outside.json"
    outside.write_text('{"a": 1}\n')
    for round_ in range(cases(1)):
        case = tmp_path / f"case-{round_}"
        case.mkdir()
        inputs = SEEDS[key](case)
        files = [f for f in inputs.files() if f not in inputs.members]  # members live inside an archive
        victim, kind = rng.choice(files), rng.choice(KINDS)
        _special(victim, kind, outside)
        out = case / "card"
        result = _import(fmt, inputs, out)
        text = result.stdout + result.stderr
        label = f"{fmt}: {kind} at {victim.name}: exit {result.returncode}\n{text[-2000:]}"
        option_file = victim in inputs.referenced and fmt == "chat-jsonl"
        assert result.returncode in ((0, 1, 2) if option_file else (0, 1)), label
        assert "Traceback" not in text and "internal error" not in text, label
        if result.returncode:
            assert victim.name in text or any(str(s) in text for s in inputs.sources), label
            assert not out.exists() or not any(out.iterdir()), label
        else:
            from rollout_cards.validate import validate

            report = validate(out)
            assert report.valid, f"{label}\n{[str(f) for f in report.findings][:5]}"
