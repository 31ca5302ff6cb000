"""Where the demo's genes, guides and controls sit on a plate (wells and sites)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from phenoica.contract import BATCH, CONTROL, GENE, GUIDE, IMAGE_INDEX, PERT_TYPE, PERTURBATION, PLATE, SITE, WELL
from phenoica.screen._options import DemoOptions
from phenoica.screen.demo._design import batch_of, check_demo, gene_truth, plate_format, row_label
from phenoica.utils import rng_from_sequence


def plate_layout(demo: DemoOptions, plate: str) -> pd.DataFrame:
    """The plate's metadata in the data contract (one row per image, ordered by image index).

    Every perturbation guide gets ``wells_per_guide_per_plate`` wells and the control guides
    share ``control_wells_per_plate`` wells; wells are placed at seeded random positions of
    the smallest standard plate (96/384/1536) that holds them, from (demo.seed, plate). Images are
    indexed in plate reading order (row-major wells, then sites 1..sites_per_well).
    """
    check_demo(demo)
    batch = batch_of(demo, plate)
    truth = gene_truth(demo)
    perturbed = truth[truth[PERT_TYPE] == PERTURBATION]
    wells_guides = list(np.repeat(perturbed.index.to_numpy(), int(demo.wells_per_guide_per_plate)))
    controls = truth.index[truth[PERT_TYPE] == CONTROL].to_numpy()
    wells_guides += [controls[i % len(controls)] for i in range(int(demo.control_wells_per_plate))]
    rows, cols = plate_format(len(wells_guides))
    position = rng_from_sequence(demo.seed, "layout", plate).choice(rows * cols, len(wells_guides), replace=False)
    order = np.argsort(position)
    position, guide_rows = position[order], np.asarray(wells_guides)[order]
    sites = int(demo.sites_per_well)
    r, c = np.divmod(np.repeat(position, sites), cols)
    picked = truth.loc[np.repeat(guide_rows, sites)]
    n = len(picked)
    row_labels = [row_label(int(i)) for i in r]
    return pd.DataFrame(
        {
            BATCH: batch,
            PLATE: plate,
            WELL: [f"{lab}{int(col) + 1:02d}" for lab, col in zip(row_labels, c)],
            SITE: np.tile(np.arange(1, sites + 1), len(position)).astype(np.int64),
            GENE: picked[GENE].to_numpy(),
            GUIDE: picked[GUIDE].to_numpy(),
            PERT_TYPE: picked[PERT_TYPE].to_numpy(),
            IMAGE_INDEX: np.arange(n, dtype=np.int64),
            "Metadata_Row": row_labels,
            "Metadata_Col": (c + 1).astype(np.int64),
        }
    )
