-- Migration 002: one table per fingerprint method (docs/sql.md), filled for the methods enabled in `settings`.

-- Full shingle sets are large: packed as big-endian uint64s in a BLOB (2-3x cheaper to write than a
-- list); unpack_hashes(blob) turns one into a UBIGINT[] in SQL.
CREATE TABLE fp_shingles   (doc_id BIGINT NOT NULL, n INTEGER NOT NULL, hashes BLOB NOT NULL USING COMPRESSION uncompressed);
CREATE TABLE fp_chars      (doc_id BIGINT NOT NULL, n INTEGER NOT NULL, hashes BLOB NOT NULL USING COMPRESSION uncompressed);
CREATE MACRO unpack_hashes(b) AS
    list_transform(range(0, octet_length(b) // 8), lambda i: ('0x' || substr(hex(b), 16 * i + 1, 16))::UBIGINT);
-- Sketch values and signatures are uniform 64-bit hashes, which no compression DuckDB has shrinks:
-- stored uncompressed, the analysis of every value for each compression (bitpacking, RLE, ...) is not paid on each write
-- (a real site's 22,000 pages: -0.07 to -0.13 s of CPU an ingest, the same file size). A storage hint
-- only (added 2026-11-27; catalogs made before keep the default, with the same types and rows).
CREATE TABLE fp_bottomk    (doc_id BIGINT NOT NULL, sketch UBIGINT[] NOT NULL USING COMPRESSION uncompressed);
CREATE TABLE fp_minhash    (doc_id BIGINT NOT NULL, signature UBIGINT[] NOT NULL USING COMPRESSION uncompressed);
CREATE TABLE fp_simhash    (doc_id BIGINT NOT NULL, simhash UBIGINT NOT NULL USING COMPRESSION uncompressed);
CREATE TABLE fp_simhash_hp (doc_id BIGINT NOT NULL, simhash UBIGINT NOT NULL);
CREATE TABLE fp_a0         (doc_id BIGINT NOT NULL, md5 VARCHAR NOT NULL);
CREATE TABLE fp_a6         (doc_id BIGINT NOT NULL, supershingles UBIGINT[] NOT NULL, megashingles UBIGINT[] NOT NULL);
CREATE TABLE fp_a6_36      (doc_id BIGINT NOT NULL, supershingles UBIGINT[] NOT NULL, megashingles UBIGINT[] NOT NULL);
CREATE TABLE fp_a8         (doc_id BIGINT NOT NULL, kept UBIGINT[] NOT NULL, signature UBIGINT NOT NULL);
