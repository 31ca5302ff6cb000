"""Benchmark: the mAP readout's p-values on pseudo-guides, random-rank null against the within-plate
permutation rule (docs/hit-calling.md, *The mAP readout at genome depth*).

A pseudo-guide is a set of control wells playing a guide, laid out like the screen's guides: on
the simulated ``arrayed`` scenario (``--draws`` seeds), one control well per plate, drawn at
random on every plate (the scenario has no position effect); on the ``arrayed_plates`` scenario
(``--position`` seeds: a position effect, 64 control wells scattered over each plate), every
control position of the 3 control constructs without a phenotype of their own, the same well on
every plate, as its guides sit; on the shipped real plate
(``--real``: both image sets, each its own plate), 4 control wells, the same physical wells on
both image sets (as every construct's 4 wells are), and, besides, the 4 wells of each control
construct (its 2 x 2 block, as the constructs are placed). Each pseudo-guide's own wells are
taken from its plates' control wells, the rest are its negatives; its mAP and per-well
configurations go through the readout's nulls exactly as a guide's do:

- ``random rank``: :func:`phenoica.classify.settled_null_counts` (the earlier default);
- ``within plate``: :func:`phenoica.classify.permuted_null_counts` (the rule);
- ``auto``: the one of the two that ``classify.map_null: auto`` takes on the unit's table
  (:func:`phenoica.classify.map_null_choice`), and beside it the first version of that rule (its
  position test on the raw features).

Pseudo-guides are nulls, so a calibrated null puts a share alpha of them at p <= alpha. Per level
it prints the observed and expected counts pooled over units and the ratio with a 95%
percentile-bootstrap interval over the (screen draw, variant) units; and, per unit, the real
guides' calls by each null (on the arrayed scenario, its guides without effect too), and the CPU.

    python benchmarks/map_depth_calibration.py --draws 4 --real --pseudo 5000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from arrayed_calibration import VARIANTS, variant_tables
from depth_calibration import real_plate_profiles
from tail_calibration import arrayed_profiles

from phenoica.classify import (
    WellPool,
    centered_on_plate_controls,
    control_mask,
    feature_matrix,
    grouping_share,
    guide_map,
    guide_map_within_plate,
    map_null_choice,
    permuted_null_counts,
    pool_map,
    settled_null_counts,
    well_pool,
    well_profiles,
)
from phenoica.contract import CONTROL, GENE, GUIDE, PERT_TYPE, PLATE, WELL, validate_config
from phenoica.screen import POSITION_DESIGN, ArrayedDesign, screen_profiles
from phenoica.utils import bh_qvalues, bootstrap_mean, rng_for

LEVELS: tuple[float, ...] = (1e-2, 1e-3, 1e-4)
NULLS: tuple[str, ...] = ("random rank", "within plate")
#: The rules that choose between them per unit: ``classify.map_null: auto`` (``map_null_choice``)
#: and its first version (the position test on the raw features), measured beside it.
RULES: tuple[str, ...] = ("auto", "auto, first version")


class Plates:
    """One variant table's wells as the mAP readout sees them: unit-norm centred profiles, plate
    codes and each plate's control rows."""

    def __init__(self, table: pd.DataFrame) -> None:
        self.wells = well_profiles(table).reset_index(drop=True)
        X, _ = feature_matrix(self.wells, "benchmark", None)
        self.is_control = control_mask(self.wells)
        self.plate = self.wells[PLATE].astype(str).to_numpy()
        X = centered_on_plate_controls(X, self.plate, self.is_control)
        self.unit = X / np.linalg.norm(X, axis=1, keepdims=True)
        self.plates = sorted(set(self.plate))
        self.controls = [np.flatnonzero(self.is_control & (self.plate == p)) for p in self.plates]

    def pool(self, own: list[np.ndarray]) -> WellPool:
        """The pool of a pseudo-guide whose wells on each plate are ``own`` (control rows)."""
        return well_pool(self.unit, self.controls, own)


def random_pseudo(plates: Plates, k: int, same_wells: bool, rng: np.random.Generator) -> list[np.ndarray]:
    """``k`` control wells per plate at random; with ``same_wells`` the same well positions on
    every plate (the plates are image sets of one plate map)."""
    if not same_wells:
        return [rng.choice(c, k, replace=False) for c in plates.controls]
    names = plates.wells[WELL].astype(str).to_numpy()
    pick = rng.choice(np.unique(names[plates.controls[0]]), k, replace=False)
    return [c[np.isin(names[c], pick)] for c in plates.controls]


