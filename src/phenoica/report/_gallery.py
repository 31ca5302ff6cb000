"""The hit gallery: representative images of each hit gene's guides beside controls of the same plates.

Which images (a stated, seeded rule, never by score): for each guide, the ``sites_per_guide`` images
whose embedding (model ``gallery.model``, the image-level embedding before any variant transform)
lies nearest, in Euclidean distance, to the guide's mean image embedding; for the controls, on each
plate that holds a shown guide image, the control images nearest that plate's mean control
embedding, ``control_sites`` in all, taken from those plates in turn. Ties are broken by a random
order seeded from the workflow seed (``phenoica.utils._seeding``). :func:`select_sites` does this in two streamed
passes over the per-plate embedding files.

Which pixels: :func:`read_gene_tiles` reads the images chosen for a batch of :data:`GENE_BATCH`
genes at once, through only the plate store's chunks that hold them (one ``zarr`` orthogonal
selection per chunk: each such chunk decoded once per batch, one at a time); no plate is read whole, and a
:class:`ReadStats` counts the images, the chunks decoded and their bytes. A store that is not found is named in the gene's status
and the gallery goes on.

How they look: each channel in its colour (:mod:`phenoica.report._channels`) and an additive composite;
per channel the display range is the ``percentiles`` of the pooled pixels, as drawn (tiles larger
than ``tile_px`` box-filtered down first), of the gene's images *and* its controls, so a hit and
its controls are scaled identically; the figure states the range.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from PIL import Image, ImageDraw, ImageFont

from phenoica.contract import (
    CONTROL,
    GENE,
    GUIDE,
    IMAGE_INDEX,
    PERT_TYPE,
    PLATE,
    SITE,
    WELL,
    ScreenError,
    feature_columns,
    open_plate,
)
from phenoica.report import _render as render
from phenoica.report._channels import ChannelStyle, channel_styles, composite_rgb, tint
from phenoica.report._options import GalleryOptions, ReportOptions
from phenoica.utils import atomic_path, rng_for, write_csv

log = logging.getLogger("phenoica.report._gallery")

#: The gallery's own table of panels (one row per gene) and of the images chosen.
PANELS_FILE = "gallery.csv"
SITES_FILE = "sites.csv"
#: Metadata columns the site choice reads from each embedding file (besides the features).
META = [PLATE, WELL, SITE, GENE, GUIDE, PERT_TYPE, IMAGE_INDEX]
GUIDE_ROLE, CONTROL_ROLE = "guide", "control"
STATUS_OK = "ok"


class GalleryError(ValueError):
    """A gallery request that cannot be met (unknown genes, channels); the message names them."""


@dataclass
class ReadStats:
    """What the tile reads cost: images and bytes read, chunks touched, plates opened."""

    images: int = 0
    bytes: int = 0
    chunks: int = 0
    plates: set[str] = field(default_factory=set)


def closest_names(name: str, known: Sequence[str], n: int = 3) -> list[str]:
    """Up to ``n`` names of ``known`` spelled most like ``name`` (case-insensitive)."""
    by_key = {k.casefold(): k for k in known}
    return [by_key[k] for k in difflib.get_close_matches(name.casefold(), list(by_key), n=n, cutoff=0.5)]


def check_requested_genes(requested: Sequence[str], known: Sequence[str], key: str = "gallery.genes") -> None:
    """Raise :class:`GalleryError` listing every requested gene the screen lacks, each with the
    closest known names."""
    pool = sorted(set(map(str, known)))
    unknown = [g for g in requested if g not in set(pool)]
    if unknown:
        hints = "; ".join(f"{g!r} (closest: {', '.join(map(repr, closest_names(g, pool))) or 'none'})" for g in unknown)
        raise GalleryError(f"{key}: unknown gene(s) {hints}; the screen has {len(pool)} genes")


def gallery_genes(gene_calls: pd.DataFrame, requested: Sequence[str] = ()) -> list[str]:
    """The genes to show: every gene called a hit in any model and variant, by best q-value
    (then name), then the requested genes not already listed. Requested names are checked first."""
    check_requested_genes(requested, gene_calls[GENE].astype(str).unique().tolist())
    hits = gene_calls[gene_calls["hit"].fillna(False).astype(bool)] if "hit" in gene_calls else gene_calls.iloc[:0]
    best = hits.groupby(GENE)["q_value"].min().reset_index().sort_values(["q_value", GENE], kind="stable")
    genes = [str(g) for g in best[GENE]]
    return genes + [g for g in dict.fromkeys(requested) if g not in set(genes)]


def _read_rows(path: Path | str, columns: Sequence[str] | None, guides: set[str] | None) -> pd.DataFrame:
    """An embedding file's rows (of ``guides`` only, when given), metadata and features."""
    filters = [(GUIDE, "in", sorted(guides))] if guides is not None else None
    return pq.read_table(str(path), columns=list(columns) if columns else None, filters=filters).to_pandas()


