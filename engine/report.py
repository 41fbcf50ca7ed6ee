"""The tables, files, pictures and ``report.html`` of ``neardup evaluate``.

``tables`` turns an evaluation into named tables; the terminal, the report page
and the files all show those same tables. ``write`` puts in a folder:

* ``<table>.csv`` and ``<table>.parquet`` for every table, and
  ``evaluation.csv`` / ``.parquet`` with every number as one row (the rows of
  the ``evaluations`` table);
* ``unique_gold_pairs_<method>.csv`` and ``unique_found_pairs_<method>.csv``,
  000's two lists, with 004's similarities of each pair when asked for;
* pictures (matplotlib): ``prf_<method>.png``, precision, recall and F1
  against the similarity threshold; ``prf_sweep_<image>.png`` against the
  concept clusters' support, and ``sweep_seconds.png``, the miner's time per
  support; ``groups_<bits>.png`` and ``distances_<bits>.png``, report 002's
  histograms; ``dice.png``, the Dice matrix as a heatmap;
* ``report.html``: every table and picture, embedded (no other file needed).
"""

from __future__ import annotations

import base64
import csv
import html
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .evaluate import method_order

COMPARATOR = ["gold_pairs", "found_pairs", "unique_gold_pairs", "unique_found_pairs", "common_pairs"]
SCORES = ["precision", "recall", "f1"]


@dataclass
class Table:
    name: str  # file stem
    title: str
    columns: list[str]
    rows: list[list]
    terminal: bool = True  # also printed by the command (long tables go to the files and the page only)


def tables(ev) -> list[Table]:
    """Every table of an evaluation, in the order they are shown."""
    out = []
    if ev.comparator:
        out.append(Table("comparator", "Comparator (000) and pair scores: all pairs of each method and clustering",
                         ["method", *COMPARATOR, *SCORES], [[m, *(c[k] for k in COMPARATOR + SCORES)] for m, c in ev.comparator.items()]))
    if ev.by_threshold:
        out.append(Table("thresholds", "Pairs at or above each similarity threshold (001's layout: a row per threshold)",
                         ["method", "threshold", *COMPARATOR, *SCORES],
                         [[r["method"], r["threshold"], *(r[k] for k in COMPARATOR + SCORES)] for r in ev.by_threshold]))
    if ev.sweep:
        search = ", ".join(f"{m} {v:.3f} s" for m, v in ev.sweep_search.items())
        out.append(Table("sweep", "Concept clusters mined afresh at each support k, with the miner's time (001 tables 2-4 and 6); "
                                  f"neighbours found once per image, at the lowest support: {search}",
                         ["image", "support", "seconds", "clusters", *COMPARATOR, *SCORES],
                         [[r["image"], r["support"], r["seconds"], r["clusters"], *(r[k] for k in COMPARATOR + SCORES)] for r in ev.sweep]))
    if ev.cluster:
        out.append(Table("clusters", "Cluster measures (004)", ["clustering", "Pr", "Re", "F1", "CPr"],
                         [[m, c["Pr"], c["Re"], c["F1"], c["CPr"]] for m, c in ev.cluster.items()]))
    if ev.pooled:
        measure, at = ev.verify
        out.append(Table("pooled", f"Pooled evaluation (003 tables 2-3): {ev.pool[0]} pairs found by some method, "
                                   f"{ev.pool[1]} verified ({measure} similarity >= {at:g}); by F1",
                         ["method", "pairs", "recall", "precision", "f1"],
                         [[m, int(c["pairs"]), c["recall"], c["precision"], c["f1"]] for m, c in ev.pooled.items()]))
        names = sorted(ev.pooled, key=method_order)
        if len(names) > 1:
            out.append(Table("dice", "Dice coefficient between methods' pairs (003 table 4)", ["method", *names],
                             [[a, *(None if a == b else ev.dice.get((a, b), ev.dice.get((b, a))) for b in names)] for a in names]))
    if ev.simhash_groups:
        budgets = sorted(ev.simhash_groups)
        sizes = sorted({s for hist, _ in ev.simhash_groups.values() for s in hist})
        out.append(Table("simhash_group_sizes", "Simhash groups by size, per bit budget n (002's greedy grouping)",
                         ["group_size", *(f"groups_{b}_bits" for b in budgets)],
                         [[s, *(ev.simhash_groups[b][0].get(s, 0) for b in budgets)] for s in sizes]))
        out.append(Table("simhash_top", "The ten largest simhash groups and their main pages (002)", ["bits", "rank", "size", "main_page"],
                         [[b, i, size, url] for b in budgets for i, (size, url) in enumerate(ev.simhash_groups[b][1], start=1)]))
        out.append(Table("simhash_distances", "Differing bits between the documents the grouping compared (002)",
                         ["differing_bits", *(f"compared_{b}_bits" for b in budgets)],
                         [[d, *(ev.simhash_distances[b][d] for b in budgets)] for d in range(65)
                          if any(ev.simhash_distances[b][d] for b in budgets)], terminal=False))
    if ev.timings:
        out.append(Table("timings", "Ingest time per stage, all batches (seconds; 'prepare:' stages run in parallel threads)",
                         ["stage", "seconds"], [[k, v] for k, v in ev.timings.items()]))
    return out


