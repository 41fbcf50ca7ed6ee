"""The seeds' other clusterings, run on request (``neardup rebuild --clusters``).

Over the duplicate graph of one pair method (vertices: documents with at least
one pair; edges: pairs, weighted by their similarity):

* ``components``: connected components (the seeds' "weak" definition).
* ``cliques``: maximal cliques, for components of at most ``max_component``
  documents (larger ones are skipped and counted as such).
* ``center`` (004): edges scanned by decreasing weight (ties by ids); the
  first time an unassigned vertex meets another unassigned one it becomes a
  centre and the other joins it; an unassigned vertex meeting a centre joins it.
* ``merge_center`` (004): as ``center``, and an edge between a centre and a
  vertex of another cluster merges the two clusters.
* ``star`` (004): edges of weight >= ``theta``; the unmarked vertex of highest
  degree (ties: smaller id) becomes a star with all its neighbours (so stars
  may overlap), which are marked; repeated until every vertex is marked.
* ``ricochet`` (004, sequential rippling): vertices by decreasing average edge
  weight are tried as seeds in turn; a vertex becomes a seed when some vertex
  (itself included) is closer to it than to its current seed, and those
  vertices move to it; at the end a seed left alone joins its nearest seed.
* ``biconnected`` (004, articulation points): biconnected components, which
  overlap at articulation points.

From report 002, over simhashes within ``bits`` differing bits:

* ``greedy002``: documents sorted by word count; repeatedly pick one by a
  length drawn at random from [300, 900) (report 002's code; seeded, so the
  result is fixed for a seed), group it with every remaining document within
  +-20% of its length and ``bits`` bits, remove the group.
* ``degree002``: all edges within the length window and ``bits`` bits;
  repeatedly the vertex of highest remaining degree (ties: smaller id) takes
  its unassigned neighbours; degrees are decremented as groups leave.

Order dependence: ``center``, ``merge_center``, ``star``, ``ricochet`` and
``degree002`` depend on their tie-breaking (fixed here by doc id, so the same
input gives the same clusters); ``greedy002`` on its random picks (fixed by
the seed); ``components``, ``cliques`` and ``biconnected`` are order-free.
"""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np

Edge = tuple[int, int, float]


def _adjacency(edges: list[Edge]) -> dict[int, dict[int, float]]:
    adj: dict[int, dict[int, float]] = defaultdict(dict)
    for a, b, w in edges:
        adj[a][b] = w
        adj[b][a] = w
    return adj


def _sorted_edges(edges: list[Edge]) -> list[Edge]:
    return sorted(((min(a, b), max(a, b), w) for a, b, w in edges), key=lambda e: (-e[2], e[0], e[1]))


def components(edges: list[Edge]) -> list[tuple[int, ...]]:
    import networkx as nx

    g = nx.Graph()
    g.add_edges_from((a, b) for a, b, _ in edges)
    return sorted(tuple(sorted(c)) for c in nx.connected_components(g) if len(c) > 1)


def cliques(edges: list[Edge], max_component: int = 50) -> tuple[list[tuple[int, ...]], int]:
    """Maximal cliques of every component of at most ``max_component`` vertices, and how
    many components were skipped as larger."""
    import networkx as nx

    g = nx.Graph()
    g.add_edges_from((a, b) for a, b, _ in edges)
    out, skipped = [], 0
    for comp in nx.connected_components(g):
        if len(comp) > max_component:
            skipped += 1
            continue
        out += [tuple(sorted(c)) for c in nx.find_cliques(g.subgraph(comp)) if len(c) > 1]
    return sorted(out), skipped


def center(edges: list[Edge], merge: bool = False) -> list[tuple[int, ...]]:
    owner: dict[int, int] = {}  # vertex -> its cluster's centre
    is_center: set[int] = set()
    parent: dict[int, int] = {}  # merged clusters (centre -> centre)

    def root(c: int) -> int:
        while parent.get(c, c) != c:
            c = parent[c]
        return c

    for u, v, _ in _sorted_edges(edges):
        if u not in owner and v not in owner:
            is_center.add(u)
            owner[u] = u
            owner[v] = u
        elif u in is_center and v not in owner:
            owner[v] = u
        elif v in is_center and u not in owner:
            owner[u] = v
        elif merge and (u in is_center or v in is_center) and u in owner and v in owner:
            a, b = root(owner[u]), root(owner[v])
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = defaultdict(list)
    for x, c in owner.items():
        groups[root(c)].append(x)
    return sorted(tuple(sorted(g)) for g in groups.values() if len(g) > 1)


def star(edges: list[Edge], theta: float = 0.0) -> list[tuple[int, ...]]:
    adj = _adjacency([e for e in edges if e[2] >= theta])
    marked: set[int] = set()
    out = []
    for v in sorted(adj, key=lambda x: (-len(adj[x]), x)):
        if v in marked:
            continue
        members = {v, *adj[v]}
        marked |= members
        out.append(tuple(sorted(members)))
    return sorted(out)


