"""Strict, safe YAML: the one loader for every YAML file a card or a user hands us.

PyYAML's SafeLoader never builds Python objects, but it still expands aliases (a
few hundred bytes can become gigabytes: the "billion laughs"), silently keeps
the last of two equal keys, and resolves YAML 1.1 base-60 integers (`1:1:1:...`),
whose conversion is quadratic (a 1 MiB scalar took 201 s). This loader refuses
anchors and aliases, duplicate keys and non-string keys; resolves numbers
without base 60; refuses scalars longer than `MAX_SCALAR_CHARS`, integers outside
int64, non-finite floats and lone surrogates (`"\ud800"`), so nothing a document
says can cost more than linear time or reach a model as a value it cannot hold;
and records the line of every key for error messages.

Large documents (source data such as mini-swe-agent's exit statuses: one line per
instance) are parsed by libyaml when PyYAML has it, ~10x faster than the pure-Python
parser; the result is used only when that parse gets through every check of the strict
one, and anything else (an error, a character that could start an anchor, alias or tag,
a scalar the checks would refuse) goes through the pure-Python loader, whose result or
error is then the answer. tests/test_yamldoc.py compares both on generated documents.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

__all__ = ["FAST_MIN_CHARS", "MAX_SCALAR_CHARS", "StrictYamlError", "YamlPath", "load_strict_yaml"]

#: A scalar (key or value) longer than this is refused: rule files, specs and mappings hold
#: short values, and the cap bounds what any one value can cost to resolve and construct.
MAX_SCALAR_CHARS = 64 * 1024
_INT64 = 2**63 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")
_INT_TAG, _FLOAT_TAG = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
# YAML 1.1 numbers as SafeLoader resolves them, minus the base-60 forms (`1:30`, `1:30.5`).
_INT = re.compile(r"""^(?:[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+)$""", re.X)
_FLOAT = re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.X)

YamlPath = tuple[str | int, ...]


class StrictYamlError(yaml.YAMLError):
    """A YAML construct the strict loader refuses, or a syntax error; `line` is 1-based."""

    def __init__(self, message: str, line: int | None = None, key: str | None = None):
        super().__init__(message)
        self.message, self.line, self.key = message, line, key

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


def _without_base60(resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]]) -> dict[Any, list[Any]]:
    swap = {_INT_TAG: _INT, _FLOAT_TAG: _FLOAT}
    return {first: [(tag, swap.get(tag, regexp)) for tag, regexp in entries] for first, entries in resolvers.items()}


class _Loader(yaml.SafeLoader):
    yaml_implicit_resolvers = _without_base60(yaml.SafeLoader.yaml_implicit_resolvers)

    def compose_scalar_node(self, anchor: Any) -> yaml.ScalarNode:
        # Every scalar, key or value, passes here before it is resolved or constructed.
        event = self.peek_event()
        line = event.start_mark.line + 1
        if len(event.value) > MAX_SCALAR_CHARS:
            raise StrictYamlError(
                f"a scalar of {len(event.value):,} characters is longer than the limit of {MAX_SCALAR_CHARS:,}", line
            )
        if _SURROGATE.search(event.value):
            raise StrictYamlError(
                "a lone surrogate (an escape such as \\ud800 that is not a character) is not allowed; "
                "write the character itself", line,
            )
        return super().compose_scalar_node(anchor)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        text = str(node.value)
        if ":" in text:
            raise StrictYamlError(f"base-60 integers ({text[:20]!r}) are not supported; quote the value",
                                  node.start_mark.line + 1)
        if len(text.replace("_", "")) > 70:  # 0b + 64 binary digits is the longest int64
            raise StrictYamlError(f"integer {text[:20]!r}... is outside the 64-bit range", node.start_mark.line + 1)
        value = super().construct_yaml_int(node)
        if not -_INT64 - 1 <= value <= _INT64:
            raise StrictYamlError(f"integer {text[:30]!r} is outside the 64-bit range", node.start_mark.line + 1)
        return value

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        text = str(node.value)
        if ":" in text:
            raise StrictYamlError(f"base-60 numbers ({text[:20]!r}) are not supported; quote the value",
                                  node.start_mark.line + 1)
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            what = "is outside the range of a 64-bit float" if text.lower().lstrip("+-") not in (".inf", ".nan") \
                else "is not a finite number"
            raise StrictYamlError(f"{text[:30]!r} {what}; write a finite number", node.start_mark.line + 1)
        return value

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise StrictYamlError("YAML aliases (*name) are not allowed; write the value out", event.start_mark.line + 1)
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise StrictYamlError(
                f"YAML anchors (&{str(anchor)[:40]}) are not allowed; write the value out", event.start_mark.line + 1
            )
        return super().compose_node(parent, index)


_Loader.add_constructor(_INT_TAG, _Loader.construct_yaml_int)
_Loader.add_constructor(_FLOAT_TAG, _Loader.construct_yaml_float)


def _guarded(construct: Any) -> Any:
    """A constructor whose failures on a malformed scalar are StrictYamlErrors with the line:
    an explicit tag skips the resolver, so `!!int x`, `!!float x`, `!!bool x`, `!!timestamp x`,
    `!!binary ?` reached int(), float(), a dict lookup or a regex match and raised ValueError,
    KeyError, IndexError or AttributeError (an internal error; rule fuzzer counterexamples `!!int synthetic..inf`,
    `!!int ""`)."""

    def guarded(loader: Any, node: yaml.Node) -> Any:
        try:
            return construct(loader, node)
        except StrictYamlError:
            raise
        except (ValueError, LookupError, AttributeError, TypeError, OverflowError):
            tag = str(node.tag).rsplit(":", 1)[-1]
            raise StrictYamlError(f"!!{tag} value {str(node.value)[:40]!r} is not a valid {tag}; remove the tag or "
                                  "fix the value", node.start_mark.line + 1) from None

    return guarded


for _tag, _construct in list(_Loader.yaml_constructors.items()):
    _Loader.add_constructor(_tag, _guarded(_construct))


def dotted(path: YamlPath) -> str:
    """`a.b[0].c` for a path of keys and indexes."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _walk(node: yaml.Node, path: YamlPath, lines: dict[YamlPath, int]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != "tag:yaml.org,2002:str":
                # a sequence or mapping key's value is a list of nodes: name its kind, never
                # its Python repr (which printed "[ScalarNode(tag=..." to the user)
                if isinstance(key_node, yaml.ScalarNode):
                    found = f"{key_node.tag.rsplit(':', 1)[-1]} {key_node.value[:40]!r}"
                else:
                    found = "a sequence" if isinstance(key_node, yaml.SequenceNode) else "a mapping"
                raise StrictYamlError(
                    f"keys must be plain strings, found {found}; quote the key",
                    line,
                    dotted(path) or None,
                )
            key = key_node.value
            if key in seen:
                raise StrictYamlError(
                    f"duplicate key {key[:60]!r} (first on line {seen[key]}); each key may appear once",
                    line,
                    dotted((*path, key)),
                )
            seen[key] = line
            lines[(*path, key)] = line
            _walk(value_node, (*path, key), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), lines)


