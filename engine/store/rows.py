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
