"""The DuckDB catalog: connection, migrations, settings."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import duckdb

from ..errors import IndexBusy, NeardupError, SchemaTooNew
from ..sqlfiles import migrations, query
from . import libc
from ..storage import convert

CATALOG_FILE = "catalog.duckdb"
#: rows per row group of what a writer appends (DuckDB's default is 122,880). A table that gets at
#: least this many rows in one transaction has them written to the file as they are inserted
#: (DuckDB's optimistic writes) instead of into the log and again by the checkpoint (docs/architecture.md)
ROW_GROUP_SIZE = 8192


def cursor(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A cursor (a connection of its own, for another thread) on ``con``'s default database."""
    name = con.execute("SELECT current_database()").fetchall()[0][0]
    cur = con.cursor()
    cur.execute('USE "' + name.replace('"', '""') + '"')
    return cur


def connect(path: Path, read_only: bool, holder: str | None = None) -> duckdb.DuckDBPyConnection:
    """Open the catalog; a lock held by another process becomes ``IndexBusy`` naming it, a damaged
    file ``CatalogDamaged``, a file that cannot be opened a ``StorageError`` (``neardup.storage``)."""
    try:
        if read_only:
            con = duckdb.connect(str(path), read_only=True)
        else:  # attached, for the row-group size; spills go where a connection to the file puts them
            con = duckdb.connect(config={"temp_directory": str(path) + ".tmp"})
            quoted = str(path).replace("'", "''")
            try:
                con.execute(f"ATTACH '{quoted}' AS catalog (ROW_GROUP_SIZE {ROW_GROUP_SIZE})")
                con.execute("USE catalog")
            except BaseException:
                con.close()
                raise
        con.execute("SET enable_progress_bar = false")  # not drawn on stderr by a long query: the CLI has its own, -q is quiet
        if not read_only:
            # No row-group vacuum at checkpoints: the vacuum merged the row groups each batch
            # leaves, rewriting whole tables from time to time (the fingerprint tables and most of
            # the documents at 400,000 documents of the scale corpus: 37 s of a 73 s part, and
            # 2.4 GB more file). After a delete it did not shrink the file either: deleting two
            # thirds of a small index left 100 used blocks without it and 148 with it.
            con.execute("SET max_vacuum_tasks = 0")
            # Each full row group a batch appends is compressed and written to the file as the
            # insert fills it, not five at a time (DuckDB's default): a batch smaller than five row
            # groups was otherwise all compressed by its commit, alone on one core at the batch's
            # end (0.25 s of a real site's 77 MB, 0.13-0.16 s so), and the rows waiting took memory
            # (peak RSS 1,009 -> 947 MB there; the million's ten parts 141-145 s against 154 s).
            con.execute("SET write_buffer_row_group_count = 1")
        return con
    except duckdb.Error as exc:
        msg = str(exc)
        if isinstance(exc, duckdb.IOException) and ("Could not set lock" in msg or "Conflicting lock" in msg):
            pid = re.search(r"PID (\d+)", msg)
            who = holder or (f"process {pid.group(1)}" if pid else "another process")
            raise IndexBusy(f"{path.parent}: the catalog is in use by {who}") from exc
        doing = "opening the catalog" + ("" if read_only else " for writing")
        err = convert(exc, path, doing, index=path.parent)
        if err is None:
            raise NeardupError(f"{path}: cannot open the catalog: {msg}") from exc
        raise err from exc


def drop_cached(path: Path) -> bool:
    """Ask the kernel to drop the catalog file's cached pages that are written out (``POSIX_FADV_DONTNEED``;
    pages still dirty stay). A writer calls it after each checkpoint: what a batch writes to the catalog
    (its texts and fingerprint rows, gigabytes over a large index) is read back rarely and in blocks
    DuckDB's own buffer pool keeps, while the page cache it would fill made every fresh page of the
    process cost more on the benchmark machine (a VM) as the cache grew (the kernel's share of a late
    part of the million-document benchmark doubled with the index's pages cached). With the drop, the million's
    ten parts took 51-63 s of system CPU in all against 73-83 s without, in runs taking turns
    (docs/benchmarks.md, the twenty-fifth session). Returns whether the advice was given (not where
    the platform lacks ``posix_fadvise``)."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def start_writeback(path: Path) -> bool:
    """Start writing the catalog file's dirty pages to disk without waiting for them (Linux
    ``sync_file_range``). A batch's full row groups reach the file as its rows are inserted
    (DuckDB's optimistic writes: a real site's 22,000 pages put 120 MB there before the commit),
    and the commit's ``fdatasync`` then waited for all of them to go out, on the batch's critical
    path (63 ms there); a writer calls this after each chunk it stores, so the commit waits for the
    last few only. Advisory: an error or a platform without the call changes nothing but the
    head start. Returns whether the writeback was started."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        return libc.start_writeback(fd)
    finally:
        os.close(fd)


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_migrations'"
    ).fetchall()[0][0]
    if not exists:
        return 0
    rows = con.execute(query("catalog", "applied_migrations")).fetchall()
    return rows[-1][0] if rows else 0