def _nearest(emb: np.ndarray, centre: np.ndarray, k: int, tie: np.ndarray) -> np.ndarray:
    """Positions of the ``k`` rows nearest ``centre`` (Euclidean), ties by ``tie`` (random keys)."""
    d = np.sqrt(((emb - centre) ** 2).sum(axis=1))
    return np.lexsort((tie, d))[:k], d


def _feature_names(path: Path | str) -> list[str]:
    names = pq.read_schema(str(path)).names
    missing = [c for c in META if c not in names]
    if missing:
        raise ScreenError(f"{path}: embedding file lacks column(s) {missing} the gallery needs")
    return [c for c in feature_columns(pd.DataFrame(columns=names)) if c.startswith("emb_")]


def select_sites(files: Sequence[Path | str], genes: Sequence[str], options: GalleryOptions) -> pd.DataFrame:
    """The images to show (rule in the module docstring): one row per image with ``gene``,
    ``role`` (guide / control), the metadata of :data:`META`, ``distance`` to its centre and
    ``rank`` (0 = nearest). Controls carry the plate they represent, ``gene`` empty."""
    cols = ["gene", "role", *META, "distance", "rank"]
    if not genes:
        return pd.DataFrame(columns=cols)
    wanted = set(genes)
    guide_sum: dict[str, np.ndarray] = {}
    guide_n: dict[str, int] = {}
    controls = []
    guide_gene: dict[str, str] = {}
    for path in files:  # pass 1: per-guide sums; per-plate representative controls
        feats = _feature_names(path)
        df = _read_rows(path, META + feats, None)
        df = df[df[GENE].astype(str).isin(wanted) | (df[PERT_TYPE] == CONTROL)]
        for guide, sub in df[df[PERT_TYPE] != CONTROL].groupby(GUIDE, sort=False):
            emb = sub[feats].to_numpy(np.float64)
            guide_sum[guide] = guide_sum.get(guide, 0.0) + emb.sum(axis=0)
            guide_n[guide] = guide_n.get(guide, 0) + len(sub)
            guide_gene[guide] = str(sub[GENE].iloc[0])
        for plate, sub in df[df[PERT_TYPE] == CONTROL].groupby(PLATE, sort=False):
            emb = sub[feats].to_numpy(np.float64)
            tie = rng_for(options.seed, "gallery", "controls", str(plate)).random(len(sub))
            pos, d = _nearest(emb, emb.mean(axis=0), options.control_sites, tie)
            pick = sub.iloc[pos][META].assign(role=CONTROL_ROLE, gene="", distance=d[pos], rank=np.arange(len(pos)))
            controls.append(pick)
        log.info("gallery: pass 1 %s (%d rows kept)", Path(path).name, len(df))
    picked = []
    if guide_n:
        means = {g: guide_sum[g] / guide_n[g] for g in guide_n}
        found = pd.concat([_read_rows(p, META + _feature_names(p), set(means)) for p in files], ignore_index=True)
        for guide, sub in found.groupby(GUIDE, sort=True):  # pass 2: the images nearest each guide's mean
            feats = [c for c in sub.columns if str(c).startswith("emb_")]
            tie = rng_for(options.seed, "gallery", "guide", str(guide)).random(len(sub))
            pos, d = _nearest(sub[feats].to_numpy(np.float64), means[guide], options.sites_per_guide, tie)
            picked.append(
                sub.iloc[pos][META].assign(
                    role=GUIDE_ROLE, gene=guide_gene[guide], distance=d[pos], rank=np.arange(len(pos))
                )
            )
    out = pd.concat([*picked, *controls], ignore_index=True) if picked or controls else pd.DataFrame(columns=cols)
    return out[cols].reset_index(drop=True)


