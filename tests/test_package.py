"""The package's surface: lazy public names, light start-up, one version."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import rollout_cards as rc

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pyarrow", "pydantic", "jsonschema", "rollout_cards.model", "rollout_cards.importers",
         "rollout_cards.io", "rollout_cards.rules", "rollout_cards.validate")


def _modules_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m in HEAVY or m.startswith(tuple(f"{h}." for h in HEAVY)))


@pytest.mark.parametrize(("args", "allowed"), [
    (["--version"], set()),
    (["--help"], set()),
    # typer (0.29) coerces a command's parameters with pydantic TypeAdapters; cli/deferred_params.py
    # builds none for --help (before, this case allowed typer's pydantic).
    (["validate", "--help"], set()),
])
def test_version_and_help_load_nothing_heavy(args, allowed):
    code = (f"from rollout_cards.cli import main\ntry:\n    main({args!r})\nexcept SystemExit:\n    pass")
    heavy = [m for m in _heavy(_modules_after(code)) if m.split(".")[0] not in allowed]
    assert heavy == []


def test_validating_a_card_without_rules_loads_no_jsonschema_yaml_or_pandas():
    """pyarrow imports pandas on its first conversion when pandas is installed (cli/without_pandas.py
    keeps it out); jsonschema runs only for a card.json the model refuses; PyYAML only for rules;
    numpy.ma and numpy.random are not needed to index Arrow arrays (numpy_arrow.py); the read and
    validate paths call Arrow kernels by name (arrow_compute.py), not through pyarrow.compute's
    generated wrappers."""
    pytest.importorskip("pandas", reason="the pandas half needs pandas installed (the test extra has it)")
    code = ("from rollout_cards.cli import main\ncode = main(['validate', 'fixtures/cards/minimal'])\n"
            "assert code == 0, code")
    loaded = _modules_after(code)
    assert "rollout_cards.validate" in loaded  # it did validate
    # msgspec: jsondoc imports it on its first fast decode, which reading a card.json never makes
    assert sorted(m for m in loaded if m.split(".")[0] in {"pandas", "dateutil", "jsonschema", "yaml", "msgspec"}) == []
    assert sorted(m for m in loaded if m.split(".")[:2] in (["numpy", "ma"], ["numpy", "random"])) == []
    assert "pyarrow.compute" not in loaded


def test_a_card_without_a_license_loads_no_spdx_table():
    """packaging's SPDX table (~6 ms of start-up) loads only when a card declares a license; the
    minimal card declares none. A declared license is still canonicalised (model/card.py)."""
    code = ("from rollout_cards.cli import main\ncode = main(['validate', 'fixtures/cards/minimal'])\n"
            "assert code == 0, code")
    loaded = _modules_after(code)
    assert "rollout_cards.validate" in loaded  # it did validate
    assert sorted(m for m in loaded if m.split(".")[0] == "packaging") == []
    from rollout_cards.model.card import Scope

    assert Scope(license="mit OR apache-2.0").license == "MIT OR Apache-2.0"


def test_no_model_has_a_builtin_default_factory():
    """pydantic reads a default factory's signature when it builds a validator; for a builtin
    (`list`, `dict`) that parses its text signature with the tokenize module, whose first use
    compiles its regular expressions (5-9 ms of start-up): the models use `empty_list` /
    `empty_dict` (model/card.py). validate.report's Report had three (fixed); fails on those."""
    import pydantic

    from rollout_cards.model import card, rule
    from rollout_cards.validate import report

    builtin = [f"{m.__name__}.{c.__name__}.{name}" for m in (card, rule, report) for c in vars(m).values()
               if isinstance(c, type) and issubclass(c, pydantic.BaseModel) and c.__module__ == m.__name__
               for name, f in c.model_fields.items() if f.default_factory in (list, dict, set, tuple, frozenset)]
    assert builtin == []
    code = ("import tokenize\nfrom rollout_cards.cli import main\n"
            "assert main(['validate', 'fixtures/cards/minimal', '--format', 'json']) == 0\n"
            "print(tokenize._compile.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "0"  # nothing on the minimal card's path tokenized a signature


def test_models_compile_their_validators_on_first_use():
    """Importing the models compiles no pydantic validator (defer_build); parsing a valid
    card.json compiles none either (model/_construct.py builds the tree), and one with a problem
    compiles the manifest tree's, which describes it. (model/rule.py builds one at import, for
    its DEFAULT_ON_STATUS instance; rules load only for a card that has them.)"""
    code = ("import inspect, pydantic, pydantic_core\n"
            "from rollout_cards.model import card, rule\n"
            "from rollout_cards.validate import report\n"
            "def built():\n"
            "    return sorted(n for m in (card, report) for n, c in vars(m).items()\n"
            "                  if inspect.isclass(c) and issubclass(c, pydantic.BaseModel) and c.__module__ == m.__name__\n"
            "                  and isinstance(c.__pydantic_validator__, pydantic_core.SchemaValidator))\n"
            "print('at-import', *built())\n"
            "from rollout_cards.io.manifest import parse_manifest\n"
            "parse_manifest(open('fixtures/cards/minimal/card.json', 'rb').read())\n"
            "print('after-parse', *built())\n"
            "from rollout_cards.errors import ManifestError\n"
            "try:\n"
            "    parse_manifest(open('fixtures/cards/minimal/card.json', 'rb').read().replace(b'1.0.0', b'1.0'))\n"
            "except ManifestError:\n"
            "    print('after-problem', *built())\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    at_import, after_parse, after_problem = (line.split()[1:] for line in out.stdout.splitlines())
    assert at_import == []
    assert after_parse == []
    assert "CardManifest" in after_problem


def test_validating_the_minimal_card_compiles_no_pydantic_validator():
    """`rcard validate fixtures/cards/minimal` builds its manifest and report models without
    compiling a validator or serializer (model/_construct.py, validate/report.py), so pydantic's
    plugin loader and importlib.metadata are never imported (issue 14: start-up within 2x)."""
    code = ("import sys, inspect, pydantic, pydantic_core\n"
            "from rollout_cards.cli import main\n"
            "for fmt in ('json', 'text', 'github', 'markdown'):\n"
            "    assert main(['validate', 'fixtures/cards/minimal', '--format', fmt]) == 0\n"
            "from rollout_cards.model import card\n"
            "from rollout_cards.validate import report\n"
            "built = sorted(n for m in (card, report) for n, c in vars(m).items()\n"
            "               if inspect.isclass(c) and issubclass(c, pydantic.BaseModel) and c.__module__ == m.__name__\n"
            "               and (isinstance(c.__pydantic_validator__, pydantic_core.SchemaValidator)\n"
            "                    or isinstance(c.__pydantic_serializer__, pydantic_core.SchemaSerializer)))\n"
            "print('built', *built)\n"
            "print('loaded', *sorted(m for m in ('importlib.metadata', 'pydantic.plugin._loader') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    built, loaded = (line.split()[1:] for line in out.stdout.splitlines()[-2:])
    assert built == []
    assert loaded == []


def test_a_built_in_import_loads_no_pandas(tmp_path):
    pytest.importorskip("pandas", reason="needs pandas installed (the test extra has it)")
    source = ROOT / "fixtures" / "sources" / "tau-bench" / "orphan-result.json"
    code = ("from rollout_cards.cli import main\n"
            f"assert main(['import', 'tau-bench', {str(source)!r}, '-o', {str(tmp_path / 'c')!r}]) == 0")
    assert not {m for m in _modules_after(code) if m.split(".")[0] == "pandas"}


def test_only_this_package_s_formats_count_as_built_in(monkeypatch):
    from importlib.metadata import EntryPoint

    from rollout_cards.importers import registry

    assert registry.is_builtin("tau-bench") and not registry.is_builtin("no-such-format")
    real = registry._entry_points()
    plugin = EntryPoint("tau-bench", "their_pkg.importer:Importer", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "_entry_points", lambda: {**real, "tau-bench": [*real["tau-bench"], plugin]})
    assert not registry.is_builtin("tau-bench")


def test_pandas_stays_usable_after_a_command():
    """The block is lifted when the command ends: pyarrow's pandas entry points work again."""
    pytest.importorskip("pandas", reason="needs pandas")
    code = ("from rollout_cards.cli import main\nmain(['validate', 'fixtures/cards/minimal'])\n"
            "import pyarrow as pa\nassert pa.table({'a': [1, 2]}).to_pandas()['a'].sum() == 3\n"
            "import pandas\nassert pa.array(pandas.Series([1.5, None])).null_count == 1\n"
            "from dateutil.relativedelta import relativedelta\n"
            "assert pa.array([relativedelta(months=1)]).type == pa.month_day_nano_interval()")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)


def test_import_is_lazy_and_every_public_name_resolves():
    assert _heavy(_modules_after("import rollout_cards")) == []
    for name in rc.__all__:
        assert getattr(rc, name) is not None, name
    assert set(rc.__all__) <= set(dir(rc))


def test_a_function_keeps_its_name_when_its_submodule_loads_first():
    # `rollout_cards.validate` (function) and `rollout_cards/validate/` (package) share a name,
    # as do `rules.rescore` / `rules.render` and their modules.
    code = ("import rollout_cards.validate.ci_output, rollout_cards.rules.rescore, rollout_cards.rules.render\n"
            "import rollout_cards as rc, rollout_cards.rules as rules\n"
            "print(callable(rc.validate), callable(rules.rescore), callable(rules.render))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "True"]


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        rc.nonexistent  # noqa: B018
    import rollout_cards.rules as rules

    with pytest.raises(AttributeError):
        rules.nonexistent  # noqa: B018


def test_one_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert rc.__version__ == project["version"]
    from rollout_cards.tables import FORMAT

    assert rc.FORMAT == FORMAT == "rollout-card/0.2"


def test_import_help_names_every_built_in_format():
    from rollout_cards.cli.importers import BUILT_IN

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert sorted(project["entry-points"]["rollout_cards.importers"]) == sorted(BUILT_IN)


def test_project_urls_are_the_schema_name_space():
    from rollout_cards.model.schemas import SCHEMA_BASE

    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert urls["Schemas"] == SCHEMA_BASE and SCHEMA_BASE.startswith(urls["Homepage"])
