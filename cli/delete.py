"""``neardup delete``: parse the selection, call ``neardup.delete.delete``, print what went."""

from __future__ import annotations

from typing import Annotated

import typer

from neardup import NeardupError
from neardup.delete import SHOW, DeleteResult, Selection, delete
from neardup.store.index import Index

from .app import DEFAULT_INDEX, IndexOpt, _fail, err, out


def delete_cmd(
    url: Annotated[list[str] | None, typer.Option("--url", help="Delete every version of this url (repeatable); a url not in the index is an error.")] = None,
    batch: Annotated[int | None, typer.Option("--batch", help="Delete the document versions batch N added (later versions of their urls stay).")] = None,
    where: Annotated[str | None, typer.Option("--where", help="Delete the documents this SQL condition on `documents` accepts, e.g. \"url LIKE 'https://old.example.org/%'\".")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print how many documents and which urls would go; change nothing.")] = False,
    show: Annotated[int, typer.Option(min=0, help="List at most this many of the documents taken.")] = SHOW,
    index: IndexOpt = DEFAULT_INDEX,
) -> None:
    """Remove documents with their fingerprints, postings, pairs and cluster memberships, as if they had
    never been ingested: one atomic batch. Give exactly one of --url, --batch, --where."""
    sel = Selection(urls=tuple(url or ()), batch=batch, where=where)
    try:
        res = delete(Index(index), sel, dry_run=dry_run, show=show)
    except NeardupError as exc:
        _fail(exc)
    _print(res, show)


def _print(res: DeleteResult, show: int) -> None:
    if res.repaired:
        err.print(f"[yellow]repaired the index after an interrupted write: re-applied postings of batch(es) {res.repaired}[/]")
    if res.n_docs == 0:
        out.print("nothing to delete: the selection takes no document (no batch was recorded)", highlight=False)
        return
    verb = "would delete" if res.dry_run else f"batch {res.batch_id}: deleted"
    out.print(f"{verb} {res.n_docs} document(s) of {res.n_urls} url(s)" + ("" if res.dry_run else f" in {res.seconds:.2f} s"), highlight=False)
    for doc_id, u, version, batch_id in res.first[:show]:
        out.print(f"  {u} (version {version}, doc {doc_id}, batch {batch_id})", highlight=False, markup=False)
    if show and res.n_docs > min(show, len(res.first)):
        out.print(f"  ... and {res.n_docs - min(show, len(res.first))} more", highlight=False)
    if res.dry_run:
        out.print("nothing was changed (--dry-run)", highlight=False)
        return
    if res.pairs:
        out.print("  pairs removed: " + ", ".join(f"{m} {n}" for m, n in res.pairs.items()), highlight=False)
    if res.clusters:
        out.print("  clusters: " + ", ".join(f"{m} +{d['created']} -{d['removed']}" for m, d in res.clusters.items()), highlight=False)


def register(app: typer.Typer) -> None:
    app.command(name="delete")(delete_cmd)


__all__ = ["register"]
