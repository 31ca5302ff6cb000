"""An arrayed screen of per-well profiles, simulated in the shape the field's screens arrive in.

Most screens that reach phenoica are not its simulator's pooled image screens but arrayed screens
already reduced to per-well profiles by CellProfiler and pycytominer (JUMP's CRISPR and ORF
plates, Cell Health, variant-effect screens): one well per perturbation per plate, 4 or 5
replicate plates per batch, 16 to 64 negative-control wells per plate at the same positions on
every plate, several control constructs, and a few hundred correlated features. This module writes
such a screen with known truth, as per-well profile tables with CellProfiler-style feature names,
so it enters the workflow as a user's export does (source ``embeddings`` with ``feature_regex``).

The design (:class:`ArrayedDesign`) follows that description; the one free size, the effect,
is set by a stated target and not by any readout's result: an effect guide's replicate wells
have a cosine similarity of about 0.3 to each other (shift norm^2 / (shift norm^2 + well noise
norm^2) = 2 x 2.5^2 x 300/24 / (that + 300 x 1.25) = 0.29), the middle of what active
perturbations show in published arrayed screens:

- ``n_batches`` batches of ``plates_per_batch`` replicate plates; every plate holds every guide
  once, at the same (seeded) well on every plate, and ``control_wells_per_construct`` wells of
  each of ``n_control_constructs`` control constructs at fixed central positions. A screen of
  more guides than a plate holds spreads them over ``plate_maps`` plate maps (a seeded share of
  the guides each, and the same control wells), each map on ``plates_per_batch`` replicate plates
  per batch, as genome-scale arrayed sets are laid out;
- a well's profile: ``n_latent`` independent standard-normal biological programmes (well-to-well
  variation) mixed into ``n_features`` correlated features by a fixed loading matrix, plus
  per-feature noise, a per-batch and a per-plate offset of every feature; then each plate is
  normalized against its control wells (median and MAD per feature), as the screens' authors
  normalize per-well profiles with pycytominer before they publish them;
- an effect gene shifts ``programmes_per_effect`` programmes by ``effect_size`` SDs (signs seeded),
  the same for both of its guides; genes without effect shift nothing;
- the last control construct (``control_effect_construct``) shifts one programme by
  ``control_effect`` SDs: controls that differ from one another, as real control constructs do.

Arrayed screens' own questions (off by default: the screen above is then unchanged, byte for
byte):

- **position**: the plate's edges and rows carry their own effect, the same on every plate (the
  evaporation of edge wells, a gradient along the dispensing order): edge wells (the outer ring
  of the 384-well grid) shift one programme by ``edge_effect`` SDs, and each well shifts another
  by ``row_gradient`` x (row / (rows - 1) - 1/2) SDs (``row_gradient`` from the first row to the
  last). The two programmes are drawn from their own stream; ``control_layout: "scattered"``
  puts every well (controls too) at a seeded position of the whole plate instead of the central
  block, so that the controls sit where the guides sit, edges included;
- **alleles**: ``n_allele_genes`` ORF-style genes, each with a wild-type construct named like its
  gene (the reference) and ``alleles_per_gene`` alleles (``{gene}_Var{k}``). The wild type shifts
  ``programmes_per_effect`` programmes by ``effect_size`` (overexpression has a phenotype); every
  allele carries its wild type's shift, and the first ``alleles_with_effect`` of each gene
  ``programmes_per_effect`` more programmes of their own by ``effect_size`` SDs. The profiles then
  carry ``Metadata_Reference`` (an allele's wild type; empty elsewhere), and the truth
  ``reference`` and ``differs_from_reference``;
- **the export's normalization**: ``control_normalized`` False leaves every plate as measured
  (its offsets included), not normalized against its control wells: what a null of control wells
  owes to that normalization (``benchmarks/null_likeness.py``).

Beside the profiles it writes ``truth.parquet``: one row per guide and per control construct
(gene, guide, PertType, ``has_effect``). Seeds: ``rng_for(seed, "arrayed", purpose, ...)``.
``python -m phenoica.screen.arrayed --out scenario_data/arrayed`` writes it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from phenoica.contract import BATCH, CONTROL, GENE, GUIDE, PERT_TYPE, PERTURBATION, PLATE, WELL
from phenoica.utils import atomic_path, rng_for

#: Gene name of the negative controls; the constructs are ``NTC_1`` ... ``NTC_k``.
CONTROL_GENE = "non-targeting"
#: The compartments feature names cycle through (CellProfiler's objects).
COMPARTMENTS: tuple[str, ...] = ("Cells", "Cytoplasm", "Nuclei")
#: The regular expression that declares the features of the written tables (``screen.feature_regex``).
FEATURE_REGEX = "(Cells|Cytoplasm|Nuclei)_.*"
#: Rows and columns of the simulated plate (a 384-well plate's grid).
PLATE_ROWS, PLATE_COLUMNS = "ABCDEFGHIJKLMNOP", 24
#: Where the control wells sit: the plate's central block, or seeded positions over the whole plate.
CONTROL_LAYOUTS: tuple[str, ...] = ("centre", "scattered")
#: The column of the profiles that names an allele's reference construct (its wild type).
REFERENCE = "Metadata_Reference"


@dataclass(frozen=True)
class ArrayedDesign:
    """The arrayed screen's layout and its sources (see the module doc)."""

    n_batches: int = 2
    plates_per_batch: int = 4
    n_effect_genes: int = 16
    n_null_genes: int = 8
    guides_per_gene: int = 2
    n_control_constructs: int = 4
    control_wells_per_construct: int = 4  # per plate
    plate_maps: int = 1  # the guides spread over this many plate maps, each on plates_per_batch plates per batch
    n_latent: int = 24
    n_features: int = 300
    programmes_per_effect: int = 2
    effect_size: float = 2.5  # shift of each affected programme, in its SDs (replicate cosine ~0.3)
    control_effect: float = 2.5  # shift of one programme in the last control construct (0 = alike)
    noise_sd: float = 0.5  # per-feature noise, in units of a programme's loading
    batch_sd: float = 1.0  # SD of a batch's offset of each feature
    plate_sd: float = 0.3  # SD of a plate's offset of each feature
    control_layout: str = "centre"  # or "scattered": every well at a seeded position of the whole plate
    edge_effect: float = 0.0  # shift of one programme in the plate's edge wells, in its SDs
    row_gradient: float = 0.0  # shift of another programme from the first row to the last, in its SDs
    n_allele_genes: int = 0  # genes with a wild-type construct (the reference) and alleles
    alleles_per_gene: int = 3
    alleles_with_effect: int = 2  # alleles per gene that differ from their wild type
    control_normalized: bool = True  # each plate normalized against its control wells, as exports are

    def __post_init__(self) -> None:
        counts = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.type in ("int", int)}
        may_be_zero = ("n_null_genes", "n_allele_genes", "alleles_with_effect")
        low = {k: v for k, v in counts.items() if v < (0 if k in may_be_zero else 1)}
        if low:
            raise ValueError(f"arrayed screen: counts must be >= 1 ({', '.join(may_be_zero)} >= 0), got {low}")
        if self.control_layout not in CONTROL_LAYOUTS:
            raise ValueError(
                f"arrayed screen: control_layout must be one of {CONTROL_LAYOUTS}, got {self.control_layout!r}"
            )
        if self.alleles_with_effect > self.alleles_per_gene:
            raise ValueError("arrayed screen: alleles_with_effect exceeds alleles_per_gene")
        if (self.edge_effect or self.row_gradient) and self.n_latent < 2:
            raise ValueError(
                "arrayed screen: a position effect needs n_latent >= 2 (one programme for edges, one for rows)"
            )
        if self.n_batches < 2:
            raise ValueError(f"arrayed screen: n_batches must be >= 2 (leave-one-batch-out), got {self.n_batches}")
        if self.plate_maps > self.n_guides:
            raise ValueError(
                f"arrayed screen: {self.plate_maps} plate maps for {self.n_guides} guides leave maps empty"
            )
        if self.programmes_per_effect > self.n_latent:
            raise ValueError("arrayed screen: programmes_per_effect exceeds n_latent")
        if self.wells_per_plate > len(PLATE_ROWS) * PLATE_COLUMNS:
            raise ValueError(f"arrayed screen: {self.wells_per_plate} wells do not fit a 384-well plate")
        if min(self.noise_sd, self.batch_sd, self.plate_sd) < 0:
            raise ValueError("arrayed screen: noise_sd, batch_sd and plate_sd must be >= 0")

    @property
    def n_genes(self) -> int:
        return self.n_effect_genes + self.n_null_genes

    @property
    def n_guides(self) -> int:
        """Perturbation constructs: every gene's guides, and every allele gene's wild type and alleles."""
        return self.n_genes * self.guides_per_gene + self.n_allele_genes * (1 + self.alleles_per_gene)

    @property
    def control_wells(self) -> int:
        return self.n_control_constructs * self.control_wells_per_construct

    @property
    def guides_per_map(self) -> int:
        """Guides of the fullest plate map (the guides split as evenly as they go)."""
        return -(-self.n_guides // self.plate_maps)

    @property
    def wells_per_plate(self) -> int:
        """Wells of the fullest plate map's plates."""
        return self.guides_per_map + self.control_wells

    @property
    def n_wells(self) -> int:
        """Wells of the whole screen: every plate map's plates in every batch."""
        return self.n_batches * self.plates_per_batch * (self.n_guides + self.plate_maps * self.control_wells)

    def feature_names(self) -> list[str]:
        """CellProfiler-style names, ``Cells_Feature_000``, ``Cytoplasm_Feature_001``, ..."""
        return [f"{COMPARTMENTS[i % len(COMPARTMENTS)]}_Feature_{i:03d}" for i in range(self.n_features)]

    def control_guides(self) -> list[str]:
        return [f"NTC_{i + 1}" for i in range(self.n_control_constructs)]


#: The screen of the ``arrayed_plates`` scenario: the default screen with controls scattered over the
#: whole plate (4 constructs at 16 positions each, 64 control wells per plate, as JUMP's plates hold
#: 64), a position effect the size of one programme of a guide's effect (``effect_size`` SDs at the
#: edge, and the same span from the first row to the last), and 4 allele genes of 3 alleles, 2 of
#: which differ from their wild type. The sizes are the effect's own unit, stated before any readout
#: was run on it: a position alone then shifts a well by half of what an effect gene does.
POSITION_DESIGN = ArrayedDesign(
    control_wells_per_construct=16,
    control_layout="scattered",
    edge_effect=ArrayedDesign.effect_size,
    row_gradient=ArrayedDesign.effect_size,
    n_allele_genes=4,
)


def well_names(n: int, scattered_seed: int | None = None) -> list[str]:
    """The first ``n`` wells of a 384-well grid, read row by row from the centre outwards: the
    central wells first (where fixed control positions sit), then the rest. With
    ``scattered_seed``, ``n`` wells of the whole grid in a seeded order instead."""
    grid = [(r, c) for r in range(len(PLATE_ROWS)) for c in range(PLATE_COLUMNS)]
    if scattered_seed is not None:
        grid = [grid[i] for i in rng_for(scattered_seed, "arrayed", "scattered").permutation(len(grid))]
    else:
        centre = ((len(PLATE_ROWS) - 1) / 2, (PLATE_COLUMNS - 1) / 2)
        grid.sort(key=lambda rc: (abs(rc[0] - centre[0]) + abs(rc[1] - centre[1]), rc))
    return [f"{PLATE_ROWS[r]}{c + 1:02d}" for r, c in grid[:n]]


def well_position(well: str) -> tuple[int, int]:
    """(row, column), from 0, of a well named like ``A01``."""
    return PLATE_ROWS.index(well[0]), int(well[1:]) - 1


def position_shifts(design: ArrayedDesign, wells: list[str], seed: int) -> np.ndarray:
    """Each well's shift of the programmes by its position (module doc): ``edge_effect`` on one
    programme in edge wells, ``row_gradient`` along the rows on another; zeros when both are 0."""
    out = np.zeros((len(wells), design.n_latent))
    if not (design.edge_effect or design.row_gradient):
        return out
    edge_programme, row_programme = rng_for(seed, "arrayed", "position").choice(design.n_latent, 2, replace=False)
    last_row, last_column = len(PLATE_ROWS) - 1, PLATE_COLUMNS - 1
    for i, well in enumerate(wells):
        r, c = well_position(well)
        out[i, edge_programme] += design.edge_effect * (r in (0, last_row) or c in (0, last_column))
        out[i, row_programme] += design.row_gradient * (r / last_row - 0.5)
    return out


def screen_truth(design: ArrayedDesign, seed: int) -> pd.DataFrame:
    """One row per guide and per control construct: gene, guide, PertType, ``has_effect``, the
    shifted programmes (``programmes``, e.g. ``3+,7-``) and their signed shifts (internal)."""
    rng = rng_for(seed, "arrayed", "truth")
    rows = []
    for g in range(design.n_genes):
        effect = g < design.n_effect_genes
        programmes = rng.choice(design.n_latent, size=design.programmes_per_effect, replace=False) if effect else []
        signs = rng.choice([-1.0, 1.0], size=len(programmes))
        for k in range(design.guides_per_gene):
            rows.append(
                {
                    GENE: f"GENE{g + 1:02d}",
                    GUIDE: f"GENE{g + 1:02d}_{k + 1}",
                    PERT_TYPE: PERTURBATION,
                    "has_effect": bool(effect),
                    "programmes": ",".join(f"{int(p)}{'+' if s > 0 else '-'}" for p, s in zip(programmes, signs)),
                }
            )
    rows += allele_truth(design, seed)
    for i, guide in enumerate(design.control_guides()):
        differs = i == design.n_control_constructs - 1 and design.control_effect > 0
        rows.append(
            {
                GENE: CONTROL_GENE,
                GUIDE: guide,
                PERT_TYPE: CONTROL,
                "has_effect": bool(differs),
                "programmes": "0+" if differs else "",
            }
        )
    truth = pd.DataFrame(rows)
    if design.n_allele_genes:
        truth[REFERENCE_TRUTH] = truth[REFERENCE_TRUTH].fillna("")
        truth["differs_from_reference"] = truth["differs_from_reference"].eq(True)
    return truth


#: The truth's columns of the allele pairs: an allele's wild type, and whether it differs from it.
REFERENCE_TRUTH = "reference"


def allele_truth(design: ArrayedDesign, seed: int) -> list[dict[str, Any]]:
    """The truth rows of the allele genes (module doc): per gene ``ORF{g}``, its wild type ``ORF{g}``
    and alleles ``ORF{g}_Var{k}``; programmes drawn from their own stream, so the other genes'
    draws do not change."""
    rng = rng_for(seed, "arrayed", "alleles")
    rows: list[dict[str, Any]] = []
    for g in range(design.n_allele_genes):
        gene = f"ORF{g + 1:02d}"
        wild = rng.choice(design.n_latent, size=design.programmes_per_effect, replace=False)
        spec = ",".join(f"{int(p)}{'+' if s > 0 else '-'}" for p, s in zip(wild, rng.choice([-1.0, 1.0], len(wild))))
        rows.append({GENE: gene, GUIDE: gene, PERT_TYPE: PERTURBATION, "has_effect": True, "programmes": spec,
                     REFERENCE_TRUTH: "", "differs_from_reference": False})  # fmt: skip
        for k in range(design.alleles_per_gene):
            own = rng.choice(design.n_latent, size=design.programmes_per_effect, replace=False)
            signs = rng.choice([-1.0, 1.0], size=len(own))
            differs = k < design.alleles_with_effect
            extra = ",".join(f"{int(p)}{'+' if s > 0 else '-'}" for p, s in zip(own, signs)) if differs else ""
            rows.append({GENE: gene, GUIDE: f"{gene}_Var{k + 1}", PERT_TYPE: PERTURBATION, "has_effect": True,
                         "programmes": ",".join(filter(None, (spec, extra))), REFERENCE_TRUTH: gene,
                         "differs_from_reference": differs})  # fmt: skip
    return rows


def plate_layout(design: ArrayedDesign, truth: pd.DataFrame, seed: int, plate_map: int = 0) -> pd.DataFrame:
    """Well -> (gene, guide, PertType) of the plates of one plate map: control wells at the central
    positions (construct by construct), the map's guides at the remaining wells in a seeded order,
    the same on every replicate plate. The guides in that seeded order are cut into
    ``plate_maps`` consecutive shares, one per map."""
    controls = truth[truth[PERT_TYPE] == CONTROL]
    guides = truth[truth[PERT_TYPE] == PERTURBATION]
    order = rng_for(seed, "arrayed", "layout").permutation(len(guides))
    order = order[plate_map * design.guides_per_map : (plate_map + 1) * design.guides_per_map]
    content = [row for _, row in controls.iterrows() for _ in range(design.control_wells_per_construct)]
    content += [guides.iloc[i] for i in order]
    wells = well_names(len(content), seed if design.control_layout == "scattered" else None)
    layout = pd.DataFrame(
        {
            WELL: wells,
            GENE: [r[GENE] for r in content],
            GUIDE: [r[GUIDE] for r in content],
            PERT_TYPE: [r[PERT_TYPE] for r in content],
        }  # fmt: skip
    )
    if design.n_allele_genes:
        layout[REFERENCE] = [r[REFERENCE_TRUTH] for r in content]
    return layout


def _shifts(design: ArrayedDesign, truth: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each guide's and control construct's shift of the programmes (zeros without effect)."""
    out = {}
    for guide, kind, spec in zip(truth[GUIDE], truth[PERT_TYPE], truth["programmes"]):
        shift = np.zeros(design.n_latent)
        size = design.control_effect if kind == CONTROL else design.effect_size
        for part in filter(None, str(spec).split(",")):
            shift[int(part[:-1])] += size if part[-1] == "+" else -size
        out[guide] = shift
    return out


def normalize_to_controls(x: np.ndarray, is_control: np.ndarray) -> np.ndarray:
    """One plate's profiles as pycytominer's ``normalize(method="mad_robustize")`` against the
    control wells leaves them: minus the controls' median, over 1.4826 x their median absolute
    deviation, per feature."""
    ctrl = x[is_control]
    median = np.median(ctrl, axis=0)
    mad = 1.4826 * np.median(np.abs(ctrl - median), axis=0)
    return (x - median) / np.where(mad > 0, mad, 1.0)


def batch_profiles(
    design: ArrayedDesign, truth: pd.DataFrame, layout: pd.DataFrame, seed: int, batch: int, plate_map: int = 0
) -> pd.DataFrame:
    """One batch's per-well profiles of the plates of one plate map (``layout``, that map's):
    metadata columns and the named features (float32)."""
    loadings = rng_for(seed, "arrayed", "loadings").normal(size=(design.n_latent, design.n_features))
    loadings /= np.sqrt(design.n_latent)
    shifts = _shifts(design, truth)
    positions = position_shifts(design, layout[WELL].tolist(), seed)
    batch_offset = rng_for(seed, "arrayed", "batch", batch).normal(scale=design.batch_sd, size=design.n_features)
    parts = []
    for p in range(design.plates_per_batch):
        plate = (batch * design.plate_maps + plate_map) * design.plates_per_batch + p
        rng = rng_for(seed, "arrayed", "plate", plate)
        plate_offset = rng.normal(scale=design.plate_sd, size=design.n_features)
        z = rng.normal(size=(len(layout), design.n_latent)) + np.stack([shifts[g] for g in layout[GUIDE]])
        if positions.any():
            z += positions
        x = z @ loadings + rng.normal(scale=design.noise_sd, size=(len(layout), design.n_features))
        x += batch_offset + plate_offset
        if design.control_normalized:
            x = normalize_to_controls(x, (layout[PERT_TYPE] == CONTROL).to_numpy())
        meta = layout.assign(**{BATCH: f"batch{batch + 1}", PLATE: f"plate{plate + 1:02d}"})
        parts.append(pd.concat([meta, pd.DataFrame(x.astype(np.float32), columns=design.feature_names())], axis=1))
    table = pd.concat(parts, ignore_index=True)
    extra = [REFERENCE] if REFERENCE in layout.columns else []
    return table[[BATCH, PLATE, WELL, GENE, GUIDE, PERT_TYPE, *extra, *design.feature_names()]]


def _batch_tables(design: ArrayedDesign, truth: pd.DataFrame, seed: int) -> list[pd.DataFrame]:
    """Each batch's per-well profiles, every plate map's plates in map order."""
    layouts = [plate_layout(design, truth, seed, m) for m in range(design.plate_maps)]
    tables = []
    for b in range(design.n_batches):
        parts = [batch_profiles(design, truth, layout, seed, b, m) for m, layout in enumerate(layouts)]
        tables.append(parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True))
    return tables


def screen_profiles(design: ArrayedDesign, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The screen in memory: its per-well profiles (every batch, as :func:`write_arrayed_screen`
    writes them, one index) and its truth."""
    truth = screen_truth(design, seed)
    return pd.concat(_batch_tables(design, truth, seed), ignore_index=True), truth


def write_arrayed_screen(out_dir: Path | str, seed: int = 0, design: ArrayedDesign | None = None) -> dict[str, Any]:
    """Write the arrayed screen under ``out_dir``: ``profiles/{batch}.parquet`` (per-well
    profiles, the ``embeddings`` source's contract with named features) and ``truth.parquet``.
    Returns the paths by name."""
    design = design or ArrayedDesign()
    out = Path(out_dir)
    truth = screen_truth(design, seed)
    (out / "profiles").mkdir(parents=True, exist_ok=True)
    files = []
    for b, table in enumerate(_batch_tables(design, truth, seed)):
        path = out / "profiles" / f"batch{b + 1}.parquet"
        with atomic_path(path) as tmp:
            table.to_parquet(tmp, index=False)
        files.append(path)
    truth_path = out / "truth.parquet"
    with atomic_path(truth_path) as tmp:
        truth.to_parquet(tmp, index=False)
    return {"profiles": out / "profiles", "truth": truth_path, "files": files, "design": design}


def main(argv: list[str] | None = None) -> None:
    """``python -m phenoica.screen.arrayed``: write the simulated arrayed per-well screen."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="scenario_data/arrayed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batches", type=int, default=ArrayedDesign.n_batches)
    args = parser.parse_args(argv)
    paths = write_arrayed_screen(args.out, args.seed, ArrayedDesign(n_batches=args.batches))
    print(f"arrayed screen written: {paths['profiles']} ({len(paths['files'])} batch files), {paths['truth']}")


if __name__ == "__main__":
    main()
