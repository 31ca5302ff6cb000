"""A screen where the method's assumptions hold: the shipped positive control, at the embedding level.

Nelson et al. (ICLR 2026) argue that an encoder's representation is a near-linear map of the
data's factors, so whitening and an ICA rotation recover independent factors up to sign and
order; Tables 3-4 show the consequence on a microscopy screen (per-guide classifiers score
higher and use fewer features after PCA + ICA than after PCA or a random rotation). This module
writes a screen built from those assumptions, as embeddings "computed elsewhere" (the data
contract of the ``embeddings`` source: one parquet per batch, ``Metadata_*`` columns and one
list-valued ``vector`` column), so it enters the workflow exactly as a user's embeddings do.

Every cell (one row) has independent, non-Gaussian sources:

- ``n_bio`` biological sources (Laplace, unit variance); a gene with an effect shifts one of them
  by ``effect_size`` SDs (sign drawn per gene), the same for each of its guides: sparse effects;
  genes without effect shift nothing;
- ``n_batch`` batch sources (uniform, unit variance) whose mean moves with the batch (an
  offset of SD ``batch_shift`` per batch and source);
- ``n_state`` cell-state sources (centred exponential: skewed, SD ``state_sd``) unrelated to
  guides and batches (cell cycle, density).

They are mixed linearly into ``n_dims`` > sources dimensions (a Gaussian mixing matrix with
unit-norm rows: each source adds its own variance), warped mildly and monotonically
(``x + warp * tanh(x)`` per dimension) and isotropic Gaussian noise of SD ``noise_sd`` is added.

The design was fixed from these assumptions before any variant was scored, and is not tuned:
3 batches (leave-one-batch-out needs held-out batches with controls), 12 biological, 4 batch and
4 cell-state sources into 48 dimensions, a one-SD effect on one source per effect gene (8 of
12 genes), 2 guides per gene, one plate per batch, 16 control wells and 2 wells per guide per
plate, 16 cells per well. A larger screen (``plates_per_batch`` > 1, more genes) adds plates as
a real screen does: each plate has its own control wells and a block of the guides, so the
controls' share of the wells stays the same.
:data:`SCREENS` holds it (``positive_control``) and the known-truth screen where cell-to-cell
variation unrelated to any guide holds most of the variance (``cell_state``: the same screen,
cell-state SD 4, about two thirds of the variance).

Beside the embeddings it writes ``truth.parquet`` (gene, guide, ``has_effect``,
``affected_factors`` like ``factor_03+``, as the demo's truth table) and ``sources.parquet``
(plate, well, site and every cell's true sources), which
:func:`phenoica.report.known_truth_section.evaluate` reads to score a finished run. Seeds: ``rng_for(seed, "positive_control", screen, purpose)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from phenoica.contract import BATCH, CONTROL, GENE, GUIDE, PERT_TYPE, PERTURBATION, PLATE, SITE, WELL
from phenoica.utils import atomic_path, rng_for

#: Gene and guide names of the controls.
CONTROL_GENE, CONTROL_GUIDE = "non-targeting", "NTC"
#: The list-valued embedding column of the written files.
VECTOR = "vector"


@dataclass(frozen=True)
class ControlDesign:
    """The simulated screen's layout and its sources (see the module doc)."""

    n_batches: int = 3
    plates_per_batch: int = 1  # each plate holds its own control wells and a share of the guides
    control_wells: int = 16  # per plate
    n_effect_genes: int = 8
    n_null_genes: int = 4
    guides_per_gene: int = 2
    wells_per_guide: int = 2  # per plate
    cells_per_well: int = 16
    n_bio: int = 12
    n_batch: int = 4
    n_state: int = 4
    n_dims: int = 48
    effect_size: float = 1.0  # shift of one biological source, in its SDs
    batch_shift: float = 1.0  # SD of a batch's mean offset on each batch source
    state_sd: float = 1.0  # SD of each cell-state source
    noise_sd: float = 0.5  # isotropic noise added to every dimension
    warp: float = 0.1  # x + warp * tanh(x), monotone for warp > -1

    def __post_init__(self) -> None:
        counts = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.type in ("int", int)}
        low = {k: v for k, v in counts.items() if v < (0 if k in ("n_null_genes", "n_batch", "n_state") else 1)}
        if low:
            raise ValueError(f"positive control: counts must be >= 1 (n_null_genes, n_batch, n_state >= 0), got {low}")
        if self.n_batches < 3:
            raise ValueError(f"positive control: n_batches must be >= 3 (leave-one-batch-out), got {self.n_batches}")
        if self.n_sources > self.n_dims:
            raise ValueError(
                f"positive control: {self.n_sources} sources (n_bio {self.n_bio} + n_batch {self.n_batch} + "
                f"n_state {self.n_state}) but n_dims {self.n_dims}: the embedding needs at least as many "
                "dimensions as sources"
            )
        if self.plates_per_batch > self.n_genes * self.guides_per_gene:
            raise ValueError(
                f"positive control: plates_per_batch {self.plates_per_batch} exceeds the "
                f"{self.n_genes * self.guides_per_gene} guides: every plate needs at least one guide"
            )
        if self.warp <= -1:
            raise ValueError(f"positive control: warp must be > -1 (a monotone warp), got {self.warp}")
        if min(self.noise_sd, self.state_sd, self.batch_shift) < 0:
            raise ValueError("positive control: noise_sd, state_sd and batch_shift must be >= 0")

    @property
    def n_sources(self) -> int:
        return self.n_bio + self.n_batch + self.n_state

    @property
    def n_genes(self) -> int:
        return self.n_effect_genes + self.n_null_genes

    def source_names(self) -> list[str]:
        """``factor_XX`` (biological), ``batch_X``, ``state_X``, in the mixing's order."""
        return (
            [f"factor_{i:02d}" for i in range(self.n_bio)]
            + [f"batch_{i}" for i in range(self.n_batch)]
            + [f"state_{i}" for i in range(self.n_state)]
        )


