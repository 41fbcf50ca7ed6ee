-- Migration 001: the public catalog of an index (documented in docs/sql.md).

CREATE TABLE settings (
    key   VARCHAR NOT NULL,
    value VARCHAR NOT NULL      -- JSON
);

CREATE TABLE batches (
    batch_id      INTEGER NOT NULL,
    source        VARCHAR NOT NULL,
    started_at    TIMESTAMP NOT NULL,
    finished_at   TIMESTAMP,
    n_docs        INTEGER NOT NULL,   -- documents added (new urls and new versions)
    n_unchanged   INTEGER NOT NULL,   -- records already indexed (same url and content hash)
    n_skipped     INTEGER NOT NULL,   -- records that are not documents (requests, images, redirects)
    n_rejected    INTEGER NOT NULL,
    n_bytes       BIGINT NOT NULL,    -- payload bytes read
    first_doc_id  BIGINT,             -- doc ids of the batch are first_doc_id .. last_doc_id
    last_doc_id   BIGINT,
    status        VARCHAR NOT NULL,   -- 'committed' or 'failed' (a --strict batch rolled back)
    neardup_version VARCHAR NOT NULL
);

CREATE TABLE documents (
    doc_id       BIGINT NOT NULL,
    url          VARCHAR NOT NULL,
    source       VARCHAR NOT NULL,
    record       VARCHAR NOT NULL,    -- where in the source: 'line 12', 'offset 3456', 'row 7', 'file'
    batch_id     INTEGER NOT NULL,
    version      INTEGER NOT NULL,    -- 1 for the first text seen under this url, then 2, 3, ...
    is_latest    BOOLEAN NOT NULL,    -- true for the newest version of the url
    n_words      INTEGER NOT NULL,
    n_sentences  INTEGER NOT NULL,
    n_bytes      INTEGER NOT NULL,    -- UTF-8 bytes of text
    content_hash UBIGINT NOT NULL,    -- xxh3-64 (seed 0) of text as UTF-8
    text         VARCHAR NOT NULL USING COMPRESSION zstd  -- zstd: ~6x faster to checkpoint than the automatic choice, and smaller
);

CREATE TABLE rejects (
    batch_id INTEGER NOT NULL,
    source   VARCHAR NOT NULL,
    record   VARCHAR NOT NULL,
    reason   VARCHAR NOT NULL
);

-- Reserved for the duplicate finders and clusterers.
CREATE TABLE duplicates (
    doc_a      BIGINT NOT NULL,
    doc_b      BIGINT NOT NULL,
    method     VARCHAR NOT NULL,
    similarity DOUBLE,
    batch_id   INTEGER NOT NULL
);

CREATE TABLE clusters (
    cluster_id BIGINT NOT NULL,
    method     VARCHAR NOT NULL,
    size       INTEGER NOT NULL,
    support    INTEGER,
    params     VARCHAR
);

CREATE TABLE cluster_members (
    cluster_id BIGINT NOT NULL,
    doc_id     BIGINT NOT NULL
);

CREATE VIEW latest_documents AS
    SELECT * FROM documents WHERE is_latest;
