-- Queries of `neardup export` (neardup.export). They run on a read-only catalog
-- connection: the `export_*` tables are temporary, in that connection only.
-- Parameters are positional (? or $n). An export is written range by range of
-- its key (doc id, or cluster id): `ranges` cuts the keys into ranges of about
-- a given size, and each output query reads one range, ordered, so memory
-- follows the range, not the index, and the same index gives the same bytes.

-- name: clusterings
-- The clusterings that have clusters in the catalog.
SELECT DISTINCT method FROM clusters ORDER BY method;

-- name: cluster_pair_method
-- The pair method a clustering follows (its params' `pairs`), NULL when it follows none.
SELECT min(json_extract_string(params, '$.pairs')) FROM clusters WHERE method = ?;

-- name: pair_methods
-- The pair methods that have pairs.
SELECT DISTINCT method FROM duplicates ORDER BY method;

-- name: group_members
-- The members of one clustering's clusters that are latest versions.
CREATE TEMP TABLE export_members AS
SELECT m.cluster_id, m.doc_id
FROM cluster_members m
JOIN clusters c ON c.cluster_id = m.cluster_id
JOIN documents d ON d.doc_id = m.doc_id
WHERE c.method = ? AND d.is_latest;

-- name: group_labels_start
-- Every cluster starts labelled with its own id.
CREATE TEMP TABLE export_labels AS
SELECT DISTINCT cluster_id, cluster_id AS label FROM export_members;

-- name: group_doc_labels
-- Each document takes the smallest label of its clusters.
CREATE OR REPLACE TEMP TABLE export_doc_labels AS
SELECT m.doc_id, min(l.label) AS label
FROM export_members m JOIN export_labels l ON l.cluster_id = m.cluster_id
GROUP BY m.doc_id;

-- name: group_next_labels
-- Each cluster takes the smallest label of its documents.
CREATE OR REPLACE TEMP TABLE export_next_labels AS
SELECT m.cluster_id, min(d.label) AS label
FROM export_members m JOIN export_doc_labels d ON d.doc_id = m.doc_id
GROUP BY m.cluster_id;

-- name: group_labels_changed
-- Clusters whose label went down this round (none: the labels are the groups).
SELECT count(*) FROM export_next_labels n JOIN export_labels l ON l.cluster_id = n.cluster_id
WHERE n.label <> l.label;

-- name: group_labels_advance
-- The next round starts from the new labels.
CREATE OR REPLACE TEMP TABLE export_labels AS FROM export_next_labels;

-- name: decisions
-- One row per grouped document: its group, the group's size and the document the
-- keep policy chooses in it. {order} is the policy's ordering (neardup.export.groups.POLICIES).
CREATE TEMP TABLE export_decisions AS
SELECT g.doc_id, g.label AS group_id,
       count(*) OVER (PARTITION BY g.label) AS group_size,
       first_value(g.doc_id) OVER (PARTITION BY g.label ORDER BY {order}
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS kept_doc_id
FROM export_doc_labels g JOIN documents d ON d.doc_id = g.doc_id;

-- name: reasons
-- For each dropped document, the direct pair between it and its kept document:
-- of the most preferred pair method (the registered table `export_pair_order`,
-- rank 0 first; a method missing from it after them all, by name).
CREATE TEMP TABLE export_reasons AS
SELECT x.doc_id,
       arg_min(p.method, (coalesce(o.rank, 1000000), p.method)) AS pair_method,
       arg_min(p.similarity, (coalesce(o.rank, 1000000), p.method)) AS similarity
FROM export_decisions x
JOIN duplicates p ON p.doc_a = least(x.doc_id, x.kept_doc_id) AND p.doc_b = greatest(x.doc_id, x.kept_doc_id)
LEFT JOIN export_pair_order o ON o.method = p.method
WHERE x.doc_id <> x.kept_doc_id
GROUP BY x.doc_id;

-- name: decision_counts
-- Groups, kept and dropped documents of the decisions, and the latest documents in no group.
SELECT (SELECT count(DISTINCT group_id) FROM export_decisions),
       (SELECT count(*) FROM export_decisions WHERE doc_id <> kept_doc_id),
       (SELECT count(*) FROM documents d WHERE d.is_latest
          AND NOT EXISTS (SELECT 1 FROM export_decisions x WHERE x.doc_id = d.doc_id));

-- name: ranges
-- Consecutive key ranges holding about {budget} bytes of rows each, from the keys and
-- weights of an export ({keys}: one of the `*_keys` blocks, giving k and w).
WITH w AS ({keys}),
c AS (SELECT k, sum(w) OVER (ORDER BY k ROWS UNBOUNDED PRECEDING) AS cum FROM w)
SELECT min(k) AS lo, max(k) AS hi FROM c GROUP BY (cum - 1) // {budget} ORDER BY lo;

-- name: keep_keys
-- The doc ids of the documents to keep, weighted by their bytes.
SELECT d.doc_id AS k, d.n_bytes + 256 AS w
FROM documents d LEFT JOIN export_decisions x ON x.doc_id = d.doc_id
WHERE d.is_latest AND (x.doc_id IS NULL OR x.kept_doc_id = d.doc_id);

-- name: keep
-- The documents to keep with doc ids in [$1, $2]: every latest document in no group, and the
-- chosen one of each group.
SELECT d.doc_id, d.url, d.text, d.batch_id, d.n_words, d.n_bytes,
       x.group_id, coalesce(x.group_size, 1) AS group_size
FROM documents d LEFT JOIN (SELECT * FROM export_decisions WHERE doc_id BETWEEN $1 AND $2) x ON x.doc_id = d.doc_id
WHERE d.doc_id BETWEEN $1 AND $2 AND d.is_latest AND (x.doc_id IS NULL OR x.kept_doc_id = d.doc_id)
ORDER BY d.doc_id;

-- name: drop_keys
-- The doc ids of the documents to drop.
SELECT doc_id AS k, 512 AS w FROM export_decisions WHERE doc_id <> kept_doc_id;

-- name: drop
-- The other documents of the groups with doc ids in [$1, $2], each with the document kept
-- instead and the direct pair joining them.
SELECT d.doc_id, d.url, d.batch_id, d.n_words, x.group_id, x.group_size,
       x.kept_doc_id, k.url AS kept_url, r.pair_method, r.similarity
FROM export_decisions x
JOIN documents d ON d.doc_id = x.doc_id
JOIN documents k ON k.doc_id = x.kept_doc_id
LEFT JOIN export_reasons r ON r.doc_id = x.doc_id
WHERE x.doc_id BETWEEN $1 AND $2 AND x.doc_id <> x.kept_doc_id
ORDER BY d.doc_id;

-- name: documents_keys
-- The doc ids of the latest documents (every version when the parameter is true), weighted by their bytes.
SELECT doc_id AS k, n_bytes + 512 AS w FROM documents WHERE is_latest OR $1;

-- name: documents
-- The documents table, doc ids in [$2, $3]: the latest versions, or every version when $1 is true.
SELECT doc_id, url, source, record, batch_id, version, is_latest, n_words, n_sentences, n_bytes,
       printf('%016x', content_hash) AS content_hash, text
FROM documents
WHERE doc_id BETWEEN $2 AND $3 AND (is_latest OR $1)
ORDER BY doc_id;

-- name: pairs_keys
-- The smaller doc ids of the pairs of method $1 (NULL: all), of latest versions only unless $2 is true.
SELECT p.doc_a AS k, count(*) * 512 AS w
FROM duplicates p
JOIN documents a ON a.doc_id = p.doc_a
JOIN documents b ON b.doc_id = p.doc_b
WHERE (p.method = $1 OR $1 IS NULL) AND ((a.is_latest AND b.is_latest) OR $2)
GROUP BY p.doc_a;

-- name: pairs
-- The duplicates table with both urls, smaller doc ids in [$3, $4]: pairs of method $1 (NULL:
-- all), of latest versions only unless $2 is true.
SELECT p.doc_a, a.url AS url_a, p.doc_b, b.url AS url_b, p.method, p.similarity, p.batch_id
FROM duplicates p
JOIN documents a ON a.doc_id = p.doc_a
JOIN documents b ON b.doc_id = p.doc_b
WHERE p.doc_a BETWEEN $3 AND $4 AND (p.method = $1 OR $1 IS NULL) AND ((a.is_latest AND b.is_latest) OR $2)
ORDER BY p.doc_a, p.doc_b, p.method;

-- name: clusters_keys
-- The cluster ids of clustering $1 (NULL: all), weighted by their members (latest versions only unless $2 is true).
SELECT c.cluster_id AS k, count(*) * 512 AS w
FROM clusters c
JOIN cluster_members m ON m.cluster_id = c.cluster_id
JOIN documents d ON d.doc_id = m.doc_id
WHERE (c.method = $1 OR $1 IS NULL) AND (d.is_latest OR $2)
GROUP BY c.cluster_id;

-- name: clusters
-- One row per cluster and member, cluster ids in [$3, $4]: the clusters of clustering $1
-- (NULL: all), members that are latest versions only unless $2 is true.
SELECT c.cluster_id, c.method, c.size, c.support, c.params, c.representative, c.truncated, c.batch_id,
       m.doc_id, d.url
FROM clusters c
JOIN cluster_members m ON m.cluster_id = c.cluster_id
JOIN documents d ON d.doc_id = m.doc_id
WHERE c.cluster_id BETWEEN $3 AND $4 AND (c.method = $1 OR $1 IS NULL) AND (d.is_latest OR $2)
ORDER BY c.cluster_id, m.doc_id;
