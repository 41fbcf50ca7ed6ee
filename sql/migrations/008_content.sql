-- Migration 008: which text each document's fingerprints were computed from (the `content` setting).
-- documents.content: 'main' (the main content of an HTML page, in main_text), 'full' (the whole text,
-- documents.text), or 'fallback' (main content asked for but under min_words words, so the full text).
-- Indexes made before this migration fingerprinted the full text: their rows and settings say so.
ALTER TABLE documents ADD COLUMN content VARCHAR NOT NULL DEFAULT 'full';
ALTER TABLE documents ADD COLUMN main_text VARCHAR USING COMPRESSION zstd;  -- null unless content = 'main'
INSERT INTO settings SELECT 'content', '"full"' WHERE EXISTS (SELECT 1 FROM settings) AND NOT EXISTS (SELECT 1 FROM settings WHERE key = 'content');
