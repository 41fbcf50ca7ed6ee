"""Pictures (matplotlib) and one self-contained ``report.html`` for ``neardup evaluate --out``.

* ``prf_<method>.png``: precision, recall and F1 against the similarity
  threshold (needs reference pairs); ``prf_concept_sweep.png`` against the
  concept clusters' support;
* ``groups_<bits>.png``: report 002's group-size histogram per bit budget;
* ``dice.png``: the Dice matrix between methods as a heatmap (``--pooled``);
* ``report.html``: every table of the run and the pictures, embedded (no
  other file needed to open it).
"""

from __future__ import annotations

import base64
import html
from pathlib import Path


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figures(ev, out: Path) -> list[Path]:
    """Write the pictures of an evaluation; returns their paths."""
    plt = _plt()
    out.mkdir(parents=True, exist_ok=True)
    made = []
    curves: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for r in ev.rows:
        if r["threshold"] is not None and r["measure"] in ("precision", "recall", "f1"):
            curves.setdefault(r["method"], {}).setdefault(r["measure"], []).append((r["threshold"], r["value"]))
    for m, series in sorted(curves.items()):
        fig, ax = plt.subplots(figsize=(5, 3.2))
        for measure, pts in sorted(series.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=measure)
        ax.set_xlabel("common sketch elements (support)" if m == "concept_sweep" else "similarity threshold")
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{m}: precision, recall, F1")
        ax.legend()
        fig.tight_layout()
        path = out / f"prf_{m}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        made.append(path)
    for b, (hist, _) in sorted(ev.simhash_groups.items()):
        fig, ax = plt.subplots(figsize=(5, 3.2))
        ax.bar([str(s) for s in hist], list(hist.values()))
        ax.set_yscale("log")
        ax.set_xlabel("group size")
        ax.set_ylabel("groups")
        ax.set_title(f"simhash groups within {b} bits")
        fig.tight_layout()
        path = out / f"groups_{b}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        made.append(path)
    if ev.dice:
        names = sorted({n for pair in ev.dice for n in pair})
        mat = [[1.0 if a == b else ev.dice.get((a, b), ev.dice.get((b, a), 0.0)) for b in names] for a in names]
        fig, ax = plt.subplots(figsize=(1.2 + 0.6 * len(names), 1.0 + 0.6 * len(names)))
        im = ax.imshow(mat, vmin=0, vmax=1, cmap="viridis")
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
        ax.set_yticks(range(len(names)), names)
        for i, row in enumerate(mat):
            for j, v in enumerate(row):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="white" if v < 0.6 else "black", fontsize=8)
        fig.colorbar(im, ax=ax)
        ax.set_title("Dice between methods' pairs")
        fig.tight_layout()
        path = out / "dice.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        made.append(path)
    return made


SWEEP_HEAD = ["support", "seconds", "clusters", "gold pairs", "found", "unique gold", "unique found", "common", "precision", "recall", "F1"]


def sweep_rows(ev) -> list[list]:
    """The support sweep as table rows (``SWEEP_HEAD``)."""
    return [[r["support"], round(r["seconds"], 3), r["clusters"], r["gold_pairs"], r["found_pairs"], r["unique_gold_pairs"],
             r["unique_found_pairs"], r["common_pairs"], r["precision"], r["recall"], r["f1"]] for r in ev.sweep]


def _table(head: list[str], rows: list[list]) -> str:
    h = "".join(f"<th>{html.escape(str(x))}</th>" for x in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(x))}</td>" for x in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(x) -> str:
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def write_html(ev, out: Path, pictures: list[Path]) -> Path:
    """One self-contained page with every table and the pictures embedded."""
    parts = [f"<h1>neardup evaluation, run {ev.run_id}</h1>"]
    if ev.comparator:
        scores = {(r["method"], r["measure"]): r["value"] for r in ev.rows if r["threshold"] is None}
        parts.append("<h2>Comparator (000) and pair scores</h2>")
        parts.append(_table(
            ["method", "gold pairs", "found", "unique gold", "unique found", "common", "precision", "recall", "F1"],
            [[m, c["gold_pairs"], c["found_pairs"], c["unique_gold_pairs"], c["unique_found_pairs"], c["common_pairs"],
              scores[(m, "precision")], scores[(m, "recall")], scores[(m, "f1")]] for m, c in ev.comparator.items()]))
    if ev.sweep:
        parts.append("<h2>Concept clusters by support (001, tables 2-4)</h2>")
        parts.append(_table(SWEEP_HEAD, sweep_rows(ev)))
    if ev.cluster:
        parts.append("<h2>Cluster measures (004)</h2>")
        parts.append(_table(["clustering", "Pr", "Re", "F1", "CPr"], [[m, c["Pr"], c["Re"], c["F1"], c["CPr"]] for m, c in ev.cluster.items()]))
    if ev.pooled:
        parts.append(f"<h2>Pooled evaluation (003)</h2><p>{ev.pool[0]} pairs found by some method, {ev.pool[1]} verified.</p>")
        parts.append(_table(["method", "pairs", "recall", "precision", "F1"],
                            [[m, int(c["pairs"]), c["recall"], c["precision"], c["f1"]] for m, c in ev.pooled.items()]))
    for b, (hist, top) in sorted(ev.simhash_groups.items()):
        parts.append(f"<h2>Simhash groups within {b} bits (002)</h2>")
        parts.append(_table(["group size", "groups"], [[s, n] for s, n in hist.items()]))
        parts.append(_table(["size", "main page"], [[s, u] for s, u in top]))
    if ev.timings:
        parts.append("<h2>Ingest time per stage, all batches (s)</h2>")
        parts.append(_table(["stage", "seconds"], [[k, v] for k, v in ev.timings.items()]))
    for p in pictures:
        data = base64.b64encode(p.read_bytes()).decode("ascii")
        parts.append(f'<figure><img alt="{html.escape(p.stem)}" src="data:image/png;base64,{data}"><figcaption>{html.escape(p.stem)}</figcaption></figure>')
    style = ("body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}th{background:#eee}"
             "td:first-child,th:first-child{text-align:left}figure{display:inline-block;margin:1em}")
    page = f"<!doctype html><html><head><meta charset='utf-8'><title>neardup evaluation {ev.run_id}</title><style>{style}</style></head><body>{''.join(parts)}</body></html>"
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
