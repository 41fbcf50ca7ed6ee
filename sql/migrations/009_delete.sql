-- neardup delete: a batch that removes documents, and which documents each removed.
ALTER TABLE batches ADD COLUMN kind VARCHAR DEFAULT 'ingest';
ALTER TABLE batches ADD COLUMN n_deleted INTEGER DEFAULT 0;
CREATE TABLE deleted_documents (
    doc_id     BIGINT NOT NULL,   -- the id the document had (ids are never reused)
    batch_id   INTEGER NOT NULL,  -- the ingest batch that had added it
    deleted_by INTEGER NOT NULL   -- the delete batch that removed it
);
