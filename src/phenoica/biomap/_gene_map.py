"""One (model, variant)'s gene map: every table the biomap job writes, from guide/gene profiles and the hit calls."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, NamedTuple, Protocol, Sequence

import numpy as np
import pandas as pd

from phenoica.biomap._consistency import guide_consistency
from phenoica.biomap._gene_similarity import NEIGHBOR_COLUMNS, guide_neighbors, map_genes, nearest_neighbors
from phenoica.biomap._options import GeneMapOptions
from phenoica.biomap._recall import relationship_recall
from phenoica.contract import GENE, PERT_TYPE, PERTURBATION, ScreenError, feature_columns
from phenoica.screen import complex_pairs
from phenoica.utils import write_parquet

TRUTH_SOURCE = "simulated_complexes"
#: The tables of one (model, variant)'s map, each a parquet the biomap job writes.
MAP_TABLES: tuple[str, ...] = ("neighbors", "guide_neighbors", "consistency", "recall", "coverage")

LOG = logging.getLogger(__name__)


def truth_complexes(truth: pd.DataFrame) -> dict[str, list[str]]:
    """The demo's simulated complexes (complex -> genes) from its truth table's ``complex`` column."""
    if "complex" not in truth.columns:
        raise ScreenError(
            "truth table: no 'complex' column, so an older phenoica wrote it; delete screen/truth.parquet "
            "under the results folder and run the workflow again (rule simulate_truth rewrites it)"
        )
    named = truth[truth["complex"].fillna("").astype(str) != ""]
    return {str(c): sorted(set(g[GENE].astype(str))) for c, g in named.groupby("complex")}


@dataclass(frozen=True)
class MapInputs:
    """What one (model, variant)'s map is built from: its guide and gene profiles, its gene
    calls (None: every perturbed gene), annotation pairs by name
    (``phenoica.screen.load_sources``) and the demo's truth table, whose simulated
    complexes are one more source, :data:`TRUTH_SOURCE`."""

    guides: pd.DataFrame
    genes: pd.DataFrame
    calls: pd.DataFrame | None
    sources: Mapping[str, pd.DataFrame]
    truth: pd.DataFrame | None = None


def gene_map(
    inputs: MapInputs,
    options: GeneMapOptions,
    *,
    model: str,
    variant: str,
    log: logging.Logger | None = None,
) -> tuple[dict[str, pd.DataFrame], pd.DataFrame, np.ndarray, str]:
    """Everything of one (model, variant)'s map: tables ``neighbors``, ``guide_neighbors``,
    ``consistency``, ``recall``, ``coverage`` (each with model and variant columns), and the map's gene profiles,
    their q-values and the note on how its genes were chosen, by the ``biomap`` rule's ``options``.
    """
    log = log or LOG
    guides, genes, calls, sources, truth = inputs.guides, inputs.genes, inputs.calls, inputs.sources, inputs.truth
    chosen, q, note = map_genes(genes, calls, options.genes)
    log.info("map %s/%s: %s", model, variant, note)
    features = feature_columns(chosen)
    X = chosen[features].to_numpy(np.float32)
    names = chosen[GENE].astype(str).tolist()
    all_sources = dict(sources)
    if truth is not None:
        all_sources[TRUTH_SOURCE] = complex_pairs(truth_complexes(truth))
    screen = genes.loc[genes[PERT_TYPE] == PERTURBATION, GENE].astype(str).tolist()
    block = int(options.block_rows)
    tables: dict[str, pd.DataFrame] = {}
    if len(names) >= 2:
        tables["neighbors"] = nearest_neighbors(X, names, q, int(options.n_neighbors), block)
    else:
        log.warning("map %s/%s: %d gene(s) in the map; no neighbours", model, variant, len(names))
        tables["neighbors"] = pd.DataFrame({c: [] for c in NEIGHBOR_COLUMNS if c not in ("model", "variant")})
    recall, coverage = relationship_recall(
        X,
        names,
        all_sources,
        screen_genes=screen,
        thresholds=[tuple(t) for t in options.recall_thresholds],
        min_entities=int(options.min_entities),
        block_rows=block,
        log=log,
    )
    tables["recall"], tables["coverage"] = recall, coverage
    tables["guide_neighbors"] = guide_neighbors(guides, set(names), int(options.n_neighbors), block)
    tables["consistency"] = guide_consistency(
        guides, seed=options.seed, null_size=int(options.consistency_null_size), model=model, variant=variant, log=log
    )
    for name in ("neighbors", "guide_neighbors", "recall", "coverage"):
        df = tables[name]
        df.insert(0, "variant", variant)
        df.insert(0, "model", model)
    for row in recall.itertuples():
        if row.status == "ok":
            log.info(
                "recall %s/%s %s at %.2f/%.2f: %.3f of %d pairs (expected %.2f)",
                model,
                variant,
                row.source,
                row.lower,
                row.upper,
                row.recall,
                row.n_pairs,
                row.recall_expected,
            )
    return tables, chosen, q, note


class MapFiles(NamedTuple):
    """One variant's files of a biomap job: its guide and gene profiles (read), its tables by
    name (:data:`MAP_TABLES`) and its heatmap (written)."""

    guides: Path | str
    genes: Path | str
    tables: Mapping[str, Path | str]
    heatmap: Path | str


class HeatmapDrawer(Protocol):
    """Draws a map's heatmap to ``path`` (``phenoica.report.heatmap_figure``)."""

    def __call__(
        self,
        X: np.ndarray,
        names: Sequence[str],
        q_values: Sequence[float],
        path: Path | str,
        *,
        max_genes: int,
        title: str,
    ) -> object: ...


def gene_map_files(
    files: Mapping[str, MapFiles],
    calls: pd.DataFrame,
    sources: Mapping[str, pd.DataFrame],
    truth: pd.DataFrame | None,
    options: GeneMapOptions,
    *,
    model: str,
    heatmap: HeatmapDrawer,
    log: logging.Logger | None = None,
) -> None:
    """The gene map of each variant of ``model`` (:func:`gene_map`), one variant after the
    other: ``files`` maps a variant to its :class:`MapFiles`; ``calls`` are the gene calls of
    every (model, variant) (each map reads its own rows), ``sources`` the annotation pairs
    (``phenoica.screen.load_sources``), ``truth`` the demo's truth table or None.
    Each table is written atomically; the heatmap (at most ``options.heatmap_max_genes`` genes)
    is drawn by ``heatmap``, which writes atomically too."""
    log = log or LOG
    for i, (variant, f) in enumerate(files.items(), 1):
        own = calls[(calls["model"] == model) & (calls["variant"] == variant)]
        inputs = MapInputs(pd.read_parquet(f.guides), pd.read_parquet(f.genes), own, sources, truth)
        tables, chosen, q, note = gene_map(inputs, options, model=model, variant=variant, log=log)
        for name in MAP_TABLES:
            write_parquet(tables[name], f.tables[name])
        features = [c for c in chosen.columns if not str(c).startswith("Metadata_")]
        heatmap(
            chosen[features].to_numpy(),
            chosen[GENE].tolist(),
            q,
            f.heatmap,
            max_genes=options.heatmap_max_genes,
            title=f"{model} / {variant}\n{note}",
        )
        log.info("variant %s (%d of %d): map of %d genes", variant, i, len(files), len(chosen))
