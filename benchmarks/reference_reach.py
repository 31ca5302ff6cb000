"""Benchmark: what a reference null of more contrasts would be on the shipped plate.

The reference readout's null (``phenoica.hits``'s ``_reference`` module) sets control wells
against each other with a real pair's layout; on the shipped plate (``data/varchamp-batch12``,
each construct 4 wells in one 2 x 2 block, its 4 control ORFs too) no control construct holds
positions for both sides, so the null is one control ORF against another: 12 ordered pairs, p
down to 1/13. More contrasts need sides drawn across the control constructs. This script scores,
by the reference mAP (:func:`phenoica.classify.reference_map`, ``base`` profiles), the allele
pairs (``named_like_gene``), the 12 construct-against-construct contrasts, and ``--mixed``
contrasts of 4 control wells against 4 others drawn from all 16 (the same plates, any construct),
and prints where each sits: a null of mixed contrasts is a valid null only if alleles alike to
their wild type sit among them.

    python benchmarks/reference_reach.py --mixed 500
"""

from __future__ import annotations

import argparse

import numpy as np
from depth_calibration import real_plate_profiles

from phenoica.classify import control_mask, feature_matrix, reference_map
from phenoica.contract import GUIDE, PLATE, WELL
from phenoica.hits import Contrast, null_contrasts, pair_contrasts, reference_pairs
from phenoica.utils import rng_for


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mixed", type=int, default=500, help="contrasts of control wells across constructs")
    parser.add_argument("--one-image-set", action="store_true", help="the scenario's image set alone")
    args = parser.parse_args()
    table = real_plate_profiles()
    if args.one_image_set:
        table = table[~table[PLATE].astype(str).str.endswith("widefield")].reset_index(drop=True)
    X, _ = feature_matrix(table, "shipped plate", None)
    pairs = pair_contrasts(table, reference_pairs(table, {"rule": "named_like_gene"}))
    crossed = null_contrasts(table, pairs, 100, 0)
    is_control = control_mask(table)
    wells = table[WELL].astype(str).to_numpy()
    names = np.unique(wells[is_control])
    rng = rng_for(0, "reference_reach")
    mixed = []
    for j in range(args.mixed):
        pick = rng.choice(names, 8, replace=False)
        a = np.flatnonzero(is_control & np.isin(wells, pick[:4]))
        r = np.flatnonzero(is_control & np.isin(wells, pick[4:]))
        mixed.append(Contrast("null contrast", f"mixed{j}", "mixed", a, r))
    maps = reference_map(table, pairs + crossed + mixed, X)
    allele = maps[: len(pairs)]
    cross = maps[len(pairs) : len(pairs) + len(crossed)]
    mix = maps[len(pairs) + len(crossed) :]
    guides = table[GUIDE].astype(str).to_numpy()
    print(f"{len(pairs)} allele pairs, {len(crossed)} construct-against-construct contrasts, {len(mixed)} mixed")
    for name, values in (("alleles", allele), ("construct vs construct", cross), ("mixed control wells", mix)):
        q = np.nanpercentile(values, [10, 50, 90])
        print(
            f"  {name:24s}: mAP 10/50/90th percentiles {q[0]:.3f} / {q[1]:.3f} / {q[2]:.3f}, at 1.0: {np.mean(values >= 1 - 1e-9):.0%}"
        )
    share = np.array([np.mean(mix >= x - 1e-12) for x in allele])
    print(
        f"  alleles above every mixed contrast: {int((share == 0).sum())} of {len(allele)}; "
        f"above the 99th percentile: {int((share <= 0.01).sum())}"
    )
    positives = [p for p in pairs if guides[p.rows[0]].split("_")[0] in ("ALK",)]
    if positives:
        print(f"  e.g. {guides[positives[0].rows[0]]}: mAP {allele[pairs.index(positives[0])]:.3f}")


if __name__ == "__main__":
    main()
