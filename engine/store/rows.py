"""Appending rows of a chunk to the catalog's tables (used by ingest and rebuild)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def shift_sentences(t: pa.Table, offset: int) -> pa.Table:
    """Number sentences batch-wide rather than chunk-wide."""
    i = t.column_names.index("sent")
    return t.set_column(i, "sent", pc.add(t.column("sent"), offset))


def insert_by_row(con, table: str, rows: pa.Table, row_to_doc: np.ndarray) -> None:
    """Insert ``rows`` (whose ``doc`` is a chunk row) into ``table`` under the rows' doc ids; rows of
    records that were not added (unchanged, rejected) are dropped."""
    doc = rows.column("doc").to_numpy()
    ok = doc < row_to_doc.size
    mapped = np.full(doc.size, -1, dtype=np.int64)
    mapped[ok] = row_to_doc[doc[ok]]
    keep = mapped >= 0
    if not keep.any():
        return
    t = rows.filter(pa.array(keep)).drop_columns(["doc"])
    t = t.add_column(0, "doc_id", pa.array(mapped[keep], pa.int64()))
    con.register("new_rows", t)
    try:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM new_rows")
    finally:
        con.unregister("new_rows")


def insert_fingerprints(con, docs: pa.Table, registered: str | None = None) -> None:
    """Append each method's columns (named ``method.column`` in ``docs``) to ``fp_<method>``.

    ``registered``: the name ``docs`` is already registered under on ``con``; its columns are then
    selected from there (each registration is a round trip to DuckDB's threads: one per chunk, not
    one per method)."""
    by_method: dict[str, dict[str, pa.Array]] = {}
    for name in docs.column_names:
        if "." in name and not name.startswith("_"):
            method, col = name.split(".", 1)
            by_method.setdefault(method, {})[col] = docs.column(name)
    for method, cols in by_method.items():
        if registered is not None:
            picked = ", ".join(f'"{method}.{c}" AS "{c}"' for c in cols)
            con.execute(f"INSERT INTO fp_{method} BY NAME SELECT doc_id, {picked} FROM {registered}")
            continue
        t = pa.table({"doc_id": docs.column("doc_id"), **cols})
        con.register("new_fp", t)
        try:
            con.execute(f"INSERT INTO fp_{method} BY NAME SELECT * FROM new_fp")
        finally:
            con.unregister("new_fp")


class WrittenRows:
    """The rows a batch has appended to ``documents`` and to the fingerprint tables, held as the
    Arrow columns it inserted (``doc_id``, ``url``, ``content_hash`` and the ``method.column``
    fingerprint columns; the texts are not held). The batch's searches and postings read its own
    rows here instead of reading them back from the catalog inside its transaction: the same
    values, without a scan, a sort and a copy of each column. Where rows are not held (crash
    recovery, rebuild, ``check``), the same functions read them from the catalog."""

    KEPT = ("doc_id", "url", "content_hash")

    def __init__(self) -> None:
        self._parts: list[pa.Table] = []
        self._whole: pa.Table | None = None
        self._ids: np.ndarray | None = None

    def add(self, docs: pa.Table) -> None:
        """Hold the columns of ``docs`` (rows just inserted, as ``insert_fingerprints`` names them)."""
        self._parts.append(docs.select([c for c in docs.column_names if c in self.KEPT or ("." in c and not c.startswith("_"))]))
        self._whole = self._ids = None

    def table(self) -> pa.Table:
        """Every row held, by ``doc_id`` ascending (a chunk per added table; ``column`` joins one column's)."""
        if self._whole is None:
            t = pa.concat_tables(self._parts, promote_options="permissive")
            ids = t.column("doc_id").to_numpy()
            if ids.size > 1 and not (ids[1:] > ids[:-1]).all():
                t = t.take(np.argsort(ids, kind="stable"))
            self._parts = [t]
            self._whole = t
            self._ids = t.column("doc_id").to_numpy()
            self._ids.flags.writeable = False  # handed to every reader: none may change it
        return self._whole

    def column(self, table: str, column: str) -> tuple[np.ndarray, pa.Array] | None:
        """``(doc ids ascending, values)`` of catalog ``table``'s ``column`` (``documents`` or a
        ``fp_<method>`` table) for the rows held; None when that column is not held."""
        held = self.chunked(table, column)
        if held is None:
            return None
        ids, col = held
        return ids, (col.chunk(0) if col.num_chunks == 1 else col.combine_chunks())

    def chunked(self, table: str, column: str) -> tuple[np.ndarray, pa.ChunkedArray] | None:
        """``column``, as the chunks it was added in (not copied into one array: for a reader that
        goes through the values one by one, as ``to_pylist`` does)."""
        name = column if table == "documents" else f"{table.removeprefix('fp_')}.{column}"
        if not self._parts:
            return None
        t = self.table()
        return (self._ids, t.column(name)) if name in t.column_names else None
