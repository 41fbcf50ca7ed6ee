"""``neardup`` commands. Each parses, calls one engine function, prints, and maps errors to exit codes."""

from __future__ import annotations

import copy
import csv
import gc
import io
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from neardup import NeardupError, ReadOptions, Settings, __version__
from neardup.settings import DEFAULT_METHODS, METHODS, parse_methods, parse_pairs, parse_sketch
from neardup.variants import KINDS
from neardup.query import info as index_info
from neardup.query import run_sql
from neardup import kernel_cache
from neardup.store.index import Index

if TYPE_CHECKING:  # the ingest machinery (numba kernels and all) is imported by the commands that ingest
    from neardup.ingest import IngestResult

app = typer.Typer(
    name="neardup",
    help="Near-duplicate document engine: ingest web crawls into an index folder and query it with SQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts are plain: their "[default: ...]" must not be read as markup
)


class _Console:
    """A rich ``Console``, made when first used: importing rich takes 25 ms, which a command that
    prints nothing (``ingest -q``) need not spend, all of it holding the interpreter's lock at the
    start of an ingest. ``rich`` is the console itself (for what wants a ``Console``)."""

    def __init__(self, **options) -> None:
        self._options = options
        self._console = None

    @property
    def rich(self):
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str):
        if name.startswith("_"):  # this object's own (or a copy's, before its fields are set): not rich's
            raise AttributeError(name)
        return getattr(self.rich, name)


def escape(markup: str) -> str:
    """``rich.markup.escape``, imported when first needed."""
    from rich.markup import escape as rich_escape

    return rich_escape(markup)


def Table(*args, **kwargs):  # noqa: N802 - stands for rich's class
    """A ``rich.table.Table``, imported when first needed."""
    from rich.table import Table as RichTable

    return RichTable(*args, **kwargs)


out = _Console(soft_wrap=True)
err = _Console(stderr=True, soft_wrap=True)

IndexOpt = Annotated[
    Path,
    typer.Option(
        "--index",
        "-i",
        envvar="NEARDUP_INDEX",
        help="Index folder (catalog.duckdb + LMDB postings). Env: NEARDUP_INDEX.",
        file_okay=False,
    ),
]
DEFAULT_INDEX = Path("neardup-index")
#: the interpreter's collection thresholds in an ingest's process: its young collections come after
#: 50,000 new container objects, not 700 (on the rust-1.63 pages: 4 collections and 0.07 s, against
#: 434 and 0.28 s, all of it holding the interpreter lock; an ingest makes few reference cycles)
INGEST_GC_THRESHOLDS = (50_000, 20, 100)
#: what an ingest says when numba compiles neardup's kernels (no cached code for this CPU yet): "compiling"
#: above the progress bar when it starts, "compiled" in the summary
KERNELS_COMPILE = "neardup's kernels for this CPU: once after installing, cached from then on"


def _fail(exc: NeardupError) -> None:
    err.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False)
    raise typer.Exit(exc.exit_code)


def version_callback(value: bool) -> None:
    if value:
        out.print(f"neardup {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    version: Annotated[
        bool | None, typer.Option("--version", callback=version_callback, is_eager=True, help="Print the version and exit.")
    ] = None,
) -> None:
    """Near-duplicate document engine: ingest web crawls into an index folder and query it with SQL."""


MinWordsOpt = Annotated[int | None, typer.Option(help="Reject documents with fewer words than this [default: 10].")]
SeedOpt = Annotated[int | None, typer.Option(help="Seed of every hash and permutation [default: 0].")]
MethodsOpt = Annotated[
    str | None,
    typer.Option(help=f"Fingerprint methods, comma-separated, from: {', '.join(METHODS)} [default: {','.join(DEFAULT_METHODS)}]."),
]
ShingleOpt = Annotated[int | None, typer.Option(help="Words per shingle [default: 5].")]
OffsetOpt = Annotated[int | None, typer.Option(help="Words between the starts of two shingles [default: 1].")]
CharShingleOpt = Annotated[int | None, typer.Option(help="Characters per character shingle (method chars) [default: 5].")]
SketchOpt = Annotated[str | None, typer.Option(help="Bottom-k sketch size, as bottom-k:N [default: bottom-k:100].")]
PermsOpt = Annotated[int | None, typer.Option(help="Permutations of the minhash method [default: 100].")]
PermutationOpt = Annotated[str | None, typer.Option(help="Permutation scheme: universal or matrix (the seeds' binary matrices) [default: universal].")]
ThresholdOpt = Annotated[float | None, typer.Option(help="Jaccard threshold of the duplicate pairs (word-shingle sets) [default: 0.8].")]
SimhashBitsOpt = Annotated[int | None, typer.Option(help="Simhash pairs differ in at most this many of 64 bits [default: 3].")]
KeepClustersOpt = Annotated[
    str | None,
    typer.Option(help="Clusterings every ingest keeps current: concept, components, both or '' [default: both, where possible]."),
]
SupportOpt = Annotated[int | None, typer.Option(help="concept clusters: common bottom-k elements [default: ceil(threshold x sketch size)].")]
ContentOpt = Annotated[
    str | None,
    typer.Option(help="Text of HTML input to fingerprint: main (the page's main content; the full text when that is under --min-words) "
                      "or full (the whole visible text, frame included); the full text is stored either way [default: main]."),
]
PairsOpt = Annotated[
    str | None,
    typer.Option(help="Pair methods computed at ingest, comma-separated, or 'all' (every one the fingerprint methods allow) [default: jaccard,simhash]."),
]


