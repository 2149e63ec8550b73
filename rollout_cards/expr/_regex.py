"""regex_extract in one RE2 pass: the pattern's capture groups get names, so that Arrow's
`extract_regex` (which returns named groups only, and refuses unnamed ones) gives the group.

The other way, a match pass and then a replace of the whole text by the group through
`^.*?(pattern).*$`, runs RE2 twice and the second time with submatches over the whole
text (3x slower on a million short answers). Both give the leftmost match's group, ""
for a group that did not take part, null without a match.

    named_groups(pattern) -> (the pattern with its capture groups named g1, g2, ..., their
        number), or None when the pattern holds syntax this scanner does not follow
        (\\Q...\\E, `(?<name>`): the caller then uses the two-pass way
"""

from __future__ import annotations

__all__ = ["named_groups"]


def named_groups(pattern: str) -> tuple[str, int] | None:
    """`pattern` with every capture group named g<k> (k its number, from 1), and k's count."""
    out: list[str] = []
    groups = 0
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if pattern.startswith("\\Q", i):
                return None  # a quoted run: not followed here
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if pattern.startswith("[:", i):  # [:alpha:] inside a class
                end = pattern.find(":]", i + 2)
                if end < 0:
                    return None
                out.append(pattern[i : end + 2])
                i = end + 2
                continue
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            if pattern.startswith("]", i):  # a leading ] is a member
                out.append("]")
                i += 1
            continue
        if c == "(":
            if pattern.startswith("(?P<", i):
                end = pattern.find(">", i)
                if end < 0:
                    return None
                groups += 1
                out.append(f"(?P<g{groups}>")
                i = end + 1
                continue
            if pattern.startswith("(?", i):
                if pattern.startswith("(?<", i):
                    return None  # RE2's newer named group syntax
                out.append(c)  # non-capturing group or flags
                i += 1
                continue
            groups += 1
            out.append(f"(?P<g{groups}>")
            i += 1
            continue
        out.append(c)
        i += 1
    if in_class:
        return None
    return "".join(out), groups
