-- Duplicate pairs with their urls: the table users query most.
CREATE VIEW duplicate_urls AS
SELECT d.method, d.similarity,
       d.doc_a, a.url AS url_a,
       d.doc_b, b.url AS url_b,
       d.batch_id
FROM duplicates d
JOIN documents a ON a.doc_id = d.doc_a
JOIN documents b ON b.doc_id = d.doc_b;