def ricochet(edges: list[Edge]) -> list[tuple[int, ...]]:
    adj = _adjacency(edges)
    order = sorted(adj, key=lambda x: (-sum(adj[x].values()) / len(adj[x]), x))
    seed_of: dict[int, int] = {}
    sim_to_seed: dict[int, float] = {}
    seeds: list[int] = []
    for s in order:
        if s in seeds:
            continue
        moving = [v for v, w in adj[s].items() if v not in seeds and w > sim_to_seed.get(v, -1.0)]
        if s in seed_of and not moving:
            continue  # nothing would move: no new cluster
        seeds.append(s)
        seed_of[s], sim_to_seed[s] = s, 1.0
        for v in moving:
            seed_of[v], sim_to_seed[v] = s, adj[s][v]
        if len(seed_of) == len(adj):
            break
    groups: dict[int, list[int]] = defaultdict(list)
    for v, s in seed_of.items():
        groups[s].append(v)
    for s in list(groups):  # a seed left alone joins its nearest seed
        if groups[s] == [s]:
            near = [(w, t) for t, w in adj[s].items() if t in groups and t != s and groups[t] != [t]]
            if near:
                _, t = max(near, key=lambda x: (x[0], -x[1]))
                groups[t].append(s)
                del groups[s]
    return sorted(tuple(sorted(g)) for g in groups.values() if len(g) > 1)


def biconnected(edges: list[Edge]) -> list[tuple[int, ...]]:
    import networkx as nx

    g = nx.Graph()
    g.add_edges_from((a, b) for a, b, _ in edges)
    return sorted(tuple(sorted(c)) for c in nx.biconnected_components(g) if len(c) > 1)


def greedy002(ids: np.ndarray, lengths: np.ndarray, hashes: np.ndarray, bits: int, seed: int = 0) -> list[tuple[int, ...]]:
    """Report 002's grouping (see the module docstring): the groups of two or more."""
    return sorted(g for _, g in greedy002_groups(ids, lengths, hashes, bits, seed) if len(g) > 1)


def greedy002_groups(ids: np.ndarray, lengths: np.ndarray, hashes: np.ndarray, bits: int, seed: int = 0,
                     distances: np.ndarray | None = None) -> list[tuple[int, tuple[int, ...]]]:
    """Every group of report 002's grouping, singletons included, with its main page (the
    document picked for it): ``[(main, members)]`` in the order they were made.

    ``distances`` (65 counters), when given, counts the Hamming distance of every comparison
    made: each remaining document of a pick's length window against the pick (002's
    histogram of the distances between the documents it checked)."""
    order = np.lexsort((ids, lengths))
    ids, lengths, hashes = ids[order], lengths[order].astype(np.int64), hashes[order].astype(np.uint64)
    alive = np.ones(ids.size, dtype=bool)
    rnd = random.Random(seed)
    out = []
    while alive.any():
        live = np.flatnonzero(alive)
        val = 300 + rnd.randrange(600)
        pick = live[min(np.searchsorted(lengths[live], val), live.size - 1)]
        alive[pick] = False
        base = lengths[pick]
        lo = np.searchsorted(lengths, int(base * 0.8), side="left")
        hi = np.searchsorted(lengths, int(base * 1.2) + 2, side="left")
        window = np.arange(lo, hi)
        window = window[alive[window]]
        dist = np.bitwise_count(hashes[window] ^ hashes[pick])
        if distances is not None:
            distances += np.bincount(dist, minlength=65)
        near = window[dist <= bits]
        alive[near] = False
        out.append((int(ids[pick]), tuple(sorted([int(ids[pick]), *ids[near].tolist()]))))
    return out


def window_edges(ids: np.ndarray, lengths: np.ndarray, hashes: np.ndarray, bits: int) -> list[Edge]:
    """Every pair within +-20% of word count (longer <= 1.2 x shorter) and ``bits`` bits."""
    order = np.lexsort((ids, lengths))
    ids, lengths, hashes = ids[order], lengths[order].astype(np.int64), hashes[order].astype(np.uint64)
    out = []
    for i in range(ids.size):
        hi = np.searchsorted(lengths, lengths[i] * 1.2, side="right")
        j = np.arange(i + 1, hi)
        d = np.bitwise_count(hashes[j] ^ hashes[i])
        for x, dist in zip(j[d <= bits].tolist(), d[d <= bits].tolist()):
            out.append((int(min(ids[i], ids[x])), int(max(ids[i], ids[x])), 1.0 - dist / 64))
    return out


def degree002(edges: list[Edge]) -> list[tuple[int, ...]]:
    adj = {v: set(n) for v, n in _adjacency(edges).items()}
    out = []
    while adj:
        v = min(adj, key=lambda x: (-len(adj[x]), x))
        group = {v, *adj[v]}
        for x in group:
            for y in adj.pop(x, set()):
                if y in adj:
                    adj[y].discard(x)
        if len(group) > 1:
            out.append(tuple(sorted(group)))
    return sorted(out)


GRAPH_METHODS = ("components", "cliques", "center", "merge_center", "star", "ricochet", "biconnected")
SIMHASH_METHODS = ("greedy002", "degree002")
