-- Collection statistics and the lexical methods of 000 and 003, run at the end of a batch
-- over the batch's documents (doc ids lo..hi), with the statistics that include the batch.
-- Parameters: ? = lo, ? = hi unless said otherwise. Logarithms are natural.

-- name: update_term_stats
-- Add the batch's document and collection frequencies to term_stats.
INSERT INTO term_stats
SELECT term, count(*) AS df, sum(tf) AS cf FROM doc_terms WHERE doc_id BETWEEN ? AND ? GROUP BY term
ON CONFLICT (term) DO UPDATE SET df = term_stats.df + excluded.df, cf = term_stats.cf + excluded.cf;

-- name: stats
-- N (documents), average document length in terms, largest collection frequency.
SELECT (SELECT count(*) FROM documents) AS n,
       (SELECT coalesce(sum(cf), 0) FROM term_stats)::DOUBLE / greatest((SELECT count(*) FROM documents), 1) AS avg_dl,
       (SELECT coalesce(max(cf), 0) FROM term_stats) AS max_cf;

-- name: weights
-- Per term of each batch document: tf, tf_max, dl, df, cf (for the weight formulas).
WITH d AS (
    SELECT doc_id, max(tf) AS tf_max, sum(tf) AS dl FROM doc_terms WHERE doc_id BETWEEN ? AND ? GROUP BY doc_id
)
SELECT t.doc_id, t.term, t.tf, d.tf_max, d.dl, s.df, s.cf
FROM doc_terms t JOIN d USING (doc_id) JOIN term_stats s USING (term)
WHERE t.doc_id BETWEEN ? AND ?;

-- name: top6
-- The 6 terms of each document with the largest weight (ties by term), from a registered table `w(doc_id, term, wt)`.
SELECT doc_id, list_sort(list(term)) AS words
FROM (SELECT doc_id, term, row_number() OVER (PARTITION BY doc_id ORDER BY wt DESC, term) AS r FROM w)
WHERE r <= 6 GROUP BY doc_id ORDER BY doc_id;

-- name: lexical_image
-- 000's lexical image: the document's terms whose collection frequency lies in [low, high] times the largest one.
-- Parameters: low * max_cf, high * max_cf, lo, hi.
SELECT t.doc_id, list_sort(list(t.term)) AS words
FROM doc_terms t JOIN term_stats s USING (term)
WHERE s.cf BETWEEN ? AND ? AND t.doc_id BETWEEN ? AND ?
GROUP BY t.doc_id ORDER BY t.doc_id;

-- name: heavy_sentences
-- A5: each batch document's two sentences of largest weight (sum of the A2 weights of their term
-- occurrences; ties by text), from the registered table `w(doc_id, term, wt)` and the batch's
-- temporary tables batch_sent_terms(doc_id, sent, term) and batch_sent_text(doc_id, sent, text).
WITH ws AS (
    SELECT x.doc_id, x.sent, x.text, coalesce(sum(w.wt), 0) AS weight
    FROM batch_sent_text x
    LEFT JOIN batch_sent_terms st ON st.doc_id = x.doc_id AND st.sent = x.sent
    LEFT JOIN w ON w.doc_id = st.doc_id AND w.term = st.term
    GROUP BY x.doc_id, x.sent, x.text
)
SELECT doc_id, list_sort(list(text)) AS sentences
FROM (SELECT doc_id, text, row_number() OVER (PARTITION BY doc_id ORDER BY weight DESC, text) AS r FROM ws)
WHERE r <= 2 GROUP BY doc_id ORDER BY doc_id;

-- name: create_batch_sentences
-- Temporary tables holding the batch's sentences for A5 (dropped with the connection).
CREATE OR REPLACE TEMP TABLE batch_sent_terms (doc_id BIGINT, sent BIGINT, term VARCHAR);
CREATE OR REPLACE TEMP TABLE batch_sent_text (doc_id BIGINT, sent BIGINT, text VARCHAR);

-- name: lexrand_terms
-- A7: each batch document's terms in the I-Match lexicon: normalised IDF ln(N/df)/ln(N) within [low, high].
-- Parameters: N, N, low, high, lo, hi.
SELECT t.doc_id, list_sort(list(t.term)) AS terms
FROM doc_terms t JOIN term_stats s USING (term)
WHERE ln(?::DOUBLE / s.df) / ln(greatest(?::DOUBLE, 2)) BETWEEN ? AND ?
  AND t.doc_id BETWEEN ? AND ?
GROUP BY t.doc_id ORDER BY t.doc_id;

-- name: relative_tf
-- A9: every (term, document) of documents lo..hi with the term's relative frequency tf / tf_max, for terms in
-- at least 2 documents.
WITH d AS (SELECT doc_id, max(tf) AS tf_max FROM doc_terms WHERE doc_id BETWEEN ? AND ? GROUP BY doc_id)
SELECT t.term, t.doc_id, t.tf::DOUBLE / d.tf_max AS rtf
FROM doc_terms t JOIN d USING (doc_id) JOIN term_stats s USING (term)
WHERE s.df >= 2 AND t.doc_id BETWEEN ? AND ?;

-- name: descr_signatures
-- A9: for each document lo..hi, its support words whose relative frequency exceeds their threshold.
WITH d AS (SELECT doc_id, max(tf) AS tf_max FROM doc_terms WHERE doc_id BETWEEN ? AND ? GROUP BY doc_id)
SELECT t.doc_id, list_sort(list(t.term)) AS words
FROM doc_terms t JOIN d USING (doc_id) JOIN support_words w USING (term)
WHERE t.doc_id BETWEEN ? AND ? AND t.tf::DOUBLE / d.tf_max > w.threshold
GROUP BY t.doc_id ORDER BY t.doc_id;
