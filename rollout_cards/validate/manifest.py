"""card.json: size cap, UTF-8, strict JSON without duplicate keys, format version, JSON Schema
and pydantic models; then the release scope.

Parsing reuses `io.manifest` (the reader's own rules). Unlike the reader, a problem in
one section does not hide the others: the inventory and the tables sections are
validated on their own, so integrity and table checks still run when, say, the
scope is invalid; and unsafe paths are reported as `path-unsafe` and left out of
the sections handed to later checks.
"""

from __future__ import annotations

import contextlib
import copy
import re
from typing import Any

from pydantic import ValidationError

from ..errors import CardFormatError, ManifestError
from ..io.manifest import MAX_MANIFEST_BYTES, load_json_document, pydantic_problems
from ..model._construct import construct, construct_or_validate
from ..model.card import CardManifest, FileEntry, Tables
from ..model.schemas import card_schema_problems
from ..tables import FORMAT, FORMAT_VERSION, parse_format
from .context import CheckContext
from .layout import MANIFEST, path_problem
from .report import excerpt

__all__ = ["check_manifest", "check_scope"]

_LONG_QUOTE = re.compile(r"('(?:[^'\\]|\\.){40})(?:[^'\\]|\\.)+'")


def _short(message: str) -> str:
    # JSON Schema messages quote the offending value; keep at most 40 characters of it.
    return _LONG_QUOTE.sub(lambda m: m.group(1) + "…'", message)


def _pointer(*parts: Any) -> str:
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _read(ctx: CheckContext) -> bytes:
    f = ctx.findings
    if MANIFEST not in ctx.readable:
        ctx.skip("card.json is missing or not a regular file (see the layout findings)")
    size = ctx.entries[MANIFEST].size
    if size > MAX_MANIFEST_BYTES:
        f.add("manifest-too-large", f"card.json is {size:,} bytes, more than the limit of {MAX_MANIFEST_BYTES:,}; "
              "keep rules in rules/ and large text out of the manifest", file=MANIFEST)
        ctx.skip("card.json is too large to read")
    try:
        return ctx.source.read_bytes(MANIFEST, limit=MAX_MANIFEST_BYTES)
    except CardFormatError as exc:  # it grew beyond the limit after it was listed
        f.add("manifest-too-large", f"card.json cannot be read within the limit: {exc}", file=MANIFEST)
        ctx.skip("card.json is too large to read")


def _parse_json(ctx: CheckContext, data: bytes) -> Any:
    f = ctx.findings
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        f.add("manifest-not-utf8", f"byte {exc.start} is not valid UTF-8; save card.json as UTF-8", file=MANIFEST)
        ctx.skip("card.json is not UTF-8")
    try:
        return load_json_document(data, MANIFEST)
    except ManifestError as exc:
        problem = exc.problems[0]
        code = "manifest-duplicate-key" if "duplicate key" in problem.message else "manifest-invalid-json"
        where = f" at {problem.location}" if problem.location else ""
        f.add(code, f"{problem.message}{where}; card.json must be strict JSON", file=MANIFEST)
        ctx.skip("card.json is not valid JSON")


def _check_format(ctx: CheckContext, document: dict[str, Any]) -> None:
    fmt = document.get("format")
    version = parse_format(fmt) if isinstance(fmt, str) else None
    if version is None or version[0] != FORMAT_VERSION[0]:
        ctx.findings.add("format-unsupported", f"format is {excerpt(fmt)}; this validator reads {FORMAT} "
                         f"(and earlier {FORMAT_VERSION[0]}.x)", file=MANIFEST, pointer="/format")
        ctx.skip("the format is not one this validator reads")
    if version > FORMAT_VERSION:
        ctx.findings.add("format-too-new", f"format is {excerpt(fmt)}, newer than {FORMAT}; upgrade "
                         "rollout-cards to validate this card", file=MANIFEST, pointer="/format")
        ctx.skip("the format is newer than this validator")


def _unsafe_paths(document: dict[str, Any]) -> dict[str, tuple[str, str, tuple[Any, ...]]]:
    """JSON pointer -> (path, problem, where) of every unsafe path the manifest declares;
    `where` is ("inventory", i), ("tables", name, j) or ("rules", k)."""
    found: dict[str, tuple[str, str, tuple[Any, ...]]] = {}

    def visit(value: Any, where: tuple[Any, ...], *pointer: Any) -> None:
        if isinstance(value, str):
            problem = path_problem(value)
            if problem:
                found[_pointer(*pointer)] = (value, problem, where)

    inventory = document.get("inventory")
    if isinstance(inventory, dict) and isinstance(inventory.get("files"), list):
        for i, entry in enumerate(inventory["files"]):
            if isinstance(entry, dict):
                visit(entry.get("path"), ("inventory", i), "inventory", "files", i, "path")
    tables = document.get("tables")
    if isinstance(tables, dict):
        for name, ref in tables.items():
            if isinstance(ref, dict) and isinstance(ref.get("paths"), list):
                for j, path in enumerate(ref["paths"]):
                    visit(path, ("tables", name, j), "tables", name, "paths", j)
    rules = document.get("rules")
    if isinstance(rules, list):
        for k, ref in enumerate(rules):
            if isinstance(ref, dict):
                visit(ref.get("path"), ("rules", k), "rules", k, "path")
    return found