def gene_images(sites: pd.DataFrame, gene: str, control_sites: int) -> pd.DataFrame:
    """The rows of one gene's panel: its guides' images (by guide, then rank), then
    ``control_sites`` controls from the plates of those images, taken plate by plate in turn."""
    own = sites[(sites["role"] == GUIDE_ROLE) & (sites["gene"] == gene)].sort_values([GUIDE, "rank"], kind="stable")
    plates = list(dict.fromkeys(own[PLATE]))
    ctrl = sites[(sites["role"] == CONTROL_ROLE) & sites[PLATE].isin(plates)].copy()
    ctrl["_plate_order"] = ctrl[PLATE].map({p: i for i, p in enumerate(plates)})
    ctrl = ctrl.sort_values(["rank", "_plate_order"], kind="stable").head(control_sites).drop(columns="_plate_order")
    return pd.concat([own, ctrl.assign(gene=gene)], ignore_index=True)


def shrink(tile: np.ndarray, px: int | None) -> np.ndarray:
    """A (C, H, W) tile box-filtered down to (C, px, px) when larger (as it is drawn), else as is."""
    if px is None or max(tile.shape[1:]) <= px:
        return tile
    return np.stack(
        [np.asarray(Image.fromarray(c.astype(np.float32), mode="F").resize((px, px), Image.BOX)) for c in tile]
    )


