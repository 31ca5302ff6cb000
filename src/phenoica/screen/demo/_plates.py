"""One demo plate (tiles, metadata, rendered factors) and the whole demo screen in the data contract."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from phenoica.contract import GUIDE, IMAGE_INDEX, PLATE, validate_metadata, write_plate
from phenoica.screen._options import DemoOptions
from phenoica.screen.demo._cells import render_block, render_cells
from phenoica.screen.demo._design import check_demo, draw_factors, factor_name, guide_shifts
from phenoica.screen.demo._layout import plate_layout
from phenoica.screen.demo._nuisance import NUISANCE_PREFIX, apply_nuisance, nuisance_table
from phenoica.utils import rng_from_sequence, write_parquet


def simulate_plate(demo: DemoOptions, plate: str) -> tuple[np.ndarray, pd.DataFrame, pd.DataFrame]:
    """Simulate one plate: tiles (n, C, H, W) in demo.dtype, contract metadata, factors table.

    The factors table has ``Metadata_Plate``, ``Metadata_ImageIndex``, the rendered factor
    values ``factor_00 ...`` (after gene shifts, before nuisance) and ``nuisance_*`` columns.
    """
    check_demo(demo)
    metadata = plate_layout(demo, plate)
    n, n_factors = len(metadata), int(demo.n_factors)
    shifts = guide_shifts(demo)
    factors = draw_factors(n, n_factors, rng_from_sequence(demo.seed, "factors", plate))
    factors += shifts.loc[metadata[GUIDE]].to_numpy()
    nuisance = nuisance_table(demo, plate, n)

    channels, size, dtype = list(demo.channels), int(demo.image_size), np.dtype(demo.dtype)
    tiles = np.empty((n, len(channels), size, size), dtype=dtype)
    render_rng, noise_rng = rng_from_sequence(demo.seed, "render", plate), rng_from_sequence(demo.seed, "noise", plate)
    block = render_block(size, float(demo.cells_per_image))
    for start in range(0, n, block):
        stop = min(n, start + block)
        clean = render_cells(
            factors[start:stop],
            channels,
            size,
            float(demo.cells_per_image),
            render_rng,
            zoom=nuisance[f"{NUISANCE_PREFIX}zoom"].to_numpy()[start:stop],
        )
        tiles[start:stop] = apply_nuisance(
            clean, nuisance.iloc[start:stop], channels, float(demo.noise), dtype, noise_rng
        )

    table = pd.DataFrame(factors, columns=[factor_name(j) for j in range(n_factors)])
    table.insert(0, IMAGE_INDEX, metadata[IMAGE_INDEX].to_numpy())
    table.insert(0, PLATE, plate)
    table = pd.concat([table, nuisance], axis=1)
    return tiles, metadata, table


def write_demo_plate(demo: DemoOptions, plate: str, store: Path, metadata_path: Path, factors_path: Path) -> None:
    """Simulate one plate and write its Zarr store, metadata and factors (each atomically)."""
    tiles, metadata, factors = simulate_plate(demo, plate)
    metadata = validate_metadata(metadata, source=f"simulated metadata of plate {plate}")
    write_plate(store, tiles, list(demo.channels), chunk_images=int(demo.chunk_images))
    write_parquet(metadata, metadata_path)
    write_parquet(factors, factors_path)


def simulate_screen(demo: DemoOptions, out_dir: Path) -> pd.DataFrame:
    """Write every demo plate under ``out_dir`` (plates/, metadata/, factors/ and metadata.parquet
    for all plates) and return the screen's metadata."""
    out_dir = Path(out_dir)
    tables = []
    for _, plate in demo.plates():
        write_demo_plate(
            demo,
            plate,
            out_dir / "plates" / f"{plate}.zarr",
            out_dir / "metadata" / f"{plate}.parquet",
            out_dir / "factors" / f"{plate}.parquet",
        )
        tables.append(pd.read_parquet(out_dir / "metadata" / f"{plate}.parquet"))
    metadata = validate_metadata(pd.concat(tables, ignore_index=True), source=str(out_dir / "metadata.parquet"))
    write_parquet(metadata, out_dir / "metadata.parquet")
    return metadata
