"""The interactive results page: one self-contained HTML file plus its gene-panel assets.

Everything is drawn by plotly (its bundled plotly.js is written into the page once, so nothing
is fetched at view time); a short script (:data:`phenoica.report._interactive_js.PAGE_JS`) only wires
plotly's click events to the gene panel and filters/sorts the hit table. Sections:

- **Volcano** per model/variant (a dropdown picks one): a point per real guide, its effect size
  (the held-out distance from the controls in control SDs, which does not stop at a ceiling as
  AUROC does; AUROC where no distance was measured) against -log10 q; hover shows gene, guide,
  rank, distance with its interval over replicate wells and folds, AUROC, p (never below what the null reaches), q
  and the mAP readout's mAP and q; a click opens the gene's panel.
- **Gene panel**: the gene's guides in every model/variant with their rank and effect sizes,
  their AUROC and distance per held-out batch, its
  nearest genes in the map (cosine, q), its known relationships (recalled = the partner is among
  its nearest genes in the map shown), and its gallery panel. The panel data of 200 genes share
  one asset file (``{ASSETS}/genes_0000.js`` ...), loaded by a script tag when first needed
  (script tags load from ``file://``; ``fetch`` would not).
- **Variant comparison**: per model, the same guides' AUROC in every variant, pairwise (a plotly
  scatter matrix: each point is one guide in two variants).
- **Hit table**: every gene in every model/variant in rank order (by effect size), filterable
  (name, model/variant, hits only) and sortable by any column (the first :data:`TABLE_ROWS` rows
  of the result are shown).
- **Batch vs biology**: batch removal against recall per model/variant; variants at the same
  point share one label and labels are placed so that none overlap (:func:`place_labels`).
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from phenoica.contract import GENE, GUIDE
from phenoica.report._interactive_js import PAGE_CSS, PAGE_JS
from phenoica.utils import atomic_path

#: The folder of the page's assets, beside it.
ASSETS = "interactive_assets"
PAGE = "interactive.html"
#: Genes per asset file, hit-table rows shown at once.
SHARD_SIZE = 200
TABLE_ROWS = 300
TEMPLATE = "plotly_white"


@dataclass
class PageInputs:
    """What the page shows: the hit table (``phenoica.hits._readouts.hit_table``), the gene calls, the
    guide-fold scores, optional map neighbours, annotation pairs, the biomap summary and the
    gallery's panels table (paths relative to the page's folder); hits are marked at
    ``q_threshold`` (the report's ``hits.q_threshold``)."""

    hits: pd.DataFrame
    genes: pd.DataFrame
    guide_folds: pd.DataFrame
    neighbors: pd.DataFrame | None = None
    annotations: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    biomap_summary: pd.DataFrame | None = None
    gallery: pd.DataFrame | None = None
    gallery_dir: str = "gallery"
    title: str = "phenoica interactive results"
    q_threshold: float = field(kw_only=True)


def _key(model: str, variant: str) -> str:
    return f"{model}/{variant}"


def plotly_text(values: Sequence[Any]) -> list[str]:
    """Names as plotly text: plotly draws a label's ``<b>``, ``<a href>``, ``<br>`` ... as
    markup, so ``&``, ``<`` and ``>`` are written as entities, which it draws as the characters
    (quotes need none: outside a tag they are text, and plotly would show ``&quot;`` as is).
    What a click hands back is decoded by the page's script (``unescapeText``)."""
    return [html.escape(str(v), quote=False) for v in values]


def _keys(df: pd.DataFrame) -> list[tuple[str, str]]:
    from phenoica.report._checks import ordered_variants

    order = {v: i for i, v in enumerate(ordered_variants(df["variant"]))}
    pairs = set(map(tuple, df[["model", "variant"]].astype(str).to_numpy()))
    return sorted(pairs, key=lambda mv: (mv[0], order.get(mv[1], 99), mv[1]))


def neg_log10_q(q: np.ndarray) -> np.ndarray:
    """-log10 q, with q = 0 drawn at the smallest positive q (NaN stays NaN)."""
    q = np.asarray(q, dtype=float)
    positive = q[np.isfinite(q) & (q > 0)]
    floor = positive.min() if positive.size else 1e-300
    return -np.log10(np.where(q > 0, q, floor))


def volcano_x(hits: pd.DataFrame) -> str:
    """The volcano's effect size: ``distance_sd`` where the hit table has a finite one, else ``auroc``."""
    has_distance = "distance_sd" in hits.columns and np.isfinite(hits["distance_sd"].to_numpy(dtype=float)).any()
    return "distance_sd" if has_distance else "auroc"


VOLCANO_CUSTOM = (
    "p_value",
    "q_value",
    "mean_average_precision",
    "map_q_value",
    "auroc",
    "distance_sd",
    "distance_sd_low",
    "distance_sd_high",
    "rank",
)


def volcano_figure(hits: pd.DataFrame, q_threshold: float) -> go.Figure:
    """One Scattergl trace per model/variant (one shown at a time, a dropdown picks it): x = the
    effect size (:func:`volcano_x`), y = -log10 q; ``text`` = gene (what a click opens),
    ``hovertext`` = guide, both as :func:`plotly_text`."""
    fig = go.Figure()
    keys = _keys(hits)
    x_col = volcano_x(hits)
    for i, (model, variant) in enumerate(keys):
        sub = hits[(hits["model"] == model) & (hits["variant"] == variant)]
        hit = sub["hit"].fillna(False).astype(bool).to_numpy()
        custom = np.column_stack(
            [
                pd.to_numeric(sub[c], errors="coerce").astype("float64").to_numpy(np.float32)
                if c in sub
                else np.full(len(sub), np.nan, np.float32)
                for c in VOLCANO_CUSTOM
            ]
        ).astype(np.float32)
        fig.add_trace(
            go.Scattergl(
                x=sub[x_col].to_numpy(np.float32),
                y=neg_log10_q(sub["q_value"].to_numpy()).astype(np.float32),
                mode="markers",
                name=html.escape(_key(model, variant), quote=False),
                visible=i == 0,
                text=plotly_text(sub[GENE]),
                hovertext=plotly_text(sub[GUIDE]),
                customdata=custom,
                marker={
                    "size": 6,
                    "color": hit.astype(np.uint8),  # a typed array: 1 byte per guide, not a colour name
                    "colorscale": [[0, "#7f7f7f"], [1, "#d62728"]],
                    "cmin": 0,
                    "cmax": 1,
                    "opacity": 0.75,
                },
                hovertemplate=(
                    "gene %{text}<br>guide %{hovertext}<br>rank %{customdata[8]}<br>distance %{customdata[5]:.2f} SD "
                    "[%{customdata[6]:.2f}, %{customdata[7]:.2f}]<br>AUROC %{customdata[4]:.3f}<br>p %{customdata[0]:.2g}"
                    "<br>q %{customdata[1]:.2g}<br>mAP %{customdata[2]:.3f}<br>mAP q %{customdata[3]:.2g}<extra></extra>"
                ),
            )
        )
    buttons = [
        {
            "label": html.escape(_key(*mv), quote=False),
            "method": "update",
            "args": [{"visible": [j == i for j in range(len(keys))]}],
        }
        for i, mv in enumerate(keys)
    ]
    fig.add_hline(y=-math.log10(q_threshold), line_dash="dash", line_color="#555")
    fig.update_layout(
        template=TEMPLATE,
        height=520,
        xaxis_title=(
            "held-out distance from the controls (control SDs)"
            if x_col == "distance_sd"
            else "held-out AUROC (guide vs controls)"
        ),
        yaxis_title="-log10 q",
        updatemenus=[{"buttons": buttons, "x": 0, "y": 1.12, "xanchor": "left", "showactive": True}],
        showlegend=False,
        margin={"t": 60},
    )
    return fig


def variant_figure(guides: pd.DataFrame, model: str) -> go.Figure:
    """The same guides of one model in every variant, pairwise: a scatter matrix of AUROC
    (one point per guide; its hover names guide and gene; a click opens the gene)."""
    sub = guides[guides["model"] == model]
    wide = sub.pivot_table(index=[GENE, GUIDE], columns="variant", values="auroc", aggfunc="first")
    variants = [v for _, v in _keys(sub)]
    wide = wide[[v for v in variants if v in wide.columns]].reset_index()
    fig = go.Figure(
        go.Splom(
            dimensions=[{"label": v, "values": wide[v].to_numpy(np.float32)} for v in variants if v in wide],
            text=plotly_text(wide[GENE]),
            hovertext=plotly_text(wide[GUIDE]),
            hovertemplate="gene %{text}<br>guide %{hovertext}<br>%{xaxis.title.text} %{x:.3f}<br>"
            "%{yaxis.title.text} %{y:.3f}<extra></extra>",
            marker={"size": 4, "opacity": 0.6, "color": "#1f77b4"},
            diagonal_visible=False,
        )
    )
    fig.update_layout(
        template=TEMPLATE, height=560, title=f"{html.escape(model, quote=False)}: guide AUROC, variant against variant"
    )
    return fig


def place_labels(
    points: Sequence[tuple[float, float]], texts: Sequence[str], size: tuple[float, float] = (640, 420)
) -> list[tuple[float, float]]:
    """Pixel offsets (ax, ay) for one label per point so that no two labels overlap each other
    or a point: greedy over 16 candidate positions on growing rings, points by x then y. Points
    are in data units, mapped to a plot area of ``size`` pixels; a label is 7 px per character by
    16 px. Deterministic."""
    pts = np.asarray(points, dtype=float).reshape(-1, 2)
    span = np.where(np.ptp(pts, axis=0) > 0, np.ptp(pts, axis=0), 1.0) if len(pts) else np.ones(2)
    px = (pts - pts.min(axis=0)) / span * np.asarray(size) * 0.8 if len(pts) else pts
    px[:, 1] = -px[:, 1]  # screen y grows downwards
    boxes = [(x - 4, y - 4, x + 4, y + 4) for x, y in px]  # the markers
    out: list[tuple[float, float]] = [(0.0, 0.0)] * len(pts)
    angles = np.linspace(0, 2 * np.pi, 16, endpoint=False)
    for i in sorted(range(len(pts)), key=lambda k: (pts[k, 0], pts[k, 1])):
        w, h = 7 * len(texts[i]) + 4, 16
        for ring in range(1, 40):
            r = 18 * ring
            choice = next(
                (
                    (dx, dy, box)
                    for dx, dy in zip(r * np.cos(angles), r * np.sin(angles))
                    if not any(_overlap(box := _box(px[i] + (dx, dy), w, h), b) for b in boxes)
                ),
                None,
            )
            if choice is not None:
                out[i] = (float(choice[0]), float(choice[1]))
                boxes.append(choice[2])
                break
    return out


def _box(centre: np.ndarray, w: float, h: float) -> tuple[float, float, float, float]:
    return (centre[0] - w / 2, centre[1] - h / 2, centre[0] + w / 2, centre[1] + h / 2)


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def batch_biology_figure(summary: pd.DataFrame) -> go.Figure:
    """Batch removal on controls against the biology kept (recall of the simulated complexes
    where the demo has them, else of the annotation sources, else the share of genes called
    active, the first with values), one point per distinct position; the model/variants at one position share a label; labels never overlap."""
    candidates = ("recall_simulated_complexes", "recall_annotations", "genes_active_fraction")
    y = next((c for c in candidates if c in summary and summary[c].notna().any()), candidates[-1])
    df = summary.dropna(subset=["batch_removal_controls", y]).copy()
    df["name"] = [_key(m, v) for m, v in zip(df["model"], df["variant"])]
    groups = df.groupby([df["batch_removal_controls"].round(4), df[y].round(4)], sort=True)["name"].agg(" = ".join)
    pts = list(groups.index)
    fig = go.Figure(
        go.Scatter(
            x=[p[0] for p in pts],
            y=[p[1] for p in pts],
            mode="markers",
            text=plotly_text(groups.values),
            marker={"size": 10, "color": "#2ca02c"},
            hovertemplate="%{text}<br>batch removal %{x:.3f}<br>recall %{y:.3f}<extra></extra>",
        )
    )
    for (x, yy), text, (ax, ay) in zip(pts, groups.values, place_labels(pts, list(groups.values))):
        fig.add_annotation(x=x, y=yy, text=html.escape(text), ax=ax, ay=ay, showarrow=True, arrowcolor="#999")
    fig.update_layout(
        template=TEMPLATE,
        height=460,
        xaxis_title="batch removal on controls (0 = batches separated, 1 = mixed)",
        yaxis_title=f"{y.replace('_', ' ')} (fraction)",
        margin={"r": 120, "t": 30},
    )
    return fig


def _column_values(values: pd.Series, digits: int = 4) -> list[Any]:
    """A column as JSON-ready Python values: floats to ``digits`` significant digits, missing
    values None, booleans and integers as such, the rest as text (vectorized)."""
    if pd.api.types.is_bool_dtype(values):
        return [None if pd.isna(v) else bool(v) for v in values.astype(object)]
    if pd.api.types.is_integer_dtype(values):
        return [None if pd.isna(v) else int(v) for v in values.astype(object)]
    if pd.api.types.is_float_dtype(values):
        arr = values.to_numpy(np.float64)
        text = np.char.mod(f"%.{digits}g", np.nan_to_num(arr, nan=0.0, posinf=0.0, neginf=0.0)).astype(np.float64)
        return [float(v) if ok else None for v, ok in zip(text.tolist(), np.isfinite(arr).tolist())]
    return [None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else str(v) for v in values.tolist()]


def _records(df: pd.DataFrame, cols: Sequence[str]) -> list[list[Any]]:
    """Rows of ``df[cols]`` as lists of JSON-ready values (:func:`_column_values`)."""
    return [list(r) for r in zip(*(_column_values(df[c]) for c in cols))] if len(df) else []


def _by_gene(df: pd.DataFrame, cols: Sequence[str]) -> dict[str, list[list[Any]]]:
    """:func:`_records` of ``df`` split by gene (row order kept)."""
    df = df.reset_index(drop=True)
    rows = _records(df, cols)
    return {str(g): [rows[i] for i in idx] for g, idx in df.groupby(GENE, sort=False).indices.items()}


#: The gene panel's guide columns, the per-batch columns and the hit table's columns (those present, in order).
GUIDE_COLS = (
    "model",
    "variant",
    GUIDE,
    "rank",
    "distance_sd",
    "distance_sd_low",
    "distance_sd_high",
    "auroc",
    "p_value",
    "p_beyond_null",
    "q_value",
    "hit",
    "mean_average_precision",
    "map_q_value",
)
FOLD_COLS = ("model", "variant", GUIDE, "fold", "auroc", "distance_sd")
NEIGHBOR_COLS = ("model", "variant", "rank", "neighbor", "cosine", "neighbor_q_value")
TABLE_COLS = (
    "model",
    "variant",
    GENE,
    "rank",
    "n_guides",
    "n_guides_hit",
    "distance_sd",
    "distance_sd_low",
    "distance_sd_high",
    "auroc",
    "mean_average_precision",
    "p_value",
    "p_beyond_null",
    "q_value",
    "hit",
)


def _present(df: pd.DataFrame, cols: Sequence[str]) -> list[str]:
    return [c for c in cols if c in df.columns]


def gene_records(inputs: PageInputs) -> dict[str, dict[str, Any]]:
    """The gene panel's data per gene: guides, per-batch scores, neighbours, known partners, gallery."""
    hits, folds = inputs.hits.sort_values([GENE, "model", "variant", GUIDE], kind="stable"), inputs.guide_folds
    folds = folds[(folds["status"] == "ok") & ~folds["is_null_guide"].astype(bool)]
    guides = _by_gene(hits, _present(hits, GUIDE_COLS))
    by_gene: dict[str, dict[str, Any]] = {
        g: {"guides": guides[g], "folds": [], "neighbors": [], "known": [], "gallery": ""} for g in sorted(guides)
    }
    for g, rows in _by_gene(folds, _present(folds, FOLD_COLS)).items():
        if g in by_gene:
            by_gene[g]["folds"] = rows
    if inputs.neighbors is not None and len(inputs.neighbors):
        ordered = inputs.neighbors.sort_values(["model", "variant", GENE, "rank"], kind="stable")
        for g, rows in _by_gene(ordered, NEIGHBOR_COLS).items():
            if g in by_gene:
                by_gene[g]["neighbors"] = rows
    for source, pairs in inputs.annotations.items():
        for a, b in pairs[["entity1", "entity2"]].astype(str).itertuples(index=False):
            for gene, partner in ((a, b), (b, a)):
                if gene in by_gene:
                    by_gene[gene]["known"].append([source, partner])
    if inputs.gallery is not None and len(inputs.gallery):
        for r in inputs.gallery.itertuples():
            if str(r.gene) in by_gene:
                panel = "" if pd.isna(r.panel) or not str(r.panel) else f"{inputs.gallery_dir}/{r.panel}"
                by_gene[str(r.gene)]["gallery"] = panel
                by_gene[str(r.gene)]["gallery_status"] = str(r.status)
    return by_gene


def _figure_div(fig: go.Figure, div_id: str, post: str = "") -> str:
    return pio.to_html(
        fig,
        full_html=False,
        include_plotlyjs=False,
        div_id=div_id,
        post_script=post or None,
        config={"responsive": True},
    )


def _section(heading: str, note: str, body: str, anchor: str) -> str:
    return (
        f'<section id="{anchor}"><h2>{html.escape(heading)}</h2><p class="note">{html.escape(note)}</p>{body}</section>'
    )


def page_html(inputs: PageInputs, data: Mapping[str, Any]) -> str:
    """The page's HTML: plotly.js inline, the figures, the panel and table shells, the data."""
    parts = [
        _section(
            "Volcano",
            f"Each point is a guide, at its effect size (the held-out distance from the controls in control SDs, "
            f"which keeps growing where AUROC stops at 1.000) and its q; red = hit at q < {inputs.q_threshold:g}; "
            f"dashed line: q = {inputs.q_threshold:g}. p-values are never below what the null reaches: 1/(n_null + 1), "
            "or 1e-10 where a Pareto tail fitted to the pseudo-guides reads beyond them. Pick the model/variant in the menu; click a "
            "point to open its gene.",
            _figure_div(volcano_figure(inputs.hits, inputs.q_threshold), "volcano", "phenoicaClickable('{plot_id}')"),
            "volcano-section",
        ),
        '<section id="gene-panel" class="panel"><h2>Gene panel</h2><p class="note">Click a gene in the volcano, '
        "the variant comparison or the hit table.</p></section>",
    ]
    models = sorted(inputs.hits["model"].astype(str).unique())
    splom = "".join(
        _figure_div(variant_figure(inputs.hits, m), f"variants-{i}", "phenoicaClickable('{plot_id}')")
        for i, m in enumerate(models)
    )
    parts.append(
        _section(
            "Variant comparison",
            "The same guides in every variant, paired: each point is one guide.",
            splom,
            "variants",
        )
    )
    parts.append(
        _section(
            "Hit table",
            f"Every gene per model/variant in rank order (by the held-out distance from the controls, or the mAP "
            f"where the mAP readout scored more guides); filter by name, model/variant or hits only; click a header to "
            f"sort; the first {TABLE_ROWS} rows are shown. Click a gene to open its panel.",
            '<div class="controls"><input id="table-filter" placeholder="gene name contains..."> '
            '<select id="table-key"><option value="">all models/variants</option></select> '
            '<label><input type="checkbox" id="table-hits"> hits only</label> <span id="table-count"></span></div>'
            '<div class="scroll"><table id="hit-table" class="tbl"><thead></thead><tbody></tbody></table></div>',
            "hit-table-section",
        )
    )
    if inputs.biomap_summary is not None and len(inputs.biomap_summary):
        parts.append(
            _section(
                "Batch vs biology",
                "Per model/variant: batch removal against recall of known relationships. Variants at the "
                "same point (rotations of one another leave cosine maps unchanged) share one label.",
                _figure_div(batch_biology_figure(inputs.biomap_summary), "batch-biology"),
                "batch-biology-section",
            )
        )
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(inputs.title)}</title><style>{PAGE_CSS}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script>'
        f'<script id="phenoica-data" type="application/json">{payload}</script>'
        f"<script>{PAGE_JS}</script></head><body>\n<h1>{html.escape(inputs.title)}</h1>\n"
        '<p><a href="index.html">Back to the report</a></p>\n' + "\n".join(parts) + "\n</body></html>\n"
    )


