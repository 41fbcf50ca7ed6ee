"""``neardup check``: verify an index folder, and say what is wrong and how to repair it.

The check holds the writer lock (no batch can start meanwhile; readers go on)
and changes nothing. Each check gives one ``Finding`` (a damaged table or
posting table one each):

catalog (the source of truth; a problem here means restoring a backup)
  * file: DuckDB opens ``catalog.duckdb`` read-only (replaying its log, if any).
  * schema: the recorded migrations are this neardup's 1..n; every view binds.
  * data: every column of every table is read in full. DuckDB keeps a
    checksum per 256 KB block and verifies it when it reads the block, so
    damage to a block in use fails the read of its table. Blocks not in use
    (free blocks left by checkpoints) are not read: damage there harms
    nothing and is not reported. The primary-key index of ``term_stats`` is
    not read by a scan either.
  * settings, batches and documents, versions, pairs, clusters: the rows
    agree with each other (``sql/maintenance.sql``).
folder
  * interrupted write: no ``batch.pending`` (the check holds the writer lock,
    so one is left over from a writer that stopped).
  * log: whether ``catalog.duckdb.wal`` holds writes not yet checkpointed.
postings (derived from the catalog; a problem here is repaired by
``neardup rebuild --postings``)
  * present: ``postings/`` exists and opens.
  * applied: ``applied_batch`` is the catalog's last committed batch, and the
    largest doc id recorded is the catalog's.
  * content: the entries the catalog rows imply (``neardup.keys``, the
    derivation a writer uses) are present with those doc ids, and the value
    tables hold each document's value. By default for a deterministic sample
    of documents (runs of ``RUN`` consecutive ids spread evenly over the
    index, ``SAMPLE`` in all, plus the batch-wide tables of the last batch);
    with ``full`` for every document, and then the number of entries of every
    table is compared too, so that entries nothing implies are found as well.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field

import duckdb
import lmdb
import numpy as np

from ..errors import IndexBusy, NeardupError, SchemaTooNew
from ..keys import BATCH_TABLES, batch_postings, derive_postings, fingerprint_postings
from ..settings import Settings
from ..sqlfiles import migrations, query
from ..store import catalog
from ..store.index import PENDING_FILE, Index, old_layout
from ..store.postings import ROW_TABLES, VALUES, LmdbPostings
from ..store.runs import RUN_TABLES
from . import writer_lock
from ..arrays import unique

#: documents whose postings the default check compares
SAMPLE = 1000
#: consecutive documents per sampled run
RUN = 100
#: keys looked up per read transaction (the pages it mapped are released after each)
LOOKUP = 16384
#: DuckDB's memory limit for the check's connection
MEMORY = "1GB"

#: exit code of ``neardup check`` when only derived data (postings, an interrupted write) is wrong
EXIT_POSTINGS = 6
#: exit code when the catalog is damaged or inconsistent
EXIT_CATALOG = 7

OK, PROBLEM, SKIPPED = "ok", "problem", "skipped"
CATALOG, POSTINGS = "catalog", "postings"

REPAIR_CATALOG = ("restore the index folder from a backup (`neardup backup`): the catalog is the source of truth "
                  "and nothing can re-derive it")
REPAIR_REBUILD = "run `neardup rebuild` (recomputes fingerprints, pairs and clusters from the stored texts), or restore a backup"
REPAIR_POSTINGS = "run `neardup rebuild --postings` (re-derives the postings from the catalog)"
REPAIR_NEXT_WRITE = "the next write repairs it from the catalog: run `neardup rebuild --postings` (or any ingest)"


@dataclass
class Finding:
    """The outcome of one check."""

    check: str
    status: str  # OK, PROBLEM or SKIPPED
    detail: str
    repair: str = ""
    #: what a problem damages: the catalog (CATALOG) or data derived from it (POSTINGS)
    part: str = CATALOG

    @property
    def ok(self) -> bool:
        return self.status != PROBLEM


@dataclass
class CheckReport:
    path: str
    full: bool
    findings: list[Finding] = field(default_factory=list)
    #: documents whose postings were compared, of how many
    documents_checked: int = 0
    documents: int = 0
    seconds: float = 0.0

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if not f.ok]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def exit_code(self) -> int:
        """0 when all is well, ``EXIT_CATALOG`` when the catalog is wrong, else ``EXIT_POSTINGS``."""
        if any(f.part == CATALOG for f in self.problems):
            return EXIT_CATALOG
        return EXIT_POSTINGS if self.problems else 0


def check_index(index: Index, full: bool = False, sample: int = SAMPLE, wait: float = 0.0) -> CheckReport:
    """Check ``index`` (see the module docstring), holding its writer lock (waited for up to ``wait``
    seconds, else ``IndexLocked``). A missing index raises ``IndexNotFound``, a newer schema ``SchemaTooNew``."""
    t0 = time.perf_counter()
    report = CheckReport(str(index.path), full)
    with writer_lock(index, wait):
        _Check(index, report, full, sample).run()
    report.seconds = time.perf_counter() - t0
    return report


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class _Check:
    def __init__(self, index: Index, report: CheckReport, full: bool, sample: int):
        self.index = index
        self.report = report
        self.full = full
        self.sample = max(int(sample), 1)
        self.con: duckdb.DuckDBPyConnection | None = None
        self.unreadable: set[str] = set()
        self.settings: Settings | None = None
        self.last: int | None = None  # the last committed batch, when the catalog tells it

    def add(self, check: str, status: str, detail: str, repair: str = "", part: str = CATALOG) -> None:
        self.report.findings.append(Finding(check, status, detail, repair, part))

    def run(self) -> None:
        try:
            if self.open_catalog():
                for what, step in (("catalog schema", self.schema), ("catalog data", self.data), ("settings", self.settings_rows),
                                   ("batches and documents", self.consistency)):
                    try:
                        step()
                    except duckdb.Error as exc:  # damage the step did not expect (e.g. in the catalog's own metadata)
                        self.alive()
                        self.unreadable.add(what)
                        self.add(what, PROBLEM, f"cannot be read: {_first_line(exc)}", REPAIR_CATALOG)
            self.pending()
            self.log()
            self.postings()
        finally:
            if self.con is not None:
                self.con.close()

    # -- catalog ------------------------------------------------------------
    def connect(self) -> duckdb.DuckDBPyConnection:
        con = catalog.connect(self.index.catalog_path, read_only=True)
        con.execute(f"SET memory_limit = '{MEMORY}'")
        return con

    def open_catalog(self) -> bool:
        try:
            self.con = self.connect()
        except IndexBusy:
            raise
        except (NeardupError, duckdb.Error) as exc:
            self.add("catalog file", PROBLEM, f"catalog.duckdb cannot be opened: {_first_line(exc)}", REPAIR_CATALOG)
            return False
        size = self.index.catalog_path.stat().st_size
        self.add("catalog file", OK, f"catalog.duckdb opens ({size / 1e6:,.1f} MB)")
        return True

    def alive(self) -> None:
        """After an error: reopen the connection if DuckDB invalidated it."""
        try:
            self.con.execute("SELECT 1").fetchall()
        except duckdb.Error:
            self.con.close()
            self.con = self.connect()

    def schema(self) -> None:
        known = [(v, n) for v, n, _ in migrations()]
        latest = known[-1][0]
        try:
            rows = [(int(v), str(n)) for v, n in self.con.execute(query("maintenance", "migration_rows")).fetchall()]
        except duckdb.Error as exc:
            self.alive()
            self.add("catalog schema", PROBLEM, f"schema_migrations cannot be read: {_first_line(exc)}", REPAIR_CATALOG)
            return
        version = rows[-1][0] if rows else 0
        if version > latest:
            raise SchemaTooNew(f"catalog schema version {version} is newer than this neardup knows ({latest})")
        want = [(v, n) for v, n in known if v <= version]
        if not rows or rows != want:
            got = ", ".join(f"{v} {n}" for v, n in rows) or "nothing"
            self.add("catalog schema", PROBLEM, f"schema_migrations records {got}; this neardup's migrations are "
                     + ", ".join(f"{v} {n}" for v, n in known), REPAIR_CATALOG)
            return
        broken = []
        views = [r[0] for r in self.con.execute(query("maintenance", "user_views")).fetchall()]
        for v in views:
            try:
                self.con.execute(f"SELECT * FROM {_ident(v)} LIMIT 0").fetchall()
            except duckdb.Error as exc:
                self.alive()
                broken.append(f"view {v}: {_first_line(exc)}")
        if broken:
            self.add("catalog schema", PROBLEM, "; ".join(broken), REPAIR_CATALOG)
            return
        later = f" (this neardup's is {latest}: the next write migrates it)" if version < latest else ""
        self.add("catalog schema", OK, f"version {version}{later}; {len(views)} views bind")

    def data(self) -> None:
        tables = [r[0] for r in self.con.execute(query("maintenance", "user_tables")).fetchall()]
        rows = 0
        for t in tables:
            cols = [r[0] for r in self.con.execute(query("maintenance", "table_columns"), [t]).fetchall()]
            reads = ", ".join(f"bit_xor(hash({_ident(c)}))" for c in cols)
            try:
                rows += int(self.con.execute(f"SELECT count(*), {reads} FROM {_ident(t)}").fetchall()[0][0])
            except duckdb.Error as exc:
                self.alive()
                self.unreadable.add(t)
                self.add("catalog data", PROBLEM, f"table {t} cannot be read: {_first_line(exc)}", REPAIR_CATALOG)
        if not self.unreadable:
            self.add("catalog data", OK, f"{len(tables)} tables read in full ({rows:,} rows; DuckDB verified the checksum of every block it read)")

    def settings_rows(self) -> None:
        if "settings" in self.unreadable:
            self.add("settings", SKIPPED, "not checked: the table cannot be read")
            return
        rows = self.con.execute(query("maintenance", "setting_rows")).fetchall()
        keys = [k for k, _ in rows]
        problems = [f"{k} is stored {keys.count(k)} times" for k in sorted(set(keys)) if keys.count(k) > 1]
        parsed = {}
        for k, v in rows:
            try:
                parsed[k] = json.loads(v)
            except ValueError:
                problems.append(f"{k} is not JSON: {v[:60]!r}")
        if not rows:
            problems.append("no settings are stored")
        if not problems:
            try:
                self.settings = Settings.from_dict(parsed)
            except (NeardupError, TypeError, ValueError) as exc:
                problems.append(f"the settings are not valid: {_first_line(exc)}")
        if problems:
            self.add("settings", PROBLEM, "; ".join(problems), REPAIR_CATALOG)
        else:
            self.add("settings", OK, f"{len(rows)} settings")

    def scalar(self, name: str, params: list | None = None) -> tuple:
        return self.con.execute(query("maintenance", name), params or []).fetchall()[0]

    def consistency(self) -> None:
        if self.unreadable & {"batches", "documents"}:
            for what in ("batches and documents", "document versions", "duplicate pairs", "clusters"):
                self.add(what, SKIPPED, "not checked: the catalog cannot be read")
            return
        try:
            if not self.scalar("has_deleted_documents")[0]:
                self.con.execute(query("maintenance", "no_deleted_documents"))
            problems = [p for _, p in self.con.execute(query("maintenance", "batch_problems")).fetchall()]
            n_dup, dup = self.scalar("duplicate_doc_ids")
            if n_dup:
                problems.append(f"{n_dup} doc id(s) are used by more than one document (e.g. {dup})")
            self.last = int(self.con.execute(query("catalog", "last_committed_batch")).fetchall()[0][0])
            n_batches, n_docs = self.con.execute("SELECT (SELECT count(*) FROM batches), (SELECT count(*) FROM documents)").fetchall()[0]
        except duckdb.Error as exc:
            self.alive()
            problems = [f"cannot be compared: {_first_line(exc)}"]
        if problems:
            more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
            self.add("batches and documents", PROBLEM, "; ".join(problems[:5]) + more, REPAIR_CATALOG)
        else:
            self.add("batches and documents", OK, f"{n_batches} batches (last committed {self.last}) agree with {n_docs:,} documents")
        self.count_check("document versions", "version_problems", "url(s) without versions 1..n and exactly one latest (e.g. {})",
                         "every url has versions 1..n and one latest", REPAIR_CATALOG, {"documents"})
        self.count_check("duplicate pairs", "pair_problems", "pair(s) not of two known documents in order (e.g. {})",
                         "every pair joins two known documents", REPAIR_REBUILD, {"duplicates", "documents"})
        self.count_check("clusters", "cluster_problems", "cluster(s) whose members are missing, unknown or not their size (e.g. cluster {})",
                         "every cluster's members are known documents, as many as its size", REPAIR_REBUILD,
                         {"clusters", "cluster_members", "documents"})

    def count_check(self, what: str, name: str, bad: str, good: str, repair: str, tables: set[str]) -> None:
        if self.unreadable & tables:
            self.add(what, SKIPPED, "not checked: the catalog cannot be read")
            return
        try:
            n, example = self.scalar(name)
        except duckdb.Error as exc:
            self.alive()
            self.add(what, PROBLEM, f"cannot be checked: {_first_line(exc)}", REPAIR_CATALOG)
            return
        if n:
            self.add(what, PROBLEM, f"{n} " + bad.format(example), repair)
        else:
            self.add(what, OK, good)

    # -- the folder ---------------------------------------------------------
    def pending(self) -> None:
        marker = self.index.path / PENDING_FILE
        if marker.exists():
            try:
                what = marker.read_text().strip() or "empty"
            except OSError:
                what = "unreadable"
            self.add("interrupted write", PROBLEM, f"{PENDING_FILE} is left over ({what}): a write stopped before it finished, "
                     "so its postings may be missing", REPAIR_NEXT_WRITE, POSTINGS)
        else:
            self.add("interrupted write", OK, f"no {PENDING_FILE}")

    def log(self) -> None:
        wal = self.index.catalog_path.with_name(self.index.catalog_path.name + ".wal")
        if wal.exists():
            self.add("catalog log", OK, f"{wal.name} holds {wal.stat().st_size:,} bytes of writes not yet checkpointed (a writer "
                     "stopped before its checkpoint); DuckDB replays them, the next write checkpoints them. Copy the "
                     "folder with `neardup backup`, not catalog.duckdb alone")
        else:
            self.add("catalog log", OK, "no write-ahead log: catalog.duckdb holds every committed write")

    # -- postings -----------------------------------------------------------
    def postings(self) -> None:
        path = self.index.postings_path
        if not path.is_dir():
            self.add("postings", PROBLEM, "postings/ is missing", REPAIR_POSTINGS, POSTINGS)
            return
        try:
            p = LmdbPostings(path, readonly=True)
        except lmdb.Error as exc:
            self.add("postings", PROBLEM, f"postings/ cannot be opened: {_first_line(exc)}", REPAIR_POSTINGS, POSTINGS)
            return
        try:
            self.postings_in(p)
        except lmdb.Error as exc:
            self.add("postings", PROBLEM, f"postings/ cannot be read: {_first_line(exc)}", REPAIR_POSTINGS, POSTINGS)
        finally:
            p.close()

    def postings_in(self, p: LmdbPostings) -> None:
        applied = p.applied_batch()
        tables = p.tables()
        self.add("postings", OK, f"postings/ opens ({len(tables)} posting tables)")
        if self.last is None:
            self.add("postings applied", SKIPPED, f"applied up to batch {applied}; not compared: the catalog cannot be read")
            self.add("postings content", SKIPPED, "not checked: the catalog cannot be read")
            return
        if applied == self.last:
            top = int(self.scalar("max_committed_doc_id")[0])
            if p._max_id() != top:
                self.add("postings applied", PROBLEM, f"applied up to batch {applied}, but the largest doc id recorded is "
                         f"{p._max_id()}, the catalog's {top}", REPAIR_POSTINGS, POSTINGS)
            else:
                self.add("postings applied", OK, f"applied up to batch {applied}, the catalog's last committed batch")
        elif applied < self.last:
            self.add("postings applied", PROBLEM, f"behind the catalog: applied up to batch {applied}, the catalog has committed "
                     f"batches up to {self.last}", REPAIR_NEXT_WRITE, POSTINGS)
        else:
            self.add("postings applied", PROBLEM, f"ahead of the catalog: applied up to batch {applied}, the catalog's last "
                     f"committed batch is {self.last}", REPAIR_POSTINGS, POSTINGS)
        older = old_layout(p)
        if older is not None:
            self.add("postings layout", PROBLEM, f"an older release's layout (table {older})", REPAIR_NEXT_WRITE, POSTINGS)
        if self.settings is None or self.unreadable:
            self.add("postings content", SKIPPED, "not checked: the catalog cannot be read")
            return
        try:
            _Content(self, p, min(applied, self.last), count=applied <= self.last and older is None).run()
        except duckdb.Error as exc:
            self.alive()
            self.add("postings content", SKIPPED, f"not checked: the catalog rows cannot be read ({_first_line(exc)})")


class _Content:
    """The postings' entries against those the catalog rows imply."""

    def __init__(self, check: _Check, p: LmdbPostings, upto: int, count: bool):
        self.check, self.p, self.upto, self.count = check, p, upto, count
        self.con = check.con
        self.settings = check.settings
        self.implied: dict[str, int] = defaultdict(int)  # table -> distinct entries derived
        self.bad: dict[str, dict] = {}

    def run(self) -> None:
        rows = self.con.execute(query("maintenance", "checked_batches"), [self.upto]).fetchall()
        total = sum(int(n) for *_, n in rows)
        self.check.report.documents = total
        whole = self.check.full or total <= self.check.sample
        if whole:
            for b, lo, hi, n in rows:
                self.compare(batch_postings(self.con, int(b), self.settings), int(lo), int(hi))
                self.check.report.documents_checked += int(n)
            how = "all"
        else:
            runs = self.runs(rows, total)
            for lo, hi in runs:
                got = self.con.sql(query("maintenance", "range_posting_rows"), params=[lo, hi]).to_arrow_table()
                implied = derive_postings(got.column("doc_id").to_numpy(), got.column("url").to_pylist(), got.column("content_hash").to_numpy())
                implied.update({t: v for t, v in fingerprint_postings(self.con, lo, hi, self.settings).items() if t not in BATCH_TABLES})
                self.compare(implied, lo, hi)
                self.check.report.documents_checked += got.num_rows
            _, lo, hi, _ = rows[-1]  # the batch-wide tables of the last batch
            wide = fingerprint_postings(self.con, int(lo), int(hi), self.settings)
            self.compare({t: v for t, v in wide.items() if t in BATCH_TABLES}, int(lo), int(hi))
            how = f"a sample ({len(runs)} runs of up to {RUN} consecutive ids, and the batch-wide tables of batch {rows[-1][0]})"
        if whole and self.count:
            self.compare_counts()
        rep = self.check.report
        if self.bad:
            said = []
            for table, b in sorted(self.bad.items()):
                parts = [f"{b[k]:,} {k}" for k in ("missing", "unexpected", "different") if b[k]]
                said.append(f"{table} " + ", ".join(parts) + f" (e.g. {b['example']})")
            more = f"; and {len(said) - 3} more tables" if len(said) > 3 else ""
            self.check.add("postings content", PROBLEM, f"{len(said)} table(s) differ from what the catalog implies: "
                           + "; ".join(said[:3]) + more, REPAIR_POSTINGS, POSTINGS)
        else:
            entries = sum(v for t, v in self.implied.items() if not t.startswith(VALUES))
            values = sum(v for t, v in self.implied.items() if t.startswith(VALUES))
            counted = "; every table holds exactly the entries implied" if whole and self.count else ""
            self.check.add("postings content", OK, f"{how} of {rep.documents:,} documents: {rep.documents_checked:,} checked, "
                           f"{entries:,} entries and {values:,} values found as the catalog implies{counted}", part=POSTINGS)

    def runs(self, rows: list[tuple], total: int) -> list[tuple[int, int]]:
        """Runs of up to ``RUN`` consecutive doc ids, each within one batch, starting at evenly spaced
        positions among the ``total`` documents of ``rows`` (batch, lo, hi, n)."""
        n_runs = math.ceil(self.check.sample / RUN)
        ends = np.cumsum([int(n) for *_, n in rows])
        out = []
        for i in range(n_runs):
            pos = i * total // n_runs
            b = int(np.searchsorted(ends, pos, side="right"))
            lo = int(rows[b][1]) + pos - (int(ends[b - 1]) if b else 0)
            out.append((lo, min(lo + RUN - 1, int(rows[b][2]))))
        return out

    def flag(self, table: str, kind: str, n: int, example: str) -> None:
        b = self.bad.setdefault(table, {"missing": 0, "unexpected": 0, "different": 0, "example": example})
        b[kind] += n

    def compare(self, implied: dict, lo: int, hi: int) -> None:
        for table, (keys, vals) in implied.items():
            if table.startswith(VALUES):
                self.compare_values(table, np.asarray(keys, dtype=np.uint64), vals)
            else:
                self.compare_lists(table, np.asarray(keys, dtype=np.uint64), np.asarray(vals, dtype=np.uint64), lo, hi)

    def compare_values(self, table: str, ids: np.ndarray, vals: list) -> None:
        want = {int(i): bytes(v) for i, v in zip(ids.tolist(), vals)}
        self.implied[table] += len(want)
        got = self.p.get_values(table[len(VALUES) :], ids)
        missing = [i for i in want if i not in got]
        different = [i for i in want if i in got and bytes(got[i]) != want[i]]
        if missing:
            self.flag(table, "missing", len(missing), f"doc {missing[0]}")
        if different:
            self.flag(table, "different", len(different), f"doc {different[0]}")

    def compare_lists(self, table: str, keys: np.ndarray, ids: np.ndarray, lo: int, hi: int) -> None:
        if keys.size == 0:
            return
        order = np.lexsort((ids, keys))
        k, d = keys[order], ids[order]
        keep = np.r_[True, (k[1:] != k[:-1]) | (d[1:] != d[:-1])]
        k, d = k[keep], d[keep]
        self.implied[table] += k.size
        pk, pd = self.stored(table, unique(k), lo, hi)
        # implied rows (0) and stored rows (1) sorted together: a pair found in both is two neighbours
        ak, ad = np.concatenate([k, pk]), np.concatenate([d, pd])
        src = np.r_[np.zeros(k.size, np.int8), np.ones(pk.size, np.int8)]
        o = np.lexsort((src, ad, ak))
        ak, ad, src = ak[o], ad[o], src[o]
        same = (ak[1:] == ak[:-1]) & (ad[1:] == ad[:-1])
        matched_next = np.r_[same, False]
        matched_prev = np.r_[False, same]
        missing = np.flatnonzero((src == 0) & ~matched_next)
        unexpected = np.flatnonzero((src == 1) & ~matched_prev)
        if missing.size:
            i = missing[0]
            self.flag(table, "missing", int(missing.size), f"key {int(ak[i]):#018x} of doc {int(ad[i])}")
        if unexpected.size:
            i = unexpected[0]
            self.flag(table, "unexpected", int(unexpected.size), f"key {int(ak[i]):#018x} of doc {int(ad[i])}")

    def stored(self, table: str, keys: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """The stored ``(key, id)`` entries of ``keys`` with ids in ``lo..hi``, both levels. Each key's
        duplicates are read from ``lo`` on (LMDB's MDB_GET_BOTH_RANGE), so a long posting list (a value
        many documents share) costs what lies in the range, not its length."""
        p = self.p
        if table in RUN_TABLES:  # sorted runs in files: one vectorised lookup
            k, v = p.runs.lookup(table, unique(keys))
            inside = (v >= np.uint64(lo)) & (v <= np.uint64(hi))
            return k[inside], v[inside]
        start = int(lo).to_bytes(8, "big")
        out_k: list[int] = []
        out_d: list[int] = []
        for recent in (False, True):
            db = p._db(table, recent=recent)
            if db is None:
                continue
            for s in range(0, keys.size, LOOKUP):
                with p.env.begin(db=db) as txn:
                    cur = txn.cursor()
                    for key in keys[s : s + LOOKUP].tolist():
                        if not cur.set_range_dup(key.to_bytes(8, "big"), start):
                            continue
                        for v in cur.iternext_dup():
                            d = int.from_bytes(v, "big")
                            if d > hi:
                                break
                            out_k.append(key)
                            out_d.append(d)
                p._release()
        return np.array(out_k, dtype=np.uint64), np.array(out_d, dtype=np.uint64)

    def compare_counts(self) -> None:
        """Every document checked: each table must hold exactly the entries implied."""
        stored = {t: self.entries(t) for t in self.p.tables() + self.p._tables(values=True)}
        for table in sorted(set(stored) | set(self.implied)):
            have, want = stored.get(table, 0), self.implied.get(table, 0)
            if have > want:
                self.flag(table, "unexpected", have - want, f"{have:,} entries stored, {want:,} implied")
            elif have < want and table not in self.bad:
                self.flag(table, "missing", want - have, f"{have:,} entries stored, {want:,} implied")

    def entries(self, table: str) -> int:
        """Entries (key and id pairs, or values) stored in a table, both levels."""
        p = self.p
        if table.startswith(VALUES) and table[len(VALUES) :] in ROW_TABLES:
            return p._row_count(table)
        if table in RUN_TABLES:
            return p.runs.count(table)
        dbs = [p._db(table)] if table.startswith(VALUES) else [p._db(table), p._db(table, recent=True)]
        with p.env.begin() as txn:
            return sum(txn.stat(db)["entries"] for db in dbs if db is not None)