def position_pseudo(plates: Plates, skip: set[str]) -> list[list[np.ndarray]]:
    """A pseudo-guide per control position whose construct is not in ``skip``: its well on every
    plate (a position holds one construct on every plate, so the construct the design shifts,
    a phenotype of its own, is skipped: its wells are no null)."""
    names = plates.wells[WELL].astype(str).to_numpy()
    guide = plates.wells[GUIDE].astype(str).to_numpy()
    first = plates.controls[0]
    keep = np.unique(names[first][~np.isin(guide[first], list(skip))])
    return [[c[names[c] == w] for c in plates.controls] for w in keep]


def block_pseudo(plates: Plates) -> list[list[np.ndarray]]:
    """Each control construct's wells, on every plate: a pseudo-guide per construct."""
    guide = plates.wells[GUIDE].astype(str).to_numpy()
    return [[c[guide[c] == g] for c in plates.controls] for g in np.unique(guide[plates.controls[0]])]


def pseudo_p_values(plates: Plates, pseudo: list[list[np.ndarray]], cfg: dict, seed: int) -> dict[str, np.ndarray]:
    """Each pseudo-guide's p-value under both nulls."""
    pools = [plates.pool(own) for own in pseudo]
    maps = np.array([pool_map(p) for p in pools])
    k = np.array([len(o) for o in pseudo[0]])
    n_pos = int(k.sum()) - 1
    totals = np.repeat([n_pos + len(c) - kk for c, kk in zip(plates.controls, k, strict=True)], k)
    ap = pd.DataFrame(
        {
            "g": np.repeat(np.arange(len(pools)), k.sum()),
            "average_precision": np.repeat(maps, k.sum()),
            "n_pos_pairs": n_pos,
            "n_total_pairs": np.tile(totals, len(pools)),
        }
    )
    size, most = int(cfg["map_null_size"]), int(cfg["map_max_null_size"])
    rr = settled_null_counts(ap, ["g"], size, most, 0.05, seed).sort_values("g")
    wp = permuted_null_counts(ap, ["g"], lambda key: pools[key[0]], size, most, 0.05, seed).sort_values("g")
    return {
        "random rank": rr["p_value"].to_numpy(),
        "within plate": wp["p_value"].to_numpy(),
        "permuted": wp["within_plate"].to_numpy(),
    }


def first_version_choice(wells: pd.DataFrame, seed: int, variant: str) -> str:
    """The first version of ``auto``'s position test (raw features; docs/hit-calling.md): the null
    it takes on a table whose guides repeat their positions."""
    controls = wells[control_mask(wells)].reset_index(drop=True)
    X, _ = feature_matrix(controls, "benchmark", None)
    blocks = (
        controls[PLATE].astype(str) + "|" + controls[GENE].astype(str) + "|" + controls[GUIDE].astype(str)
    ).to_numpy()
    _, _, p = grouping_share(X, controls[WELL].astype(str).to_numpy(), blocks, rng_for(seed, "map_null", "m", variant))
    return "random_rank" if p <= 0.05 else "within_plate"