def fmt(x) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def write(ev, out: Path) -> list[Path]:
    """Every file of an evaluation in ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    made = []
    ts = tables(ev)
    for t in ts:
        made += _write_table(out / t.name, t.columns, t.rows)
    rows = ev.rows()
    made += _write_table(out / "evaluation", ["method", "threshold", "measure", "value"],
                         [[r["method"], r["threshold"], r["measure"], r["value"]] for r in rows])
    for m, (gold_only, found_only) in ev.unique.items():
        for kind, pairs in (("gold", gold_only), ("found", found_only)):
            path = out / f"unique_{kind}_pairs_{_stem(m)}.csv"
            with open(path, "w", newline="", encoding="utf-8") as fh:
                w = csv.writer(fh)
                w.writerow(["doc_a", "url_a", "doc_b", "url_b", *(x.replace("-", "_") for x in ev.measures)])
                for a, b in pairs:
                    sims = ev.pair_similarity.get((a, b), {})
                    w.writerow([a, ev.urls.get(a, ""), b, ev.urls.get(b, ""), *(f"{sims[x]:.4f}" for x in ev.measures if x in sims)])
            made.append(path)
    pictures = figures(ev, out)
    made += pictures
    made.append(write_html(ev, out, ts, pictures))
    return made


def _stem(method: str) -> str:
    return method.replace(":", "-")


def _write_table(stem: Path, columns: list[str], rows: list[list]) -> list[Path]:
    with open(stem.with_suffix(".csv"), "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(columns)
        w.writerows([["" if x is None else x for x in r] for r in rows])
    cols = list(zip(*rows)) if rows else [()] * len(columns)
    arrays = [pa.array([None if x is None else float(x) for x in c], pa.float64())
              if any(isinstance(x, float) for x in c) else pa.array(list(c)) for c in cols]
    pq.write_table(pa.table(dict(zip(columns, arrays))), stem.with_suffix(".parquet"))
    return [stem.with_suffix(".csv"), stem.with_suffix(".parquet")]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _prf(plt, title: str, xlabel: str, points: list[dict], x: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(5, 3.2))
    pts = sorted(points, key=lambda r: r[x])
    for measure in SCORES:
        ax.plot([r[x] for r in pts], [r[measure] for r in pts], marker="o", label=measure)
    ax.set_xlabel(xlabel)
    ax.set_ylim(0, 1.05)
    ax.set_title(title)
    ax.legend()
    return _save(plt, fig, path)


def figures(ev, out: Path) -> list[Path]:
    """Write the pictures of an evaluation; returns their paths."""
    plt = _plt()
    made = []
    for m in dict.fromkeys(r["method"] for r in ev.by_threshold):
        made.append(_prf(plt, f"{m}: precision, recall, F1", "similarity threshold",
                         [r for r in ev.by_threshold if r["method"] == m], "threshold", out / f"prf_{_stem(m)}.png"))
    images = list(dict.fromkeys(r["image"] for r in ev.sweep))
    for image in images:
        made.append(_prf(plt, f"concept clusters ({image}): precision, recall, F1", "common image elements (support)",
                         [r for r in ev.sweep if r["image"] == image], "support", out / f"prf_sweep_{image}.png"))
    if images:
        fig, ax = plt.subplots(figsize=(5, 3.2))
        for image in images:
            pts = sorted((r["support"], r["seconds"]) for r in ev.sweep if r["image"] == image)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=image)
        ax.set_xlabel("common image elements (support)")
        ax.set_ylabel("seconds")
        ax.set_title("concept miner time by support")
        ax.legend()
        made.append(_save(plt, fig, out / "sweep_seconds.png"))
    for b, (hist, _) in sorted(ev.simhash_groups.items()):
        fig, ax = plt.subplots(figsize=(5, 3.2))
        ax.bar([str(s) for s in hist], list(hist.values()))
        ax.set_yscale("log")
        ax.set_xlabel("group size")
        ax.set_ylabel("groups")
        ax.set_title(f"simhash groups within {b} bits")
        made.append(_save(plt, fig, out / f"groups_{b}.png"))
    for b, counts in sorted(ev.simhash_distances.items()):
        fig, ax = plt.subplots(figsize=(5, 3.2))
        ax.bar(range(65), counts, color=["tab:green" if d <= b else "tab:gray" for d in range(65)])
        ax.set_yscale("log")
        ax.set_xlabel("differing bits (green: joined the group)")
        ax.set_ylabel("comparisons")
        ax.set_title(f"distances checked, {b}-bit grouping")
        made.append(_save(plt, fig, out / f"distances_{b}.png"))
    if len(ev.pooled) > 1:
        names = sorted(ev.pooled, key=method_order)
        mat = [[1.0 if a == b else ev.dice.get((a, b), ev.dice.get((b, a), 0.0)) for b in names] for a in names]
        fig, ax = plt.subplots(figsize=(max(5, 1.6 + 0.6 * len(names)), max(3.6, 1.2 + 0.6 * len(names))))
        im = ax.imshow(mat, vmin=0, vmax=1, cmap="viridis")
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
        ax.set_yticks(range(len(names)), names)
        for i, row in enumerate(mat):
            for j, v in enumerate(row):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="white" if v < 0.6 else "black", fontsize=8)
        fig.colorbar(im, ax=ax)
        ax.set_title("Dice between methods' pairs")
        made.append(_save(plt, fig, out / "dice.png"))
    return made


def _html_table(t: Table) -> str:
    text = [any(isinstance(r[i], str) for r in t.rows) for i in range(len(t.columns))]
    h = "".join(f"<th{' class=t' if x else ''}>{html.escape(c.replace('_', ' '))}</th>" for c, x in zip(t.columns, text))
    body = "".join("<tr>" + "".join(f"<td class=t>{html.escape(x)}</td>" if isinstance(x, str) else f"<td>{html.escape(fmt(x))}</td>"
                                    for x in r) + "</tr>" for r in t.rows)
    return f"<h2>{html.escape(t.title)}</h2><table><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>"


def write_html(ev, out: Path, ts: list[Table], pictures: list[Path]) -> Path:
    """One self-contained page with every table and the pictures embedded."""
    parts = [f"<h1>neardup evaluation, run {ev.run_id}</h1>"]
    for what, n in ev.unknown.items():
        if n:
            parts.append(f"<p>{n} {html.escape(what)} name documents not in the index (left out).</p>")
    parts += [_html_table(t) for t in ts]
    if ev.unique:
        parts.append("<p>000's unique-pair lists: <code>unique_gold_pairs_&lt;method&gt;.csv</code> and "
                     "<code>unique_found_pairs_&lt;method&gt;.csv</code> beside this page.</p>")
    for p in pictures:
        data = base64.b64encode(p.read_bytes()).decode("ascii")
        parts.append(f'<figure><img alt="{html.escape(p.stem)}" src="data:image/png;base64,{data}"><figcaption>{html.escape(p.stem)}</figcaption></figure>')
    style = ("body{font-family:sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}th{background:#eee}"
             ".t{text-align:left}figure{display:inline-block;margin:1em}h2{font-size:1.1em}")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>neardup evaluation {ev.run_id}</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
