"""Load named SQL blocks from the package's ``sql/`` folder.

A file holds blocks of the form::

    -- name: block_name
    -- One line that says what the block does.
    SELECT ...;

``query("catalog", "block_name")`` returns the SQL text of that block. Files are
read once and cached; an unknown name raises ``KeyError`` naming the file.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$", re.MULTILINE)


def parse_blocks(text: str) -> dict[str, str]:
    """Split the text of a .sql file into ``{name: sql}``; descriptions are dropped."""
    blocks: dict[str, str] = {}
    matches = list(_NAME.finditer(text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = text[m.end() : end]
        lines = [ln for ln in body.splitlines() if not ln.lstrip().startswith("--")]
        sql = "\n".join(lines).strip()
        if m.group(1) in blocks:
            raise ValueError(f"SQL block {m.group(1)!r} is defined twice")
        blocks[m.group(1)] = sql
    return blocks


@functools.cache
def _file_blocks(stem: str) -> dict[str, str]:
    text = resources.files("neardup.sql").joinpath(f"{stem}.sql").read_text("utf-8")
    return parse_blocks(text)


def query(stem: str, name: str) -> str:
    """The SQL of block ``name`` in ``sql/<stem>.sql``."""
    blocks = _file_blocks(stem)
    try:
        return blocks[name]
    except KeyError:
        raise KeyError(f"no SQL block {name!r} in sql/{stem}.sql (have: {', '.join(sorted(blocks))})") from None


def migrations() -> list[tuple[int, str, str]]:
    """Every migration as ``(version, name, sql)``, ordered by version.

    Migration files are ``sql/migrations/NNN_name.sql``; versions must be unique.
    """
    out = []
    for entry in resources.files("neardup.sql.migrations").iterdir():
        m = re.fullmatch(r"(\d{3})_([a-z0-9_]+)\.sql", entry.name)
        if m:
            out.append((int(m.group(1)), m.group(2), entry.read_text("utf-8")))
    out.sort()
    versions = [v for v, _, _ in out]
    if len(set(versions)) != len(versions):
        raise ValueError(f"duplicate migration versions in sql/migrations: {versions}")
    return out
