"""The hostile corpus (fixtures/bad_cards.py): every package fails with exactly its codes."""

from __future__ import annotations

import json

import bad_cards
import pytest

from rollout_cards.validate import CODES, Severity, validate
from tests.conftest import REPO

BAD = REPO / "fixtures" / "bad"
# Codes no directory package can produce: the validator's own failure, packed-card
# problems (fixtures/bad_archives), and the note that replay did not run.
# signature-invalid needs a key: tests/validate/test_signature.py covers it.
_NOT_IN_CORPUS = {"internal-error", "archive-unsafe", "replay-unavailable", "signature-invalid"}


@pytest.mark.parametrize("name", sorted(bad_cards.PACKAGES))
def test_each_package_yields_exactly_its_codes(bad_corpus, name):
    root, expected = bad_corpus
    entry = expected["packages"][name]
    report = validate(root / name)
    crashed = [f.message for f in report.findings if f.code == "internal-error"]
    assert not crashed
    assert sorted(report.codes(Severity.ERROR, Severity.WARNING)) == entry["codes"]
    assert validate(root / name, strict=True).valid is False
    if entry["strict_only"]:
        assert report.valid and report.outcome == "valid"
    else:
        assert not report.valid and report.outcome == "invalid"


def test_every_code_has_a_package():
    produced = {code for p in bad_cards.PACKAGES.values() for code in p.codes}
    assert produced == set(CODES) - _NOT_IN_CORPUS


def test_committed_corpus_is_the_generated_one():
    data = json.loads((BAD / "EXPECTED.json").read_text())
    assert data == bad_cards.expected()
    assert bad_cards.check() == [], "fixtures/bad is stale: run python fixtures/make.py"


@pytest.mark.parametrize("name", sorted(n for n, p in bad_cards.PACKAGES.items() if not p.runtime_only))
def test_committed_packages_fail_with_their_codes(name):
    entry = bad_cards.expected()["packages"][name]
    report = validate(BAD / name)
    assert sorted(report.codes(Severity.ERROR, Severity.WARNING)) == entry["codes"]


def test_runtime_only_packages_are_not_committed():
    for name, package in bad_cards.PACKAGES.items():
        assert (BAD / name).exists() != package.runtime_only