def parse_clusters(value: str) -> tuple[str, ...]:
    """``--keep-clusters``: a comma-separated list, ``both`` for ``concept,components``, ``''`` for none."""
    if value.strip() == "both":
        return ("concept", "components")
    return tuple(c.strip() for c in value.split(",") if c.strip())


def _settings_args(min_words, seed, methods, shingle_size, shingle_offset, char_shingle_size, sketch, minhash_perms, permutation,
                   threshold=None, simhash_bits=None, pairs=None, keep_clusters=None, concept_support=None, content=None) -> dict:
    """The settings given on the command line (None for those not given)."""
    method_list = parse_methods(methods) if methods is not None else None
    return {
        "min_words": min_words,
        "seed": seed,
        "methods": method_list,
        "shingle_size": shingle_size,
        "shingle_offset": shingle_offset,
        "char_shingle_size": char_shingle_size,
        "bottomk": parse_sketch(sketch) if sketch is not None else None,
        "minhash_perms": minhash_perms,
        "permutation": permutation,
        "threshold": threshold,
        "simhash_bits": simhash_bits,
        "pairs": parse_pairs(pairs, method_list) if pairs is not None else None,
        "clusters": parse_clusters(keep_clusters) if keep_clusters is not None else None,
        "concept_support": concept_support,
        "content": content,
    }


def _new_settings(given: dict) -> Settings:
    return Settings(**{k: v for k, v in given.items() if v is not None})


@app.command()
def init(
    index: IndexOpt = DEFAULT_INDEX,
    min_words: MinWordsOpt = None,
    seed: SeedOpt = None,
    methods: MethodsOpt = None,
    shingle_size: ShingleOpt = None,
    shingle_offset: OffsetOpt = None,
    char_shingle_size: CharShingleOpt = None,
    sketch: SketchOpt = None,
    minhash_perms: PermsOpt = None,
    permutation: PermutationOpt = None,
    threshold: ThresholdOpt = None,
    simhash_bits: SimhashBitsOpt = None,
    pairs: PairsOpt = None,
    keep_clusters: KeepClustersOpt = None,
    concept_support: SupportOpt = None,
    content: ContentOpt = None,
) -> None:
    """Create an empty index with the given settings (ingest creates one too, with defaults)."""
    try:
        idx = Index(index)
        if idx.exists():
            raise NeardupError(f"{index}: an index already exists here", hint="settings are fixed at creation; use another --index")
        s = _new_settings(_settings_args(min_words, seed, methods, shingle_size, shingle_offset, char_shingle_size, sketch, minhash_perms, permutation,
                                         threshold, simhash_bits, pairs, keep_clusters, concept_support, content))
        with idx.writer(create_with=s):
            pass
    except NeardupError as exc:
        _fail(exc)
    out.print(f"created index {index}")