def latest_version() -> int:
    return migrations()[-1][0]


def migrate(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Apply pending migrations, each in its own transaction (a new catalog's all in one,
    ``_create``); returns the versions applied."""
    con.execute(query("catalog", "create_migrations_table"))
    current = schema_version(con)
    if current > latest_version():
        raise SchemaTooNew(f"catalog schema version {current} is newer than this neardup knows ({latest_version()})")
    applied = {row[0] for row in con.execute(query("catalog", "applied_migrations")).fetchall()}
    pending = [m for m in migrations() if m[0] not in applied]
    if not applied and pending:
        return _create(con, pending)
    done = []
    for version, name, sql in migrations():  # every one not applied, in order (also one below the newest applied)
        if version in applied:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(sql)
            con.execute(query("catalog", "record_migration"), [version, name])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        done.append(version)
    return done


def _create(con: duckdb.DuckDBPyConnection, pending: list[tuple[int, str, str]]) -> list[int]:
    """A new catalog's migrations as one script in one transaction (four calls), instead of
    four calls and a commit each. A new index opened in 0.19-0.21 s with them one by one, 0.13-0.15
    s so. Beside the thread that loads the compiled kernels at an ingest's start, where DuckDB
    waits for the interpreter's lock after each call, 0.51-0.56 s against 0.33 s. A crash
    before the commit leaves the catalog without any of them, and the next opening applies all."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("\n".join(sql for _, _, sql in pending))  # each file's statements end in ';'
        con.executemany(query("catalog", "record_migration"), [[version, name] for version, name, _ in pending])
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return [v for v, _, _ in pending]


#: where empty catalogs of this schema are kept for new indexes (``from_template``): beside this
#: module's compiled files, as numba keeps its compiled kernels beside theirs
TEMPLATE_DIR = Path(__file__).resolve().parent / "__pycache__"


def template_path() -> Path:
    """The empty catalog of this DuckDB version and these migrations (``from_template``)."""
    h = hashlib.sha256(duckdb.__version__.encode())
    for version, name, sql in migrations():
        h.update(f"{version}\0{name}\0{sql}\0".encode())
    return TEMPLATE_DIR / f"catalog-{h.hexdigest()[:16]}.duckdb"


def from_template(path: Path) -> bool:
    """Create the catalog of a new index at ``path`` (which must not exist) as a copy of an empty
    catalog of this schema, made by the migrations the first time (``template_path``) and kept;
    False, leaving ``path`` alone, where none can be kept (a folder that cannot be written): the
    writer then runs the migrations on the new file itself. The copy is the same file the
    migrations make, without their statements: a new index opened in 0.12 s beside the kernels'
    first load, with about a third of that spent creating the tables and views."""
    template = template_path()
    try:
        if not template.exists():
            template.parent.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix="catalog-", dir=template.parent))
            try:
                con = connect(work / CATALOG_FILE, read_only=False)
                try:
                    migrate(con)
                    con.execute("CHECKPOINT")  # the file alone holds the schema
                finally:
                    con.close()
                os.replace(work / CATALOG_FILE, template)  # whole or absent, whoever makes it first
            finally:
                shutil.rmtree(work, ignore_errors=True)
        part = path.with_name(path.name + ".new")
        shutil.copyfile(template, part)
        os.replace(part, path)  # a crash leaves no catalog, or this one
    except (OSError, duckdb.Error, NeardupError):
        return False
    return True


def stamp_migrations(con: duckdb.DuckDBPyConnection) -> None:
    """Record the migrations of a catalog made ``from_template`` as applied now."""
    con.execute(query("catalog", "stamp_migrations"))


def check_schema(con: duckdb.DuckDBPyConnection) -> None:
    """For read-only use: the schema must be this version's (migrations need a writer)."""
    v = schema_version(con)
    if v > latest_version():
        raise SchemaTooNew(f"catalog schema version {v} is newer than this neardup knows ({latest_version()})")


def read_settings(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    return {k: json.loads(v) for k, v in con.execute(query("catalog", "get_settings")).fetchall()}


def write_settings(con: duckdb.DuckDBPyConnection, settings: dict[str, Any]) -> None:
    if not settings:
        return
    keys = sorted(settings)
    # two calls, not two a setting: each call gives up the interpreter's lock (see ``_create``)
    con.execute(query("catalog", "delete_settings"), [keys])
    con.execute(query("catalog", "put_settings"), [keys, [json.dumps(settings[k], sort_keys=True) for k in keys]])
