-- Views that make a build folder (neardup build) read like an index (neardup sql --index DIR).

-- name: dataset_view
-- A view over one Parquet dataset of the folder; neardup.distributed.folder fills in NAME and GLOB.
CREATE VIEW NAME AS SELECT * FROM read_parquet(GLOB);

-- name: latest_documents
-- The newest version of every url, as the index's view of the same name (001_initial.sql).
CREATE VIEW latest_documents AS
    SELECT * FROM documents WHERE is_latest;

-- name: duplicate_urls
-- Duplicate pairs with their urls, as the index's view of the same name (004_pairs.sql).
CREATE VIEW duplicate_urls AS
SELECT d.method, d.similarity,
       d.doc_a, a.url AS url_a,
       d.doc_b, b.url AS url_b,
       d.batch_id
FROM duplicates d
JOIN documents a ON a.doc_id = d.doc_a
JOIN documents b ON b.doc_id = d.doc_b;