@app.command(name="ingest")
def ingest_cmd(
    inputs: Annotated[
        list[str] | None,
        typer.Argument(help="WARC/WET (.warc[.gz]), JSONL (.jsonl[.gz|.zst]), Parquet, .html/.txt files, folders, or - for stdin."),
    ] = None,
    index: IndexOpt = DEFAULT_INDEX,
    from_build: Annotated[Path | None, typer.Option("--from-build", file_okay=False,
                                                    help="Instead of INPUTS: merge the output folder of `neardup build` into a new "
                                                         "index, one batch per input of the build (no Dask needed).")] = None,
    text_field: Annotated[str, typer.Option(help="JSONL/Parquet field holding the text.")] = "text",
    id_field: Annotated[str | None, typer.Option(help="JSONL/Parquet field holding the url/id [default: url, else id].")] = None,
    html: Annotated[bool, typer.Option("--html", help="The text field holds HTML markup: extract its visible text.")] = False,
    encoding: Annotated[str | None, typer.Option(help="Force this charset for HTML/text bytes instead of the declared one.")] = None,
    fmt: Annotated[
        str | None, typer.Option("--format", help="Input format when the name does not tell it: warc, jsonl, parquet, html, text.")
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Fail and roll back the batch at the first bad record.")] = False,
    min_words: MinWordsOpt = None,
    seed: SeedOpt = None,
    methods: MethodsOpt = None,
    shingle_size: ShingleOpt = None,
    shingle_offset: OffsetOpt = None,
    char_shingle_size: CharShingleOpt = None,
    sketch: SketchOpt = None,
    minhash_perms: PermsOpt = None,
    permutation: PermutationOpt = None,
    threshold: ThresholdOpt = None,
    simhash_bits: SimhashBitsOpt = None,
    pairs: PairsOpt = None,
    keep_clusters: KeepClustersOpt = None,
    concept_support: SupportOpt = None,
    content: ContentOpt = None,
    batch_mb: Annotated[
        float | None, typer.Option(min=0.001, help="Commit a bigger input as several batches of this many MB read each "
                                   "(bounds memory) [default: 128 at --memory 4GB, in proportion to --memory].")
    ] = None,
    memory_size: Annotated[
        str | None, typer.Option("--memory", help="Size every budget the ingest holds in memory for about this much (e.g. 2GB, "
                                 "at least 500MB) [default: 4GB]: batch size, DuckDB's buffer pool, cached values, candidate slices.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Add crawl files to the index: one atomic batch per input (per --batch-mb of it); re-ingesting is a no-op.

    Settings options apply when this creates the index; on an existing index they must match it.
    With --from-build DIR, the index (new) is made of a build folder instead, with the build's settings.
    """
    if from_build is not None:
        if inputs:
            err.print("[bold red]error:[/] name INPUTS or --from-build, not both")
            raise typer.Exit(2)
        _ingest_build(index, from_build, quiet)
        return
    if not inputs:
        err.print("[bold red]error:[/] name the inputs to ingest (files, folders or -), or --from-build DIR")
        raise typer.Exit(2)
    opts = ReadOptions(text_field=text_field, id_field=id_field, html=html, encoding=encoding, fmt=fmt)
    idx = Index(index)
    failed = False
    thresholds = gc.get_threshold()
    try:
        memory_bytes = _memory_size(memory_size)
        from neardup.memory import MemoryPlan, keep_freed_memory

        keep_freed_memory(MemoryPlan(memory_bytes) if memory_bytes else None)  # one ingest a process: freed memory is reused
        gc.set_threshold(*INGEST_GC_THRESHOLDS)
        given = _settings_args(min_words, seed, methods, shingle_size, shingle_offset, char_shingle_size, sketch, minhash_perms, permutation,
                               threshold, simhash_bits, pairs, keep_clusters, concept_support, content)
        create = None  # on an existing index the options given are checked against its settings, not combined with the defaults
        if idx.exists():
            idx.settings().check_overrides(given)
        else:
            create = _new_settings(given)
        for path in inputs:
            compiled = kernel_cache.compiled_here()
            res = _ingest_one(idx, path, opts, strict, create, quiet, batch_mb, memory_bytes)
            if not quiet:
                _print_summary(res, kernel_cache.compiled_here() - compiled)
    except NeardupError as exc:
        failed = True
        _fail(exc)
    finally:
        gc.set_threshold(*thresholds)
    if failed:
        raise typer.Exit(1)


def _ingest_build(index: Path, folder: Path, quiet: bool) -> None:
    from neardup.distributed.merge import ingest_build

    try:
        r = ingest_build(Index(index), str(folder))
    except NeardupError as exc:
        _fail(exc)
    if not quiet:
        out.print(f"merged build {folder} into {index}: batches {r.batch_ids[0] if r.batch_ids else '-'}..{r.batch_ids[-1] if r.batch_ids else '-'}, "
                  f"{r.n_docs} documents, {r.pairs} pairs, {r.clusters} clusters", highlight=False)


def _memory_size(text: str | None) -> int | None:
    """Bytes of ``--memory``, or a usage error naming the option."""
    if text is None:
        return None
    from neardup.memory import MemoryPlan, parse_size

    try:
        return MemoryPlan(parse_size(text)).total
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--memory") from None


def _ingest_one(idx: Index, path: str, opts: ReadOptions, strict: bool, create: Settings | None, quiet: bool,
                batch_mb: float | None = None, memory_bytes: int | None = None) -> IngestResult:
    from neardup.ingest import ingest

    show = not quiet and err.is_terminal
    if not show:
        return ingest(idx, path, opts, strict=strict, create_with=create, batch_mb=batch_mb, memory_bytes=memory_bytes)
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        TextColumn("batch {task.fields[batch]}: {task.fields[stage]:<8}"),
        TextColumn("{task.fields[records]:,} records"),
        TextColumn("{task.fields[mb]:.1f} MB"),
        TextColumn("{task.fields[docs_s]:,.0f} docs/s"),
        TextColumn("{task.fields[rate]:.1f} MB/s"),
        TimeElapsedColumn(),
        console=err.rich,
        transient=True,
    ) as bar:
        task = bar.add_task(f"ingest {path}", total=None, records=0, mb=0.0, rate=0.0, docs_s=0.0, batch="-", stage="starting")
        t0 = time.perf_counter()
        seen = {"records": 0, "bytes": 0}

        def tick(records: int, nbytes: int) -> None:
            seen["records"] += records
            seen["bytes"] += nbytes
            mb = seen["bytes"] / 1e6
            dt = max(time.perf_counter() - t0, 1e-9)
            bar.update(task, records=seen["records"], mb=mb, rate=mb / dt, docs_s=seen["records"] / dt)

        def stage(batch_id: int, name: str) -> None:
            bar.update(task, batch=batch_id, stage=name)

        # the first run after installing compiles the kernels (34-42 s on two cores, docs/cli.md): said above the bar when it begins
        kernel_cache.on_first_compile(lambda: bar.console.print(f"compiling {KERNELS_COMPILE} (up to a minute)", highlight=False, markup=False))
        try:
            return ingest(idx, path, opts, strict=strict, create_with=create, progress=tick, batch_mb=batch_mb, on_stage=stage,
                          memory_bytes=memory_bytes)
        finally:
            kernel_cache.on_first_compile(None)


def _print_summary(res: IngestResult, compiled: int = 0) -> None:
    mb = res.n_bytes / 1e6
    rate = mb / res.seconds if res.seconds > 0 else 0.0
    if res.repaired:
        err.print(f"[yellow]repaired the index after an interrupted write: re-applied postings of batch(es) {res.repaired}[/]")
    which = f"batch {res.batch_id}" if len(res.batch_ids) <= 1 else f"batches {res.batch_ids[0]}-{res.batch_ids[-1]}"
    out.print(
        f"{which} ({res.source}): [green]{res.n_docs} added[/] ({res.n_new_versions} new versions), "
        f"{res.n_unchanged} unchanged, {res.n_skipped} skipped, "
        f"{'[yellow]' if res.n_rejected else ''}{res.n_rejected} rejected{'[/]' if res.n_rejected else ''}; "
        f"{mb:.1f} MB in {res.seconds:.2f} s ({rate:.1f} MB/s)",
        highlight=False,
    )
    if res.pairs:
        out.print("  new duplicate pairs: " + ", ".join(f"{m} {n}" for m, n in res.pairs.items()), highlight=False)
    if res.clusters:
        out.print("  clusters: " + ", ".join(f"{m} +{d['created']} -{d['removed']}" for m, d in res.clusters.items()), highlight=False)
    for r in res.rejects[:5]:
        err.print(f"  rejected {r.message()}", highlight=False, markup=False)
    if res.n_rejected > 5:
        err.print(f"  ... and {res.n_rejected - 5} more: SELECT * FROM rejects WHERE batch_id BETWEEN {res.batch_ids[0]} AND {res.batch_id}", highlight=False)
    if compiled:
        err.print(f"  compiled {KERNELS_COMPILE} ({compiled} kernel signatures, part of the time above)", highlight=False, markup=False)


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="One SELECT (or EXPLAIN of one); anything that would write or read outside the catalog is refused.")],
    index: IndexOpt = DEFAULT_INDEX,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, csv, json (one object per line) or tsv.")] = "table",
    max_rows: Annotated[int, typer.Option(help="At most this many rows in table format.")] = 200,
) -> None:
    """Run a read-only SQL query over documents, batches, rejects, fingerprints and duplicates. See docs/sql.md."""
    if fmt not in ("table", "csv", "json", "tsv"):
        err.print(f"[bold red]error:[/] unknown --format {fmt!r}; use table, csv, json or tsv")
        raise typer.Exit(2)
    from neardup.distributed.folder import BuildFolder

    idx = BuildFolder(index) if BuildFolder.holds(index) else Index(index)  # a build folder reads like an index
    try:
        result = run_sql(idx, query)
    except NeardupError as exc:
        _fail(exc)
    _note_unrepaired(idx.unrepaired)
    if fmt in ("csv", "tsv"):
        _write_delimited(result, "," if fmt == "csv" else "\t")
        return
    rows = result.to_pylist()
    cols = result.column_names
    if fmt == "json":
        for r in rows:
            sys.stdout.write(json.dumps(r, default=str, ensure_ascii=False) + "\n")
    else:
        t = Table(*cols, show_lines=False)
        for r in rows[:max_rows]:
            t.add_row(*(_cell(r[c]) for c in cols))
        out.print(t)
        more = f" (showing {max_rows})" if len(rows) > max_rows else ""
        out.print(f"{len(rows)} row{'s' if len(rows) != 1 else ''}{more}", highlight=False)


def _write_delimited(result, delim: str) -> None:
    """Write a query's rows to stdout exactly as ``csv.writer(delimiter=delim, lineterminator="\\n")``
    writes them, a column at a time: integers and strings are put in text by Arrow and joined per row;
    other types by Python's ``str`` per value (as the csv module does); rows that need the csv module's
    quoting (a field holding the delimiter, a quote or a line break, or a lone empty field) are
    written by it."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    w = csv.writer(sys.stdout, delimiter=delim, lineterminator="\n")
    w.writerow(result.column_names)
    if result.num_rows == 0:
        return
    texts, careful = [], None
    for col in result.columns:
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if pa.types.is_integer(col.type):
            text = pc.cast(col, pa.string())
        elif pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            text = col
        else:
            text = pa.array([None if v is None else str(v) for v in col.to_pylist()], pa.large_string())
        text = text.cast(pa.large_string()).fill_null("")
        special = pc.match_substring_regex(text, "[" + delim + '"\r\n]')
        careful = special if careful is None else pc.or_(careful, special)
        texts.append(text)
    if len(texts) == 1:  # a row of one empty field is written quoted
        careful = pc.or_(careful, pc.equal(pc.binary_length(texts[0]), 0))
    lines = pc.binary_join_element_wise(*texts, pa.scalar(delim, pa.large_string())) if len(texts) > 1 else texts[0]
    redo = pc.indices_nonzero(careful).to_pylist()
    if redo:
        buf = io.StringIO()
        again = csv.writer(buf, delimiter=delim, lineterminator="\n")
        done = []
        for i in redo:
            buf.seek(0)
            buf.truncate()
            again.writerow([c[i].as_py() for c in result.columns])
            done.append(buf.getvalue()[:-1])
        lines = pc.replace_with_mask(lines, careful, pa.array(done, pa.large_string()))
    empty, newline = pa.scalar("", pa.large_string()), pa.scalar("\n", pa.large_string())
    ended = pc.binary_join_element_wise(lines, empty, newline)  # each line and its line feed
    _, offsets, data = ended.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int64)[ended.offset : ended.offset + len(ended) + 1]
    raw = memoryview(data)[int(bounds[0]) : int(bounds[-1])]
    out = getattr(sys.stdout, "buffer", None)
    if out is None:  # a text-only stream (a StringIO)
        sys.stdout.write(bytes(raw).decode("utf-8"))
    else:
        sys.stdout.flush()
        out.write(raw)


def _note_unrepaired(exc: NeardupError | None) -> None:
    """A reader could not repair an interrupted write: say so (on stderr), and why."""
    if exc is not None:
        first = escape(str(exc).splitlines()[0])
        err.print(f"[yellow]note: an interrupted write could not be repaired here ({first}); this is the last committed "
                  "state, and the postings stay behind it until a writer (any ingest, or `neardup rebuild --postings`) "
                  "repairs them[/]", highlight=False)


def _cell(v: object) -> str:
    if v is None:
        return "NULL"
    s = str(v)
    return s if len(s) <= 120 else s[:117] + "..."


@app.command()
def rebuild(
    index: IndexOpt = DEFAULT_INDEX,
    clusters: Annotated[
        str | None,
        typer.Option(help="Only recompute these clusterings, comma-separated: concept, components, cliques, center, merge_center, "
                          "star, ricochet, biconnected, greedy002, degree002 (docs/clusters.md)."),
    ] = None,
    pairs_method: Annotated[str | None, typer.Option(help="Pair method whose graph the graph clusterings follow [default: jaccard].")] = None,
    theta: Annotated[float, typer.Option(help="star: the least edge similarity.")] = 0.0,
    bits: Annotated[str, typer.Option(help="greedy002/degree002: simhash bit budgets, comma-separated.")] = "5,10,15",
    support: Annotated[int | None, typer.Option(help="concept: common sketch elements [default: the index's].")] = None,
    max_component: Annotated[int, typer.Option(help="cliques: skip components larger than this.")] = 50,
    postings: Annotated[bool, typer.Option("--postings", help="Only re-derive the postings (LMDB) from the catalog, whatever state they are in.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary.")] = False,
) -> None:
    """Recompute every fingerprint, duplicate pair and incremental clustering from the stored texts
    with the current collection statistics; with --clusters, only those clusterings; with --postings,
    only the postings."""
    from neardup.rebuild import rebuild_clusters, rebuild_fingerprints, rebuild_postings

    try:
        if postings:
            p = rebuild_postings(Index(index))
            if not quiet:
                out.print(f"re-derived the postings of {p.batches} batch(es) from the catalog in {p.seconds:.2f} s", highlight=False)
            return
        if clusters:
            names = [c.strip() for c in clusters.split(",") if c.strip()]
            bit_list = [int(b) for b in bits.split(",") if b.strip()]
            r = rebuild_clusters(Index(index), names, pairs_method, theta, bit_list, support, max_component)
            if not quiet:
                for m, d in r.made.items():
                    extra = f", {d['skipped_components']} components over --max-component skipped" if "skipped_components" in d else ""
                    out.print(f"{m}: {d['clusters']} clusters ({', '.join(f'{k}={v}' for k, v in d['params'].items())}){extra}", highlight=False)
                out.print(f"in {r.seconds:.2f} s", highlight=False)
            return
        r = rebuild_fingerprints(Index(index))
    except ValueError as exc:
        _fail(NeardupError(f"bad option: {exc}"))
    except NeardupError as exc:
        _fail(exc)
    if not quiet:
        out.print(f"rebuilt {', '.join(r.methods)} for {r.n_docs} documents in {r.seconds:.2f} s", highlight=False)
        if r.pairs:
            out.print("duplicate pairs: " + ", ".join(f"{m} {n}" for m, n in r.pairs.items()), highlight=False)
        for m, d in (r.clusters or {}).items():
            out.print(f"{m}: {d['created']} clusters", highlight=False)


def _numbers(value: str, kind, name: str) -> tuple:
    """``A,B,...`` as a tuple of numbers."""
    try:
        return tuple(kind(x) for x in value.split(",") if x.strip())
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated numbers, got {value!r}", param_hint=name) from None


@app.command()
def evaluate(
    index: IndexOpt = DEFAULT_INDEX,
    gold: Annotated[str | None, typer.Option(help="CSV of reference duplicate pairs: two columns of urls or doc ids; header optional.")] = None,
    gold_clusters: Annotated[str | None, typer.Option(help="CSV of reference clusters: url,cluster_label; header optional.")] = None,
    out_dir: Annotated[str | None, typer.Option("--out", help="Folder for the report: every table as CSV and Parquet, the unique "
                                                              "pairs per method, pictures and report.html.")] = None,
    pooled: Annotated[bool, typer.Option("--pooled", help="003's pooled evaluation: the union of all methods' pairs, verified by a text similarity, is the reference.")] = False,
    verify: Annotated[str, typer.Option(help="--pooled: the similarity that verifies a pair: edit (003), weighted-jaccard or cosine (004, IDF weights).")] = "edit",
    verify_at: Annotated[float, typer.Option(help="--pooled: the least similarity of a verified pair.")] = 0.8,
    thresholds: Annotated[str, typer.Option(help="Similarity thresholds of the per-threshold rows, comma-separated.")] = "0.8,0.85,0.9,0.95,1",
    support_sweep: Annotated[str, typer.Option(help="Concept clusters mined afresh and timed at each support k, for the bottom-k and "
                                                    "min-hash images (001 tables 2-4 and 6): auto (k = ceil(t * image size) for each "
                                                    "threshold t), none, or K1,K2,...")] = "auto",
    bits: Annotated[str, typer.Option(help="Report 002's view (group sizes, top-10 groups, distances) for these simhash bit budgets; 'none' for none.")] = "5,10,15",
    measures: Annotated[str | None, typer.Option(help="004's similarities to add to the unique-pair lists, comma-separated: edit, weighted-jaccard, cosine.")] = None,
) -> None:
    """Compare every pair method and clustering with reference pairs/clusters (000's Comparator,
    precision/recall/F1 per threshold, 001's support sweep, 004's cluster Pr/Re/F1/CPr), or with
    their verified union (003, --pooled); results go to `evaluations` and, with --out, a report."""
    from neardup.evaluate import evaluate as run
    from neardup.report import fmt, tables

    supports = None if support_sweep == "auto" else () if support_sweep == "none" else _numbers(support_sweep, int, "--support-sweep")
    bit_list = () if bits == "none" else _numbers(bits, int, "--bits")
    threshold_list = _numbers(thresholds, float, "--thresholds")
    measure_list = tuple(m.strip() for m in measures.split(",") if m.strip()) if measures else ()
    try:
        ev = run(Index(index), gold, gold_clusters, out_dir, thresholds=threshold_list, pooled=pooled, verify_at=verify_at,
                 bits=bit_list, measure=verify, supports=supports, measures=measure_list)
    except NeardupError as exc:
        _fail(exc)
    for what, n in ev.unknown.items():
        if n:
            err.print(f"[yellow]{n} {what} name documents not in the index (left out)[/]", highlight=False)
    for t in tables(ev):
        if t.terminal:
            table = Table(*(c.replace("_", " ") for c in t.columns), title=t.title, title_justify="left")
            for row in t.rows:
                table.add_row(*(fmt(x) for x in row))
            out.print(table)
    where = f"; report in {out_dir}" if out_dir else ""
    out.print(f"evaluation run {ev.run_id} stored in evaluations ({ev.seconds:.2f} s){where}", highlight=False)


def _range(value: str, kind, name: str) -> tuple:
    """``LO,HI`` (or one value for both) as a pair of numbers."""
    parts = _numbers(value, kind, name)
    if len(parts) not in (1, 2):
        raise typer.BadParameter(f"expected LO,HI or one number, got {value!r}", param_hint=name)
    return parts[0], parts[-1]


@app.command()
def generate(
    inputs: Annotated[list[str], typer.Argument(help="Real text to build from: anything `neardup ingest` reads.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for corpus.jsonl, pairs.csv, clusters.csv, framed_pairs.csv, documents.csv, manifest.json.", file_okay=False)],
    sources: Annotated[int | None, typer.Option(help="Originals to use [default: every usable source].")] = None,
    duplicated: Annotated[float, typer.Option(help="Share of the originals that get near-duplicate variants.")] = 0.5,
    variants: Annotated[str, typer.Option(help="Variants per duplicated original: LO,HI.")] = "1,3",
    kinds: Annotated[str, typer.Option(help="Variant kinds to draw from: exact, edit, reorder, boilerplate.")] = ",".join(KINDS),
    edit_rate: Annotated[str, typer.Option(help="edit: share of the words inserted, deleted or substituted, LO,HI.")] = "0.005,0.02",
    framed: Annotated[int, typer.Option(help="Framed pages: different texts inside a shared long frame (001's false duplicates).")] = 20,
    frame_group: Annotated[int, typer.Option(help="Framed pages per frame.")] = 5,
    frame_words: Annotated[int, typer.Option(help="Words of each long frame (half header, half footer).")] = 200,
    framed_content: Annotated[str | None, typer.Option(help="Words of each framed page's own text, LO,HI [default: frame/20,frame/2].")] = None,
    reframed: Annotated[int, typer.Option(help="Reframed pages: the same text under two different site frames, a gold pair each.")] = 0,
    html_pages: Annotated[bool, typer.Option("--html-pages", help="Write every document as an HTML page (frames as header and footer, "
                                                                  "the text in <main>); ingest it with --html.")] = False,
    min_words: Annotated[int, typer.Option(help="Sources with fewer words are skipped.")] = 50,
    max_words: Annotated[int | None, typer.Option(help="Cut longer sources to this many words.")] = None,
    source_similarity: Annotated[float, typer.Option(help="A source whose word-shingle Jaccard with an earlier one reaches this is skipped.")] = 0.3,
    seed: Annotated[int, typer.Option(help="Seed of every random choice.")] = 0,
    output_format: Annotated[str, typer.Option(help="Corpus file format: jsonl or parquet.")] = "jsonl",
    text_field: Annotated[str, typer.Option(help="JSONL/Parquet field holding the text.")] = "text",
    id_field: Annotated[str | None, typer.Option(help="JSONL/Parquet field holding the url/id [default: url, else id].")] = None,
    html: Annotated[bool, typer.Option("--html", help="The text field holds HTML markup: extract its visible text.")] = False,
    encoding: Annotated[str | None, typer.Option(help="Force this charset for HTML/text bytes instead of the declared one.")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="Input format when the name does not tell it: warc, jsonl, parquet, html, text.")] = None,
) -> None:
    """Make a labelled corpus from real text: near-duplicate variants with known edits, their gold
    pairs and clusters, and framed false duplicates (for `neardup evaluate` and benchmarks)."""
    from neardup.generate import GenerateOptions
    from neardup.generate import generate as run

    o = GenerateOptions(
        sources=sources, duplicated=duplicated, variants=_range(variants, int, "--variants"),
        kinds=tuple(k.strip() for k in kinds.split(",") if k.strip()), edit_rate=_range(edit_rate, float, "--edit-rate"),
        framed=framed, frame_group=frame_group, frame_words=frame_words,
        framed_content=_range(framed_content, int, "--framed-content") if framed_content else None,
        min_words=min_words, max_words=max_words, source_similarity=source_similarity, seed=seed, output_format=output_format,
        reframed=reframed, html_pages=html_pages,
    )
    read = ReadOptions(text_field=text_field, id_field=id_field, html=html, encoding=encoding, fmt=fmt)
    try:
        r = run(inputs, out_dir, o, read)
    except NeardupError as exc:
        _fail(exc)
    for rej in r.rejects:
        err.print(f"[yellow]skipped[/] {rej.message()}", highlight=False)
    if r.rejected > len(r.rejects):
        err.print(f"[yellow]... and {r.rejected - len(r.rejects)} more skipped records[/]", highlight=False)
    out.print(f"read {r.records_read} records: {r.too_short} too short, {r.similar} similar to an earlier one, "
              f"{r.rejected} rejected by the reader", highlight=False)
    out.print(f"wrote {r.documents} documents to {r.corpus}: {r.originals} originals, {r.clusters} gold clusters, variants "
              + (", ".join(f"{k} {n}" for k, n in r.variants.items()) or "none") + f", {r.framed} framed pages"
              + (f", {r.reframed} reframed pages" if r.reframed else "") + (" (HTML pages)" if o.html_pages else ""), highlight=False)
    out.print(f"gold pairs: {r.gold_pairs} ({r.gold_pairs_below} below word-shingle Jaccard 0.8); framed pairs: "
              f"{r.framed_pairs} ({r.framed_pairs_above} at or above 0.8)", highlight=False)


@app.command()
def info(index: IndexOpt = DEFAULT_INDEX) -> None:
    """Show an index's settings, counts, postings and recent batches."""
    try:
        i = index_info(Index(index))
    except NeardupError as exc:
        _fail(exc)
    out.print(f"[bold]index[/] {i.path}  (schema version {i.schema_version})", highlight=False)
    out.print("[bold]settings[/] " + ", ".join(f"{k}={v}" for k, v in sorted(i.settings.items())), highlight=False)
    out.print("[bold]counts[/] " + ", ".join(f"{k}={v}" for k, v in i.counts.items()), highlight=False)
    out.print("[bold]duplicate pairs[/] " + (", ".join(f"{k}={v}" for k, v in i.pairs.items()) or "none"), highlight=False)
    out.print("[bold]clusters[/] " + (", ".join(f"{m}={n}" for m, (n, _) in i.clusters.items()) or "none"), highlight=False)
    for m, (_, t) in i.clusters.items():
        if t:
            err.print(f"[yellow]{m}: {t} cluster(s) truncated[/]: the miner's work budget ran out there, so the cluster is the "
                      "neighbourhood of its anchor, not a maximal set (SELECT * FROM clusters WHERE truncated)", highlight=False)
    if i.postings_problem is not None:
        why = escape(getattr(i.postings_problem, "detail", "") or str(i.postings_problem).splitlines()[0])
        out.print(f"[bold]postings[/] cannot be read ({why}): run `neardup rebuild --postings`", highlight=False)
    elif i.postings_applied_batch is None:
        out.print("[bold]postings[/] missing (the postings/ folder is gone): run `neardup rebuild --postings`", highlight=False)
    else:
        out.print(
            f"[bold]postings[/] up to batch {i.postings_applied_batch}; keys: "
            + (", ".join(f"{k}={v}" for k, v in i.postings_keys.items()) or "none"),
            highlight=False,
        )
    _note_unrepaired(i.unrepaired)
    if i.batches:
        t = Table("batch", "source", "status", "added", "unchanged", "skipped", "rejected", "finished")
        for b in i.batches:
            deleted = b.get("kind") == "delete"
            t.add_row(
                str(b["batch_id"]), b["source"], b["status"] + (" (delete)" if deleted else ""),
                f"-{b['n_deleted']}" if deleted else str(b["n_docs"]), str(b["n_unchanged"]),
                str(b["n_skipped"]), str(b["n_rejected"]), str(b["finished_at"])[:19],
            )
        out.print(t)


WaitOpt = Annotated[float, typer.Option(min=0, help="Wait up to this many seconds for a writer holding the index [default: refuse at once].")]


@app.command()
def check(
    index: IndexOpt = DEFAULT_INDEX,
    full: Annotated[bool, typer.Option("--full", help="Compare the postings of every document, not a sample of 1,000, and every table's entry count.")] = False,
    wait: WaitOpt = 0.0,
) -> None:
    """Verify an index: read every catalog block, check that its rows agree and that the postings
    hold what the catalog implies; print each check and the repair of each problem (exit 6: postings, 7: catalog)."""
    from neardup.maintenance.check import check_index

    try:
        r = check_index(Index(index), full=full, wait=wait)
    except NeardupError as exc:
        _fail(exc)
    _print_check(r)
    if not r.ok:
        raise typer.Exit(r.exit_code)


def _print_check(r) -> None:
    style = {"ok": "green", "problem": "bold red", "skipped": "yellow"}
    for f in r.findings:
        out.print(f"[{style[f.status]}]{f.status:<8}[/] {f.check}: {f.detail}", highlight=False)
        if f.repair:
            out.print(f"         repair: {f.repair}", highlight=False, markup=False)
    what = f"{len(r.findings)} checks in {r.seconds:.2f} s"
    if r.ok:
        out.print(f"[green]all is well[/] ({what})", highlight=False)
    else:
        out.print(f"[bold red]{len(r.problems)} problem(s)[/] ({what}); exit code {r.exit_code}", highlight=False)


@app.command()
def backup(
    dest: Annotated[Path, typer.Argument(help="A new or empty folder for the copy.", file_okay=False)],
    index: IndexOpt = DEFAULT_INDEX,
    wait: WaitOpt = 0.0,
    no_check: Annotated[bool, typer.Option("--no-check", help="Do not check the copy afterwards.")] = False,
) -> None:
    """Copy the whole index (catalog and postings) into DEST, consistently, while readers go on;
    writers wait until the copy is done. The copy is then checked like `neardup check`."""
    from neardup.maintenance.backup import backup as run

    try:
        r = run(Index(index), dest, wait=wait, check=not no_check)
    except NeardupError as exc:
        _fail(exc)
    postings = f"postings {r.postings_bytes / 1e6:,.1f} MB" if r.postings else "no postings"
    out.print(f"backed up {r.source} to {r.dest}: catalog {r.catalog_bytes / 1e6:,.1f} MB, {postings}; writers were held "
              f"off for {r.locked_seconds:.2f} s ({r.seconds:.2f} s in all)", highlight=False)
    if r.finished:
        err.print("[yellow]the index had an interrupted write: the copy was made whole"
                  + (f" (postings of batch(es) {r.repaired} re-derived)" if r.repaired else "") + "; the original is as it was[/]",
                  highlight=False)
    if r.check is not None:
        if r.check.ok:
            out.print(f"the copy checks ok ({len(r.check.findings)} checks in {r.check.seconds:.2f} s)", highlight=False)
        else:
            _print_check(r.check)
            raise typer.Exit(r.check.exit_code)


from .build import register as register_build  # noqa: E402
from .delete import register as register_delete  # noqa: E402
from .export import register as register_export  # noqa: E402
from .query import register as _register_query  # noqa: E402

register_build(app)
register_delete(app)
register_export(app)
_register_query(app)


def main() -> None:
    from neardup.blas_probe import skip_numba_blas_probe

    skip_numba_blas_probe()  # this process is neardup's: numba's BLAS probe would import scipy.linalg (0.3 s)
    # (its kernels' lean loading and wide vectors are installed when neardup.cli is imported, before numba is)
    try:
        app_for(sys.argv[1:])()
    except SystemExit as done:
        _leave(done.code)
    except Exception as exc:  # the engine turns storage faults into NeardupErrors; this catches any it missed
        from neardup.storage import convert

        fault = convert(exc, Path.cwd(), "running the command")
        if fault is None:
            raise
        err.print(f"[bold red]error:[/] {escape(str(fault))}", markup=True, highlight=False)
        _leave(fault.exit_code)
    _leave(0)


def app_for(args: list[str]) -> typer.Typer:
    """The application to run for the command line ``args``: ``app`` with only the command that
    ``args`` names, when their first one names one. Typer turns every command's parameters into
    click's before it parses anything (reading each function's signature and annotations): 50-60 ms
    for the thirteen commands, on the main thread at the start of every command, an ingest's
    included, where one command's take a few. Anything else (``--help``, ``--version``, no
    command, an unknown one) gets the whole ``app``, whose help and errors list every command."""
    if not args or args[0].startswith("-"):
        return app
    from typer.main import get_command_name

    named = [c for c in app.registered_commands
             if (c.name or get_command_name(c.callback.__name__ if c.callback else "")) == args[0]]
    if len(named) != 1 or app.registered_groups:
        return app
    one = copy.copy(app)
    one.registered_commands = named
    return one


def _leave(code: int | str | None) -> None:
    """End the process once a command is done: the exit functions run (``atexit``: finalizers of
    temporary files, thread pools), the standard streams are flushed, and the process exits
    without the interpreter's teardown of every module and object, which takes 0.3-0.4 s once
    numba has loaded compiled code (its code generator's shutdown). Everything a command writes
    is closed or committed before it returns; what the teardown would close late (a connection a
    command left open) is what a crash leaves, which the index recovers from."""
    import atexit
    import os

    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``neardup sql ... | head``) or stream
            pass
    os._exit(code or 0)
