"""Rule files from YAML text to a validated `Rule`, with every expression parsed.

Reading is safe and bounded: the text is size-capped before parsing, read with a
`yaml.SafeLoader` subclass that refuses duplicate keys, anchors/aliases and
non-string keys, and nothing in it is ever executed. Every problem becomes a
`RuleError` (or `ExpressionError`) naming the file, the key (dotted, e.g.
`aggregate.interval.method`), the line, and what to write instead.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import ExpressionError, RuleError
from ..expr import parse_expression
from ..model.card import MAX_RULE_BYTES
from ..model.rule import Rule
from ..regular_files import NotRegularFileError, open_regular
from ..yamldoc import StrictYamlError, YamlPath, load_strict_yaml
from ..yamldoc import dotted as _dotted

__all__ = ["MAX_RULE_BYTES", "RuleFile", "columns_read", "declared_rules", "line_of_key", "load_rule", "located",
           "parse_rule", "read_rule"]

_Path = YamlPath


def _read_yaml(text: str, file: str | None) -> tuple[Any, dict[_Path, int]]:
    try:
        return load_strict_yaml(text)
    except StrictYamlError as exc:
        hint = ""
        if exc.message.startswith("not valid YAML"):
            hint = '; check indentation and quote expressions (e.g. score: "score.reward == 1")'
        message = exc.message.replace("are not allowed;", "are not allowed in rule files;")
        raise RuleError(message + hint, file=file, key=exc.key, line=exc.line) from None


def _known_keys(model: type[BaseModel]) -> list[str]:
    return sorted(f.alias or name for name, f in model.model_fields.items())


def _model_at(path: _Path) -> type[BaseModel] | None:
    """The model whose keys are allowed at `path` (for 'did you mean' hints)."""
    model: type[BaseModel] | None = Rule
    skip_key = False  # the next part is a key of a dict of models (features.<name>)
    for part in path:
        if model is None:
            return None
        if isinstance(part, int) or skip_key:
            skip_key = False
            continue
        fields = {f.alias or n: f for n, f in model.model_fields.items()}
        if part not in fields:
            return None
        model, skip_key = _inner_model(fields[part].annotation)
    return model


def _inner_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model inside a field annotation, and whether it sits in a dict."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin = getattr(annotation, "__origin__", None)
    for arg in getattr(annotation, "__args__", ()):
        model, in_dict = _inner_model(arg)
        if model is not None:
            return model, in_dict or origin is dict
    return None, False


def _clean_loc(loc: tuple[Any, ...]) -> _Path:
    # Union members appear in pydantic's loc as "float" or "literal['score','exclude']".
    return tuple(
        p
        for p in loc
        if not (
            isinstance(p, str)
            and (p in ("float", "int", "str", "bool") or p.startswith(("literal[", "function-")))
        )
    )


def _message(err: dict[str, Any], path: _Path) -> str:
    kind, msg = err["type"], err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if kind == "extra_forbidden":
        key = str(path[-1]) if path else "?"
        parent = _model_at(path[:-1])
        allowed = _known_keys(parent) if parent is not None else []
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"unknown key {key[:60]!r}; {hint}allowed keys: {', '.join(allowed)}"
    if kind == "string_type":
        return (
            f"must be a string, got {type(err.get('input')).__name__} "
            f"{str(err.get('input'))[:40]!r}; quote it in YAML, e.g. \"1\""
        )
    if kind == "int_type":
        value = err.get("input")
        hint = " (YAML reads yes/no/on/off as booleans)" if isinstance(value, bool) else ""
        return f"must be an integer, got {type(value).__name__} {str(value)[:40]!r}{hint}; write e.g. 1"
    if kind == "missing":
        return "required key is missing"
    if kind in ("literal_error", "enum"):
        return f"{msg[0].lower()}{msg[1:]} (got {str(err.get('input'))[:40]!r})"
    return msg


def _union_message(path: _Path, messages: list[str], value: Any) -> str:
    if path and path[0] == "on_status":
        return f"must be score, exclude or a number (got {str(value)[:40]!r})"
    if path == ("on_missing",):
        return f"must be a number, exclude or error (got {str(value)[:40]!r})"
    return "; or ".join(messages)


def _validation_error(exc: ValidationError, lines: dict[_Path, int], file: str | None) -> RuleError:
    grouped: dict[_Path, list[dict[str, Any]]] = {}
    for err in exc.errors(include_url=False):
        grouped.setdefault(_clean_loc(err["loc"]), []).append(err)
    problems: list[tuple[_Path, str]] = []
    for path, errs in grouped.items():
        messages = [_message(e, path) for e in errs]
        text = (
            messages[0] if len(errs) == 1 else _union_message(path, messages, errs[0].get("input"))
        )
        problems.append((path, text))
    problems.sort(key=lambda p: lines.get(p[0], 10**9))
    path, text = problems[0]
    line = _line_of(path, lines)
    if len(problems) > 1:
        rest = "; ".join(
            f"{_dotted(p) or '(top)'} (line {_line_of(p, lines)}): {m}" for p, m in problems[1:6]
        )
        text += f" [and {len(problems) - 1} more: {rest}]"
    return RuleError(text, file=file, key=_dotted(path) or None, line=line)


def line_of_key(key: str, lines: dict[_Path, int]) -> int | None:
    """The YAML line of a rule's dotted `key` (e.g. "features.n.where"), or of its nearest
    parent that has one; `lines` is the strict loader's map of the rule file."""
    return _line_of(tuple(key.split(".")), lines)


