-- Results of `neardup evaluate`, one row per method, threshold and measure (docs/evaluate.md).
CREATE TABLE evaluations (
    run_id    INTEGER NOT NULL,
    ran_at    TIMESTAMP NOT NULL,
    gold      VARCHAR NOT NULL,
    method    VARCHAR NOT NULL,
    threshold DOUBLE,
    measure   VARCHAR NOT NULL,
    value     DOUBLE
);
