"""What the hit gallery reads: streamed tile reads of the chosen images against reading the plates whole.

A synthetic screen (default 2 plates x 1,536 images, 6 channels of 128 px uint16, chunks of 64
images) with per-image embeddings; the gallery of ``--genes`` hit genes (4 guides each). Prints
the bytes and chunks the gallery read, its time (site choice, tile reads and drawing), and the
same for the baseline measured in the same run: reading every plate whole (``tiles[:]``).

    python benchmarks/gallery_cost.py [--plates 2] [--images 1536] [--genes 20]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from phenoica.contract import open_plate, validate_config, write_plate
from phenoica.report import ReportOptions, channel_styles, select_sites, write_gallery

CHANNELS = ["DNA", "ER", "RNA", "AGP", "Mito", "Brightfield"]


def plate_table(plate: str, n: int, n_genes: int, rng: np.random.Generator) -> pd.DataFrame:
    """A quarter controls, the rest spread over the genes' 4 guides (wells of 4 sites)."""
    site = np.arange(n) % 4 + 1
    well = np.arange(n) // 4
    control = well % 4 == 0
    guide_no = (well // 4 * 3 + well % 4 - 1) % (4 * max(n_genes * 3, 1))
    gene = np.where(control, "non-targeting", [f"GENE{g // 4:05d}" for g in guide_no])
    guide = np.where(control, [f"NTC_{w % 8}" for w in well], [f"GENE{g // 4:05d}_g{g % 4}" for g in guide_no])
    df = pd.DataFrame(
        {
            "Metadata_Plate": plate,
            "Metadata_Well": [f"W{w:04d}" for w in well],
            "Metadata_Site": site,
            "Metadata_Gene": gene,
            "Metadata_Guide": guide,
            "Metadata_PertType": np.where(control, "control", "perturbation"),
            "Metadata_ImageIndex": np.arange(n),
        }
    )
    emb = rng.normal(size=(n, 64)).astype(np.float32)
    return pd.concat([df, pd.DataFrame(emb, columns=[f"emb_{i:04d}" for i in range(64)])], axis=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plates", type=int, default=2)
    ap.add_argument("--images", type=int, default=1536)
    ap.add_argument("--genes", type=int, default=20)
    ap.add_argument("--size", type=int, default=128)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files, stores = [], {}
        for p in range(args.plates):
            plate = f"P{p + 1}"
            table = plate_table(plate, args.images, args.genes, rng)
            blocks = (
                rng.integers(
                    0, 4000, size=(min(64, args.images - s), len(CHANNELS), args.size, args.size), dtype=np.uint16
                )
                for s in range(0, args.images, 64)
            )
            shape = (args.images, len(CHANNELS), args.size, args.size)
            write_plate(root / f"{plate}.zarr", blocks, CHANNELS, shape=shape, dtype="uint16", chunk_images=64)
            files.append(root / f"{plate}.parquet")
            table.to_parquet(files[-1], index=False)
            stores[plate] = str(root / f"{plate}.zarr")
        genes = sorted({g for g in pd.read_parquet(files[0])["Metadata_Gene"] if g != "non-targeting"})[: args.genes]
        t0 = time.perf_counter()
        whole = sum(np.asarray(open_plate(s)[:]).nbytes for s in stores.values())
        t_whole = time.perf_counter() - t0
        t0 = time.perf_counter()
        options = ReportOptions.from_config(validate_config({})).gallery  # the schema's gallery settings
        select_sites(files, genes, options)
        t_sites = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = write_gallery(root / "gallery", genes, files, stores, channel_styles(CHANNELS), options)
        t_gallery = time.perf_counter() - t0
        st = result.stats
        n_chunks = args.plates * -(-args.images // 64)
        print(f"screen: {args.plates} plates x {args.images} images, 6 x {args.size} px uint16; {len(genes)} hit genes")
        print(f"baseline (read every plate whole): {whole / 1e6:.1f} MB, {n_chunks} chunks, {t_whole:.2f} s")
        print(
            f"gallery: {st.images} images, {st.bytes / 1e6:.2f} MB in {st.chunks} chunk reads, {t_gallery:.2f} s "
            f"(site choice + reads + drawing {len(result.panels)} panels)"
        )
        print(
            f"ratio bytes gallery/whole: {st.bytes / whole:.4f}; chunk reads gallery/whole: {st.chunks / n_chunks:.3f}"
        )
        print(f"of which site choice (two passes over the embedding files): {t_sites:.2f} s")
        print(f"ratio time gallery/whole-plate read: {t_gallery / t_whole:.2f}")


if __name__ == "__main__":
    main()
