"""Which documents ``neardup export`` keeps and which it drops.

The documents that count are the latest versions (``latest_documents``): an
older version of a url is neither kept nor dropped. A **group** is made from
the clusters of one clustering (``--cluster``, default ``components``),
restricted to their latest members: clusters that share a member are one
group (only the overlapping clusterings, ``concept``, ``star``, ``cliques``,
``biconnected``, ever do), so every document is in at most one group. The
group's id is the smallest cluster id in it. A latest document in no cluster
is in no group and is kept.

In each group the keep policy chooses one document (``POLICIES``); the
others are dropped, each with the kept document and the direct pair between
the two, if ``duplicates`` holds one: of the clustering's own pair method
(its ``params``' ``pairs``) when it has one, else of the first pair method
in the index's ``pairs`` setting that has one, else of any other by name.
When no method paired them (a component joins them through other members),
the pair method and similarity are NULL and the group id says where they
met.

Everything happens in DuckDB, in temporary tables of the read-only
connection: the grouping is a label propagation (each cluster and document
takes the smallest label around it until nothing changes, as many rounds as
the longest chain of overlapping clusters), then one window per group.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pyarrow as pa

from ..sqlfiles import query

#: keep policy -> the order of a group's documents; the first is kept (``{order}`` of sql/export.sql ``decisions``)
POLICIES = {
    "first": "d.doc_id",  # the earliest: the smallest doc id (ids grow with batches and input order)
    "longest": "d.n_words DESC, d.n_bytes DESC, d.doc_id",  # most words, then most bytes, then the earliest
    "latest": "d.batch_id DESC, d.doc_id DESC",  # the newest batch, in it the last in input order
}
DEFAULT_CLUSTERING = "components"


@dataclass
class Decisions:
    """What the keep policy decided (the temporary tables hold the rows)."""

    clustering: str
    policy: str
    groups: int
    dropped: int
    #: latest documents in no group (kept)
    ungrouped: int
    #: rounds of label propagation until the groups were stable
    rounds: int


def clusterings(con: duckdb.DuckDBPyConnection, kept: tuple[str, ...] = ()) -> list[str]:
    """The clusterings ``--cluster`` may name: those with clusters in the catalog, and those every
    ingest keeps current (``kept``, the index's ``clusters`` setting) even when they have none."""
    return sorted({r[0] for r in con.execute(query("export", "clusterings")).fetchall()} | set(kept))


def pair_order(con: duckdb.DuckDBPyConnection, clustering: str, index_pairs: tuple[str, ...]) -> list[str]:
    """The pair methods in the order a drop's reason prefers them: the clustering's own, then the
    index's ``pairs`` setting in its order (methods not in it come after, by name, in SQL)."""
    own = con.execute(query("export", "cluster_pair_method"), [clustering]).fetchall()[0][0]
    order = [own] if own else []
    return order + [m for m in index_pairs if m not in order]


def decide(con: duckdb.DuckDBPyConnection, clustering: str, policy: str, index_pairs: tuple[str, ...]) -> Decisions:
    """Fill ``export_decisions`` (doc_id, group_id, group_size, kept_doc_id) and ``export_reasons``
    (doc_id, pair_method, similarity) for ``clustering`` and ``policy``."""
    con.execute(query("export", "group_members"), [clustering])
    con.execute(query("export", "group_labels_start"))
    rounds = 0
    while True:
        rounds += 1
        con.execute(query("export", "group_doc_labels"))
        con.execute(query("export", "group_next_labels"))
        changed = con.execute(query("export", "group_labels_changed")).fetchall()[0][0]
        con.execute(query("export", "group_labels_advance"))
        if not changed:
            break
    con.execute(query("export", "decisions").replace("{order}", POLICIES[policy]))
    methods = pair_order(con, clustering, index_pairs)
    con.register("export_pair_order", pa.table({"method": pa.array(methods, pa.string()),
                                                "rank": pa.array(range(len(methods)), pa.int32())}))
    try:
        con.execute(query("export", "reasons"))
    finally:
        con.unregister("export_pair_order")
    groups, dropped, ungrouped = con.execute(query("export", "decision_counts")).fetchall()[0]
    return Decisions(clustering, policy, int(groups), int(dropped), int(ungrouped), rounds)
