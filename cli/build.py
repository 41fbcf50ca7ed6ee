"""``neardup build``: the ingest pipeline on a Dask cluster, written as Parquet datasets (``neardup.distributed``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from neardup import NeardupError

from .app import (ContentOpt, MethodsOpt, MinWordsOpt, OffsetOpt, PairsOpt, PermsOpt, SeedOpt, ShingleOpt, SimhashBitsOpt,
                  ThresholdOpt, _fail, _new_settings, _settings_args, out)


def build(
    inputs: Annotated[list[str], typer.Argument(help="Files or folders to read (any format ingest reads), taken in sorted order; "
                                                     "workers must reach them at the same paths.")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", file_okay=False,
                                          help="The folder to write the Parquet datasets and manifest.json to (new or empty, unless --force).")],
    dask: Annotated[str, typer.Option("--dask", help="The cluster: local:N (a LocalCluster of N one-thread worker processes on "
                                                     "this machine) or a scheduler address tcp://host:8786.")] = "local:2",
    force: Annotated[bool, typer.Option("--force", help="Replace the output of an earlier build in --out.")] = False,
    min_words: MinWordsOpt = None,
    seed: SeedOpt = None,
    methods: MethodsOpt = None,
    shingle_size: ShingleOpt = None,
    shingle_offset: OffsetOpt = None,
    minhash_perms: PermsOpt = None,
    threshold: ThresholdOpt = None,
    simhash_bits: SimhashBitsOpt = None,
    pairs: PairsOpt = None,
    content: ContentOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary.")] = False,
) -> None:
    """Run the ingest pipeline on a Dask cluster (pip install 'neardup[dask]'): documents, fingerprints, jaccard and
    simhash pairs, components and concept clusters, written to --out as Parquet datasets that DuckDB reads in place, with a manifest.
    The same inputs and settings give the same doc ids, pairs and clusters as ingesting them in sorted order."""
    from neardup.distributed import build as run

    try:
        s = _new_settings(_settings_args(min_words, seed, methods, shingle_size, shingle_offset, None, None, minhash_perms, None,
                                         threshold, simhash_bits, pairs, None, None, content))
        r = run(inputs, str(out_dir), cluster=dask, settings=s, force=force)
    except NeardupError as exc:
        _fail(exc)
    if quiet:
        return
    pairs_text = ", ".join(f"{n} {m}" for m, n in r.pairs.items()) or "none"
    clusters_text = ", ".join(f"{n} {m}" for m, n in r.clusters.items()) or "none"
    out.print(f"built {r.n_docs} documents into {r.out} in {r.seconds:.1f} s: pairs {pairs_text}; "
              f"clusters {clusters_text} ({r.rounds} label rounds for the components); {r.n_rejected} rejected", highlight=False)


def register(app: typer.Typer) -> None:
    app.command(name="build")(build)
