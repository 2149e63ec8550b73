"""One node of a JSON document replaced by hostile raw JSON text: shared by the sweep scripts."""
import json

MISSING = object()  # as a replacement: delete the node
MARK = "\u0000MARK\u0000"


def paths(v, p=(), *, items=None):
    """Every node's path, depth first; with `items`, only the first that many items of each list."""
    yield p
    if isinstance(v, dict):
        for k, x in v.items():
            yield from paths(x, (*p, k), items=items)
    elif isinstance(v, list):
        for i, x in enumerate(v if items is None else v[:items]):
            yield from paths(x, (*p, i), items=items)


def with_value(doc, path, raw) -> str:
    """JSON text of doc with the node at path replaced by the raw JSON text (or deleted, MISSING).
    Raw text because json.dumps cannot write some hostile values (1e999, big ints, lone surrogates)."""
    doc = json.loads(json.dumps(doc))
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    if raw is MISSING:
        del parent[path[-1]]
        return json.dumps(doc)
    parent[path[-1]] = MARK
    return json.dumps(doc).replace(json.dumps(MARK), raw, 1)
