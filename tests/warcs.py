"""Writing small WARC files for tests."""

from __future__ import annotations

import io
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter


def write_warc(path: Path, pages: list[tuple], gzip: bool = True) -> Path:
    """``pages``: (url, body bytes, content type[, status]) responses; also writes a request per page."""
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=gzip)
        w.write_record(w.create_warcinfo_record(path.name, {"software": "tests"}))
        for page in pages:
            url, body, ctype = page[:3]
            status = page[3] if len(page) > 3 else "200 OK"
            req = w.create_warc_record(url, "request", payload=io.BytesIO(b""), http_headers=StatusAndHeaders("GET / HTTP/1.1", [("Host", "x")], is_http_request=True))
            w.write_record(req)
            headers = StatusAndHeaders(status, [("Content-Type", ctype), ("Content-Length", str(len(body)))], protocol="HTTP/1.1")
            w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=headers))
    return path


def write_wet(path: Path, docs: list[tuple[str, str]]) -> Path:
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True)
        for url, text in docs:
            rec = w.create_warc_record(url, "conversion", payload=io.BytesIO(text.encode("utf-8")), warc_content_type="text/plain")
            w.write_record(rec)
    return path
