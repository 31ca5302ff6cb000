"""Where the demo's genes, guides and controls sit on a plate (wells and sites)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from phenoica.contract import screen
from phenoica.screen.demo.design import batch_of, check_demo, gene_truth, plate_format, row_label
from phenoica.screen.options import DemoOptions
from phenoica.utils.seeding import rng_from_sequence


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
    perturbed = truth[truth[screen.PERT_TYPE] == screen.PERTURBATION]
    wells_guides = list(np.repeat(perturbed.index.to_numpy(), int(demo.wells_per_guide_per_plate)))
    controls = truth.index[truth[screen.PERT_TYPE] == screen.CONTROL].to_numpy()
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
            screen.BATCH: batch,
            screen.PLATE: plate,
            screen.WELL: [f"{lab}{int(col) + 1:02d}" for lab, col in zip(row_labels, c)],
            screen.SITE: np.tile(np.arange(1, sites + 1), len(position)).astype(np.int64),
            screen.GENE: picked[screen.GENE].to_numpy(),
            screen.GUIDE: picked[screen.GUIDE].to_numpy(),
            screen.PERT_TYPE: picked[screen.PERT_TYPE].to_numpy(),
            screen.IMAGE_INDEX: np.arange(n, dtype=np.int64),
            "Metadata_Row": row_labels,
            "Metadata_Col": (c + 1).astype(np.int64),
        }
    )