def write_interactive(out_dir: Path | str, inputs: PageInputs) -> dict[str, Path]:
    """Write ``out_dir/interactive.html`` and its gene-panel assets (``out_dir/{ASSETS}``),
    each file atomically; return them by name."""
    out = Path(out_dir)
    genes = gene_records(inputs)
    names = sorted(genes)
    written: dict[str, Path] = {}
    (out / ASSETS).mkdir(parents=True, exist_ok=True)
    n_shards = -(-len(names) // SHARD_SIZE)
    for stale in (out / ASSETS).glob("genes_*.js"):  # a smaller screen than last time
        if not stale.stem[6:].isdigit() or int(stale.stem[6:]) >= n_shards:
            stale.unlink()
    for start in range(0, len(names), SHARD_SIZE):
        shard = {n: genes[n] for n in names[start : start + SHARD_SIZE]}
        path = out / ASSETS / f"genes_{start // SHARD_SIZE:04d}.js"
        with atomic_path(path) as tmp:
            body = json.dumps(shard, separators=(",", ":")).replace("</", "<\\/")
            tmp.write_text(f"phenoicaShard({start // SHARD_SIZE},{body});\n", encoding="utf-8")
        written[path.name] = path
    order = "rank" if "rank" in inputs.genes.columns else "q_value"
    table = inputs.genes.assign(_o=pd.to_numeric(inputs.genes[order], errors="coerce").astype("float64").fillna(np.inf))
    table = table.sort_values(["model", "variant", "_o"], kind="stable").drop(columns="_o")
    data = {
        "genes": names,
        "shard_size": SHARD_SIZE,
        "assets": ASSETS,
        "keys": [_key(*mv) for mv in _keys(inputs.hits)],
        "table": {
            "cols": [c for c in TABLE_COLS if c in table],
            "rows": _records(table, [c for c in TABLE_COLS if c in table]),
        },
        "table_rows": TABLE_ROWS,
        "guide_cols": _present(inputs.hits, GUIDE_COLS),
        "fold_cols": _present(inputs.guide_folds, FOLD_COLS),
        "q_threshold": inputs.q_threshold,
    }
    with atomic_path(out / PAGE) as tmp:
        tmp.write_text(page_html(inputs, data), encoding="utf-8")
    written["page"] = out / PAGE
    return written
