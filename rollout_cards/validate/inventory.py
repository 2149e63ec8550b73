"""Inventory completeness and integrity: missing and unlisted files, sizes, sha256, root digest.

The integrity verdicts (`check_digests`) depend only on the layout and on the
inventory section of card.json, so they are given even when the rest of the
manifest is invalid. Hashing is streamed through `CardSource.open_binary`, 1 MiB
at a time; sizes are taken from the stored members, never from the manifest.
"""

from __future__ import annotations

from types import SimpleNamespace

from ..errors import CardFormatError
from ..io.hashing import MAX_LFS_POINTER, lfs_pointer_note, root_digest
from ..io.staging import STAGING_DIR
from .context import CheckContext
from .layout import MANIFEST
from .report import excerpt

__all__ = ["check_digests", "check_files", "check_references", "referenced_paths"]


def _inventory_index(ctx: CheckContext) -> dict[str, int]:
    # The raw document, before (or despite) schema validation: any level may be another type
    # (a list as a path was an unhashable dict key: TypeError, an internal error of validate).
    inventory = ctx.document.get("inventory") if isinstance(ctx.document, dict) else None
    files = inventory.get("files") if isinstance(inventory, dict) else None
    return {item["path"]: i for i, item in enumerate(files if isinstance(files, list) else [])
            if isinstance(item, dict) and isinstance(item.get("path"), str)}


def referenced_paths(ctx: CheckContext) -> dict[str, str]:
    """Path -> JSON pointer of every file card.json refers to outside the inventory (tables, rules)."""
    refs: dict[str, str] = {}
    if ctx.tables is not None:
        for name in ("episodes", "steps"):
            for j, path in enumerate(getattr(ctx.tables, name).paths):
                refs.setdefault(path, f"/tables/{name}/paths/{j}")
    if ctx.manifest is not None:
        for k, rule in enumerate(ctx.manifest.rules):
            refs.setdefault(rule.path, f"/rules/{k}/path")
    return refs


def check_references(ctx: CheckContext) -> None:
    """Every table part and rule file is in the inventory, and each rule's digest agrees with it."""
    if ctx.inventory is None:
        ctx.skip("card.json has no readable inventory")
    f = ctx.findings
    listed = {e.path: e for e in ctx.inventory}
    for path, pointer in referenced_paths(ctx).items():
        if path not in listed:
            present = "" if path in ctx.hashable else " and does not exist"
            f.add("reference-unlisted", f"{excerpt(path)} is referred to but not listed in the inventory{present}; "
                  "list it in the inventory with its size and sha256 (for a README: rcard card CARD --into) or remove the reference",
                  file=MANIFEST, pointer=pointer)
    for k, rule in enumerate(ctx.manifest.rules if ctx.manifest else ()):
        entry = listed.get(rule.path)
        if entry is not None and entry.sha256 != rule.sha256:
            f.add("rule-digest-mismatch", f"rule {excerpt(rule.id)} declares sha256 {rule.sha256[:12]}…, the "
                  f"inventory lists {entry.sha256[:12]}… for {excerpt(rule.path)}; make them agree",
                  file=MANIFEST, pointer=f"/rules/{k}/sha256")


def check_files(ctx: CheckContext) -> None:
    """Every listed file exists as a regular file; every regular file is listed."""
    if ctx.inventory is None:
        ctx.skip("card.json has no readable inventory")
    f = ctx.findings
    listed = ctx.inventory_paths
    for entry in ctx.inventory:
        member = ctx.entries.get(entry.path)
        if member is None:
            f.add("file-missing", "is listed in the inventory but absent; add the file or remove its entry",
                  file=entry.path)
        elif member.kind != "file":
            f.add("file-missing", f"is listed in the inventory but is a {member.kind}, not a regular file",
                  file=entry.path)
    refs = referenced_paths(ctx)
    for path in sorted(ctx.hashable - listed - set(refs) - {MANIFEST}):
        if path.startswith(STAGING_DIR + "/"):
            continue  # reported once as card-unfinished
        f.add("file-unlisted", "is not listed in the inventory; remove it, or list it with its size and sha256 (a README: rcard card CARD --into)",
              file=path)


def _lfs_note(ctx: CheckContext, rel: str, sha256: str) -> str | None:
    try:
        return lfs_pointer_note(ctx.source.read_bytes(rel, limit=MAX_LFS_POINTER), sha256)
    except (CardFormatError, OSError):  # changed since it was hashed: the mismatch finding stands alone
        return None


def check_digests(ctx: CheckContext) -> None:
    """Sizes and sha256 of every listed file (streamed), and the root digest over the inventory."""
    if ctx.inventory is None:
        ctx.skip("card.json has no readable inventory")
    f = ctx.findings
    index = _inventory_index(ctx)
    # absent or not a regular file: reported by check_files / the layout check
    entries = [entry for entry in ctx.inventory if entry.path in ctx.hashable]
    digests = ctx.hash_files([entry.path for entry in entries])
    for entry, (_, digest) in zip(entries, digests, strict=True):
        pointer = f"/inventory/files/{index.get(entry.path, 0)}"
        size = ctx.entries[entry.path].size
        # the failure path only: a file this small may be a Git LFS pointer (a card cloned from a Git
        # host without `git lfs`), whose fix is a pull, not a restore
        note = _lfs_note(ctx, entry.path, entry.sha256) if size != entry.bytes and size <= MAX_LFS_POINTER else None
        if size != entry.bytes:
            f.add("file-size-mismatch", f"is {size:,} bytes, the inventory says {entry.bytes:,}; " + (
                note or "the file was changed or truncated: restore it or update the inventory"), file=entry.path)
        if digest != entry.sha256:
            f.add("file-digest-mismatch", f"sha256 is {digest[:12]}…, the inventory says {entry.sha256[:12]}… "
                  f"(card.json#{pointer}); " + (note or "the file was changed: restore it or update the inventory"),
                  file=entry.path)
    if ctx.declared_lines is None:
        ctx.skip("the inventory's entries are malformed, so the root digest cannot be recomputed")
    computed = root_digest(SimpleNamespace(path=p, bytes=b, sha256=s) for p, b, s in ctx.declared_lines)
    if computed != ctx.declared_root:
        f.add("root-digest-mismatch", f"root_digest is {excerpt(ctx.declared_root)}, the inventory's entries give "
              f"{computed[:12]}…; the inventory was edited: restore it or recompute the root digest",
              file=MANIFEST, pointer="/inventory/root_digest")
