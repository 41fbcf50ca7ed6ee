"""``neardup export``: the deduplicated corpus (keep), what it leaves out (drop), or a table, to a file or stdout."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from neardup import NeardupError
from neardup.store.index import Index

from .app import DEFAULT_INDEX, IndexOpt, _fail, _note_unrepaired, err, out


def export(
    out_path: Annotated[str, typer.Option("--out", "-o", help="The file to write (refused if it exists, unless --force), or - for standard output (jsonl or csv).")],
    what: Annotated[str, typer.Option(help="keep (one document per duplicate group, and every document in none), drop (the others, "
                                           "with the kept document and the pair joining them), pairs, clusters or documents.")] = "keep",
    fmt: Annotated[str | None, typer.Option("--format", "-f", help="parquet, jsonl or csv (default: from --out's suffix, else parquet; jsonl for -).")] = None,
    cluster: Annotated[str | None, typer.Option(help="keep/drop: the clustering whose clusters are the duplicate groups (default: "
                                                     "components); clusters: the one clustering to write (default: all).")] = None,
    keep: Annotated[str, typer.Option(help="keep/drop: which document of a group is kept: first (smallest doc id), longest (most "
                                           "words, then bytes, then first) or latest (newest batch, then last in it).")] = "first",
    method: Annotated[str | None, typer.Option(help="pairs: only this pair method (default: all).")] = None,
    all_versions: Annotated[bool, typer.Option("--all-versions", help="pairs, clusters, documents: also older versions of a url "
                                                                      "(default: latest versions only).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out file.")] = False,
    index: IndexOpt = DEFAULT_INDEX,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary.")] = False,
) -> None:
    """Write the deduplicated corpus (--what keep), the documents it leaves out and why (drop), or the
    pairs, clusters or documents tables, as Parquet, JSON Lines or CSV. Reads the index like `neardup sql`;
    the output file appears whole or not at all."""
    idx = Index(index)
    try:
        from neardup.export import export as run  # on use: it imports Arrow's Parquet writer (20 ms of every command's start)

        r = run(idx, out_path, what=what, fmt=fmt, cluster=cluster, keep=keep, method=method, all_versions=all_versions, force=force)
    except NeardupError as exc:
        _fail(exc)
    _note_unrepaired(idx.unrepaired)
    if quiet:
        return
    say = err if r.out == "-" else out  # standard output holds the rows only
    where = "standard output" if r.out == "-" else str(Path(r.out))
    if r.stopped:
        say.print(f"standard output was closed before the end of the export ({r.what})", highlight=False)
        return
    if r.decisions is not None:
        d = r.decisions
        say.print(f"{d.groups} duplicate groups of clustering {d.clustering} (--keep {d.policy}): one document kept from each, "
                  f"{d.dropped} dropped; {d.ungrouped} documents in no group, kept", highlight=False)
    say.print(f"wrote {r.rows} rows ({r.what}) as {r.fmt} to {where} in {r.seconds:.2f} s", highlight=False)


def register(app: typer.Typer) -> None:
    app.command(name="export")(export)
