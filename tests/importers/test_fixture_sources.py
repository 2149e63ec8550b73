from __future__ import annotations

import importlib.util

from tests.conftest import REPO


def _make_sources():
    spec = importlib.util.spec_from_file_location("make_sources", REPO / "fixtures" / "make_sources.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_sources_are_what_the_script_writes():
    module = _make_sources()
    assert module.check(module.OUT) == [], "run python fixtures/make_sources.py"


def test_the_script_is_deterministic(tmp_path):
    module = _make_sources()
    module.write(tmp_path / "a")
    module.write(tmp_path / "b")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files and all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)
