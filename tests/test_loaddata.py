"""CellProfiler LoadData CSVs as an image source (phenoica.screen._loaddata), on a fixture written here in the
layout of pycytominer's and JUMP's load_data CSVs: FileName_/PathName_ per channel (Orig*), optional
Illum* functions, Metadata_Plate/Well/Site."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import tifffile

from phenoica.contract import ScreenError, open_plate, plate_channels, validate_config
from phenoica.report._gallery import ReadStats, read_gene_tiles
from phenoica.screen import LoadDataIngestOptions, validate_plate_map
from phenoica.screen import _loaddata as L

CHANNELS = {"DNA": "OrigDNA", "ER": "OrigER", "Mito": "OrigMito"}
WELLS = ["A01", "A02", "B01"]


def loaddata_options(csv, channels=None, **screen) -> LoadDataIngestOptions:
    """The ``ingest_loaddata`` options of a config reading ``csv`` (a path or a glob) with these
    ``loaddata_channels`` and other ``screen`` keys (the rest: the schema's defaults)."""
    config = {"screen": {"loaddata": str(csv), "loaddata_channels": channels, **screen}}
    return LoadDataIngestOptions.from_config(validate_config(config))


def write_fixture(root, plate="BR00117010", relative=True, shape=(12, 10), batch="2021_04_26_Batch1"):
    """Per site and channel a 12x10 uint16 TIFF whose pixels are 1000 * channel + 10 * well + site;
    an illumination function of 2.0 everywhere for DNA, 1.0 for the others."""
    images = root / "images" / plate
    images.mkdir(parents=True)
    root.joinpath("illum").mkdir(exist_ok=True)
    rows = []
    for w, well in enumerate(WELLS):
        for site in (1, 2):
            row = {"Metadata_Plate": plate, "Metadata_Well": well, "Metadata_Site": site}
            for c, ld in enumerate(CHANNELS.values()):
                name = f"r0{w + 1}c01f0{site}p01-ch{c + 1}sk1fk1fl1.tiff"
                tifffile.imwrite(images / name, np.full(shape, 1000 * (c + 1) + 10 * w + site, dtype=np.uint16))
                row[f"FileName_{ld}"] = name
                row[f"PathName_{ld}"] = f"images/{plate}" if relative else str(images)
                illum = ld.removeprefix("Orig")
                np.save(root / "illum" / f"{plate}_Illum{illum}.npy", np.full(shape, 2.0 if illum == "DNA" else 1.0))
                row[f"FileName_Illum{illum}"] = f"{plate}_Illum{illum}.npy"
                row[f"PathName_Illum{illum}"] = str(root / "illum")
            rows.append(row)
    csv = root / f"load_data_with_illum_{plate}.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    plate_map = pd.DataFrame(
        {
            "Metadata_Batch": batch,
            "Metadata_Plate": plate,
            "Metadata_Well": WELLS,
            "Metadata_Gene": ["non-targeting", "TP53", "TP53"],
            "Metadata_Guide": ["NTC", "TP53_1", "TP53_2"],
            "Metadata_PertType": ["control", "perturbation", "perturbation"],
        }
    )
    return csv, validate_plate_map(plate_map)


def test_loaddata_plate_becomes_a_plate_store(tmp_path):
    csv, plate_map = write_fixture(tmp_path)
    table = L.read_loaddata(csv)
    assert L.loaddata_channels(list(table.columns)) == list(CHANNELS.values())  # Illum* are not channels
    meta = L.ingest_loaddata_plate(
        table, plate_map, "BR00117010", tmp_path / "p.zarr", tmp_path / "p.parquet", loaddata_options(csv, CHANNELS)
    )
    tiles = np.asarray(open_plate(tmp_path / "p.zarr")[:])
    assert tiles.shape == (6, 3, 12, 10) and plate_channels(tmp_path / "p.zarr") == list(CHANNELS)
    assert list(zip(meta["Metadata_Well"], meta["Metadata_Site"])) == [(w, s) for w in WELLS for s in (1, 2)]
    for i, r in meta.iterrows():
        w = WELLS.index(r["Metadata_Well"])
        assert tiles[i, :, 0, 0].tolist() == [1000 * (c + 1) + 10 * w + r["Metadata_Site"] for c in range(3)]
    assert list(meta["Metadata_Gene"]) == ["non-targeting"] * 2 + ["TP53"] * 4
    # the gallery reads such a store like any other
    read, missing = read_gene_tiles(meta.iloc[[5]], {"BR00117010": str(tmp_path / "p.zarr")}, ReadStats())
    assert not missing and read[0][0, 0, 0] == 1000 + 10 * 2 + 2


def test_illumination_functions_are_applied_when_asked(tmp_path):
    csv, plate_map = write_fixture(tmp_path, relative=False)
    table = L.read_loaddata(csv)
    L.ingest_loaddata_plate(
        table,
        plate_map,
        "BR00117010",
        tmp_path / "p.zarr",
        tmp_path / "p.parquet",
        loaddata_options(csv, CHANNELS, loaddata_illum=True),
    )
    tiles = np.asarray(open_plate(tmp_path / "p.zarr")[:])
    assert tiles[0, 0, 0, 0] == round((1000 + 1) / 2) and tiles[0, 1, 0, 0] == 2001  # DNA halved, ER unchanged


