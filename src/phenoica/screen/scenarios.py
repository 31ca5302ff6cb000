"""Inputs of the checked-in scenario configs (``config/scenarios/*.yaml``): one small screen in
each form the workflow starts from, so every scenario runs by hand and in the tests.

``python -m phenoica.screen.scenarios [--config config/scenarios/demo.yaml] [--out scenario_data]``
writes, from the demo scenario's ``demo`` section and ``seed``:

- ``screen/``: the demo screen in the data contract, ``plates/{plate}.zarr`` + one
  ``metadata.parquet`` (source ``zarr``; :func:`phenoica.screen.demo.simulate_screen`);
- ``images/{plate}/{well}_s{site}_w{channel}.png`` (one 8/16-bit PNG per channel, channels
  numbered from 1, RxRx style) + ``images/plate_map.csv`` (source ``images``);
- ``ome_zarr/{plate}.zarr``: the same tiles as OME-Zarr HCS plates (NGFF 0.5 on Zarr v3: plate,
  wells, one field per site, axes ``c, y, x``, omero channel labels) + ``ome_zarr/plate_map.csv``
  (source ``ome_zarr``);
- ``embeddings/{batch}.parquet``: embeddings computed elsewhere, one list-valued column
  ``vector`` per image, 3 batches of controls and two genes, one with a strong effect on one
  feature and one without (source ``embeddings``);
- ``positive_control/`` and ``cell_state/``: the known-truth embedding screens of
  :mod:`phenoica.screen.known_truth` (``embeddings/{batch}.parquet``, ``truth.parquet``,
  ``sources.parquet``; source ``embeddings``), drawn from ``seed``;
- ``arrayed/``: the arrayed per-well profile screen of :mod:`phenoica.screen.arrayed`
  (``profiles/{batch}.parquet`` with CellProfiler-style feature columns, ``truth.parquet``; source
  ``embeddings`` with ``feature_regex``), drawn from ``seed``;
- ``arrayed_plates/``: the same screen with a position effect, controls scattered over the plate
  and allele pairs with their wild type (:data:`phenoica.screen.POSITION_DESIGN`; the
  profiles name each allele's reference in ``Metadata_Reference``).

The ``varchamp`` scenario needs nothing written: its screen is a real public export that ships in
the repository (``data/varchamp-batch12/``, with its licence), read with a config alone.

Paths in the scenario configs are relative to the working directory, so run the workflow from
the folder that holds ``scenario_data/`` (the repository root by default). The ``frozen``
scenario reads the transforms a ``demo`` scenario run fitted (``results/transforms``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import zarr
from PIL import Image

from phenoica.contract import IMAGE_INDEX, PLATE, SITE, WELL, open_plate, read_yaml, validate_config
from phenoica.screen import arrayed
from phenoica.screen._options import DemoOptions
from phenoica.screen.demo import simulate_screen
from phenoica.screen.known_truth import write_known_truth_screen
from phenoica.utils import rng_for, write_csv

#: The checked-in scenarios, each ``config/scenarios/{name}.yaml``.
SCENARIOS: tuple[str, ...] = (
    "demo",
    "zarr",
    "images",
    "ome_zarr",
    "embeddings",
    "frozen",
    "positive_control",
    "cell_state",
    "arrayed",
    "arrayed_plates",
    "varchamp",
    "varchamp_microscopes",
)
#: The scenarios whose screen is a known-truth embedding screen of :mod:`phenoica.screen.known_truth`.
KNOWN_TRUTH_SCREENS: tuple[str, ...] = ("positive_control", "cell_state")
#: Where the scenario configs expect their inputs (relative to the working directory).
DATA_DIR = "scenario_data"


def write_plate_map(metadata: pd.DataFrame, path: Path) -> Path:
    """The per-well plate map of a screen's metadata (site and image index dropped), as CSV."""
    wells = metadata.drop(columns=[SITE, IMAGE_INDEX]).drop_duplicates([PLATE, WELL])
    return write_csv(wells, path)


def write_image_files(metadata: pd.DataFrame, plates_dir: Path, out_dir: Path) -> Path:
    """Every site's tiles as one PNG per channel, ``{plate}/{well}_s{site}_w{c}.png`` (c from 1),
    and ``plate_map.csv`` beside them; returns the plate map's path."""
    for plate, rows in metadata.groupby(PLATE):
        tiles = open_plate(plates_dir / f"{plate}.zarr")[:]
        (out_dir / str(plate)).mkdir(parents=True, exist_ok=True)
        for well, site, index in zip(rows[WELL], rows[SITE], rows[IMAGE_INDEX]):
            for c in range(tiles.shape[1]):
                Image.fromarray(np.ascontiguousarray(tiles[index, c])).save(
                    out_dir / str(plate) / f"{well}_s{site}_w{c + 1}.png"
                )
    return write_plate_map(metadata, out_dir / "plate_map.csv")


def _split_well(well: str) -> tuple[str, str]:
    letters = "".join(ch for ch in well if ch.isalpha())
    return letters, str(int(well[len(letters) :]))


