-- Queries of `neardup check` and `neardup backup` (neardup.maintenance). Parameters are positional (?).

-- name: user_tables
-- The catalog's own tables (every one is read in full by the check).
SELECT table_name FROM duckdb_tables()
WHERE database_name = current_database() AND NOT internal AND NOT temporary
ORDER BY table_name;

-- name: table_columns
-- The columns of one table, in order.
SELECT column_name FROM duckdb_columns()
WHERE database_name = current_database() AND table_name = ?
ORDER BY column_index;

-- name: user_views
-- The catalog's own views (each must still bind to its tables).
SELECT view_name FROM duckdb_views()
WHERE database_name = current_database() AND NOT internal AND NOT temporary
ORDER BY view_name;

-- name: migration_rows
-- Every recorded migration, in order.
SELECT version, name FROM schema_migrations ORDER BY version, name;

-- name: setting_rows
-- Every stored setting, as stored (duplicated keys included).
SELECT key, value FROM settings ORDER BY key;

-- name: batch_problems
-- Batches whose row disagrees with the documents that name them, and documents naming no batch.
-- A batch's documents are those still indexed and those `neardup delete` removed (deleted_documents).
WITH d AS (
    SELECT batch_id, count(*) AS n, min(doc_id) AS lo, max(doc_id) AS hi
    FROM (SELECT doc_id, batch_id FROM documents UNION ALL SELECT doc_id, batch_id FROM deleted_documents)
    GROUP BY batch_id
), b AS (
    SELECT batch_id, status, n_docs, first_doc_id, last_doc_id,
           count(*) OVER (PARTITION BY batch_id) AS copies,
           max(last_doc_id) OVER (ORDER BY batch_id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS earlier_hi
    FROM batches
), found AS (
    SELECT coalesce(b.batch_id, d.batch_id) AS batch_id,
        CASE
            WHEN b.batch_id IS NULL THEN
                format('{} document(s) name batch {}, which has no row in batches', d.n, d.batch_id)
            WHEN b.copies > 1 THEN format('batch {} has {} rows in batches', b.batch_id, b.copies)
            WHEN b.status NOT IN ('committed', 'failed') THEN format('batch {} has status {}', b.batch_id, b.status)
            WHEN b.status = 'failed' AND d.n IS NOT NULL THEN
                format('failed batch {} holds {} document(s)', b.batch_id, d.n)
            WHEN b.status = 'committed' AND coalesce(d.n, 0) <> b.n_docs THEN
                format('batch {} says it added {} document(s), documents holds {}', b.batch_id, b.n_docs, coalesce(d.n, 0))
            WHEN b.status = 'committed' AND d.n IS NOT NULL
                 AND (b.first_doc_id IS DISTINCT FROM d.lo OR b.last_doc_id IS DISTINCT FROM d.hi) THEN
                format('batch {} says doc ids {}..{}, documents holds {}..{}', b.batch_id, b.first_doc_id, b.last_doc_id, d.lo, d.hi)
            WHEN d.n IS NOT NULL AND d.hi - d.lo + 1 <> d.n THEN
                format('the doc ids of batch {} are not consecutive ({} documents in {}..{})', b.batch_id, d.n, d.lo, d.hi)
            WHEN b.first_doc_id <= b.earlier_hi THEN
                format('the doc ids of batch {} start at {}, not after an earlier batch''s {}', b.batch_id, b.first_doc_id, b.earlier_hi)
        END AS problem
    FROM b FULL OUTER JOIN d ON b.batch_id = d.batch_id
)
SELECT batch_id, problem FROM found WHERE problem IS NOT NULL ORDER BY batch_id;

-- name: has_deleted_documents
-- Whether the catalog has the table of deleted documents (migration 9 on).
SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND table_name = 'deleted_documents';

-- name: no_deleted_documents
-- For a catalog from before migration 9: no document was ever deleted (a temporary view, on the check's connection).
CREATE TEMP VIEW deleted_documents AS
SELECT NULL::BIGINT AS doc_id, NULL::INTEGER AS batch_id, NULL::INTEGER AS deleted_by WHERE false;

-- name: duplicate_doc_ids
-- Doc ids used by more than one row: how many, and the smallest.
SELECT count(*), min(doc_id) FROM (SELECT doc_id FROM documents GROUP BY doc_id HAVING count(*) > 1);

-- name: version_problems
-- Urls whose versions are not 1..n with exactly one latest: how many, and one of them.
SELECT count(*), min(url) FROM (
    SELECT url FROM documents GROUP BY url
    HAVING count(*) FILTER (WHERE is_latest) <> 1
        OR count(DISTINCT version) <> count(*) OR min(version) <> 1 OR max(version) <> count(*)
);

-- name: pair_problems
-- Duplicate pairs not of two distinct known documents in order: how many, and one of them.
SELECT count(*), min(format('{} {}-{}', p.method, p.doc_a, p.doc_b)) FROM duplicates p
WHERE p.doc_a >= p.doc_b
   OR NOT EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = p.doc_a)
   OR NOT EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = p.doc_b);

-- name: cluster_problems
-- Clusters whose members are missing, unknown documents, or fewer or more than their size: how many, and one.
WITH m AS (
    SELECT cm.cluster_id, count(*) AS n, count(*) FILTER (WHERE d.doc_id IS NULL) AS unknown
    FROM cluster_members cm LEFT JOIN documents d ON d.doc_id = cm.doc_id
    GROUP BY cm.cluster_id
)
SELECT count(*), min(coalesce(c.cluster_id, m.cluster_id)) FROM clusters c FULL OUTER JOIN m ON c.cluster_id = m.cluster_id
WHERE c.cluster_id IS NULL OR m.cluster_id IS NULL OR m.n <> c.size OR m.unknown > 0;

-- name: checked_batches
-- Committed batches up to a given id that added documents: id and doc id range (from documents).
SELECT b.batch_id, min(d.doc_id) AS lo, max(d.doc_id) AS hi, count(*) AS n
FROM batches b JOIN documents d ON d.batch_id = b.batch_id
WHERE b.status = 'committed' AND b.batch_id <= ?
GROUP BY b.batch_id ORDER BY b.batch_id;

-- name: max_committed_doc_id
-- The largest doc id of a committed batch (0 when none).
SELECT coalesce(max(d.doc_id), 0) FROM documents d JOIN batches b ON d.batch_id = b.batch_id WHERE b.status = 'committed';

-- name: range_posting_rows
-- What the url and content postings of documents lo..hi are derived from.
SELECT doc_id, url, content_hash FROM documents WHERE doc_id BETWEEN ? AND ? ORDER BY doc_id;
