"""The ingest pipeline on a Dask cluster: ``build(inputs, out, cluster)`` writes Parquet datasets.

Stages (``stages``, each a function of one partition and the settings, run on
the workers; ``run`` schedules them; docs/scaling.md has the data flow):

1. read: per input, the local ingest's readers, ``extract_html`` and ``prepare``;
2. versions: records shuffled by url, the local url rule (unchanged / new version);
3. documents: doc ids from the kept counts per input (in sorted input order),
   ``documents/`` and ``fp_<method>/`` written;
4. candidates: LSH band keys / simhash table keys shuffled by key, pairs
   deduplicated by a shuffle by pair;
5. verification: the partners' min-hash low bytes joined onto each candidate
   (agreement filter), then their shingle sets (exact Jaccard); simhash
   distances from the values carried with the keys;
6. components: min-label propagation over the jaccard pairs (``components``);
7. concept: neighbours from each sketch's rarest values, their components,
   the miner per component.

``folder`` reads a build folder like an index (``neardup sql``), ``merge``
makes an index of it (``neardup ingest --from-build``).

Dask is an optional extra (``pip install 'neardup[dask]'``): importing this
package does not import it; ``build`` raises ``MissingExtra`` without it.
"""

from __future__ import annotations

from ..errors import MissingExtra


def build(inputs, out, cluster="local:2", settings=None, opts=None, force=False, measure=False):
    """``neardup.distributed.run.build`` (see there), after checking that Dask is installed."""
    try:
        import dask.dataframe  # noqa: F401
        import dask.distributed  # noqa: F401
    except ImportError as exc:
        raise MissingExtra(f"a distributed build needs Dask, which is not installed ({exc})") from exc
    from .run import build as run_build

    return run_build(inputs, out, cluster=cluster, settings=settings, opts=opts, force=force, measure=measure)


__all__ = ["build"]