def describe(units: pd.DataFrame, null: str) -> list[str]:
    lines = []
    for alpha in LEVELS:
        k = units[f"{null} {alpha:g}"].to_numpy(dtype=float)
        shares = k / units["n"].to_numpy(dtype=float)
        ci = bootstrap_mean(shares, 0, "map_depth", null, f"{alpha:g}")
        expected = float((units["n"] * alpha).sum())
        interval = f"[{ci.low / alpha:.2f}, {ci.high / alpha:.2f}]" if np.isfinite(ci.low) else "[n/a]"
        lines.append(
            f"    alpha {alpha:g}: observed {int(k.sum())} / expected {expected:.1f}, "
            f"ratio {shares.mean() / alpha:.2f} {interval}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2, help="seeds of the simulated arrayed screen")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--real", action="store_true", help="also the shipped real plate, two image sets")
    parser.add_argument(
        "--position", type=int, default=0, help="seeds of the arrayed_plates screen (a position effect)"
    )
    parser.add_argument("--pseudo", type=int, default=2000, help="pseudo-guides per unit")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--csv", help="write the per-unit counts here")
    parser.add_argument("--no-guides", action="store_true", help="skip the real guides' calls by each null")
    args = parser.parse_args()
    arrayed_cfg = validate_config({})
    real_cfg = validate_config({"transforms": {"n_components": 32}})
    screens = [
        ("arrayed", s, arrayed_cfg, lambda s=s: arrayed_profiles(s))
        for s in range(args.first_seed, args.first_seed + args.draws)
    ]
    screens += [
        ("arrayed_plates", s, arrayed_cfg, lambda s=s: screen_profiles(POSITION_DESIGN, s)[0])
        for s in range(args.first_seed, args.first_seed + args.position)
    ]
    if args.real:
        screens.append(("real plate", 0, real_cfg, real_plate_profiles))
    rows = []
    for name, seed, cfg, load in screens:
        profiles = load()
        design = {"arrayed": ArrayedDesign(), "arrayed_plates": POSITION_DESIGN}.get(name)
        truth = screen_profiles(design, seed)[1] if design is not None else None
        for variant, table in variant_tables(profiles, cfg, seed).items():
            if variant not in args.variants:
                continue
            plates = Plates(table)
            rng = rng_for(seed, "map_depth_calibration", variant)
            if name == "arrayed_plates":  # every control position, the same on every plate, as the guides sit
                shifted = truth.loc[truth["has_effect"].astype(bool) & (truth[PERT_TYPE] == CONTROL), GUIDE]
                pseudo = position_pseudo(plates, set(shifted.astype(str)))
            else:
                k, same = (1, False) if name == "arrayed" else (4, True)
                pseudo = [random_pseudo(plates, k, same, rng) for _ in range(args.pseudo)]
            t0 = time.process_time()
            p = pseudo_p_values(plates, pseudo, cfg["classify"], seed)
            cpu = time.process_time() - t0
            choice = map_null_choice(plates.wells, "auto", seed, "m", variant)
            chosen = {"auto": choice.null, "auto, first version": first_version_choice(plates.wells, seed, variant)}
            for rule in RULES:
                p[rule] = p[NULLS[chosen[rule] == "within_plate"]]
            row = {"screen": name, "seed": seed, "variant": variant, "n": len(pseudo)}
            row |= {f"{rule} takes": chosen[rule] for rule in RULES} | {"position p": choice.p_value}
            for null in NULLS + RULES:
                row |= {f"{null} {a:g}": int((p[null] <= a * (1 + 1e-9)).sum()) for a in LEVELS}
            rows.append(row)
            line = f"  {name} seed {seed} {variant}: {len(pseudo)} pseudo-guides, {int(p['permuted'].sum())} permuted, {cpu:.0f} CPU s"
            line += f"; auto takes {choice.null} ({choice.reason}); its first version {chosen['auto, first version']}"
            if name == "real plate":
                blocks = pseudo_p_values(plates, block_pseudo(plates), cfg["classify"], seed)
                line += "; control constructs' blocks, p within plate: " + ", ".join(
                    f"{x:.2g}" for x in blocks["within plate"]
                )
                line += " (random rank: " + ", ".join(f"{x:.2g}" for x in blocks["random rank"]) + ")"
            print(line, flush=True)
            for within in () if args.no_guides else (False, True):
                t0 = time.process_time()
                scorer = guide_map_within_plate if within else guide_map
                maps = scorer(table, variant, "m", seed, q_threshold=0.05)
                cpu = time.process_time() - t0
                called = bh_qvalues(maps["map_p_value"].to_numpy()) < 0.05
                text = f"    guides called, {NULLS[within]}: {int(called.sum())} of {len(maps)}"
                if truth is not None:
                    effect = maps[GUIDE].map(truth.set_index(GUIDE)["has_effect"]).to_numpy(dtype=bool)
                    nulls = maps["map_p_value"].to_numpy()[~effect]
                    text += (
                        f" ({int((called & effect).sum())} of {int(effect.sum())} with effect, "
                        f"{int((called & ~effect).sum())} of {int((~effect).sum())} without; p of those without: "
                        f"<= 0.05 {int((nulls <= 0.05).sum())}, <= 0.01 {int((nulls <= 0.01).sum())})"
                    )
                print(text + f", {cpu:.1f} CPU s", flush=True)
    units = pd.DataFrame(rows)
    if args.csv:
        units.to_csv(args.csv, index=False)
    for (name), sub in units.groupby("screen", sort=False):
        for null in NULLS + RULES:
            print(f"{name}, {null} ({len(sub)} units, {int(sub['n'].sum())} pseudo-guides):")
            print("\n".join(describe(sub, null)), flush=True)


if __name__ == "__main__":
    main()