#: Documents shorter than this are always read by the pure-Python loader (rule files, specs,
#: mappings: small, and the exact path they always took).
FAST_MIN_CHARS = 64 * 1024
#: The fast path reads block mappings and sequences of plain scalars only: these characters
#: (anchors, aliases, tags, flow collections, explicit keys, block and quoted scalars,
#: directives, reserved indicators, tabs) send a document to the pure-Python loader. libyaml
#: and PyYAML's own scanner disagree on some of them (a tab as white space, `{A?: 1}`: found
#: by tests/test_yamldoc.py), and the strict loader refuses anchors, aliases and escapes libyaml
#: would let through.
_NOT_FAST = re.compile(r"""[&*!\t{}\[\]?|>"'%@`\\]""")
_FAST_MAX_DEPTH = 100

if getattr(yaml, "__with_libyaml__", False):

    from yaml.cyaml import CParser

    class _FastLoader(CParser, _Loader):  # type: ignore[misc]
        """libyaml's parser and composer, the strict loader's resolver and constructors."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
else:  # pragma: no cover - PyYAML built without libyaml
    _FastLoader = None  # type: ignore[assignment,misc]


def _fast_load(text: str) -> tuple[Any, dict[YamlPath, int]] | None:
    """The strict loader's answer by libyaml, or None when only the pure-Python loader may say."""
    if _FastLoader is None or len(text) < FAST_MIN_CHARS or _NOT_FAST.search(text):
        return None
    loader = None
    try:
        # libyaml parses without recursion but its composer (Cython) recurses with no limit:
        # a document nested deeper than the pure-Python loader could compose is left to it.
        depth = 0
        for event in yaml.parse(text, Loader=yaml.CSafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > _FAST_MAX_DEPTH:
                    return None
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        loader = _FastLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        lines: dict[YamlPath, int] = {}
        _walk(node, (), lines)
        stack = [node]
        while stack:  # what compose_scalar_node checks, on the composed tree
            n = stack.pop()
            if isinstance(n, yaml.ScalarNode):
                if len(n.value) > MAX_SCALAR_CHARS or _SURROGATE.search(n.value):
                    return None
            elif isinstance(n, yaml.MappingNode):
                stack.extend(x for pair in n.value for x in pair)
            else:
                stack.extend(n.value)
        return loader.construct_document(node), lines
    except (yaml.YAMLError, RecursionError, ValueError, TypeError):
        return None
    finally:
        if loader is not None:
            loader.dispose()


def load_strict_yaml(text: str) -> tuple[Any, dict[YamlPath, int]]:
    """The document in `text` and the line of each key path; raises StrictYamlError."""
    fast = _fast_load(text)
    return fast if fast is not None else _python_load(text)


def _python_load(text: str) -> tuple[Any, dict[YamlPath, int]]:
    """load_strict_yaml by the pure-Python parser: the reference every answer agrees with."""
    lines: dict[YamlPath, int] = {}
    loader = None
    try:
        # Inside the try: the reader refuses control characters (ESC, NUL) as it is built.
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            return None, lines
        _walk(node, (), lines)
        return loader.construct_document(node), lines
    except StrictYamlError:
        raise
    except yaml.reader.ReaderError as exc:
        char = f"U+{exc.character:04X}" if isinstance(exc.character, int) else repr(exc.character)
        raise StrictYamlError(
            f"not valid YAML: the control character {char} is not allowed (at character {exc.position}); "
            "remove it or write it as an escape in a double-quoted string",
            text.count("\n", 0, exc.position) + 1,
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise StrictYamlError(
            f"not valid YAML: {exc.problem or exc.context or 'syntax error'}", mark.line + 1 if mark else None
        ) from None
    except yaml.YAMLError as exc:
        raise StrictYamlError(f"not valid YAML: {str(exc)[:200]}") from None
    except RecursionError:
        raise StrictYamlError("YAML nested too deeply") from None
    except (ValueError, OverflowError) as exc:
        # PyYAML's scanner decodes an escape with chr(): "\U0011FFFF" (past U+10FFFF) raised
        # ValueError, "\UFFFFFFFF" OverflowError (counterexamples of the fast-path fuzz test).
        line = loader.get_mark().line + 1 if loader is not None else None
        raise StrictYamlError(f"not valid YAML: an escape is not a character ({exc})", line) from None
    finally:
        if loader is not None:
            loader.dispose()