def _line_of(path: _Path, lines: dict[_Path, int]) -> int | None:
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return lines.get(())


class RuleFile(str):
    """The name of a rule file that knows the YAML line of each of its keys (`lines`, the strict
    loader's map): an error raised where the rule meets a card (an unknown column, a type error)
    knows only its key, and `located` gives it the line, as the validator's findings have it."""

    lines: dict[_Path, int]

    def __new__(cls, name: str, lines: dict[_Path, int] | None = None) -> RuleFile:
        named = super().__new__(cls, name)
        named.lines = lines or {}
        return named

    def __reduce__(self) -> tuple[Any, ...]:  # pickles to Ray's workers with its lines
        return (RuleFile, (str(self), self.lines))


def located(exc: RuleError, file: str | None) -> RuleError:
    """`exc` naming the line of its key in `file` (a `RuleFile`) when it names the key only."""
    lines = getattr(file, "lines", None)
    if not lines or exc.line is not None or not exc.key or exc.file is None or str(exc.file) != str(file):
        return exc
    line = line_of_key(exc.key, lines)
    if line is not None:
        exc.at_line(line)
    return exc


def parse_rule(text: str, *, file: str | None = None, parsed: tuple[Any, dict[_Path, int]] | None = None) -> Rule:
    """Validate the YAML `text` of a rule file into a `Rule`; `file` names it in errors.

    Every expression is parsed too, so a malformed one fails here, with its key and
    line; names are checked against the card's columns when the rule is applied.
    `parsed` is `load_strict_yaml(text)` when the caller already has it (the validator),
    so the text is not parsed twice. A `RuleFile` `file` is given the file's lines.
    """
    if len(text.encode("utf-8", errors="surrogatepass")) > MAX_RULE_BYTES:
        raise RuleError(
            f"rule file is larger than {MAX_RULE_BYTES // 1024} KiB; a rule is a short document",
            file=file,
        )
    data, lines = parsed if parsed is not None else _read_yaml(text, file)
    if isinstance(file, RuleFile):
        file.lines = lines
    if not isinstance(data, dict):
        found = "an empty file" if data is None else type(data).__name__
        raise RuleError(
            f"a rule file must be a YAML mapping with at least `rule:` and `score:`, found {found}",
            file=file,
            line=1,
        )
    try:
        rule = Rule.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(exc, lines, file) from None
    for key, expression in rule.expressions():
        try:
            parse_expression(expression, file=file, key=key)
        except ExpressionError as exc:
            path = tuple(key.split("."))
            raise ExpressionError(
                exc.reason,
                expression=exc.expression,
                column=exc.column,
                file=f"{file}:{_line_of(path, lines)}" if file and _line_of(path, lines) else file,
                key=key,
            ) from None
    return rule


