"""Running a query over an input or a list of texts (``neardup query``, ``Index.query``).

``query_input`` answers an input (any file, folder or ``-`` that ingest
reads, with the same ``ReadOptions``), ``query_texts`` a list of strings; both
give tables of ``SCHEMA`` (see ``neardup.lookup.match``). The index is opened
as ``neardup sql`` opens it: the catalog read-only (so readers go on, and a
writer at work makes the query fail at once with ``IndexBusy``), the postings
read-only; nothing in the folder is written.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence

import pyarrow as pa

from ..readers import RawChunk, ReadOptions, read_input
from ..readers.base import ChunkBuilder
from ..store.index import Index as _StoreIndex
from .match import DEFAULT_PART_MB, SCHEMA, Session, answer, close_session, open_session, prepared_chunks, reset_session

#: ``source`` of the records of ``query_texts``
TEXTS_SOURCE = "<texts>"


def query_input(index: _StoreIndex, path: str, opts: ReadOptions | None = None,
                part_mb: float = DEFAULT_PART_MB, timings: dict[str, float] | None = None) -> Iterator[pa.Table]:
    """The answer for every record of ``path``, one table of ``SCHEMA`` per ``part_mb`` MB read.

    The index stays open (read-only) while the tables are being taken. Raises ``InputError``
    when the input cannot be opened, before the index is opened."""
    raw = read_input(path, opts or ReadOptions())
    yield from _answer(index, raw, part_mb, timings)


def query_texts(index: _StoreIndex, texts: Sequence[str | None], urls: Sequence[str] | None = None, html: bool = False,
                timings: dict[str, float] | None = None) -> pa.Table:
    """The answer for each text (``query`` is its position in ``texts``): one table of ``SCHEMA``.

    ``urls`` name the texts (default ``text:N``); ``html``: the texts are HTML markup, whose
    visible text is compared. A text that is None, empty or too short for the index is a row
    with its ``reject`` reason."""
    with Lookup(index) as q:
        return q.query(texts, urls, html, timings)


class Lookup:
    """An index held open for many queries (``Index.lookup()``): each ``query`` is answered as
    ``query_texts`` answers it, without opening the catalog and postings again.

    While it is open the catalog is open read-only: readers go on, writers are refused
    (``IndexBusy``), so the answers stay those of one committed state."""

    def __init__(self, index: _StoreIndex):
        self.index = index
        self._reader = None
        self._session: Session | None = None

    def __enter__(self) -> Lookup:
        self._reader = self.index.reader()
        con = self._reader.__enter__()
        try:
            self._session = open_session(self.index, con)
        except BaseException:
            self._reader.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self._session is not None:
                close_session(self._session)
        finally:
            self._session = None
            self._reader.__exit__(*exc)

    def query(self, texts: Sequence[str | None], urls: Sequence[str] | None = None, html: bool = False,
              timings: dict[str, float] | None = None) -> pa.Table:
        """See ``query_texts``."""
        if self._session is None:
            raise RuntimeError("the lookup is not open: use it as `with index.lookup() as q: q.query(...)`")
        if urls is not None and len(urls) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(urls)} urls")
        s = self._session
        reset_session(s)
        chunks = list(_chunks(texts, urls, html))
        before = dict(s.timings)
        tables = list(answer(s, prepared_chunks(chunks, s.settings, threads=len(chunks) > 1), float("inf")))
        if timings is not None:
            for k, v in s.timings.items():
                timings[k] = timings.get(k, 0.0) + v - before.get(k, 0.0)
        return pa.concat_tables(tables) if tables else SCHEMA.empty_table()


def _chunks(texts: Sequence[str | None], urls: Sequence[str] | None, html: bool) -> Iterator[RawChunk]:
    b = ChunkBuilder(TEXTS_SOURCE)
    for i, text in enumerate(texts):
        url = urls[i] if urls is not None else f"text:{i}"
        if text is None:  # kept as a row (numbering stays the position), rejected by prepare as empty
            text = ""
        elif not isinstance(text, str):
            raise TypeError(f"texts[{i}] is {type(text).__name__}, not str")
        b.add(url, f"text {i}", text, html, len(text.encode("utf-8", "surrogatepass")))
        if b.full():
            yield b.take()
    if b.pending():
        yield b.take()


def _answer(index: _StoreIndex, raw, part_mb: float, timings: dict[str, float] | None,
            threads: bool = True) -> Iterator[pa.Table]:
    with index.reader() as con:
        s = open_session(index, con)
        try:
            yield from answer(s, prepared_chunks(raw, s.settings, threads), part_mb)
        finally:
            close_session(s)
            if timings is not None:
                for k, v in s.timings.items():
                    timings[k] = timings.get(k, 0.0) + v


__all__ = ["Lookup", "query_input", "query_texts", "TEXTS_SOURCE"]
