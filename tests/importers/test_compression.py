"""A compressed source is named as such by every importer, with the command that decompresses it."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import shutil
import zipfile
from pathlib import Path

import pytest
import zstandard

from rollout_cards.errors import SourceFormatError
from rollout_cards.importers.compression import compressed_error, compression_of
from rollout_cards.importers.json_stream import iter_jsonl
from rollout_cards.importers.run import import_source
from rollout_cards.io.hashing import lfs_pointer
from tests.conftest import REPO, external


def _zip(data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("inner.json", data)
    return out.getvalue()


COMPRESS = {
    "gzip": lambda b: gzip.compress(b, mtime=0),
    "zstd": lambda b: zstandard.ZstdCompressor().compress(b),
    "xz": lzma.compress,
    "bzip2": bz2.compress,
    "zip": _zip,
}

SUFFIX = {"gzip": ".gz", "zstd": ".zst", "xz": ".xz", "bzip2": ".bz2", "zip": ".zip"}

# (format, source under ../shared/data/external, the file in it that is compressed — None: the source itself)
CASES = [
    ("tau-bench", "tau-bench/gpt-4o-airline.json", None),
    ("tau2-bench", "tau2-bench/qwen2.5-7b_airline_default_gpt-4.1-2025-04-14_1trials.json", None),
    ("atif", "harbor/hello-world-timeout.trajectory.json", None),
    ("agentbench", "agentbench/medagentbench-std_gemini-2.0/runs.jsonl", None),
    ("agentlab", "agentlab/2024-08-01_10-20-52_GenericAgent_on_miniwob.ascending-numbers_64_e6d2d5",
     "summary_info.json"),
    ("agentlab", "agentlab/result_df_trial_1_of_3.csv", None),
    ("openhands", "openhands/v1_sdk_openagentsafety/output.jsonl", None),
    ("swe-agent", "swe-agent/v1/6e44b9__sweagenttestrepo-1c2844.traj", None),
    ("swe-agent", "swe-agent/v0/all_preds.jsonl", None),
    ("mini-swe-agent", "mini-swe-agent/deepseek_reasoner_dev", "preds.json"),
    ("mini-swe-agent", "mini-swe-agent/deepseek_reasoner_dev", "exit_statuses_1776073811.3981779.yaml"),
    ("mini-swe-agent", "mini-swe-agent/deepseek_reasoner_dev", "pvlib__pvlib-python-1606.traj.json"),
    ("swe-bench", "swe-bench/harness_deepseek_chat_dev/deepseek__deepseek-chat.deepseek_chat_dev.json", None),
    ("lm-eval", "lm-eval/negotiationtom_Qwen3-8B", "results_2026-07-08T18-15-33.115417.json"),
    ("lm-eval", "lm-eval/negotiationtom_Qwen3-8B",
     "samples_negotiationtom_belief_2026-07-08T18-15-33.115417.jsonl"),
]


def _source(tmp_path: Path, rel: str, member: str | None, kind: str) -> tuple[Path, Path]:
    """A copy of a real source with one file's bytes replaced by their `kind` compression;
    (the source to import, the compressed file)."""
    real = external(rel)
    if member is None:
        src = tmp_path / f"{real.name}{SUFFIX[kind]}"
        src.write_bytes(COMPRESS[kind](real.read_bytes()))
        return src, src
    src = tmp_path / real.name
    shutil.copytree(real, src)
    target = src / member
    target.write_bytes(COMPRESS[kind](target.read_bytes()))
    return src, target


@pytest.mark.parametrize(("fmt", "rel", "member"), CASES, ids=[f"{c[0]}:{c[2] or Path(c[1]).name}" for c in CASES])
@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_every_importer_names_a_compressed_source(tmp_path, fmt, rel, member, kind):
    src, compressed = _source(tmp_path, rel, member, kind)
    with pytest.raises(SourceFormatError) as info:
        import_source(fmt, [src], tmp_path / "card")
    message = str(info.value)
    assert info.value.file == str(compressed)
    assert f"is {kind}-compressed" in message and "decompress it" in message
    assert "UTF-8" not in message
    assert not (tmp_path / "card").exists()


@pytest.mark.parametrize("kind", ["xz", "bzip2", "zip"])
def test_other_compressions_are_named_too(tmp_path, kind):
    src, _ = _source(tmp_path, "openhands/v1_sdk_openagentsafety/output.jsonl", None, kind)
    with pytest.raises(SourceFormatError, match="zip archive" if kind == "zip" else f"is {kind}-compressed"):
        import_source("openhands", [src], tmp_path / "card")


def test_keep_going_does_not_hide_a_compressed_file(tmp_path):
    src, _ = _source(tmp_path, "agentbench/medagentbench-std_gemini-2.0/runs.jsonl", None, "gzip")
    with pytest.raises(SourceFormatError, match="gzip-compressed"):
        import_source("agentbench", [src], tmp_path / "card", keep_going=True)


def test_the_message_names_the_command_and_the_decompressed_file():
    error = compressed_error("runs/out put.jsonl.gz", gzip.compress(b"{}\n")[:6], "line 1")
    assert error is not None and error.file == "runs/out put.jsonl.gz" and error.record == "line 1"
    assert "`gunzip -c 'out put.jsonl.gz' > 'out put.jsonl'`" in str(error)
    assert "and import 'out put.jsonl'" in str(error) and "magic number 1f 8b)" in str(error)
    # a compressed file under the plain name a directory format expects is decompressed in place
    inside = str(compressed_error("run/preds.json", zstandard.ZstdCompressor().compress(b"{}")[:6]))
    assert "`zstd -dc preds.json > preds.json.plain && mv preds.json.plain preds.json`" in inside


@pytest.mark.parametrize(("head", "kind"), [
    (gzip.compress(b"x", mtime=0)[:6], "gzip"), (zstandard.ZstdCompressor().compress(b"x")[:6], "zstd"),
    (lzma.compress(b"x")[:6], "xz"), (bz2.compress(b"x")[:6], "bzip2"), (_zip(b"x")[:6], "zip"),
    (b'{"a":', None), (b"BZh is text", None), (b"", None), (b"\x1f", None),
])
def test_compression_of(head, kind):
    assert compression_of(head) == kind


def test_plain_sources_that_fail_keep_their_own_message(tmp_path):
    bad = tmp_path / "output.jsonl"
    bad.write_bytes(b'\xff\xfe{"instance_id": "a"}\n')
    with pytest.raises(SourceFormatError, match="not valid UTF-8") as info:
        import_source("openhands", [bad], tmp_path / "card")
    assert info.value.record == "line 1"


def _lfs_pointer(data: bytes) -> bytes:
    """The pointer `git lfs` leaves in a checkout without the LFS content (git-lfs spec v1)."""
    import hashlib

    return (b"version https://git-lfs.github.com/spec/v1\noid sha256:" + hashlib.sha256(data).hexdigest().encode()
            + b"\nsize " + str(len(data)).encode() + b"\n")


@pytest.mark.parametrize(("fmt", "rel", "member"), CASES + [("inspect", "inspect/log_formats.eval", None)],
                         ids=[f"{c[0]}:{c[2] or Path(c[1]).name}" for c in CASES] + ["inspect:.eval"])
def test_every_importer_names_a_git_lfs_pointer(tmp_path, fmt, rel, member):
    # a checkout without `git lfs` holds pointers under the data files' names; before, each
    # format said "not valid JSON at character 0" (or "not a zip archive" for an .eval)
    real = external(rel)
    if member is None:
        src = target = tmp_path / real.name
    else:
        src = tmp_path / real.name
        shutil.copytree(real, src)
        target = src / member
    original = real.read_bytes() if member is None else target.read_bytes()
    target.write_bytes(_lfs_pointer(original))
    with pytest.raises(SourceFormatError) as info:
        import_source(fmt, [src], tmp_path / "card")
    message = str(info.value)
    assert info.value.file == str(target)
    assert "is a Git LFS pointer" in message and "git lfs pull --include" in message
    assert "not valid JSON" not in message and "zip archive" not in message
    assert not (tmp_path / "card").exists()


# The v1 pointer of the git-lfs spec (git-lfs/git-lfs docs/spec.md, "Example of a v1 text pointer").
SPEC_POINTER = (b"version https://git-lfs.github.com/spec/v1\n"
                b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n")
OID = b"4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393"


@pytest.mark.parametrize("version", [b"https://git-lfs.github.com/spec/v1", b"https://hawser.github.com/spec/v1",
                                     b"http://git-media.io/v/2"])
def test_a_pointer_is_named_with_its_size_under_each_version_git_lfs_reads(version):
    # lfs/pointer.go v1Aliases: public launch, the pre-release "hawser" and the alpha git-media URL
    pointer = SPEC_POINTER.replace(b"https://git-lfs.github.com/spec/v1", version)
    assert "is a Git LFS pointer" in (m := str(compressed_error("a/b.json", pointer)))
    assert "not the file of 12,345 bytes" in m
    ext = pointer.replace(b"\noid", b"\next-0-foo sha256:" + OID + b"\next-1-bar sha256:" + OID + b"\noid")
    assert compressed_error("a/b.json", ext) is not None  # extension lines, sorted, before oid (the spec)


@pytest.mark.parametrize("data", [
    b"version https://hawser.github.com/spec/",  # hypothesis found it: a tar member's bytes began so
    b"version https://git-lfs.github.com/spec/v1\n",  # the version line alone
    SPEC_POINTER[:-1],  # no newline after size
    SPEC_POINTER + b"\x00" * 40,  # a pointer's text followed by data: a larger file
    SPEC_POINTER + b"extra line\n",
    SPEC_POINTER.replace(b"\n", b"\r\n"),  # lines end in \n only
    SPEC_POINTER.replace(b"spec/v1", b"spec/v2"),  # an unknown version (plain string comparison)
    SPEC_POINTER.replace(b"sha256:4d", b"sha256:4D"),  # oid: lower-case hex
    SPEC_POINTER.replace(b"sha256:", b"sha1:"),
    SPEC_POINTER.replace(b"size 12345", b"size -1"),
    SPEC_POINTER.replace(b"size 12345", b"size 99999999999999999999"),  # beyond int64
    SPEC_POINTER.replace(b"oid", b"size 1\noid", 1).replace(b"\nsize 12345", b""),  # keys out of order
    SPEC_POINTER.replace(b"\noid", b"\next-1-bar sha256:" + OID + b"\next-0-foo sha256:" + OID + b"\noid"),
    SPEC_POINTER.replace(b"version ", b"version  "),  # one space between key and value
    SPEC_POINTER + b" " * (1025 - len(SPEC_POINTER)),  # over git-lfs's 1024-byte bound
    b'{"version https://git-lfs.github.com/spec/v1": 1}',
    b"version: 1\nsize 3\n",
])
def test_only_the_pointer_grammar_is_a_pointer(data):
    # a pointer was any file whose bytes began with a version line: the tar reader refused a member that is
    # data (tests/importers/test_tar_reader.py::test_members_are_what_tarfile_reads, hypothesis)
    assert lfs_pointer(data) is None
    assert compressed_error("a/b.json", data) is None


def test_a_jsonl_pointer_is_named_from_the_files_head_not_its_first_line(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(SPEC_POINTER)
    with pytest.raises(SourceFormatError, match=r"is a Git LFS pointer .*not the file of 12,345 bytes"):
        list(iter_jsonl(path.open("rb"), str(path)))
    path.write_bytes(SPEC_POINTER.split(b"\n")[0] + b"\n{}\n")  # a version line, then JSON: not a pointer
    with pytest.raises(SourceFormatError) as info:
        list(iter_jsonl(path.open("rb"), str(path)))
    assert "LFS" not in str(info.value) and info.value.record == "line 1"


def _openhands_archive_with_pointer(tmp_path: Path) -> tuple[Path, Path, str, bytes]:
    """The OpenHands conversations fixture with one sub-agent event file of nest-1.tar.gz a pointer."""
    import gzip
    import importlib.util
    import tarfile

    spec = importlib.util.spec_from_file_location("openhands_conversations", REPO / "fixtures" / "openhands_conversations.py")
    oh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oh)
    src = oh.write(tmp_path / "run")
    archive = src.parent / "conversations" / "nest-1.tar.gz"
    with tarfile.open(archive, "r:gz") as tar:
        entries = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]
    member, original = next((m.name, d) for m, d in entries if d is not None and "/subagents/" in m.name
                            and "/events/event-" in m.name)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in entries:
            if info.name == member:
                data = _lfs_pointer(data)
                info.size = len(data)
            tar.addfile(info, None if data is None else io.BytesIO(data))
    archive.write_bytes(gzip.compress(raw.getvalue(), mtime=0))
    return src, archive, member, original


def test_a_git_lfs_pointer_inside_an_archive_is_named_as_a_member(tmp_path):
    """A .eval zip or an OpenHands conversations .tar.gz made from a checkout without `git lfs`
    holds pointers as members: the message named the archive as the pointer and said to
    `git lfs pull --include <the archive>`, which is no pointer; now it names the member, its
    size from the pointer, and that the archive must be made again from a fetched checkout."""
    real = external("inspect/log_formats.eval")
    with zipfile.ZipFile(real) as z:
        members = {n: z.read(n) for n in z.namelist()}
    sample = next(n for n in members if n.startswith("samples/"))
    cases = []
    for member in ("header.json", sample):
        eval_log = tmp_path / member.replace("/", "_") / real.name
        eval_log.parent.mkdir()
        with zipfile.ZipFile(eval_log, "w") as z:
            for n, data in members.items():
                z.writestr(n, _lfs_pointer(data) if n == member else data)
        cases.append(("inspect", eval_log, eval_log, member, len(members[member])))
    src, archive, member, original = _openhands_archive_with_pointer(tmp_path / "oh")
    cases.append(("openhands", src, archive, member, len(original)))
    for fmt, source, file, member, size in cases:
        with pytest.raises(SourceFormatError) as info:
            import_source(fmt, [source], tmp_path / "card")
        message = str(info.value)
        assert info.value.file == str(file) and member in info.value.record, (fmt, message)
        assert f"is a Git LFS pointer (it starts 'version https://git-lfs.github.com/spec/...'), not the file of " \
               f"{size:,} bytes" in message, message
        assert "the archive was made from a checkout without its LFS content" in message, message
        assert f"git lfs pull --include {member.rsplit('/', 1)[-1]}`" in message, message
        assert "not valid JSON" not in message and not (tmp_path / "card").exists()
