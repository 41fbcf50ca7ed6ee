"""Connected components of a pair graph held as a Dask dataframe: min-label propagation.

Every node starts labelled with itself. A round sends each node's label to
its neighbours (a join of the edges with the labels, by node), keeps the
smallest label each node received or held (a shuffle by node), then jumps:
a node takes its label's label (a second join). A label is always a node of
the same component and never grows, so ``label(label(v)) <= label(v)`` keeps
that true and only speeds things up: a path of n nodes needs about log2(n)
rounds instead of n. When a round changes no label, every node of a
component holds the same label, the component's smallest node (that node's
label can only be itself).

Each round is a few shuffles of ``(node, label)`` rows; only the number of
labels that changed (one integer) comes back to the client. The result does
not depend on the partitioning or the order of the edges.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

def _min_label(df: pd.DataFrame) -> pd.DataFrame:
    """The smallest label per node of a partition holding every row of its nodes, with the
    label the node held before (``old``: its own row's; -1 on the rows its neighbours sent)."""
    if df.empty:
        return ROUND_META.copy()
    return df.groupby("node", as_index=False, sort=True).agg(label=("label", "min"), old=("old", "max"))


ROUND_META = pd.DataFrame({"node": pd.Series([], dtype="int64"), "label": pd.Series([], dtype="int64"),
                           "old": pd.Series([], dtype="int64")})
COUNT_META = pd.DataFrame({"n": pd.Series([], dtype="int64")})


def _changed(df: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"n": [int((df["label"].to_numpy() != df["old"].to_numpy()).sum())]})


def min_label_components(edges, max_rounds: int = 200):
    """``(labels, rounds)``: a Dask dataframe ``(node, label)`` of every node of ``edges`` (a
    Dask dataframe with columns ``doc_a``, ``doc_b``) labelled with the smallest node of its
    component, persisted; and the rounds it took. Raises ``RuntimeError`` past ``max_rounds``
    (a graph needs about log2 of its longest shortest path)."""
    import dask.dataframe as dd

    n = max(edges.npartitions, 1)
    both = dd.concat([
        edges[["doc_a", "doc_b"]].rename(columns={"doc_a": "src", "doc_b": "dst"}),
        edges[["doc_b", "doc_a"]].rename(columns={"doc_b": "src", "doc_a": "dst"}),
    ]).persist()
    # every node, labelled with itself
    nodes = both[["src"]].rename(columns={"src": "node"})
    labels = (nodes.assign(label=nodes["node"], old=nodes["node"]).shuffle("node", npartitions=n)
              .map_partitions(_min_label, meta=ROUND_META)[["node", "label"]].persist())
    for rounds in range(1, max_rounds + 1):
        sent = both.merge(labels, left_on="src", right_on="node")[["dst", "label"]].rename(columns={"dst": "node"})
        least = (dd.concat([labels.assign(old=labels["label"]), sent.assign(old=-1)])
                 .shuffle("node", npartitions=n).map_partitions(_min_label, meta=ROUND_META))
        # the jump: each node takes its label's label (a node of the same component, never larger)
        hop = least[["node", "label"]].rename(columns={"node": "label", "label": "hop"})
        jumped = least.merge(hop, on="label", how="left")
        new = jumped.assign(label=jumped["hop"].astype("int64"))[["node", "label", "old"]].persist()
        changed = int(new.map_partitions(_changed, meta=COUNT_META)["n"].sum().compute())
        labels = new[["node", "label"]]
        if changed == 0:
            return labels, rounds
    raise RuntimeError(f"the components did not converge in {max_rounds} rounds")


def components_reference(a: np.ndarray, b: np.ndarray) -> dict[int, int]:
    """Node -> smallest node of its component, by union-find in one process (for tests and
    small graphs)."""
    from .. import kernels
    from ..arrays import unique

    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    nodes = unique(np.concatenate([a, b]))
    root = kernels.component_roots(nodes.size, np.searchsorted(nodes, a), np.searchsorted(nodes, b))
    return dict(zip(nodes.tolist(), nodes[root].tolist()))