def _without(document: dict[str, Any], unsafe: dict[str, tuple[str, str, tuple[Any, ...]]]) -> dict[str, Any]:
    """A copy of `document` without the list items that declare an unsafe path."""
    if not unsafe:
        return document
    doc = copy.deepcopy(document)
    # Delete from the end of each list so earlier indexes stay valid.
    for _, _, where in sorted(unsafe.values(), key=lambda u: u[2][-1], reverse=True):
        if where[0] == "inventory":
            del doc["inventory"]["files"][where[1]]
        elif where[0] == "tables":
            del doc["tables"][where[1]]["paths"][where[2]]
        else:
            del doc["rules"][where[1]]
    return doc


def _sections(ctx: CheckContext, raw: dict[str, Any], sanitized: dict[str, Any]) -> None:
    """Inventory and tables validated on their own, for the checks that need only them.

    Entries come from the sanitized document (no unsafe paths); the lines of the root
    digest come from the document as declared, unsafe paths included.
    """
    inventory = sanitized.get("inventory")
    if isinstance(inventory, dict) and isinstance(inventory.get("files"), list):
        entries = []
        for item in inventory["files"]:
            with contextlib.suppress(ValidationError):
                entries.append(construct_or_validate(FileEntry, item))
        ctx.inventory = entries
    declared = raw.get("inventory")
    if isinstance(declared, dict) and isinstance(declared.get("files"), list):
        lines = [
            (item["path"], item["bytes"], item["sha256"])
            for item in declared["files"]
            if isinstance(item, dict)
            and isinstance(item.get("path"), str)
            and type(item.get("bytes")) is int
            and isinstance(item.get("sha256"), str)
        ]
        if len(lines) == len(declared["files"]) and isinstance(declared.get("root_digest"), str):
            ctx.declared_lines, ctx.declared_root = lines, declared["root_digest"]
    try:
        ctx.tables = construct_or_validate(Tables, sanitized.get("tables"))
    except ValidationError:
        ctx.tables = None


def check_manifest(ctx: CheckContext) -> None:
    """card.json parses, declares a format we read, and satisfies the JSON Schema and the models."""
    f = ctx.findings
    document = _parse_json(ctx, _read(ctx))
    if not isinstance(document, dict):
        f.add("manifest-schema", "card.json must hold a JSON object", file=MANIFEST, pointer="/")
        ctx.skip("card.json is not a JSON object")
    ctx.document = document
    _check_format(ctx, document)
    unsafe = _unsafe_paths(document)
    for pointer, (path, problem, _) in unsafe.items():
        f.add("path-unsafe", f"path {excerpt(path)} {problem}; declare relative paths inside the card",
              file=MANIFEST, pointer=pointer)
    sanitized = _without(document, unsafe)
    _sections(ctx, document, sanitized)
    # A card.json the models certainly accept is built without compiling their validator
    # (model/_construct.py; ~45 ms of a small validate): the JSON Schema and the models would
    # find nothing in it. Anything else takes the validated way, which describes each problem.
    if not unsafe and (manifest := construct(CardManifest, document)) is not None:
        ctx.manifest = manifest
        return
    problems = [p for p in card_schema_problems(document) if p.location not in unsafe]
    try:
        ctx.manifest = CardManifest.model_validate(sanitized)
    except ValidationError as exc:
        seen = {p.location for p in problems}
        problems += [p for p in pydantic_problems(exc) if p.location not in seen and p.location not in unsafe]
    for p in problems:
        f.add("manifest-schema", f"{_short(p.message)}; fix this field of card.json", file=MANIFEST,
              pointer=p.location)
    if problems:
        ctx.manifest = None


def check_scope(ctx: CheckContext) -> None:
    """The release scope declares a license (a warning when it does not)."""
    if ctx.manifest is None:
        ctx.skip("card.json does not validate")
    if ctx.manifest.scope.license is None:
        ctx.findings.add("scope-license-missing", "scope.license is not declared; add an SPDX license "
                         "expression (e.g. CC-BY-4.0) so others know whether they may use the data",
                         file=MANIFEST, pointer="/scope/license")
