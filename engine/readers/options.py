"""Options shared by the readers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ReadOptions:
    """How to read input records.

    ``text_field``/``id_field`` name the JSONL/Parquet fields; with no
    ``id_field`` the url is taken from ``url``, else ``id``, else made from the
    source and record. ``html`` says the text field holds markup. ``encoding``
    forces a charset for HTML/text bytes. ``fmt`` forces an input format.
    """

    text_field: str = "text"
    id_field: str | None = None
    html: bool = False
    encoding: str | None = None
    fmt: str | None = None


def record_url(obj: dict[str, Any], opts: ReadOptions, source: str, record: str) -> str:
    """The url of a JSON-like record, with the documented fallbacks."""
    fields = (opts.id_field,) if opts.id_field else ("url", "id")
    for f in fields:
        v = obj.get(f)
        if v is not None and v != "":
            return str(v)
    return f"{source}#{record.replace(' ', '')}"