def read_gene_tiles(
    rows: pd.DataFrame, stores: Mapping[str, str], stats: ReadStats, px: int | None = None
) -> tuple[list[np.ndarray | None], list[str]]:
    """The tiles of ``rows`` (one per row, None where its store is missing; shrunk to ``px`` as
    drawn), read plate by plate and chunk by chunk: one orthogonal selection per chunk that holds
    a wanted image, so each such chunk is decoded once per call, no other chunk is, and memory
    holds one chunk's wanted images at full size; and the missing stores, named."""
    tiles: list[np.ndarray | None] = [None] * len(rows)
    missing = []
    plates = rows[PLATE].astype(str).to_numpy()
    for plate in dict.fromkeys(plates):
        store = stores.get(plate)
        try:
            if store is None:
                raise ScreenError(f"plate {plate}: no plate store is configured")
            array = open_plate(store)
        except ScreenError as exc:
            missing.append(str(exc))
            continue
        where = np.flatnonzero(plates == plate)
        unique, inverse = np.unique(rows[IMAGE_INDEX].to_numpy(np.int64)[where], return_inverse=True)
        shrunk: list[np.ndarray] = []
        for chunk in np.unique(unique // array.chunks[0]):  # one chunk decoded at a time, then freed
            block = np.asarray(array.oindex[unique[unique // array.chunks[0] == chunk]])
            shrunk += [shrink(t, px) for t in block]
            stats.chunks += 1
            stats.bytes += int(np.prod(array.chunks)) * array.dtype.itemsize
        stats.images += len(unique)
        stats.plates.add(plate)
        for pos, j in zip(where, inverse):
            tiles[pos] = shrunk[j]
    return tiles, missing


def display_ranges(tiles: Sequence[np.ndarray], percentiles: tuple[float, float]) -> np.ndarray:
    """Per channel (lo, hi): the percentiles of the pooled pixels of all ``tiles`` (hi > lo)."""
    stack = np.stack([t.astype(np.float32) for t in tiles])  # (n, C, H, W)
    lo, hi = np.percentile(stack.transpose(1, 0, 2, 3).reshape(stack.shape[1], -1), percentiles, axis=1)
    return np.stack([lo, np.maximum(hi, lo + 1e-6)], axis=1)


def _font(size: int = 12) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # Pillow without FreeType: the bitmap font
        return ImageFont.load_default()


def _fit(rgb: np.ndarray, px: int) -> Image.Image:
    """An (H, W, 3) float image in [0, 1] as a ``px``-wide PIL tile (nearest up, box down)."""
    img = Image.fromarray((np.clip(rgb, 0, 1) * 255).astype(np.uint8))
    return img.resize((px, px), Image.NEAREST if img.width < px else Image.BOX)


def _row_label(row: Any) -> str:
    who = "control" if row.role == CONTROL_ROLE else str(getattr(row, "Metadata_Guide"))
    return f"{who}  {row.Metadata_Plate} {row.Metadata_Well} s{row.Metadata_Site}"


def scaling_note(styles: Sequence[ChannelStyle], ranges: np.ndarray, percentiles: tuple[float, float]) -> str:
    """The display scaling as the figure states it."""
    per = ", ".join(f"{s.label} {lo:.0f}-{hi:.0f}" for s, (lo, hi) in zip(styles, ranges))
    return (
        f"Display range per channel = {percentiles[0]:g}-{percentiles[1]:g}th percentile of the pixels of all "
        f"images shown, as drawn (guides and controls alike): {per}"
    )


@dataclass(frozen=True)
class Panel:
    """One gene's panel: its image rows, their tiles and the channels to draw."""

    gene: str
    rows: pd.DataFrame
    tiles: Sequence[np.ndarray]
    styles: Sequence[ChannelStyle]
    composite: Sequence[int]


def panel_image(panel: Panel, options: GalleryOptions) -> tuple[Image.Image, str]:
    """The panel as an image: a row per image (label, each channel tinted, composite), a header
    naming the channels in their colours, and a footer stating the display scaling."""
    ranges = display_ranges(panel.tiles, options.percentiles)
    font, px, pad = _font(12), options.tile_px, 4
    label_w = (
        max(
            int(ImageDraw.Draw(Image.new("RGB", (1, 1))).textlength(_row_label(r), font=font))
            for r in panel.rows.itertuples()
        )
        + 2 * pad
    )
    n_cols = len(panel.styles) + 1
    note = scaling_note(panel.styles, ranges, options.percentiles)
    width = label_w + n_cols * (px + pad) + pad
    lines = _wrap(f"{panel.gene}: {note}", font, width - 2 * pad)
    header, footer = 34, 16 * len(lines) + 2 * pad
    canvas = Image.new("RGB", (width, header + len(panel.rows) * (px + pad) + footer), "white")
    draw = ImageDraw.Draw(canvas)
    draw.text((pad, 2), panel.gene, fill="black", font=_font(14))
    for c, style in enumerate([*panel.styles, None]):
        x = label_w + c * (px + pad)
        draw.text((x, 18), style.label if style else "composite", fill=style.hex if style else "black", font=font)
    for r, (row, tile) in enumerate(zip(panel.rows.itertuples(), panel.tiles)):
        y = header + r * (px + pad)
        scaled = (tile.astype(np.float32) - ranges[:, :1, None]) / (ranges[:, 1:, None] - ranges[:, :1, None])
        draw.text(
            (pad, y + px // 2 - 6), _row_label(row), fill="black" if row.role == GUIDE_ROLE else "#555", font=font
        )
        for c, style in enumerate(panel.styles):
            canvas.paste(_fit(tint(scaled[c], style.rgb), px), (label_w + c * (px + pad), y))
        rgb = composite_rgb(scaled[list(panel.composite)], [panel.styles[i].rgb for i in panel.composite])
        canvas.paste(_fit(rgb, px), (label_w + len(panel.styles) * (px + pad), y))
    for i, line in enumerate(lines):
        draw.text((pad, canvas.height - footer + pad + 16 * i), line, fill="#333", font=font)
    return canvas, note


def _wrap(text: str, font: Any, width: int) -> list[str]:
    draw, lines, line = ImageDraw.Draw(Image.new("RGB", (1, 1))), [], ""
    for word in text.split(" "):
        trial = f"{line} {word}".strip()
        if line and draw.textlength(trial, font=font) > width:
            lines.append(line)
            line = word
        else:
            line = trial
    return lines + ([line] if line else [])


#: Characters of a gene's name kept in its panel's file name.
PANEL_STEM_CHARS = 40


def panel_file(gene: str) -> str:
    """The gallery file name of a gene's panel, unique by construction: a readable stem (the
    first :data:`PANEL_STEM_CHARS` characters of the name, those outside [A-Za-z0-9._-] as
    ``_``) and the first 10 hex digits of the name's SHA-256 (``TP53-3f2c...png``), so that
    two names that read alike (``<b>`` and ``_b_``) never share a file."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", gene[:PANEL_STEM_CHARS]).lstrip(".") or "gene"
    return f"{stem}-{hashlib.sha256(gene.encode('utf-8')).hexdigest()[:10]}.png"


def save_image(image: Image.Image, path: Path | str) -> Path:
    """Write a PIL image as PNG at ``path`` atomically."""
    path = Path(path)
    with atomic_path(path) as tmp:
        image.save(tmp, format="PNG")
    return path


@dataclass
class GalleryResult:
    """What :func:`write_gallery` wrote: one row per gene (``panels``), the images chosen
    (``sites``), the stores not found and the read cost."""

    panels: pd.DataFrame
    sites: pd.DataFrame
    missing_stores: list[str]
    stats: ReadStats


#: Genes whose images are read together (each chunk holding one of them decoded once per batch).
GENE_BATCH = 100


def _draw_gene(out: Path, panel: Panel, missing: Sequence[str], options: GalleryOptions) -> dict[str, Any]:
    """Draw one gene's panel from the tiles found; its record for ``gallery.csv``."""
    rows = panel.rows
    keep = [i for i, t in enumerate(panel.tiles) if t is not None]
    record: dict[str, Any] = {
        "gene": panel.gene,
        "guides": ", ".join(dict.fromkeys(rows.loc[rows["role"] == GUIDE_ROLE, GUIDE])),
    }
    n_guide = int((rows.iloc[keep]["role"] == GUIDE_ROLE).sum()) if keep else 0
    record.update(n_guide_images=n_guide, n_control_images=len(keep) - n_guide)
    record["plates"] = ", ".join(dict.fromkeys(rows[PLATE].astype(str)))
    if rows.empty or not n_guide:
        reason = "; ".join(missing) if missing else "no image of this gene's guides was found"
        return {**record, "status": f"not drawn: {reason}", "panel": "", "scaling": ""}
    drawn = Panel(panel.gene, rows.iloc[keep], [panel.tiles[i] for i in keep], panel.styles, panel.composite)
    image, note = panel_image(drawn, options)
    save_image(image, out / panel_file(panel.gene))
    status = STATUS_OK if not missing else f"partly drawn: {'; '.join(missing)}"
    return {**record, "status": status, "panel": panel_file(panel.gene), "scaling": note}


def write_gallery(
    out_dir: Path | str,
    genes: Sequence[str],
    embedding_files: Sequence[Path | str],
    stores: Mapping[str, str],
    styles: Sequence[ChannelStyle],
    options: GalleryOptions,
) -> GalleryResult:
    """Choose, read and draw every gene's panel into ``out_dir`` (``{gene}.png``), with
    ``gallery.csv`` (gene, status, panel, images, plates, scaling) and ``sites.csv``. A gene
    whose stores are missing gets a status naming them; the other genes are drawn."""
    out = Path(out_dir)
    sites = select_sites(embedding_files, genes, options)
    comp = [i for i, s in enumerate(styles) if (s.name in options.composite if options.composite else s.in_composite)]
    stats, missing_all, records = ReadStats(), [], []
    for first in range(0, len(genes), GENE_BATCH):  # a batch's images are read together
        batch = genes[first : first + GENE_BATCH]
        per_gene = [gene_images(sites, gene, options.control_sites) for gene in batch]
        rows_all = pd.concat(per_gene, ignore_index=True) if per_gene else sites.iloc[:0]
        tiles_all, missing = read_gene_tiles(rows_all, stores, stats, options.tile_px)
        missing_all += [m for m in missing if m not in missing_all]
        at = 0
        for gene, rows in zip(batch, per_gene):
            tiles, at = tiles_all[at : at + len(rows)], at + len(rows)
            gone = [m for m in missing if any(f"/{p}.zarr" in m or f"plate {p}:" in m for p in rows[PLATE].astype(str))]
            records.append(_draw_gene(out, Panel(gene, rows, tiles, styles, comp), gone, options))
        log.info(
            "gallery: %d/%d genes drawn (%d images, %d chunk reads, %d plates)",
            first + len(batch),
            len(genes),
            stats.images,
            stats.chunks,
            len(stats.plates),
        )
    cols = ["gene", "status", "guides", "n_guide_images", "n_control_images", "plates", "panel", "scaling"]
    panels = pd.DataFrame.from_records(records, columns=cols)
    write_csv(panels, out / PANELS_FILE)
    write_csv(sites, out / SITES_FILE)
    return GalleryResult(panels, sites, missing_all, stats)


def skipped_gallery(out_dir: Path | str, reason: str) -> GalleryResult:
    """An empty gallery whose one row states why nothing was drawn (e.g. source embeddings)."""
    panels = pd.DataFrame([{"gene": "", "status": f"skipped: {reason}", "panel": ""}])
    write_csv(panels, Path(out_dir) / PANELS_FILE)
    return GalleryResult(panels, pd.DataFrame(), [], ReadStats())


#: Panels shown as figures on the static report page (all are linked, and in the interactive page).
SHOWN_ON_PAGE = 24


def report_gallery(
    out_dir: Path | str,
    gene_calls: pd.DataFrame,
    embedding_files: Sequence[Path | str],
    stores: Mapping[str, str],
    report: ReportOptions,
) -> GalleryResult:
    """The report's gallery as ``report`` (:class:`~phenoica.report.ReportOptions`) asks:
    skipped (with the reason) when ``gallery.enabled`` is off or the source has no pixels
    (``embeddings``); else every hit gene and every gene of ``gallery.genes``. Unknown genes or
    channels are errors naming them; a missing plate store is named in the genes' status and the
    other genes are drawn."""
    from phenoica.contract import plate_channels

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not report.gallery_reads_pixels:
        reason = "gallery.enabled is off" if not report.gallery_enabled else "source embeddings has no pixels"
        return skipped_gallery(out, f"{reason}, so the report shows no images")
    options = report.gallery
    genes = gallery_genes(gene_calls, options.genes)
    present = [s for s in stores.values() if Path(s).exists()]
    channels = plate_channels(present[0]) if present else []
    styles = channel_styles(channels, report.channels) if present else []
    unknown = [c for c in options.composite or () if c not in set(channels)]
    if present and unknown:
        raise GalleryError(
            f"gallery.composite: {unknown} name channel(s) the screen lacks; its channels are {channels}"
        )
    log.info("gallery: %d genes (%d requested), channels %s", len(genes), len(options.genes), channels)
    return write_gallery(out, genes, embedding_files, stores, styles, options)


def gallery_section(result: GalleryResult, page_dir: Path | str, gallery_dir: Path | str) -> render.PageSection:
    """The report's gallery section: the rule, the missing stores, a table of the panels and
    the first :data:`SHOWN_ON_PAGE` panels as figures (paths relative to ``page_dir``)."""
    rel = Path(gallery_dir).absolute().relative_to(Path(page_dir).absolute()).as_posix()
    panels = result.panels
    skipped = len(panels) == 1 and str(panels["status"].iloc[0]).startswith("skipped")
    if skipped:
        return render.PageSection("Hit gallery", [f"Gallery {panels['status'].iloc[0]}."])
    blocks: list[render.Block] = [
        "Per hit gene (any model or variant; and the genes of `gallery.genes`): for each guide the images "
        "nearest its mean image embedding, then control images of the same plates nearest their plate's mean "
        "control embedding (seeded tie-break). Each channel in its colour and a composite; the display range of "
        "each channel is the same for a gene's images and its controls, and is stated under each panel."
    ]
    if result.missing_stores:
        blocks.append(
            "**Plate store(s) not found** (moved since the run?): "
            + "; ".join(map(render.md_text, result.missing_stores))
        )
    if panels.empty:
        blocks.append("No gene is called a hit, and no gene was requested: the gallery is empty.")
        return render.PageSection("Hit gallery", blocks)
    blocks.append(render.Table(panels[["gene", "status", "guides", "n_guide_images", "n_control_images", "plates"]]))
    drawn = panels[panels["panel"].fillna("").astype(str) != ""]
    blocks += [render.Figure(f"{rel}/{p}", f"Gallery: {g}") for g, p in zip(drawn["gene"], drawn["panel"])][
        :SHOWN_ON_PAGE
    ]
    if len(drawn) > SHOWN_ON_PAGE:
        rest = list(zip(drawn["gene"], drawn["panel"]))[SHOWN_ON_PAGE:]
        blocks.append(render.Links([(g, f"{rel}/{p}") for g, p in rest], label="More panels:"))
    return render.PageSection("Hit gallery", blocks)
