-- Clusters kept by ingest (concept, components) and made on request (neardup rebuild --clusters).
ALTER TABLE clusters ADD COLUMN representative BIGINT;
ALTER TABLE clusters ADD COLUMN common UBIGINT[];
ALTER TABLE clusters ADD COLUMN truncated BOOLEAN DEFAULT false;
ALTER TABLE clusters ADD COLUMN batch_id INTEGER;
-- What each batch (or rebuild) did to the clusters: 'created' or 'removed'.
CREATE TABLE cluster_changes (
    batch_id   INTEGER NOT NULL,
    method     VARCHAR NOT NULL,
    cluster_id BIGINT NOT NULL,
    change     VARCHAR NOT NULL
);
