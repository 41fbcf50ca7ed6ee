-- Migration 003: collection statistics and the lexical fingerprint tables (docs/sql.md).

-- Terms of each document after the RCDL preprocessing (filled when a lexical method is enabled).
CREATE TABLE doc_terms (doc_id BIGINT NOT NULL, term VARCHAR NOT NULL, tf INTEGER NOT NULL);
-- Collection statistics per term, updated by every batch that fills doc_terms.
CREATE TABLE term_stats (term VARCHAR PRIMARY KEY, df BIGINT NOT NULL, cf BIGINT NOT NULL);

CREATE TABLE fp_lexical (doc_id BIGINT NOT NULL, words VARCHAR[] NOT NULL);
CREATE TABLE fp_a1  (doc_id BIGINT NOT NULL, words VARCHAR[] NOT NULL, crc32 UINTEGER NOT NULL);
CREATE TABLE fp_a2  (doc_id BIGINT NOT NULL, words VARCHAR[] NOT NULL, crc32 UINTEGER NOT NULL);
CREATE TABLE fp_a3  (doc_id BIGINT NOT NULL, words VARCHAR[] NOT NULL, crc32 UINTEGER NOT NULL);
CREATE TABLE fp_a10 (doc_id BIGINT NOT NULL, words VARCHAR[] NOT NULL, crc32 UINTEGER NOT NULL);
CREATE TABLE fp_a4  (doc_id BIGINT NOT NULL, sentences VARCHAR[] NOT NULL, crc32 UINTEGER NOT NULL);
CREATE TABLE fp_a5  (doc_id BIGINT NOT NULL, sentences VARCHAR[] NOT NULL, crc32 UINTEGER NOT NULL);
CREATE TABLE fp_a7  (doc_id BIGINT NOT NULL, signatures VARCHAR[] NOT NULL, keys UBIGINT[] NOT NULL);
CREATE TABLE fp_a9  (doc_id BIGINT NOT NULL, words VARCHAR[] NOT NULL, signature UBIGINT NOT NULL);
-- A9's support words and their thresholds, chosen once from the collection (again by `neardup rebuild`).
CREATE TABLE support_words (term VARCHAR NOT NULL, threshold DOUBLE NOT NULL, coverage BIGINT NOT NULL, precision DOUBLE NOT NULL);
CREATE TABLE fp_a12 (doc_id BIGINT NOT NULL, ss UINTEGER[] NOT NULL, ws UINTEGER[] NOT NULL, len INTEGER NOT NULL, num INTEGER NOT NULL);

CREATE VIEW collection_stats AS
SELECT (SELECT count(*) FROM documents)                   AS n_docs,
       (SELECT count(*) FROM term_stats)                  AS n_terms,
       (SELECT coalesce(sum(cf), 0) FROM term_stats)      AS total_tf,
       (SELECT coalesce(sum(cf), 0) FROM term_stats)::DOUBLE
         / greatest((SELECT count(*) FROM documents), 1)  AS avg_dl,
       (SELECT coalesce(max(cf), 0) FROM term_stats)      AS max_cf;