#: The known-truth embedding screens: the positive control and the cell-state-dominated screen.
SCREENS: dict[str, ControlDesign] = {
    "positive_control": ControlDesign(),
    "cell_state": ControlDesign(state_sd=4.0),
}


def gene_truth(design: ControlDesign, seed: int, screen: str = "positive_control") -> pd.DataFrame:
    """Per guide: gene, guide, ``has_effect``, the shifted source (``affected_factors``, e.g.
    ``factor_03+``; empty without effect) and the signed shift ``effect``. Effect gene ``i``
    shifts biological source ``i mod n_bio``; signs are seeded."""
    rng = rng_for(seed, "positive_control", screen, "signs")
    signs = rng.choice([-1.0, 1.0], size=design.n_effect_genes)
    rows = []
    for g in range(design.n_genes):
        effect = g < design.n_effect_genes
        source = g % design.n_bio
        for s in range(design.guides_per_gene):
            sign = signs[g] if effect else 0.0
            rows.append(
                {
                    GENE: f"G{g + 1:02d}",
                    GUIDE: f"G{g + 1:02d}_{chr(97 + s)}",
                    "has_effect": effect,
                    "affected_factors": f"factor_{source:02d}{'+' if sign > 0 else '-'}" if effect else "",
                    "effect_source": source if effect else -1,
                    "effect": sign * design.effect_size,
                }
            )
    return pd.DataFrame(rows)


def plate_layout(design: ControlDesign, truth: pd.DataFrame, batch: int) -> pd.DataFrame:
    """One batch's plates, one row per cell: batch, plate, well, site (the cell's index in its
    well), gene, guide and PertType. Plates are numbered across batches (``P1``, ``P2``, ...;
    batch ``b`` holds plates ``b * plates_per_batch + 1`` on); the guides, in truth's order, are
    split into ``plates_per_batch`` consecutive blocks, one per plate, so every batch has every
    guide once. On each plate: its ``control_wells`` control wells first, then each guide's wells."""
    rows = []
    blocks = np.array_split(np.arange(len(truth)), design.plates_per_batch)
    for p, block in enumerate(blocks):
        wells = [(CONTROL_GENE, CONTROL_GUIDE, CONTROL)] * design.control_wells
        for gene, guide in zip(truth[GENE].iloc[block], truth[GUIDE].iloc[block]):
            wells += [(gene, guide, PERTURBATION)] * design.wells_per_guide
        for w, (gene, guide, kind) in enumerate(wells):
            for c in range(design.cells_per_well):
                rows.append(
                    {
                        BATCH: f"B{batch + 1}",
                        PLATE: f"P{batch * design.plates_per_batch + p + 1}",
                        WELL: f"W{w + 1:03d}",
                        SITE: c,
                        GENE: gene,
                        GUIDE: guide,
                        PERT_TYPE: kind,
                    }
                )
    return pd.DataFrame(rows)


