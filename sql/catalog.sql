-- Queries of the catalog used by the engine. Parameters are positional (?).

-- name: create_migrations_table
-- The table that records applied schema migrations.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER NOT NULL,
    name       VARCHAR NOT NULL,
    applied_at TIMESTAMP NOT NULL
);

-- name: applied_migrations
-- Versions of the migrations already applied, ascending.
SELECT version FROM schema_migrations ORDER BY version;

-- name: record_migration
-- Record one applied migration.
INSERT INTO schema_migrations VALUES (?, ?, now()::TIMESTAMP);

-- name: stamp_migrations
-- A new catalog copied from an empty one of the same schema: its migrations applied now.
UPDATE schema_migrations SET applied_at = now()::TIMESTAMP;

-- name: get_settings
-- Every stored setting.
SELECT key, value FROM settings ORDER BY key;

-- name: put_settings
-- Store settings: keys and JSON values as two lists of one length (callers delete the old values first).
INSERT INTO settings SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[]);

-- name: delete_settings
-- Remove the settings of a list of keys.
DELETE FROM settings WHERE key IN (SELECT unnest(?::VARCHAR[]));

-- name: next_ids
-- The next batch id and the next doc id.
SELECT coalesce(max(batch_id), 0) + 1,
       coalesce(max(last_doc_id), 0) + 1
FROM batches;

-- name: last_committed_batch
-- The newest committed batch id (0 when none).
SELECT coalesce(max(batch_id), 0) FROM batches WHERE status = 'committed';

-- name: committed_batches_after
-- Committed batches newer than a given id, oldest first (for re-applying postings).
SELECT batch_id FROM batches WHERE status = 'committed' AND batch_id > ? ORDER BY batch_id;

-- name: batch_posting_rows
-- What the postings of one batch are derived from.
SELECT doc_id, url, content_hash FROM documents WHERE batch_id = ? ORDER BY doc_id;

-- name: docs_by_id
-- Url, content hash and version of given documents (ids in a registered table `ids`).
SELECT d.doc_id, d.url, d.content_hash, d.version, d.is_latest
FROM documents d JOIN ids USING (doc_id);

-- name: insert_documents
-- Append prepared documents from the registered Arrow table `new_docs`.
INSERT INTO documents
SELECT doc_id, url, source, record, batch_id, version, is_latest,
       n_words, n_sentences, n_bytes, content_hash, text, content, main_text
FROM new_docs;

-- name: fingerprinted_texts
-- The text each document of ids ?..? was fingerprinted from (docs/sql.md: documents.content).
SELECT doc_id, CASE WHEN content = 'main' THEN main_text ELSE text END AS text
FROM documents WHERE doc_id BETWEEN ? AND ? ORDER BY doc_id;

-- name: supersede
-- Mark older versions as not latest (ids in a registered table `old_ids`).
UPDATE documents SET is_latest = false
WHERE is_latest AND doc_id IN (SELECT doc_id FROM old_ids);

-- name: insert_rejects
-- Append rejects from the registered Arrow table `new_rejects`, but those a
-- committed batch already recorded (same source, record and reason): rejects
-- of an input ingested again are a no-op, like its unchanged documents.
INSERT INTO rejects
SELECT n.batch_id, n.source, n.record, n.reason FROM new_rejects n
WHERE NOT EXISTS (
    SELECT 1 FROM rejects r JOIN batches b ON b.batch_id = r.batch_id AND b.status = 'committed'
    WHERE r.source = n.source AND r.record = n.record AND r.reason = n.reason
);

-- name: insert_batch
-- Record a finished batch.
INSERT INTO batches (batch_id, source, started_at, finished_at, n_docs, n_unchanged, n_skipped, n_rejected,
                     n_bytes, first_doc_id, last_doc_id, status, neardup_version)
VALUES (?, ?, ?, now()::TIMESTAMP, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: summary
-- Counts for `neardup info`.
SELECT
    (SELECT count(*) FROM documents)                 AS documents,
    (SELECT count(*) FROM documents WHERE is_latest) AS latest_documents,
    (SELECT count(DISTINCT url) FROM documents)      AS urls,
    (SELECT count(*) FROM batches WHERE status = 'committed') AS batches,
    (SELECT count(*) FROM rejects)                   AS rejects,
    (SELECT coalesce(sum(n_bytes), 0) FROM documents) AS text_bytes;

-- name: pairs_per_method
-- Duplicate pairs per pair method, for `neardup info`.
SELECT method, count(*) AS pairs FROM duplicates GROUP BY method ORDER BY method;

-- name: clusters_per_method
-- Clusters per method and how many are truncated, for `neardup info`.
SELECT method, count(*) AS clusters, count(*) FILTER (WHERE truncated) AS truncated FROM clusters GROUP BY method ORDER BY method;

-- name: recent_batches
-- The newest batches, newest first.
SELECT batch_id, source, status, n_docs, n_unchanged, n_skipped, n_rejected,
       started_at, finished_at, kind, n_deleted
FROM batches ORDER BY batch_id DESC LIMIT ?;
