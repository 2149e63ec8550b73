"""Layout checks over the members as stored: names, links, special files, collisions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rollout_cards.io.reader import Entry
from rollout_cards.validate.context import CheckContext
from rollout_cards.validate.layout import check_members, path_problem
from rollout_cards.validate.report import Findings


class EntriesOnly:
    """A CardSource that only lists members (enough for the layout check)."""

    name = "fake"

    def __init__(self, entries, refused=()):
        self._entries = entries
        self._refused = set(refused)

    def entries(self):
        return iter(self._entries)

    def exists(self, rel):
        return rel not in self._refused


def run_layout(entries, refused=()):
    ctx = CheckContext(source=EntriesOnly(entries, refused))
    findings = Findings()
    with ctx.collecting(findings):
        check_members(ctx)
    return ctx, [(f.code, f.location.file) for f in findings.items]


@pytest.mark.parametrize("path", ["/etc/passwd", "../x", "a/../b", "a//b", "./a", "C:x", "c:/x", "a\\b", "a/", "",
                                  "a\nb", "a\x00b", "tab\there", "del\x7f"])
def test_unsafe_paths_are_named(path):
    assert path_problem(path) is not None


@given(st.lists(st.text(alphabet="abcXYZ019._-é", min_size=1, max_size=8).filter(lambda p: p not in (".", "..")),
                min_size=1, max_size=4))
def test_plain_relative_paths_are_safe(parts):
    assert path_problem("/".join(parts)) is None


@given(st.lists(st.sampled_from(["a", "b", "..", "."]), min_size=1, max_size=5))
def test_any_dot_component_is_unsafe(parts):
    assert (path_problem("/".join(parts)) is None) == (not {"..", "."} & set(parts))


def test_each_kind_of_member_gets_its_code_and_only_plain_files_are_read():
    ctx, found = run_layout([
        Entry("card.json", "file", 10),
        Entry("data", "dir", 0),
        Entry("data/a.parquet", "file", 5),
        Entry("data/link", "symlink", 0, target="/etc/shadow"),
        Entry("data/hard", "file", 5, links=2),
        Entry("data/arch-hard", "hardlink", 0, target="card.json", links=2),
        Entry("dev", "device", 0),
        Entry("fifo", "other", 0),
        Entry("../escape", "file", 1),
    ])
    assert sorted(found) == sorted([
        ("path-symlink", "data/link"), ("path-hardlink", "data/hard"), ("path-hardlink", "data/arch-hard"),
        ("path-special", "dev"), ("path-special", "fifo"), ("path-unsafe", "../escape"),
    ])
    assert ctx.readable == {"card.json", "data/a.parquet"}
    assert ctx.hashable == {"card.json", "data/a.parquet", "data/hard"}


def test_collisions_after_normalisation_and_case_folding():
    _, found = run_layout([Entry("card.json", "file", 1), Entry("Caf\u00e9.txt", "file", 1),
                           Entry("cafe\u0301.TXT", "file", 1), Entry("STRASSE", "file", 1),
                           Entry("straße", "file", 1)])
    assert sorted(found) == [("path-collision", "cafe\u0301.TXT"), ("path-collision", "straße")]


def test_a_name_stored_twice_is_a_collision_and_never_read():
    ctx, found = run_layout([Entry("card.json", "file", 1), Entry("x.parquet", "file", 1),
                             Entry("x.parquet", "file", 2)])
    assert found == [("path-collision", "x.parquet")]
    assert "x.parquet" not in ctx.readable


def test_members_the_source_refuses_are_never_read():
    ctx, found = run_layout([Entry("card.json", "file", 1), Entry("bad.parquet", "file", 1)], refused={"bad.parquet"})
    assert found == [] and ctx.readable == {"card.json"}


def test_missing_manifest_and_staging_area():
    _, found = run_layout([Entry(".rcard-staging", "dir", 0), Entry(".rcard-staging/header.json", "file", 1)])
    assert sorted(found) == [("card-unfinished", ".rcard-staging"), ("manifest-missing", "card.json")]
