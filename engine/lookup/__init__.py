"""``neardup query`` and ``neardup.Index(path).query(texts)``: what records would pair with, read-only.

``run.query_input`` answers an input (any file, folder or ``-`` that ingest
reads, with the same ``ReadOptions``), ``run.query_texts`` a list of strings;
both give tables of ``match.SCHEMA``. The index is opened as ``neardup sql``
opens it: the catalog read-only (so readers go on, and a writer at work makes
the query fail at once with ``IndexBusy``), the postings read-only; nothing in
the folder is written. ``overlay`` is how a batch's pairing runs without
writing the catalog. This module stays light: the query machinery is
imported on first use.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pyarrow as pa

from ..store.index import Index as _StoreIndex


class Index(_StoreIndex):
    """An index folder (``neardup.store.index.Index``) that also answers queries."""

    def __init__(self, path: str | os.PathLike):
        super().__init__(path)

    def query(self, texts: Sequence[str | None], urls: Sequence[str] | None = None, html: bool = False) -> pa.Table:
        """The indexed documents each text would pair with, as ``neardup query`` gives them.

        One row per (text, indexed partner, pair method): ``query`` (the text's position),
        ``url``, the partner's ``doc_id`` and ``doc_url``, ``method``, ``similarity`` and the
        partner's ``clusters`` (a list of ``{method, cluster_id}``); a text without partner is one
        row whose partner columns are null, a rejected text (empty, too short) one row with its
        ``reject`` reason. Pairs among the texts themselves are not reported. Nothing is written.
        """
        from .run import query_texts

        return query_texts(self, texts, urls, html)

    def lookup(self):
        """The index held open for many ``query`` calls (``with index.lookup() as q: q.query(texts)``),
        each answered as ``Index.query`` answers it, without opening the catalog and postings each
        time. Writers are refused (``IndexBusy``) while it is open; readers go on."""
        from .run import Lookup

        return Lookup(self)


__all__ = ["Index"]
