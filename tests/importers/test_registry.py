from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint

import pytest

from rollout_cards.errors import ImporterError
from rollout_cards.importers import registry
from rollout_cards.importers.base import Importer
from tests.conftest import REPO


def test_builtins_match_the_entry_points_in_pyproject():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    declared = pyproject["project"]["entry-points"][registry.ENTRY_POINT_GROUP]
    assert declared == registry.BUILTIN


@pytest.mark.parametrize("name", sorted(registry.BUILTIN))
def test_every_builtin_loads_and_is_an_importer(name):
    importer = registry.get_importer(name)
    assert isinstance(importer, Importer) and importer.name == name and importer.summary


def test_unknown_format_lists_the_available_ones():
    with pytest.raises(ImporterError, match="available: .*atif, chat-jsonl"):
        registry.get_importer("nope")


class PluginImporter:
    name = "plugin-format"
    summary = "a format from another package"
    options: dict[str, str] = {}

    def read(self, request, session):
        raise NotImplementedError


def _with_entry_points(monkeypatch, *eps: EntryPoint) -> None:
    monkeypatch.setattr(registry, "entry_points", lambda group: list(eps) if group == registry.ENTRY_POINT_GROUP else [])


def test_a_plugin_entry_point_is_discovered(monkeypatch):
    _with_entry_points(monkeypatch, EntryPoint("plugin-format", f"{__name__}:PluginImporter", registry.ENTRY_POINT_GROUP))
    assert "plugin-format" in registry.available_formats()
    assert isinstance(registry.get_importer("plugin-format"), PluginImporter)


def test_a_broken_plugin_is_an_importer_error(monkeypatch):
    _with_entry_points(monkeypatch, EntryPoint("broken", "no_such_module_xyz:Thing", registry.ENTRY_POINT_GROUP))
    with pytest.raises(ImporterError, match="cannot be loaded"):
        registry.get_importer("broken")
    assert registry.get_importer("tau-bench").name == "tau-bench"  # the others still load


def test_a_plugin_that_is_not_an_importer_is_refused(monkeypatch):
    _with_entry_points(monkeypatch, EntryPoint("odd", "json:dumps", registry.ENTRY_POINT_GROUP))
    with pytest.raises(ImporterError, match="does not provide"):
        registry.get_importer("odd")


def test_two_packages_claiming_a_format_is_an_error(monkeypatch):
    _with_entry_points(
        monkeypatch,
        EntryPoint("dup", f"{__name__}:PluginImporter", registry.ENTRY_POINT_GROUP),
        EntryPoint("dup", "other_pkg:Importer", registry.ENTRY_POINT_GROUP),
    )
    with pytest.raises(ImporterError, match="several packages"):
        registry.get_importer("dup")
