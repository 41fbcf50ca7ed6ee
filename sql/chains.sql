-- Length-ordered chains of 003 section 6 (A11 "decomposition", A12 "3+5").
--
-- Input: a temporary table chain_records(key UBIGINT, doc_id BIGINT, len INTEGER,
-- is_new BOOLEAN) holding, for every key that a document of the new batch has,
-- the records of all documents with that key (new ones and the older ones found
-- through the postings). Parameters: $ratio, the largest length ratio of two
-- neighbours in a chain (1.15 for similarity 0.85, as 003 recommends).

-- name: chain_members
-- Each record's chain: records of one key ordered by (len, doc_id), a new chain
-- starting wherever a length exceeds its predecessor's times $ratio.
CREATE OR REPLACE TEMP TABLE chain_members AS
WITH ordered AS (
    SELECT key, doc_id, len, is_new,
           lag(len) OVER (PARTITION BY key ORDER BY len, doc_id) AS prev_len
    FROM chain_records
)
SELECT key, doc_id, len, is_new,
       sum(CASE WHEN prev_len IS NULL OR len > prev_len * $ratio THEN 1 ELSE 0 END)
           OVER (PARTITION BY key ORDER BY len, doc_id ROWS UNBOUNDED PRECEDING) AS chain
FROM ordered;

-- name: chain_pairs
-- Pairs compared inside a chain, only within the local window (the longer at
-- most $ratio times the shorter), at least one of them new; each pair once,
-- as the hash of already compared pairs does in 003. Dropping repeated and
-- contained chains (003) only saves work there; DISTINCT gives the same pairs.
SELECT DISTINCT least(a.doc_id, b.doc_id) AS doc_a, greatest(a.doc_id, b.doc_id) AS doc_b
FROM chain_members a
JOIN chain_members b
  ON a.key = b.key AND a.chain = b.chain
 AND (a.len < b.len OR (a.len = b.len AND a.doc_id < b.doc_id))
 AND b.len <= a.len * $ratio
WHERE a.is_new OR b.is_new
ORDER BY doc_a, doc_b;

-- name: a12_pairs
-- A12's rules on the chain pairs: sentence counts within $num_ratio, at least 2
-- of the 5 word signatures shared, and the longest sentences equal or, for
-- documents of more than 5 sentences, 2 of the 3 sentence signatures shared.
-- Input: chain_pair(doc_a, doc_b) and a12_rows(doc_id, ss, ws, num).
SELECT p.doc_a, p.doc_b,
       len(list_intersect(a.ws, b.ws)) / 5.0 AS similarity
FROM chain_pair p
JOIN a12_rows a ON a.doc_id = p.doc_a
JOIN a12_rows b ON b.doc_id = p.doc_b
WHERE greatest(a.num, b.num) <= least(a.num, b.num) * $num_ratio
  AND len(list_intersect(a.ws, b.ws)) >= 2
  AND (a.ss[1] = b.ss[1]
       OR (least(a.num, b.num) > 5 AND len(list_intersect(a.ss, b.ss)) >= 2))
ORDER BY p.doc_a, p.doc_b;

-- name: simhash_window_pairs
-- Report 002's length window for large bit budgets: every new document against
-- every document (older, or new with a smaller id) whose word count lies within
-- +-20% (the longer at most 1.2 times the shorter), kept when the simhashes
-- differ in at most $bits bits. Input: new_ids(doc_id).
WITH new AS (
    SELECT f.doc_id, f.simhash, d.n_words
    FROM FP_TABLE f JOIN documents d USING (doc_id)
    WHERE f.doc_id BETWEEN $lo AND $hi
), cand AS (
    SELECT f.doc_id, f.simhash, d.n_words
    FROM FP_TABLE f JOIN documents d USING (doc_id)
    WHERE f.doc_id <= $hi
)
SELECT c.doc_id AS doc_a, n.doc_id AS doc_b,
       1.0 - bit_count(xor(n.simhash, c.simhash)) / 64.0 AS similarity
FROM new n
JOIN cand c
  ON c.doc_id < n.doc_id
 AND c.n_words >= n.n_words / 1.2
 AND c.n_words <= n.n_words * 1.2
WHERE bit_count(xor(n.simhash, c.simhash)) <= $bits
ORDER BY doc_a, doc_b;
