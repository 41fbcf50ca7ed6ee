"""``neardup query``: the indexed documents each input record would pair with, without changing the index."""

from __future__ import annotations

import csv
import json
import sys
from typing import Annotated

import pyarrow as pa
import pyarrow.compute as pc
import typer

from neardup import NeardupError, ReadOptions
from neardup.memory import DEFAULT_BATCH_MB
from neardup.store.index import Index

from .app import DEFAULT_INDEX, IndexOpt, _fail, _note_unrepaired, err, escape, out

FORMATS = ("table", "jsonl", "csv")
#: columns of the csv output (``clusters`` as ``method:cluster_id`` words, space-separated)
CSV_COLUMNS = ("query", "source", "record", "url", "doc_id", "doc_url", "method", "similarity", "clusters", "reject")


def query_cmd(
    path: Annotated[str, typer.Argument(metavar="FILE|-", help="The records to look up: a file or folder as `neardup ingest` reads them, or - for stdin.")],
    index: IndexOpt = DEFAULT_INDEX,
    fmt: Annotated[str, typer.Option("--format", "-f", help="Output: table, jsonl (one object per row) or csv.")] = "table",
    text_field: Annotated[str, typer.Option(help="JSONL/Parquet field holding the text.")] = "text",
    id_field: Annotated[str | None, typer.Option(help="JSONL/Parquet field holding the url/id [default: url, else id].")] = None,
    html: Annotated[bool, typer.Option("--html", help="The text field holds HTML markup: compare its visible text.")] = False,
    encoding: Annotated[str | None, typer.Option(help="Force this charset for HTML/text bytes instead of the declared one.")] = None,
    input_format: Annotated[
        str | None, typer.Option("--input-format", help="Input format when the name does not tell it: warc, jsonl, parquet, html, text.")
    ] = None,
    batch_mb: Annotated[
        float, typer.Option(min=0.001, help="Pair a bigger input in parts of this many MB read each, as ingest batches it.")
    ] = DEFAULT_BATCH_MB,
) -> None:
    """Print the indexed documents each input record would pair with (url, method, similarity) and their clusters.

    Nothing is written: the index is read as `neardup sql` reads it. Pairs among the input's own records are not reported.
    """
    from neardup.lookup.run import query_input

    if fmt not in FORMATS:
        err.print(f"[bold red]error:[/] unknown --format {fmt!r}; use table, jsonl or csv")
        raise typer.Exit(2)
    opts = ReadOptions(text_field=text_field, id_field=id_field, html=html, encoding=encoding, fmt=input_format)
    idx = Index(index)
    counts = {"records": 0, "with": 0, "rejected": 0}
    writer = csv.writer(sys.stdout, lineterminator="\n") if fmt == "csv" else None
    table = None
    if fmt == "table":
        from rich.table import Column, Table

        table = Table("#", Column("url", overflow="fold"), Column("partner (doc_id url)", overflow="fold"), "method", "similarity",
                      Column("clusters", overflow="fold"))
    last = [None, False]  # the record of the previous table row (its number and url are shown once); csv header written
    try:
        for part in query_input(idx, path, opts, part_mb=batch_mb):
            if writer is not None and not last[1]:
                writer.writerow(CSV_COLUMNS)
                last[1] = True
            _count(part, counts)
            _print_rejects(part)
            rows = part.to_pylist()
            if fmt == "jsonl":
                for r in rows:
                    sys.stdout.write(json.dumps(r, ensure_ascii=False) + "\n")
            elif writer is not None:
                for r in rows:
                    writer.writerow([_csv_cell(c, r[c]) for c in CSV_COLUMNS])
            else:
                for r in rows:
                    if r["reject"] is None:
                        table.add_row(*_table_cells(r, r["query"] == last[0]))
                        last[0] = r["query"]
            sys.stdout.flush()
    except NeardupError as exc:
        _fail(exc)
    if writer is not None and not last[1]:  # an input without records: the header alone
        writer.writerow(CSV_COLUMNS)
    _note_unrepaired(idx.unrepaired)
    summary = (f"{counts['records']} record{'s' if counts['records'] != 1 else ''}: {counts['with']} with indexed partners, "
               f"{counts['records'] - counts['with'] - counts['rejected']} without, {counts['rejected']} rejected")
    if table is not None:
        out.print(table)
        out.print(summary, highlight=False)
    else:
        err.print(summary, highlight=False)


def _count(part: pa.Table, counts: dict[str, int]) -> None:
    """Records (not rows) of a part: answered ones by their number, rejects one each."""
    rows = part.select(["query", "source", "record", "doc_id", "reject"]).to_pylist()
    seen: dict[tuple, bool] = {}
    for r in rows:
        if r["reject"] is not None:
            counts["rejected"] += 1
            counts["records"] += 1
            continue
        key = (r["query"],)
        seen[key] = seen.get(key, False) or r["doc_id"] is not None
    counts["records"] += len(seen)
    counts["with"] += sum(seen.values())


def _print_rejects(part: pa.Table) -> None:
    for r in part.filter(pc.is_valid(part.column("reject"))).select(["source", "record", "reject"]).to_pylist():
        err.print(f"rejected {r['source']}: {r['record']}: {r['reject']}", highlight=False, markup=False)


def _clusters(v: list | None) -> str:
    return " ".join(f"{c['method']}:{c['cluster_id']}" for c in v or ())


def _csv_cell(column: str, v: object) -> object:
    if column == "clusters":
        return _clusters(v)
    return "" if v is None else v


def _table_cells(r: dict, same_record: bool) -> list[str]:
    none = r["doc_id"] is None
    return [
        "" if same_record else str(r["query"]), "" if same_record else escape(r["url"] or ""),
        "(none)" if none else escape(f"{r['doc_id']} {r['doc_url']}"), r["method"] or "",
        "" if none else f"{r['similarity']:.3f}", escape(_clusters(r["clusters"])),
    ]


def register(app: typer.Typer) -> None:
    app.command(name="query")(query_cmd)
