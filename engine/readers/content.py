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

import pyarrow as pa

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


def main_contents(html: list[str]) -> pa.Array:
    """Main content of each page, white-space cleaned as ``text.clean_whitespace`` does; null where none."""
    return text.clean_whitespace(pa.array([main_content(h) for h in html], pa.large_string()))
