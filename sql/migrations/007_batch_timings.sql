-- Seconds each committed batch spent per stage (000 tables 3-6 report such timings), for `neardup evaluate`.
CREATE TABLE batch_timings (
    batch_id INTEGER NOT NULL,
    stage    VARCHAR NOT NULL,
    seconds  DOUBLE NOT NULL
);
