"""A build's Parquet datasets read by Spark as they are, checked against DuckDB.

``neardup build`` writes ``documents/``, ``fp_<method>/``, ``duplicates/``,
``clusters/``, ``cluster_members/`` and ``rejects/`` as folders of Parquet
files (docs/scaling.md). This reads each folder with ``spark.read.parquet``
(no schema given, no conversion) and with DuckDB's ``read_parquet``, and
compares, per dataset: the row count, the sum of each integer and floating
column (unsigned 64-bit ones included: Spark reads them as DECIMAL(20,0)),
and for the string columns the sum of their lengths. It prints each
dataset's Spark schema and exits 1 on any difference.

    pip install -e '.[dask,spark]'     # Spark needs a Java runtime (17 was used)
    neardup build fixtures/crawl/sample.warc.gz fixtures/text/docs.jsonl --dask local:2 --out /tmp/fx-build
    python benchmarks/spark_read.py /tmp/fx-build
"""

from __future__ import annotations

import argparse
import sys
from decimal import Decimal
from pathlib import Path

DATASETS = ("documents", "duplicates", "clusters", "cluster_members", "rejects")


def duckdb_figures(folder: Path) -> tuple[int, dict[str, Decimal]]:
    import duckdb

    con = duckdb.connect()
    rel = con.sql(f"SELECT * FROM read_parquet('{folder}/*.parquet')")
    sums = {}
    for name, typ in zip(rel.columns, rel.types):
        t = str(typ)
        if t in ("BIGINT", "INTEGER", "UBIGINT", "SMALLINT", "TINYINT", "UINTEGER", "HUGEINT"):
            sums[name] = f"sum(CAST({name} AS HUGEINT))"
        elif t in ("DOUBLE", "FLOAT"):
            sums[name] = f"round(sum({name}), 6)"
        elif t == "VARCHAR":
            sums[name] = f"sum(length({name}))"
    row = con.sql(f"SELECT count(*), {', '.join(sums.values()) or 'NULL'} FROM read_parquet('{folder}/*.parquet')").fetchall()[0]
    return int(row[0]), {k: _dec(v) for k, v in zip(sums, row[1:])}


def spark_figures(spark, folder: Path) -> tuple[int, dict[str, Decimal], str]:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    df = spark.read.parquet(str(folder))
    aggs = {}
    for f in df.schema.fields:
        if isinstance(f.dataType, (T.LongType, T.IntegerType, T.ShortType, T.ByteType, T.DecimalType)):
            aggs[f.name] = F.sum(F.col(f.name).cast(T.DecimalType(38, 0)))
        elif isinstance(f.dataType, (T.DoubleType, T.FloatType)):
            aggs[f.name] = F.round(F.sum(f.name), 6)
        elif isinstance(f.dataType, T.StringType):
            aggs[f.name] = F.sum(F.length(f.name))
    row = df.agg(F.count(F.lit(1)), *aggs.values()).collect()[0]
    return int(row[0]), {k: _dec(v) for k, v in zip(aggs, row[1:])}, df.schema.simpleString()


def _dec(v) -> Decimal:
    return Decimal(0) if v is None else Decimal(str(v)).quantize(Decimal("0.000001"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", help="a `neardup build` output folder")
    args = ap.parse_args()
    root = Path(args.build)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("neardup-build-read")
             .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    names = [*DATASETS, *sorted(p.name for p in root.glob("fp_*"))]
    bad = 0
    for name in names:
        folder = root / name
        n_duck, s_duck = duckdb_figures(folder)
        n_spark, s_spark, schema = spark_figures(spark, folder)
        same = n_duck == n_spark and s_duck == s_spark
        bad += not same
        print(f"{name:<16} rows duckdb {n_duck:>10,} spark {n_spark:>10,}  column sums {'equal' if s_duck == s_spark else 'DIFFER'}")
        print(f"{'':<16} {schema}")
        if s_duck != s_spark:
            for k in sorted(set(s_duck) | set(s_spark)):
                if s_duck.get(k) != s_spark.get(k):
                    print(f"{'':<16} {k}: duckdb {s_duck.get(k)} spark {s_spark.get(k)}")
    spark.stop()
    print("every dataset read alike" if not bad else f"{bad} dataset(s) differ")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
