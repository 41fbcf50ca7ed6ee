-- Queries of `neardup delete` (neardup.delete). Parameters are positional (?); the documents to
-- delete are a registered table `gone(doc_id)` unless said otherwise.

-- name: delete_batches_after
-- Committed delete batches newer than a given id (their postings cannot be re-derived row by row).
SELECT count(*) FROM batches WHERE status = 'committed' AND kind = 'delete' AND batch_id > ?;

-- name: by_url
-- Every version of the urls of a registered table `want(url)`.
SELECT d.doc_id FROM documents d JOIN want USING (url) ORDER BY d.doc_id;

-- name: unknown_urls
-- The urls of `want(url)` the index does not hold, in the order given.
SELECT w.url FROM want w WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.url = w.url) ORDER BY w.pos;

-- name: batch_row
-- A batch's status and, when the catalog has the column, its kind.
SELECT status, n_docs FROM batches WHERE batch_id = ?;

-- name: batch_range
-- The smallest and largest batch id.
SELECT min(batch_id), max(batch_id) FROM batches;

-- name: by_batch
-- The documents a batch added that are still indexed.
SELECT doc_id FROM documents WHERE batch_id = ? ORDER BY doc_id;

-- name: preview
-- What would go: how many documents and distinct urls, and the first urls (with their versions).
SELECT d.doc_id, d.url, d.version, d.batch_id FROM documents d JOIN gone USING (doc_id) ORDER BY d.url, d.doc_id LIMIT ?;

-- name: count_urls
-- Documents and distinct urls of the selection.
SELECT count(*), count(DISTINCT d.url) FROM documents d JOIN gone USING (doc_id);

-- name: gone_rows
-- What the url and content postings of the deleted documents came from.
SELECT doc_id, url, content_hash FROM documents JOIN gone USING (doc_id) ORDER BY doc_id;

-- name: affected_batches
-- The ingest batches the deleted documents came from, with the doc id range of each.
SELECT batch_id, min(doc_id), max(doc_id) FROM documents WHERE batch_id IN (
    SELECT d.batch_id FROM documents d JOIN gone USING (doc_id)
) GROUP BY batch_id ORDER BY batch_id;

-- name: record_deleted
-- Keep the ids of the deleted documents and the batches that added them (parameter: the delete batch).
INSERT INTO deleted_documents SELECT d.doc_id, d.batch_id, ? FROM documents d JOIN gone USING (doc_id);

-- name: gone_urls
-- The urls that lose a version (their remaining versions are renumbered).
CREATE OR REPLACE TEMP TABLE gone_urls AS
SELECT DISTINCT d.url FROM documents d JOIN gone USING (doc_id);

-- name: subtract_term_stats
-- Take the deleted documents' terms out of the collection statistics.
UPDATE term_stats SET df = term_stats.df - g.df, cf = term_stats.cf - g.cf
FROM (SELECT term, count(*) AS df, sum(tf) AS cf FROM doc_terms WHERE doc_id IN (SELECT doc_id FROM gone) GROUP BY term) g
WHERE term_stats.term = g.term;

-- name: drop_unused_terms
-- Terms no document holds any more.
DELETE FROM term_stats WHERE df <= 0;

-- name: pairs_per_method
-- The pairs that go with the deleted documents, per method.
SELECT method, count(*) FROM duplicates
WHERE doc_a IN (SELECT doc_id FROM gone) OR doc_b IN (SELECT doc_id FROM gone)
GROUP BY method ORDER BY method;

-- name: delete_pairs
-- Remove those pairs.
DELETE FROM duplicates WHERE doc_a IN (SELECT doc_id FROM gone) OR doc_b IN (SELECT doc_id FROM gone);

-- name: renumber_versions
-- The remaining versions of each url that lost one: 1..n in doc id order, the newest latest.
UPDATE documents SET version = r.v, is_latest = r.latest
FROM (
    SELECT doc_id,
           row_number() OVER (PARTITION BY url ORDER BY doc_id)::INTEGER AS v,
           doc_id = max(doc_id) OVER (PARTITION BY url) AS latest
    FROM documents WHERE url IN (SELECT url FROM gone_urls)
) r
WHERE documents.doc_id = r.doc_id AND (documents.version <> r.v OR documents.is_latest <> r.latest);

