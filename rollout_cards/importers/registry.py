"""Find importers: entry points in the group `rollout_cards.importers`.

Any installed package can add a format by declaring, in its pyproject.toml,

    [project.entry-points."rollout_cards.importers"]
    my-format = "my_package.my_module:MyImporter"

where `MyImporter` is a class (instantiated without arguments) or an object that
satisfies `base.Importer`. The entry-point name is the format name on the command
line. Loading happens only when a format is asked for, so a broken third-party
importer cannot break the others.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

from ..errors import ImporterError
from .base import Importer

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "available_formats", "get_importer"]

ENTRY_POINT_GROUP = "rollout_cards.importers"

#: The importers shipped with rollout-cards, as declared in pyproject.toml. Used when
#: the package runs from a source tree whose metadata is not installed.
BUILTIN: dict[str, str] = {
    "agentbench": "rollout_cards.importers.agentbench:AgentBenchImporter",
    "agentlab": "rollout_cards.importers.agentlab:AgentLabImporter",
    "atif": "rollout_cards.importers.atif:AtifImporter",
    "chat-jsonl": "rollout_cards.importers.chat_jsonl:ChatJsonlImporter",
    "inspect": "rollout_cards.importers.inspect_ai:InspectImporter",
    "lm-eval": "rollout_cards.importers.lm_eval:LmEvalImporter",
    "mini-swe-agent": "rollout_cards.importers.mini_swe_agent:MiniSweAgentImporter",
    "openhands": "rollout_cards.importers.openhands:OpenHandsImporter",
    "swe-agent": "rollout_cards.importers.swe_agent:SweAgentImporter",
    "swe-bench": "rollout_cards.importers.swe_bench:SweBenchImporter",
    "tau-bench": "rollout_cards.importers.tau_bench:TauBenchImporter",
    "tau2-bench": "rollout_cards.importers.tau2_bench:Tau2BenchImporter",
}


def _entry_points() -> dict[str, list[EntryPoint]]:
    found: dict[str, list[EntryPoint]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        # An editable install can list the same entry point twice; count distinct targets.
        if all(seen.value != ep.value for seen in found.get(ep.name, [])):
            found.setdefault(ep.name, []).append(ep)
    for name, value in BUILTIN.items():
        found.setdefault(name, [EntryPoint(name, value, ENTRY_POINT_GROUP)])
    return found


def available_formats() -> list[str]:
    """Names of every registered import format, sorted."""
    return sorted(_entry_points())


def is_builtin(name: str) -> bool:
    """Whether format `name` is registered by this package alone (not by a plug-in)."""
    candidates = _entry_points().get(name, [])
    return bool(candidates) and all(ep.value.startswith("rollout_cards.importers.") for ep in candidates)


def get_importer(name: str) -> Importer:
    """Load the importer registered as `name`; ImporterError when there is none or it is broken."""
    found = _entry_points()
    candidates = found.get(name)
    if not candidates:
        raise ImporterError(f"no importer for format {name!r}; available: {', '.join(sorted(found))}")
    if len(candidates) > 1:
        targets = ", ".join(ep.value for ep in candidates)
        raise ImporterError(f"format {name!r} is registered by several packages ({targets}); uninstall one")
    ep = candidates[0]
    try:
        obj = ep.load()
    except Exception as exc:  # noqa: BLE001 - a third-party plug-in may fail in any way
        raise ImporterError(f"importer {name!r} ({ep.value}) cannot be loaded: {type(exc).__name__}: {exc}") from None
    importer = obj() if isinstance(obj, type) else obj
    if not isinstance(importer, Importer):
        raise ImporterError(
            f"importer {name!r} ({ep.value}) does not provide name, summary, options and read(request, session)"
        )
    return importer
