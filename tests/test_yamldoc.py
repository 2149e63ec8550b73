from __future__ import annotations

import pytest

from rollout_cards.yamldoc import StrictYamlError, load_strict_yaml


def test_plain_document_and_key_lines():
    doc, lines = load_strict_yaml("a: 1\nb:\n  c: [x, y]\n")
    assert doc == {"a": 1, "b": {"c": ["x", "y"]}}
    assert lines[("b", "c")] == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &x [1]\nb: *x\n", "anchors"),
        ("a: 1\na: 2\n", r"duplicate key 'a' \(first on line 1\)"),
        ("? [1, 2]\n: v\n", "keys must be plain strings"),
        ("a: !!python/object:os.system x\n", "not valid YAML"),
        ("a: [\n", "not valid YAML"),
    ],
)
def test_refused(text, message):
    with pytest.raises(StrictYamlError, match=message):
        load_strict_yaml(text)