def write_ome_zarr(metadata: pd.DataFrame, plates_dir: Path, out_dir: Path) -> Path:
    """Each plate's tiles as an OME-Zarr HCS plate ``{plate}.zarr`` (NGFF 0.5, Zarr v3; one field
    per site in site order; axes c, y, x; omero labels = the store's channel names) and
    ``plate_map.csv`` beside them; returns the plate map's path."""
    for plate, rows in metadata.groupby(PLATE):
        store = zarr.open_group(str(plates_dir / f"{plate}.zarr"), mode="r")
        tiles, channels = store["tiles"][:], [str(c) for c in store.attrs["channels"]]
        wells = sorted({_split_well(w) for w in rows[WELL]}, key=lambda rc: (rc[0], int(rc[1])))
        row_names = sorted({r for r, _ in wells})
        col_names = sorted({c for _, c in wells}, key=int)
        root = zarr.open_group(str(out_dir / f"{plate}.zarr"), mode="w", zarr_format=3)
        root.attrs["ome"] = {
            "version": "0.5",
            "plate": {
                "rows": [{"name": r} for r in row_names],
                "columns": [{"name": c} for c in col_names],
                "wells": [
                    {"path": f"{r}/{c}", "rowIndex": row_names.index(r), "columnIndex": col_names.index(c)}
                    for r, c in wells
                ],
            },
        }
        for (r, c), well_rows in rows.groupby(rows[WELL].map(_split_well), sort=False):
            well_rows = well_rows.sort_values(SITE)
            group = root.require_group(r).require_group(c)
            group.attrs["ome"] = {
                "version": "0.5",
                "well": {"images": [{"path": str(i)} for i in range(len(well_rows))]},
            }
            for i, index in enumerate(well_rows[IMAGE_INDEX]):
                field = group.require_group(str(i))
                field.attrs["ome"] = {
                    "version": "0.5",
                    "omero": {"channels": [{"label": n} for n in channels]},
                    "multiscales": [
                        {
                            "axes": [
                                {"name": "c", "type": "channel"},
                                {"name": "y", "type": "space"},
                                {"name": "x", "type": "space"},
                            ],
                            "datasets": [
                                {
                                    "path": "0",
                                    "coordinateTransformations": [{"type": "scale", "scale": [1.0, 1.0, 1.0]}],
                                }
                            ],
                        }
                    ],
                }
                image = tiles[index]
                field.create_array("0", shape=image.shape, dtype=image.dtype, chunks=image.shape)[:] = image
    return write_plate_map(metadata, out_dir / "plate_map.csv")


def write_embeddings(out_dir: Path, seed: int = 0, n_features: int = 12) -> list[Path]:
    """Embeddings computed elsewhere: ``{batch}.parquet`` with one list-valued column ``vector``.

    Three batches, each 60 control images and 10 images of each of two genes' guides; gene
    ``G1`` shifts feature 0 by 6 (a strong effect), ``G2`` shifts nothing; every batch adds its
    own offset to all features (a batch effect)."""
    rng = rng_for(seed, "scenario", "embeddings")
    kinds = (
        [("NTC", "non-targeting", "control")] * 60
        + [("G1_a", "G1", "perturbation")] * 10
        + [("G2_a", "G2", "perturbation")] * 10
    )
    offset = rng.normal(size=n_features)
    written = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for b in range(3):
        df = pd.DataFrame(
            [
                {
                    "Metadata_Batch": f"B{b}",
                    "Metadata_Plate": f"P{b}",
                    "Metadata_Gene": gene,
                    "Metadata_Guide": guide,
                    "Metadata_PertType": kind,
                }
                for guide, gene, kind in kinds
            ]
        )
        df["Metadata_Well"] = [f"W{b}{i:03d}" for i in range(len(df))]
        x = rng.laplace(size=(len(df), n_features)) + b * offset
        x[(df["Metadata_Gene"] == "G1").to_numpy(), 0] += 6.0
        df["vector"] = list(x.astype("float32"))
        path = out_dir / f"B{b}.parquet"
        df.to_parquet(path)
        written.append(path)
    return written


def prepare(demo: DemoOptions, out_dir: Path | str = DATA_DIR) -> dict[str, Path]:
    """Write every scenario's inputs under ``out_dir`` (see the module doc), the demo screen and
    the other screens from ``demo`` (and its seed); returns them by name."""
    seed = demo.seed
    out = Path(out_dir)
    metadata = simulate_screen(demo, out / "screen")
    plates = out / "screen" / "plates"
    return {
        "screen": out / "screen" / "metadata.parquet",
        "images": write_image_files(metadata, plates, out / "images"),
        "ome_zarr": write_ome_zarr(metadata, plates, out / "ome_zarr"),
        "embeddings": write_embeddings(out / "embeddings", seed)[0].parent,
        **{name: write_known_truth_screen(out / name, seed, name)["embeddings"] for name in KNOWN_TRUTH_SCREENS},
        "arrayed": arrayed.write_arrayed_screen(out / "arrayed", seed)["profiles"],
        "arrayed_plates": arrayed.write_arrayed_screen(out / "arrayed_plates", seed, arrayed.POSITION_DESIGN)[
            "profiles"
        ],
    }


def prepare_from_config(config_path: Path | str, out_dir: Path | str = DATA_DIR) -> dict[str, Path]:
    """:func:`prepare` with the ``demo`` section and ``seed`` of a config file (validated)."""
    return prepare(DemoOptions.from_config(validate_config(read_yaml(config_path) or {})), out_dir)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the inputs of the scenario configs (config/scenarios/).")
    parser.add_argument(
        "--config",
        default="config/scenarios/demo.yaml",
        help="config whose demo section and seed make the screen (default: %(default)s)",
    )
    parser.add_argument("--out", default=DATA_DIR, help="folder to write (default: %(default)s)")
    args = parser.parse_args(argv)
    for name, path in prepare_from_config(args.config, args.out).items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
