"""Benchmark: does an answer hinge on one control well? Both readouts, with the profile hygiene.

The simulated arrayed screen of the ``arrayed`` scenario (:mod:`phenoica.screen.arrayed`) gets one
outlier control well: the first control well of the first plate, in one feature, ``--sds`` control
SDs above the controls' median (default 1,000, as in a real pycytominer export, and 300, below the
outlier cutoff of 500). Each screen goes through what the workflow runs on it, every setting at the
schema's defaults: the profile hygiene (:func:`phenoica.profiles.clean_profiles`), the
variants ``base``, ``pca`` and ``pca_ica``, the classifier with its pseudo-guide null and the mAP
readout. It prints, per variant and readout, the guides called (q < 0.05) on the clean screen
(the same well at its simulated value: the baseline, measured in the same run), with the outlier,
and without the well, with the differences in per cent of the larger count. Clean against outlier
isolates what the outlier's value does; removing the well also takes it out of the pseudo-guides
that held it (a consistent sample: the others keep their wells), out of its plate's negatives in
the mAP readout, and, where the profile hygiene dropped the outlier's feature, gives that feature
back.

    python benchmarks/outlier_well.py --seeds 0 1 2        # about 2 minutes per seed on 2 cores
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from arrayed_calibration import VARIANTS, variant_tables

from phenoica.classify import (
    ClassifyOptions,
    SplitOptions,
    classify_guides,
    control_constructs,
    guide_map,
    make_folds,
    null_guide_design,
    split_control_rows,
)
from phenoica.contract import CONTROL, PERT_TYPE, PLATE, feature_columns, validate_config
from phenoica.hits import screen_calls
from phenoica.profiles import Hygiene, clean_profiles
from phenoica.screen import ArrayedDesign, screen_profiles


def planted(profiles: pd.DataFrame, sds: float) -> tuple[pd.DataFrame, int, str]:
    """The table with its first control well of the first plate set ``sds`` control SDs above the
    controls' median in the feature whose control SD is the features' median; the row and feature."""
    controls = profiles[profiles[PERT_TYPE] == CONTROL]
    sd = controls[feature_columns(profiles)].std()
    feature = sd.index[int(np.argsort(sd.to_numpy())[len(sd) // 2])]
    row = int(controls[controls[PLATE] == controls[PLATE].iloc[0]].index[0])
    out = profiles.copy()
    out.loc[row, feature] = float(controls[feature].median() + sds * sd[feature])
    return out, row, feature


def cleaned(profiles: pd.DataFrame, work: Path, name: str) -> pd.DataFrame:
    """The profile hygiene at the schema's defaults, as the gather job applies it."""
    path = work / f"{name}.parquet"
    profiles.to_parquet(path, index=False)
    clean_profiles(path, Hygiene())
    return pd.read_parquet(path)


def calls(profiles: pd.DataFrame, cfg: dict, seed: int) -> pd.DataFrame:
    """Per variant, the guides each readout calls at q < 0.05 (the workflow's functions)."""
    tables = variant_tables(profiles, cfg, seed)
    options = ClassifyOptions.from_config(cfg)._replace(seed=seed)
    rows, maps = [], []
    for variant, table in tables.items():
        folds = make_folds(table, SplitOptions.from_config(cfg)._replace(seed=seed))
        nulls = null_guide_design(table, options.n_null_guides, seed, layout=options.null_layout)
        nulls += control_constructs(table)
        rows.append(classify_guides(table, None, folds, options, variant, "sim", nulls=nulls))
        maps.append(guide_map(table, variant, "sim", seed, cfg["classify"]["map_null_size"]))
    guide_rows, _ = split_control_rows(pd.concat(rows, ignore_index=True))
    hits = screen_calls(guide_rows, pd.concat(maps, ignore_index=True), cfg["hits"]["null_model"], 0.05)["hits"]
    return hits.groupby("variant")[["hit", "map_hit"]].sum()


def _apart(a: int, b: int) -> str:
    """How far two counts are apart, in per cent of the larger."""
    return f"{100 * abs(a - b) / max(a, b, 1):.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--sds", type=float, nargs="+", default=[1000.0, 300.0])
    args = parser.parse_args()
    cfg = validate_config({})
    design = ArrayedDesign()
    for seed in args.seeds:
        profiles = screen_profiles(design, seed)[0]
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            t0 = time.perf_counter()
            clean = calls(cleaned(profiles, work, "clean"), cfg, seed)
            for sds in args.sds:
                table, row, feature = planted(profiles, sds)
                with_well = calls(cleaned(table, work, "with"), cfg, seed)
                without = calls(cleaned(table.drop(index=row), work, "without"), cfg, seed)
                print(f"seed {seed}: control well (row {row}) at {sds:g} control SDs in {feature}")
                for variant in VARIANTS:
                    for readout, col in (("classifier", "hit"), ("mAP", "map_hit")):
                        c = int(clean.loc[variant, col])
                        a, b = int(with_well.loc[variant, col]), int(without.loc[variant, col])
                        print(
                            f"  {variant:8s} {readout:10s} clean {c:3d}  outlier {a:3d} ({_apart(c, a)})  "
                            f"without the well {b:3d} ({_apart(a, b)} from the outlier's)"
                        )
            print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
