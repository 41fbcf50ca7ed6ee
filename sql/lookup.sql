-- Queries of `neardup query` (neardup.lookup.match).

-- name: query_rows
-- One row per (query record, indexed partner, pair method), or one per record without
-- partner (partner columns null). Inputs: registered tables query_docs(doc, query, source,
-- record, url) (the records answered, doc = their provisional doc id) and
-- query_pairs(doc_a, doc_b, method, similarity) (doc_a indexed, doc_b a record);
-- $methods: the clusterings whose memberships are reported; $pair_methods: the index's
-- pair methods in order. CATALOG stands for the catalog's schema (the read-only database
-- the overlay is laid on).
WITH p AS (SELECT DISTINCT doc_a AS doc_id FROM query_pairs),
u AS (SELECT d.doc_id, d.url FROM CATALOG.documents d SEMI JOIN p ON d.doc_id = p.doc_id),
c AS (
    SELECT m.doc_id, list({'method': c.method, 'cluster_id': c.cluster_id} ORDER BY c.method, c.cluster_id) AS clusters
    FROM CATALOG.cluster_members m SEMI JOIN p ON m.doc_id = p.doc_id
    JOIN CATALOG.clusters c ON c.cluster_id = m.cluster_id
    WHERE list_contains($methods::VARCHAR[], c.method)
    GROUP BY m.doc_id
)
SELECT q.query, q.source, q.record, q.url, f.doc_a AS doc_id, u.url AS doc_url, f.method, f.similarity,
       CASE WHEN f.doc_a IS NULL THEN NULL
            ELSE coalesce(c.clusters, []::STRUCT(method VARCHAR, cluster_id BIGINT)[]) END AS clusters,
       NULL::VARCHAR AS reject
FROM query_docs q
LEFT JOIN query_pairs f ON f.doc_b = q.doc
LEFT JOIN u ON u.doc_id = f.doc_a
LEFT JOIN c ON c.doc_id = f.doc_a
ORDER BY q.query, list_position($pair_methods::VARCHAR[], f.method), f.similarity DESC, f.doc_a;
