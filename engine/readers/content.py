"""Main-content extraction of HTML records: the ``content`` setting (``main`` or ``full``).

A crawled page is its site's frame (header, navigation, sidebars, footer)
around the page's own text. Under ``content = full`` the fingerprints are
computed from the whole visible text (``neardup.text.html_to_text``), so
pages sharing a frame look alike and one article under two frames does not.
Under ``content = main`` they are computed from the page's main content as
resiliparse's ``extract_plain_text(main_content=True)`` finds it (a
crawl-scale extractor: Lexbor's DOM and rules on tags, class names and
link density; docs/architecture.md says why this one). The whole visible
text is still what ``documents.text`` stores either way.

The options are fixed (they are part of the fingerprint contract, like the
full text's definition): formatting kept (a block starts a new line, so
sentences end where the full text's do), no list bullets or numbers (``1.``
of an ordered list would be a word), no alt texts, link targets, form
fields or ``noscript`` (the full text has none of them). The result is
white-space cleaned like the full text. A page the extractor cannot parse
gets no main content (null); ingest then fingerprints its full text and
records the fallback (``documents.content = 'fallback'``).
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc

from .. import text

#: what ``documents.content`` records per document
FINGERPRINTED = ("main", "full", "fallback")

_OPTIONS = dict(main_content=True, preserve_formatting=True, list_bullets=False, alt_texts=False, links=False,
                form_fields=False, noscript=False)


def main_content(html: str) -> str | None:
    """The main content of one HTML page (not yet white-space cleaned), or None when it cannot be parsed."""
    from resiliparse.extract.html2text import extract_plain_text

    try:
        return extract_plain_text(html, **_OPTIONS)
    except Exception:  # resiliparse's parser and type errors: the page keeps its full text
        return None


def page_texts(html: pa.Array, main: bool) -> tuple[pa.Array, pa.Array | None]:
    """Each page's visible text (``text.html_to_text``) and, with ``main``, its main content
    (``main_content``; null where none), both white-space cleaned."""
    full, mains = _raw_texts(html, main)
    return _cleaned(full, mains)


def _raw_texts(html: pa.Array, main: bool) -> tuple[list[str], list[str | None] | None]:
    """``page_texts`` before the white-space cleaning: one page after another."""
    full = [text.html_to_text(s, blocks_marked=True) for s in text.mark_blocks(html).to_pylist()]
    return full, ([main_content(h) for h in html.to_pylist()] if main else None)


def _cleaned(full: list[str], mains: list[str | None] | None) -> tuple[pa.Array, pa.Array | None]:
    clean = text.clean_whitespace(pa.array(full, pa.large_string()))
    return clean, (None if mains is None else text.clean_whitespace(pa.array(mains, pa.large_string())))


#: HTML characters in one chunk whose texts are extracted in worker processes (selectolax and
#: resiliparse hold the GIL; below this a chunk is extracted in the calling thread)
POOL_MIN_CHARS = 4_000_000
#: worker processes of a ``ContentPool`` (this machine's cores, at most 2: the ingest's own work needs one)
POOL_WORKERS = max(1, min(2, os.cpu_count() or 1))


def _exit_with(parent: int) -> None:
    """Worker initializer: end this worker once ``parent`` has gone (killed, it never tells its workers)."""
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


class ContentPool:
    """The HTML text extraction of big chunks in worker processes, started on the first one.

    ``submit`` returns a callable giving what ``page_texts`` would: the same
    extractors on the same pages, only elsewhere, so the results do not depend on
    where they were computed. Workers are spawned (no copy of the writer's open
    catalog or postings) and exit with the ingest, or within a second of it dying.
    """

    def __init__(self) -> None:
        self._pool = None

    def submit(self, html: pa.Array, main: bool):
        if (pc.sum(pc.utf8_length(html)).as_py() or 0) < POOL_MIN_CHARS:
            return lambda: page_texts(html, main)
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(POOL_WORKERS, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_exit_with, initargs=(os.getpid(),))
        future = self._pool.submit(_raw_texts, html, main)  # an Arrow array pickles as its buffers
        return lambda: _cleaned(*future.result())

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> "ContentPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
