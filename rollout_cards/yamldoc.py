"""Strict, safe YAML: the one loader for every YAML file a card or a user hands us.

PyYAML's SafeLoader never builds Python objects, but it still expands aliases (a
few hundred bytes can become gigabytes: the "billion laughs") and silently keeps
the last of two equal keys. This loader refuses anchors and aliases, duplicate
keys and non-string keys, and records the line of every key for error messages.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["StrictYamlError", "YamlPath", "load_strict_yaml"]

YamlPath = tuple[str | int, ...]


class StrictYamlError(yaml.YAMLError):
    """A YAML construct the strict loader refuses, or a syntax error; `line` is 1-based."""

    def __init__(self, message: str, line: int | None = None, key: str | None = None):
        super().__init__(message)
        self.message, self.line, self.key = message, line, key

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


class _Loader(yaml.SafeLoader):
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
                raise StrictYamlError(
                    f"keys must be plain strings, found {key_node.tag.rsplit(':', 1)[-1]} "
                    f"{str(getattr(key_node, 'value', ''))[:40]!r}; quote the key",
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


def load_strict_yaml(text: str) -> tuple[Any, dict[YamlPath, int]]:
    """The document in `text` and the line of each key path; raises StrictYamlError."""
    loader = _Loader(text)
    lines: dict[YamlPath, int] = {}
    try:
        node = loader.get_single_node()
        if node is None:
            return None, lines
        _walk(node, (), lines)
        return loader.construct_document(node), lines
    except StrictYamlError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise StrictYamlError(
            f"not valid YAML: {exc.problem or exc.context or 'syntax error'}", mark.line + 1 if mark else None
        ) from None
    except yaml.YAMLError as exc:
        raise StrictYamlError(f"not valid YAML: {str(exc)[:200]}") from None
    except RecursionError:
        raise StrictYamlError("YAML nested too deeply") from None
    finally:
        loader.dispose()