def test_a_missing_file_names_the_csv_row(tmp_path):
    csv, plate_map = write_fixture(tmp_path)
    table = pd.read_csv(csv)
    table.loc[3, "FileName_OrigER"] = "gone.tiff"
    table.to_csv(csv, index=False)
    with pytest.raises(
        ScreenError,
        match=r"load_data_with_illum_BR00117010.csv row 3 \(plate BR00117010, well A02, site 2\).*gone.tiff.*'OrigER'",
    ):
        L.ingest_loaddata_plate(
            L.read_loaddata(csv),
            plate_map,
            "BR00117010",
            tmp_path / "p.zarr",
            tmp_path / "m.parquet",
            loaddata_options(csv, CHANNELS),
        )
    assert not (tmp_path / "p.zarr").exists()


def test_a_channel_without_columns_is_named(tmp_path):
    csv, _ = write_fixture(tmp_path)
    table = L.read_loaddata(csv)
    with pytest.raises(
        ScreenError,
        match=r"channel 'OrigRNA' \(screen channel 'RNA'\) has no column\(s\) \['FileName_OrigRNA', 'PathName_OrigRNA'\]",
    ):
        L.channel_map(table, {"DNA": "OrigDNA", "RNA": "OrigRNA"})


def test_a_site_listed_twice_names_both_rows(tmp_path):
    csv, _ = write_fixture(tmp_path)
    table = pd.read_csv(csv)
    pd.concat([table, table.iloc[[2]]]).to_csv(csv, index=False)
    with pytest.raises(ScreenError, match=r"row 2 and .* row 6: site BR00117010 A02 s1 is listed twice"):
        L.read_loaddata(csv)


def test_channels_are_matched_by_name_whatever_each_csvs_column_order(tmp_path):
    """One plate's CSV listing its channels in another column order (no
    loaddata_channels) gives that plate the same channels, in the same store order, as the
    others: natural order of the names, each channel's files taken by name."""
    maps = [write_fixture(tmp_path, plate=plate)[1] for plate in ("PA", "PB")]
    csv = tmp_path / "load_data_with_illum_PA.csv"
    table = pd.read_csv(csv)
    table[table.columns[::-1]].to_csv(csv, index=False)  # Mito, ER, DNA: column order reversed
    glob = str(tmp_path / "load_data_with_illum_*.csv")
    for plate in ("PA", "PB"):
        assert L.plate_geometry(glob, None, plate) == (["OrigDNA", "OrigER", "OrigMito"], (12, 10))
    both = L.read_loaddata(glob)
    plate_map = validate_plate_map(pd.concat(maps).reset_index(drop=True))
    stores = {}
    for plate in ("PA", "PB"):
        L.ingest_loaddata_plate(
            both, plate_map, plate, tmp_path / f"{plate}.zarr", tmp_path / f"{plate}.parquet", loaddata_options(glob)
        )
        stores[plate] = np.asarray(open_plate(tmp_path / f"{plate}.zarr")[:])
        assert plate_channels(tmp_path / f"{plate}.zarr") == ["OrigDNA", "OrigER", "OrigMito"]
    np.testing.assert_array_equal(stores["PA"], stores["PB"])  # the fixture's pixels do not depend on the plate
    assert stores["PA"][0, :, 0, 0].tolist() == [1001, 2001, 3001]  # DNA, ER, Mito of A01 site 1


@pytest.mark.slow
def test_the_workflow_ingests_loaddata_plates(tmp_path):
    """Source loaddata through Snakemake: the DAG-time check reads the CSVs (one per plate, a
    glob) and the plate map; ingest_loaddata writes each plate's store with the screen's channels."""
    from tests.test_workflow import planned_jobs, snakemake, write_config

    maps = []
    for i, plate in enumerate(["PL1", "PL2"]):
        _, plate_map = write_fixture(tmp_path, plate=plate, shape=(32, 32), batch=f"B{i + 1}")
        maps.append(plate_map)
    pd.concat(maps).to_csv(tmp_path / "plate_map.csv", index=False)
    screen = {
        "source": "loaddata",
        "plate_map": "plate_map.csv",
        "loaddata": str(tmp_path / "load_data_with_illum_*.csv"),
    }
    write_config(tmp_path, screen=screen | {"loaddata_channels": CHANNELS})
    jobs = planned_jobs(tmp_path)
    assert jobs.get("ingest_loaddata") == 2 and "simulate_plate" not in jobs, jobs
    snakemake(tmp_path, "results/screen/plates/PL1.zarr", "results/screen/plates/PL2.zarr")
    store = tmp_path / "results" / "screen" / "plates" / "PL2.zarr"
    assert plate_channels(store) == list(CHANNELS) and open_plate(store).shape == (6, 3, 32, 32)