-- name: clusters_with
-- The clusters of a method that hold a deleted document, with their members.
SELECT c.cluster_id, list(m.doc_id ORDER BY m.doc_id) FROM clusters c JOIN cluster_members m USING (cluster_id)
WHERE c.method = ? AND c.cluster_id IN (SELECT cluster_id FROM cluster_members WHERE doc_id IN (SELECT doc_id FROM gone))
GROUP BY c.cluster_id ORDER BY c.cluster_id;

-- name: member_sets
-- The member lists of the clusters of a method that hold one of the documents of a registered table `near(doc_id)`.
SELECT list(m.doc_id ORDER BY m.doc_id) FROM clusters c JOIN cluster_members m USING (cluster_id)
WHERE c.method = ? AND c.cluster_id IN (SELECT cluster_id FROM cluster_members WHERE doc_id IN (SELECT doc_id FROM near))
GROUP BY c.cluster_id;

-- name: pairs_within
-- The pairs of a method between documents of a registered table `near(doc_id)`.
SELECT doc_a, doc_b FROM duplicates
WHERE method = ? AND doc_a IN (SELECT doc_id FROM near) AND doc_b IN (SELECT doc_id FROM near)
ORDER BY doc_a, doc_b;

-- name: sketches_of
-- The bottom-k sketches of the documents of `near(doc_id)`.
SELECT doc_id, sketch FROM fp_bottomk WHERE doc_id IN (SELECT doc_id FROM near) ORDER BY doc_id;

-- name: frequent_firsts
-- concept_frequent's key of one batch (doc ids lo..hi): its first document with at least k sketch
-- values, before the delete and after it. Parameters: lo, hi, k.
SELECT min(doc_id), min(doc_id) FILTER (WHERE doc_id NOT IN (SELECT doc_id FROM gone))
FROM fp_bottomk WHERE doc_id BETWEEN ? AND ? AND len(sketch) >= ?;

-- name: frequent_lost
-- The values of the deleted documents that FREQUENT or more of the batch's documents (with at least
-- k values) hold, but fewer of those left. Parameters: lo, hi, k, FREQUENT, FREQUENT.
WITH held AS (
    SELECT doc_id, unnest(sketch) AS v FROM fp_bottomk WHERE doc_id BETWEEN ? AND ? AND len(sketch) >= ?
), theirs AS (
    SELECT DISTINCT v FROM held WHERE doc_id IN (SELECT doc_id FROM gone)
)
SELECT h.v FROM held h JOIN theirs USING (v) GROUP BY h.v
HAVING count(*) >= ? AND count(*) FILTER (WHERE h.doc_id NOT IN (SELECT doc_id FROM gone)) < ?
ORDER BY h.v;

-- name: frequent_all
-- Every value FREQUENT or more of the batch's documents (with at least k values) hold, and how many
-- of them are left. Parameters: lo, hi, k, FREQUENT.
SELECT v, count(*) FILTER (WHERE doc_id NOT IN (SELECT doc_id FROM gone)) AS n_left
FROM (SELECT doc_id, unnest(sketch) AS v FROM fp_bottomk WHERE doc_id BETWEEN ? AND ? AND len(sketch) >= ?)
GROUP BY v HAVING count(*) >= ? ORDER BY v;

-- name: max_doc_id
-- The largest doc id indexed (0 when none).
SELECT coalesce(max(doc_id), 0) FROM documents;

-- name: insert_delete_batch
-- Record a committed delete batch: source (what was selected), started_at, documents deleted, version.
INSERT INTO batches (batch_id, source, started_at, finished_at, n_docs, n_unchanged, n_skipped, n_rejected,
                     n_bytes, first_doc_id, last_doc_id, status, neardup_version, kind, n_deleted)
VALUES (?, ?, ?, now()::TIMESTAMP, 0, 0, 0, 0, 0, NULL, NULL, 'committed', ?, 'delete', ?);
