"""Benchmark: the mAP readout's random-rank null per guide, drawn by ranking every item against
drawn by its negatives (the gap draw), along the plates (docs/hit-calling.md, *The mAP readout:
robust to one well, stable across seeds*).

The arrayed layout puts a guide on one well of every replicate plate, 16 control wells a plate: at
``k`` times the plates (``benchmarks/arrayed_run_cost.py --plates k``) a guide has 8k wells, each
ranking its 8k - 1 siblings among its plate's 16 controls. One guide near the BH cut is drawn
``--draws`` times (``coupled_null_counts``, the refinement's own call) by both draws in the same
run, and the script prints the CPU seconds of each and their ratio, and which one the readout
takes (``gap_drawn``). A plate that lost a control well is added (a second configuration), as a
real layout has.

    python benchmarks/map_null_cost.py --scales 1 4 16 40 --draws 100000 1000000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from phenoica.classify import coupled_null_counts, gap_drawn

#: Control wells a plate on the arrayed layout.
CONTROLS = 16


def guide_rows(scale: int) -> pd.DataFrame:
    """One guide of the arrayed layout at ``scale`` times the plates: 8 x scale wells, one of
    them on a plate with a control well fewer."""
    wells = 8 * scale
    totals = np.full(wells, wells - 1 + CONTROLS)
    totals[0] -= 1
    return pd.DataFrame({"group": "g", "average_precision": 0.0, "n_pos_pairs": wells - 1, "n_total_pairs": totals})


def timed(rows: pd.DataFrame, draws: int, gaps: bool) -> float:
    """CPU seconds of ``draws`` random-rank draws of the guide, by gaps or by ranking every item."""
    t0 = time.process_time()
    coupled_null_counts(rows, ["group"], draws, seed=0, gaps=gaps)
    return time.process_time() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 4, 16, 40])
    parser.add_argument("--draws", type=int, nargs="+", default=[100_000])
    args = parser.parse_args()
    print("scale | wells a guide | draws | ranking every item, CPU s | gap draw, CPU s | ratio | the readout takes")
    for scale in args.scales:
        rows = guide_rows(scale)
        taken = "gaps" if gap_drawn(8 * scale - 1, CONTROLS) else "ranking every item"
        for draws in args.draws:
            old, new = timed(rows, draws, gaps=False), timed(rows, draws, gaps=True)
            print(f"{scale}x | {8 * scale} | {draws:,} | {old:.2f} | {new:.2f} | {old / new:.1f} | {taken}", flush=True)


if __name__ == "__main__":
    main()