def load_rule(source: str | os.PathLike[str] | Rule) -> Rule:
    """A `Rule` from a rule file path, `lib:<id>` for a rule of the library, or a `Rule`
    (returned as it is).

    Raises RuleError for a missing, oversized, non-UTF-8 or invalid file.
    """
    return read_rule(source)[0]


def read_rule(source: str | os.PathLike[str] | Rule) -> tuple[Rule, str | None]:
    """`load_rule(source)` and the name to pass as `file=` where it is applied: a `RuleFile`
    for a rule file (so errors there name their line), the `lib:` name, or None for a `Rule`."""
    if isinstance(source, Rule):
        return source, None
    if str(source).startswith("lib:"):
        from .library import library_rule  # the library parses its files with this module

        return library_rule(str(source)).rule, str(source)
    path = Path(source)
    name = RuleFile(str(source))
    try:
        with open_regular(path) as fh:
            data = fh.read(MAX_RULE_BYTES + 1)
    except FileNotFoundError:
        raise RuleError("no such rule file; check the path", file=name) from None
    except IsADirectoryError:
        raise RuleError("is a directory, not a rule file", file=name) from None
    except NotRegularFileError as exc:
        raise RuleError(f"{exc.strerror} (a rule file)", file=name) from None
    except OSError as exc:
        raise RuleError(f"cannot read the rule file: {exc.strerror}", file=name) from None
    if len(data) > MAX_RULE_BYTES:
        raise RuleError(
            f"rule file is larger than {MAX_RULE_BYTES // 1024} KiB; a rule is a short document",
            file=name,
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RuleError(
            f"byte {exc.start} is not valid UTF-8; save the file as UTF-8", file=name
        ) from None
    return parse_rule(text, file=name), name


class CardRuleFile(RuleFile):
    """The name of a rule file inside a card (`rules/<id>.yaml`) that knows the card's name
    (`card`): a RuleError naming it, wherever the rule is read or applied, is about the card's
    own rule (`RuleError.card`), so the card is invalid input, not the request a usage error."""

    card: str

    def __new__(cls, rel: str, card: str, lines: dict[_Path, int] | None = None) -> CardRuleFile:
        name = super().__new__(cls, rel, lines)
        name.card = card
        return name

    def __reduce__(self) -> tuple[Any, ...]:  # pickles to Ray's workers with its card
        return (CardRuleFile, (str(self), self.card, self.lines))


def declared_rules(card: Any) -> list[tuple[Rule, str]]:
    """The card's own rules with the file each came from (a `CardRuleFile`), in card.json order."""
    out = []
    for ref in card.manifest.rules:
        file = CardRuleFile(ref.path, card.path)
        try:
            rule = parse_rule(card.read_text(ref.path), file=file)
        except RuleError as exc:  # a message with a line names `file:line`, a plain string
            exc.card = card.path
            raise
        if rule.rule != ref.id:
            raise RuleError(
                f"the file declares rule {rule.rule!r} but card.json lists it as {ref.id!r}",
                file=file,
                key="rule",
            )
        out.append((rule, file))
    return out


def columns_read(rule: Rule) -> frozenset[str]:
    """The `<table>.<column>` names a rule reads: its expressions' column names (feature
    names excluded) and the columns it groups, reduces, stratifies and pairs on."""
    features = set(rule.features)
    episodes: set[str] = set()
    steps: set[str] = set()
    for key, text in rule.expressions():
        names = parse_expression(text, key=key).names
        (steps if key.startswith("features.") else episodes).update(names)
    agg = rule.aggregate
    unit = [agg.unit] if isinstance(agg.unit, str) else list(agg.unit or [])
    episodes.update(agg.group_by, agg.strata, unit)
    if rule.reduce is not None:
        episodes.update(rule.reduce.by)
    if rule.compare is not None:
        episodes.update(rule.compare.baseline, rule.compare.pair_on or [])
    return frozenset({f"episodes.{c}" for c in episodes - features} | {f"steps.{c}" for c in steps})