def draw_sources(
    design: ControlDesign, layout: pd.DataFrame, truth: pd.DataFrame, offsets: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Every cell's sources (cells x n_sources): biological (Laplace, shifted by the guide's
    effect), batch (uniform + the batch's offsets), cell state (centred exponential x state_sd)."""
    n = len(layout)
    bio = rng.laplace(scale=1 / np.sqrt(2), size=(n, design.n_bio))
    effects = truth.set_index(GUIDE)
    guides = layout[GUIDE].to_numpy()
    for guide, row in effects[effects["has_effect"]].iterrows():
        bio[guides == guide, int(row["effect_source"])] += float(row["effect"])
    batch = rng.uniform(-np.sqrt(3), np.sqrt(3), size=(n, design.n_batch)) + offsets
    state = (rng.exponential(size=(n, design.n_state)) - 1.0) * design.state_sd
    return np.hstack([bio, batch, state])


def mixing_matrix(design: ControlDesign, seed: int, screen: str = "positive_control") -> np.ndarray:
    """The (n_sources x n_dims) linear mixture: Gaussian, each row scaled to unit norm."""
    A = rng_for(seed, "positive_control", screen, "mixing").normal(size=(design.n_sources, design.n_dims))
    return A / np.linalg.norm(A, axis=1, keepdims=True)


def embed(design: ControlDesign, sources: np.ndarray, mixing: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Sources -> embeddings: linear mixture, mild monotone warp, isotropic noise (float32)."""
    x = sources @ mixing
    x = x + design.warp * np.tanh(x)
    x += rng.normal(scale=design.noise_sd, size=x.shape)
    return x.astype(np.float32)


def write_known_truth_screen(
    out_dir: Path | str, seed: int = 0, screen: str = "positive_control", design: ControlDesign | None = None
) -> dict[str, Any]:
    """Write one known-truth screen under ``out_dir``: ``embeddings/{batch}.parquet`` (the
    ``embeddings`` source's contract), ``truth.parquet`` and ``sources.parquet``. ``design``
    defaults to ``SCREENS[screen]``. Returns the paths by name."""
    if design is None:
        if screen not in SCREENS:
            raise ValueError(f"positive control: unknown screen {screen!r}; expected one of {sorted(SCREENS)}")
        design = SCREENS[screen]
    out = Path(out_dir)
    truth = gene_truth(design, seed, screen)
    mixing = mixing_matrix(design, seed, screen)
    offsets = rng_for(seed, "positive_control", screen, "batch").normal(
        scale=design.batch_shift, size=(design.n_batches, design.n_batch)
    )
    names = design.source_names()
    files, parts = [], []
    (out / "embeddings").mkdir(parents=True, exist_ok=True)
    for b in range(design.n_batches):
        rng = rng_for(seed, "positive_control", screen, "cells", b)
        layout = plate_layout(design, truth, b)
        sources = draw_sources(design, layout, truth, offsets[b], rng)
        table = layout.assign(**{VECTOR: list(embed(design, sources, mixing, rng))})
        path = out / "embeddings" / f"{layout[BATCH].iloc[0]}.parquet"
        with atomic_path(path) as tmp:
            table.to_parquet(tmp, index=False)
        files.append(path)
        parts.append(pd.concat([layout[[PLATE, WELL, SITE]], pd.DataFrame(sources, columns=names)], axis=1))
    paths = {"embeddings": out / "embeddings", "truth": out / "truth.parquet", "sources": out / "sources.parquet"}
    with atomic_path(paths["truth"]) as tmp:
        truth.to_parquet(tmp, index=False)
    with atomic_path(paths["sources"]) as tmp:
        pd.concat(parts, ignore_index=True).to_parquet(tmp, index=False)
    return {**paths, "files": files, "design": design}


def main(argv: list[str] | None = None) -> None:
    """``python -m phenoica.screen.known_truth``: write a known-truth screen (score a
    finished run of it with ``python -m phenoica.report.known_truth_section``)."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screen", default="positive_control", choices=sorted(SCREENS))
    parser.add_argument("--out", default=None, help="folder (default: scenario_data/<screen>)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = write_known_truth_screen(args.out or f"scenario_data/{args.screen}", args.seed, args.screen)
    print(f"{args.screen}: {len(out['files'])} embedding files in {out['embeddings']}; truth {out['truth']}")


if __name__ == "__main__":
    main()
