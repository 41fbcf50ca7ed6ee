"""Build a real, boilerplate-heavy web-like corpus: the Rust documentation site in two releases.

The pages come from two Debian (bookworm) packages of the same site, the
rustdoc/mdBook HTML documentation shipped with the Rust toolchain:

* ``rust-1.63``: package ``rust-doc`` 1.63.0+dfsg1-2 (about 22,000 pages)
* ``rust-1.85``: package ``rust-web-doc`` 1.85.0+dfsg3-1~deb12u3 (about 30,000 pages)

Every page of the std/core/alloc API docs, source views, The Book, the
Reference, Rust by Example and so on shares the rustdoc or mdBook frame
(header, search bar, sidebar, navigation; its visible text is thin, as
rustdoc fills sidebars by script, so the shared words are mostly the
per-item template), and many pages are near copies of each other: about
three quarters are core::arch SIMD intrinsics (x86 vs x86_64, ...). So
neardup can be measured on real near-duplicates under a shared frame. The
content stays under the packages' own licences (MIT/Apache-2.0 and others:
see ``usr/share/doc/<package>/copyright`` in each extracted tree); nothing
of it is committed (``benchmarks/data/`` is git-ignored).

    .venv/bin/python benchmarks/realsite.py [--release rust-1.63 --release rust-1.85]

The .deb files are fetched with ``apt-get download`` (pinned versions, so
run ``apt-get update`` once first) into ``benchmarks/data/realsite/debs``
and unpacked with ``dpkg-deb -x`` into ``benchmarks/data/realsite/<release>/``
(both steps skipped when already done). Then it writes, byte-identically on
every run, ``benchmarks/data/realsite/<release>.warc.gz``: one gzip-member
``response`` record (HTTP 200, ``text/html``) per HTML page, in sorted path
order, url ``https://doc.rust-lang.org/<path relative to the doc root>`` (so
the same page has the same url in both releases), a fixed WARC-Date and
uuid5 record ids; and ``both.warc.gz``, the first release's records followed
by the second's. Redirect stubs (``<meta http-equiv="refresh">`` pages,
about a third of the files) are left out unless ``--keep-redirects``: a
crawler would follow them to the real page. Symlinks leading out of the
doc root are skipped, symlinked duplicates kept once, ``.html.gz`` pages
decompressed.
"""

from __future__ import annotations

import argparse
import gzip
import io
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

DATA = Path(__file__).resolve().parent / "data" / "realsite"
HOST = "https://doc.rust-lang.org/"
WARC_DATE = "2024-01-01T00:00:00Z"
#: release name -> (package, pinned version); the first two are the default pair, in this order
RELEASES = {
    "rust-1.63": ("rust-doc", "1.63.0+dfsg1-2"),
    "rust-1.85": ("rust-web-doc", "1.85.0+dfsg3-1~deb12u3"),
}
_REFRESH = re.compile(rb"<meta[^>]+http-equiv\s*=\s*[\"']?refresh", re.I)


def fetch(release: str) -> Path:
    """Download (if missing) and extract (if not yet done) a release; return its doc root."""
    pkg, version = RELEASES[release]
    debs = DATA / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    found = sorted(debs.glob(f"{pkg}_*.deb"))
    if not found:
        if subprocess.run(["apt-get", "download", f"{pkg}={version}"], cwd=debs).returncode != 0:
            print(f"warning: {pkg}={version} is gone from the archive; taking the current one (output will differ)", file=sys.stderr)
            subprocess.run(["apt-get", "download", pkg], cwd=debs, check=True)
        found = sorted(debs.glob(f"{pkg}_*.deb"))
    deb = found[-1]
    out = DATA / release
    marker = out / ".extracted"
    if not marker.exists() or marker.read_text() != deb.name:
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(out)], check=True)
        marker.write_text(deb.name)
    return out / "usr" / "share" / "doc" / pkg / "html"


def pages(root: Path, keep_redirects: bool = False):
    """Yield ``(relative path, html bytes)`` of every HTML page under ``root``, in sorted path order."""
    real_root = root.resolve()
    files = []
    for d, dirs, names in os.walk(root):  # does not descend into symlinked directories
        dirs.sort()
        files += [Path(d) / n for n in names if n.endswith((".html", ".htm", ".html.gz", ".htm.gz"))]
    seen: set[Path] = set()
    for f in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        real = f.resolve()
        if not real.is_file() or not real.is_relative_to(real_root) or real in seen:
            continue  # dangling, leading out of the tree, or a duplicate of a page already taken
        seen.add(real)
        rel = f.relative_to(root).as_posix()
        body = real.read_bytes()
        if rel.endswith(".gz"):
            rel, body = rel[:-3], gzip.decompress(body)
        if not keep_redirects and _REFRESH.search(body[:4096]):
            continue
        yield rel, body


def write_warc(release: str, root: Path, out: Path, keep_redirects: bool = False) -> tuple[int, int]:
    """Write one release's WARC; return (pages, bytes of HTML)."""
    n = size = 0
    tmp = out.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        w = WARCWriter(fh, gzip=True)
        for rel, body in pages(root, keep_redirects):
            url = HOST + rel
            try:
                body.decode("utf-8")
                ctype = "text/html; charset=utf-8"
            except UnicodeDecodeError:
                ctype = "text/html"
            http = StatusAndHeaders("200 OK", [("Content-Type", ctype), ("Content-Length", str(len(body)))], protocol="HTTP/1.1")
            rid = f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, release + ' ' + url)}>"
            rec = w.create_warc_record(
                url,
                "response",
                payload=io.BytesIO(body),
                length=len(body),
                http_headers=http,
                warc_headers_dict={"WARC-Record-ID": rid, "WARC-Date": WARC_DATE},
            )
            w.write_record(rec)
            n += 1
            size += len(body)
    tmp.replace(out)
    return n, size


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--release", action="append", choices=sorted(RELEASES), help="default: all, in order")
    ap.add_argument("--keep-redirects", action="store_true", help="also write the meta-refresh redirect stubs")
    args = ap.parse_args(argv)
    releases = args.release or list(RELEASES)
    outs = []
    for rel in releases:
        t0 = time.perf_counter()
        root = fetch(rel)
        t1 = time.perf_counter()
        out = DATA / f"{rel}.warc.gz"
        n, size = write_warc(rel, root, out, args.keep_redirects)
        t2 = time.perf_counter()
        outs.append(out)
        print(f"{rel}: {n} pages, {size / 1e6:.1f} MB of HTML, {out.stat().st_size / 1e6:.1f} MB WARC -> {out} "
              f"(fetch+extract {t1 - t0:.1f} s, WARC {t2 - t1:.1f} s)")
    if len(outs) == 2:
        both = DATA / "both.warc.gz"
        with open(both.with_suffix(".tmp"), "wb") as fh:
            for o in outs:  # gzip WARC records are independent members: concatenation is a valid WARC
                with open(o, "rb") as src:
                    shutil.copyfileobj(src, fh, 1 << 20)
        both.with_suffix(".tmp").replace(both)
        print(f"both: {outs[0].name} + {outs[1].name} -> {both} ({both.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
