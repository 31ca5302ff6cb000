"""Ingest of per-channel image files and OME-Zarr HCS plates into the data contract."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tifffile
import zarr
from PIL import Image

from phenoica.contract import (
    IMAGE_INDEX,
    REQUIRED_COLUMNS,
    SITE,
    WELL,
    ScreenError,
    open_plate,
    plate_channels,
    read_metadata,
    validate_config,
)
from phenoica.screen import ImageIngestOptions, OmeZarrIngestOptions
from phenoica.screen import _images as images
from phenoica.screen import _ome_zarr as ome_zarr
from phenoica.screen import _plate_map as plate_map

H, W = 6, 10  # non-square so that a swapped axis shows
WELLS = ["A01", "B02"]
SITES = [1, 2]
LOG = logging.getLogger("phenoica.test_ingest")


DEFAULT_PATTERN = ImageIngestOptions.from_config(validate_config({})).pattern


def image_options(images_dir: Path, **screen) -> ImageIngestOptions:
    """The ``ingest_images`` options of a config whose ``screen`` section has ``images_dir`` and
    ``screen`` (the other keys: the schema's defaults)."""
    return ImageIngestOptions.from_config(validate_config({"screen": {"images_dir": str(images_dir), **screen}}))


def hcs_options(**screen) -> OmeZarrIngestOptions:
    """The ``ingest_ome_zarr`` options of a config whose ``screen`` section has ``screen``."""
    return OmeZarrIngestOptions.from_config(validate_config({"screen": screen}))


def plate_map_frame(wells_p1: list[str] = ["A1", "B02", "C03"]) -> pd.DataFrame:
    """Plate map of plates P1 (wells_p1) and P2, with two extra Metadata_* columns."""
    rows = []
    genes = ["NTC", "TP53", "MYC"]
    for i, well in enumerate(wells_p1):
        gene = genes[i % 3]
        rows.append(
            ("b1", "P1", well, gene, f"{gene}_g1", "control" if gene == "NTC" else "perturbation", 0.5 * i, f"n{i}")
        )
    rows.append(("b2", "P2", "A01", "NTC", "NTC_g1", "control", 9.0, "other"))
    cols = [
        "Metadata_Batch",
        "Metadata_Plate",
        "Metadata_Well",
        "Metadata_Gene",
        "Metadata_Guide",
        "Metadata_PertType",
        "Metadata_Dose",
        "Metadata_Note",
    ]
    return pd.DataFrame(rows, columns=cols)


def write_png(path: Path, arr: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path)


def write_tiff(path: Path, arr: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tifffile.imwrite(path, arr)


def make_pixels(dtype: str, seed: int, channels: list[str]) -> dict[tuple[str, int, str], np.ndarray]:
    """Distinct seeded images per (well, site, channel)."""
    rng = np.random.default_rng(seed)
    top = np.iinfo(np.dtype(dtype)).max
    return {
        (well, site, ch): rng.integers(0, top, size=(H, W), endpoint=True).astype(dtype)
        for well in WELLS
        for site in SITES
        for ch in channels
    }


def expected_tiles(pixels: dict, channels: list[str]) -> np.ndarray:
    return np.stack([np.stack([pixels[(w, s, c)] for c in channels]) for w in WELLS for s in SITES])


def assert_no_outputs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    left = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert left == [], f"left behind: {left}"


@pytest.fixture
def rxrx(tmp_path: Path) -> tuple[Path, dict]:
    """RxRx-style uint8 PNGs: P1/{well}_s{site}_w{channel}.png, plus files to ignore."""
    root = tmp_path / "images"
    pixels = make_pixels("uint8", 0, ["1", "2", "3"])
    for (well, site, ch), arr in pixels.items():
        write_png(root / "P1" / f"{well}_s{site}_w{ch}.png", arr)
    write_png(root / "P2" / "A01_s1_w1.png", pixels[("A01", 1, "1")])  # another plate
    (root / "P1" / "notes.txt").write_text("not an image")
    write_png(root / "P1" / "A01_sX_w1.png", pixels[("A01", 1, "1")])  # site is not a number
    return root, pixels


# --------------------------------------------------------------------------- names


def test_normalize_well_and_natural_sort() -> None:
    assert [plate_map.normalize_well(w) for w in ["A1", "a01", "B12", "AB003", "r01c01", " H7 "]] == [
        "A01",
        "A01",
        "B12",
        "AB03",
        "r01c01",
        "H07",
    ]
    assert plate_map.natural_sorted(["w10", "w2", "W1", "DAPI"]) == ["DAPI", "W1", "w2", "w10"]
    assert ome_zarr.hcs_plate_name("/data/hcs/Plate-7.zarr") == "Plate-7"


# --------------------------------------------------------------------------- plate map


def test_read_plate_map_normalizes_and_keeps_extras(tmp_path: Path) -> None:
    path = tmp_path / "map.csv"
    plate_map_frame().to_csv(path, index=False)
    pm = plate_map.read_plate_map(path)
    assert pm["Metadata_Well"].tolist() == ["A01", "B02", "C03", "A01"]
    assert pm["Metadata_Dose"].dtype == np.float64
    assert pm["Metadata_Note"].tolist() == ["n0", "n1", "n2", "other"]


def test_read_plate_map_missing_column_names_file_and_column(tmp_path: Path) -> None:
    path = tmp_path / "map.csv"
    plate_map_frame().drop(columns=["Metadata_Guide"]).to_csv(path, index=False)
    with pytest.raises(ScreenError, match=r"map\.csv.*Metadata_Guide"):
        plate_map.read_plate_map(path)


def test_read_plate_map_duplicate_well_after_normalizing(tmp_path: Path) -> None:
    path = tmp_path / "map.csv"
    plate_map_frame(["A1", "A01"]).to_csv(path, index=False)
    with pytest.raises(ScreenError, match=r"map\.csv: duplicate \(plate, well\) \(P1, A01\) at rows \[0, 1\]"):
        plate_map.read_plate_map(path)


def test_plate_map_rejects_non_metadata_and_per_image_columns() -> None:
    with pytest.raises(ScreenError, match="'notes'"):
        plate_map.validate_plate_map(plate_map_frame().assign(notes="x"))
    with pytest.raises(ScreenError, match="Metadata_Site"):
        plate_map.validate_plate_map(plate_map_frame().assign(Metadata_Site=1))


def test_plate_map_rows_of_one_plate() -> None:
    rows = plate_map.plate_map_rows(plate_map_frame(), "P1")
    assert rows["Metadata_Well"].tolist() == ["A01", "B02", "C03"] and rows.index.tolist() == [0, 1, 2]
    assert set(rows["Metadata_Plate"]) == {"P1"} and "source" in rows.attrs
    assert plate_map.plate_map_rows(plate_map_frame(), "P2")["Metadata_Note"].tolist() == ["other"]
    with pytest.raises(ScreenError, match=r"no rows for plate 'P3'; plates there include \['P1', 'P2'\]"):
        plate_map.plate_map_rows(plate_map_frame(), "P3")


# --------------------------------------------------------------------------- image files


def test_discover_images_default_pattern(rxrx: tuple[Path, dict]) -> None:
    root, _ = rxrx
    found = images.discover_images(root, DEFAULT_PATTERN, "P1")
    assert list(found.columns) == ["plate", "well", "site", "channel", "path"]
    assert len(found) == 12  # 2 wells x 2 sites x 3 channels; notes.txt, sX and P2 ignored
    assert set(found["plate"]) == {"P1"} and set(found["well"]) == set(WELLS)
    assert found["site"].dtype == np.int64 and set(found["site"]) == {1, 2}
    assert sorted(set(found["channel"])) == ["1", "2", "3"]
    assert all(Path(p).parent == root / "P1" for p in found["path"])


def test_default_pattern_matches_config_schema() -> None:
    from phenoica.contract import load_schema

    screen = load_schema()["properties"]["screen"]["properties"]
    assert screen["image_pattern"]["default"] == DEFAULT_PATTERN == "{plate}/{well}_s{site}_w{channel}.png"


def test_two_files_for_one_image_are_an_error(rxrx: tuple[Path, dict]) -> None:
    root, pixels = rxrx
    write_png(root / "P1" / "A1_s1_w1.png", pixels[("A01", 1, "1")])  # same image as A01_s1_w1.png
    with pytest.raises(ScreenError, match=r"well A01 site 1 channel '1' matches more than one file"):
        images.discover_images(root, DEFAULT_PATTERN, "P1")


def test_ingest_png_uint8_round_trip(rxrx: tuple[Path, dict], tmp_path: Path, caplog) -> None:
    root, pixels = rxrx
    store, meta_path = tmp_path / "out" / "P1.zarr", tmp_path / "out" / "P1.parquet"
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        meta = images.ingest_image_plate(
            plate_map_frame(), "P1", store, meta_path, image_options(root, chunk_images=3), log=LOG
        )
    assert any("C03" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    tiles = open_plate(store)
    assert tiles.dtype == np.uint8 and tiles.shape == (4, 3, H, W) and tiles.chunks[0] == 3
    np.testing.assert_array_equal(tiles[:], expected_tiles(pixels, ["1", "2", "3"]))
    assert plate_channels(store) == ["1", "2", "3"]
    written = read_metadata(meta_path)
    pd.testing.assert_frame_equal(written, meta)
    assert list(meta.columns) == list(REQUIRED_COLUMNS) + ["Metadata_Dose", "Metadata_Note"]
    assert meta[WELL].tolist() == ["A01", "A01", "B02", "B02"]
    assert meta[SITE].tolist() == [1, 2, 1, 2]
    assert meta[IMAGE_INDEX].tolist() == [0, 1, 2, 3]
    assert meta["Metadata_Gene"].tolist() == ["NTC", "NTC", "TP53", "TP53"]
    assert meta["Metadata_PertType"].tolist() == ["control", "control", "perturbation", "perturbation"]
    assert meta["Metadata_Dose"].tolist() == [0.0, 0.0, 0.5, 0.5]
    assert meta["Metadata_Note"].tolist() == ["n0", "n0", "n1", "n1"]
    assert set(meta["Metadata_Batch"]) == {"b1"} and set(meta["Metadata_Plate"]) == {"P1"}


def test_ingest_tiff_uint16_custom_pattern_and_channel_order(tmp_path: Path) -> None:
    root = tmp_path / "images"
    channels = ["GFP", "DAPI", "RFP"]  # not alphabetical: the given order is kept
    pixels = make_pixels("uint16", 1, channels)
    pattern = "{plate}/site{site}/{channel}/{plate}_{well}.tif"
    for (well, site, ch), arr in pixels.items():
        write_tiff(root / "P1" / f"site{site}" / ch / f"P1_{well}.tif", arr)
        write_tiff(root / "P1" / f"site{site}" / "BF" / f"P1_{well}.tif", arr)  # not in channels: ignored
    write_tiff(root / "P1" / "site1" / "GFP" / "P2_A01.tif", pixels[("A01", 1, "GFP")])  # other plate
    store, meta_path = tmp_path / "out" / "P1.zarr", tmp_path / "out" / "P1.parquet"
    meta = images.ingest_image_plate(
        plate_map_frame(["A01", "B2"]),
        "P1",
        store,
        meta_path,
        image_options(root, image_pattern=pattern, channels=channels),
        log=LOG,
    )
    tiles = open_plate(store)
    assert tiles.dtype == np.uint16
    np.testing.assert_array_equal(tiles[:], expected_tiles(pixels, channels))
    assert plate_channels(store) == channels
    assert meta[WELL].tolist() == ["A01", "A01", "B02", "B02"] and meta[SITE].tolist() == [1, 2, 1, 2]


def test_ingest_png_uint16_without_site_field(tmp_path: Path) -> None:
    root = tmp_path / "images"
    pixels = {
        (w, c): np.full((H, W), 1000 * (i + 1) + 7 * j, np.uint16)
        for i, w in enumerate(WELLS)
        for j, c in enumerate(["1", "2", "3"])
    }
    for (well, ch), arr in pixels.items():
        write_png(root / f"{well}-ch{ch}.png", arr)
    store, meta_path = tmp_path / "out" / "P1.zarr", tmp_path / "out" / "P1.parquet"
    meta = images.ingest_image_plate(
        plate_map_frame(["A01", "B02"]),
        "P1",
        store,
        meta_path,
        image_options(root, image_pattern="{well}-ch{channel}.png"),
        log=LOG,
    )
    assert meta[SITE].tolist() == [images.DEFAULT_SITE] * 2
    want = np.stack([np.stack([pixels[(w, c)] for c in ["1", "2", "3"]]) for w in WELLS])
    np.testing.assert_array_equal(open_plate(store)[:], want)


def test_images_of_unmapped_wells_are_skipped_with_a_warning(rxrx: tuple[Path, dict], tmp_path: Path, caplog) -> None:
    root, pixels = rxrx
    store, meta_path = tmp_path / "out" / "P1.zarr", tmp_path / "out" / "P1.parquet"
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        meta = images.ingest_image_plate(plate_map_frame(["B02"]), "P1", store, meta_path, image_options(root), log=LOG)
    assert any("A01" in r.getMessage() and "absent from the plate map" in r.getMessage() for r in caplog.records)
    assert meta[WELL].tolist() == ["B02", "B02"]
    np.testing.assert_array_equal(open_plate(store)[:], expected_tiles(pixels, ["1", "2", "3"])[2:])


def _ingest_rxrx(root: Path, tmp_path: Path) -> pd.DataFrame:
    return images.ingest_image_plate(
        plate_map_frame(),
        "P1",
        tmp_path / "out" / "P1.zarr",
        tmp_path / "out" / "P1.parquet",
        image_options(root),
        log=LOG,
    )


def test_missing_channel_file_names_file_channel_and_site(rxrx: tuple[Path, dict], tmp_path: Path) -> None:
    root, _ = rxrx
    (root / "P1" / "B02_s2_w3.png").unlink()
    with pytest.raises(ScreenError, match=r"B02_s2_w3\.png: missing file for channel '3' of well B02 site 2"):
        _ingest_rxrx(root, tmp_path)
    assert_no_outputs(tmp_path)


def test_mismatched_image_size_names_file(rxrx: tuple[Path, dict], tmp_path: Path) -> None:
    root, _ = rxrx
    write_png(root / "P1" / "B02_s1_w2.png", np.zeros((H + 1, W), np.uint8))
    with pytest.raises(ScreenError, match=r"B02_s1_w2\.png: image size \(7, 10\) differs"):
        _ingest_rxrx(root, tmp_path)
    assert_no_outputs(tmp_path)


def test_mixed_dtypes_name_file(rxrx: tuple[Path, dict], tmp_path: Path) -> None:
    root, _ = rxrx
    write_png(root / "P1" / "B02_s1_w2.png", np.zeros((H, W), np.uint16))
    with pytest.raises(ScreenError, match=r"B02_s1_w2\.png: pixel dtype uint16 differs from uint8"):
        _ingest_rxrx(root, tmp_path)
    assert_no_outputs(tmp_path)


def test_rgb_png_is_rejected(rxrx: tuple[Path, dict], tmp_path: Path) -> None:
    root, _ = rxrx
    write_png(root / "P1" / "A01_s2_w1.png", np.zeros((H, W, 3), np.uint8))
    with pytest.raises(ScreenError, match=r"A01_s2_w1\.png: image mode RGB is not single-channel grayscale"):
        _ingest_rxrx(root, tmp_path)
    assert_no_outputs(tmp_path)


@pytest.mark.parametrize(
    "arr, message",
    [
        (np.zeros((H, W), np.float32), "unsupported pixel dtype float32"),
        (np.zeros((H, W, 3), np.uint8), r"image of shape \(6, 10, 3\) is not single-channel"),
    ],
)
def test_float_and_rgb_tiff_are_rejected(tmp_path: Path, arr: np.ndarray, message: str) -> None:
    root = tmp_path / "images"
    for well in WELLS:
        for ch in "12":
            write_tiff(root / f"{well}_{ch}.tif", np.ones((H, W), np.uint8))
    write_tiff(root / "B02_2.tif", arr)
    with pytest.raises(ScreenError, match=rf"B02_2\.tif: {message}"):
        images.ingest_image_plate(
            plate_map_frame(),
            "P1",
            tmp_path / "out" / "P1.zarr",
            tmp_path / "out" / "P1.parquet",
            image_options(root, image_pattern="{well}_{channel}.tif"),
            log=LOG,
        )
    assert_no_outputs(tmp_path)


def test_unreadable_file_names_file(rxrx: tuple[Path, dict], tmp_path: Path) -> None:
    root, _ = rxrx
    (root / "P1" / "B02_s1_w1.png").write_bytes(b"\x89PNG but not really")
    with pytest.raises(ScreenError, match=r"B02_s1_w1\.png: unreadable image"):
        _ingest_rxrx(root, tmp_path)
    assert_no_outputs(tmp_path)


def test_plate_absent_from_plate_map(rxrx: tuple[Path, dict], tmp_path: Path) -> None:
    root, _ = rxrx
    with pytest.raises(ScreenError, match="no rows for plate 'P9'"):
        images.ingest_image_plate(
            plate_map_frame(),
            "P9",
            tmp_path / "out" / "P9.zarr",
            tmp_path / "out" / "P9.parquet",
            image_options(root),
            log=LOG,
        )
    assert_no_outputs(tmp_path)


@pytest.mark.parametrize("pattern", ["{well}_{site}.png", "{well}_{channel:02d}.png", "{plate}/{gene}_{channel}.png"])
def test_bad_patterns_are_value_errors(tmp_path: Path, pattern: str) -> None:
    with pytest.raises(ValueError, match="image pattern"):
        images.discover_images(tmp_path, pattern, "P1")


# --------------------------------------------------------------------------- OME-Zarr HCS

HCS_WELLS = [("A", "1"), ("B", "2")]
HCS_CHANNELS = ["DNA", "ER", "RNA"]


def hcs_pixels(dtype: str, shape: tuple[int, ...], seed: int) -> dict[tuple[str, int], np.ndarray]:
    rng = np.random.default_rng(seed)
    top = np.iinfo(np.dtype(dtype)).max
    return {
        (f"{r}{c}", f): rng.integers(0, top, size=shape, endpoint=True).astype(dtype)
        for r, c in HCS_WELLS
        for f in range(2)
    }


def write_hcs_with_ome_zarr(path: Path, version: str, pixels: dict, axes: str) -> None:
    """An HCS plate written by the ome-zarr package (NGFF 0.4 on zarr v2, or 0.5 on zarr v3)."""
    from ome_zarr.format import FormatV04, FormatV05
    from ome_zarr.writer import write_image, write_plate_metadata, write_well_metadata

    fmt = FormatV04() if version == "0.4" else FormatV05()
    root = zarr.open_group(str(path), mode="w", zarr_format=2 if version == "0.4" else 3)
    wells = [f"{r}/{c}" for r, c in HCS_WELLS]
    write_plate_metadata(root, ["A", "B"], ["1", "2"], wells, fmt=fmt, field_count=2)
    window = {"start": 0, "end": 255, "min": 0, "max": 255}
    omero = {"channels": [{"label": name, "color": "FFFFFF", "window": window} for name in HCS_CHANNELS]}
    for r, c in HCS_WELLS:
        well = root.require_group(r).require_group(c)
        write_well_metadata(well, ["0", "1"], fmt=fmt)
        for f in range(2):
            write_image(
                pixels[(f"{r}{c}", f)], well.require_group(str(f)), axes=axes, fmt=fmt, scale_factors=[], omero=omero
            )


def write_hcs_by_hand_v3(path: Path, pixels: dict, wells: list[tuple[str, str]] = HCS_WELLS) -> None:
    """NGFF 0.5 HCS on zarr v3 with attributes under "ome", (t, c, z, y, x), no omero labels."""
    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    root.attrs["ome"] = {
        "version": "0.5",
        "plate": {
            "rows": [{"name": "A"}, {"name": "B"}, {"name": "C"}],
            "columns": [{"name": str(i)} for i in range(1, 4)],
            "wells": [{"path": f"{r}/{c}", "rowIndex": "ABC".index(r), "columnIndex": int(c) - 1} for r, c in wells],
            "field_count": 2,
        },
    }
    for r, c in wells:
        well = root.require_group(r).require_group(c)
        well.attrs["ome"] = {"version": "0.5", "well": {"images": [{"path": "0"}, {"path": "1"}]}}
        for f in range(2):
            field = well.require_group(str(f))
            field.attrs["ome"] = {
                "version": "0.5",
                "multiscales": [
                    {
                        "axes": [
                            {"name": a, "type": t}
                            for a, t in zip("tczyx", ["time", "channel", "space", "space", "space"])
                        ],
                        "datasets": [
                            {"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1.0] * 5}]}
                        ],
                    }
                ],
            }
            data = pixels[(f"{r}{c}", f)]
            field.create_array("0", shape=data.shape, dtype=data.dtype, chunks=data.shape)[:] = data


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # ome-zarr's own Scaler default
@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_ome_zarr_writer_plate_round_trip(tmp_path: Path, version: str, caplog) -> None:
    pixels = hcs_pixels("uint8", (3, 2, H, W), seed=2)  # (c, z, y, x), z = 2
    hcs = tmp_path / "hcs" / "P1.zarr"
    write_hcs_with_ome_zarr(hcs, version, pixels, "czyx")
    store, meta_path = tmp_path / "out" / "P1.zarr", tmp_path / "out" / "P1.parquet"
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        meta = ome_zarr.ingest_ome_zarr_plate(
            hcs, plate_map_frame(), ome_zarr.hcs_plate_name(hcs), store, meta_path, hcs_options(chunk_images=3), log=LOG
        )
    assert any("C03" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    tiles = open_plate(store)
    want = np.stack([pixels[(w, f)].max(axis=1) for w in ["A1", "B2"] for f in range(2)])  # max over z
    assert tiles.dtype == np.uint8 and tiles.chunks[0] == 3
    np.testing.assert_array_equal(tiles[:], want)
    assert plate_channels(store) == HCS_CHANNELS
    pd.testing.assert_frame_equal(read_metadata(meta_path), meta)
    assert meta[WELL].tolist() == ["A01", "A01", "B02", "B02"]
    assert meta[SITE].tolist() == [0, 1, 0, 1] and meta[IMAGE_INDEX].tolist() == [0, 1, 2, 3]
    assert meta["Metadata_Note"].tolist() == ["n0", "n0", "n1", "n1"]


def test_hand_written_v3_tczyx_plate(tmp_path: Path) -> None:
    pixels = hcs_pixels("uint16", (2, 2, 3, H, W), seed=3)  # (t, c, z, y, x)
    hcs = tmp_path / "hcs" / "P1.zarr"
    write_hcs_by_hand_v3(hcs, pixels)
    store, meta_path = tmp_path / "out" / "P1.zarr", tmp_path / "out" / "P1.parquet"
    meta = ome_zarr.ingest_ome_zarr_plate(
        hcs, plate_map_frame(["A1", "B2"]), "P1", store, meta_path, hcs_options(), log=LOG
    )
    want = np.stack([pixels[(w, f)][0].max(axis=1) for w in ["A1", "B2"] for f in range(2)])  # t = 0, max z
    tiles = open_plate(store)
    assert tiles.dtype == np.uint16
    np.testing.assert_array_equal(tiles[:], want)
    assert plate_channels(store) == ["c0", "c1"]
    assert meta[WELL].tolist() == ["A01", "A01", "B02", "B02"]


def assert_hcs_ingest_fails(tmp_path: Path, hcs: Path, match: str) -> None:
    """Ingesting plate P1 of ``hcs`` (wells A1, B2 in the plate map) raises ``match`` and writes nothing."""
    with pytest.raises(ScreenError, match=match):
        ome_zarr.ingest_ome_zarr_plate(
            hcs,
            plate_map_frame(["A1", "B2"]),
            "P1",
            tmp_path / "out" / "P1.zarr",
            tmp_path / "out" / "P1.parquet",
            hcs_options(),
            log=LOG,
        )
    assert_no_outputs(tmp_path)


def test_hcs_well_not_in_plate_map_is_an_error(tmp_path: Path) -> None:
    pixels = hcs_pixels("uint8", (1, 2, 1, H, W), seed=4)
    pixels.update({("C3", f): pixels[("A1", f)] for f in range(2)})
    hcs = tmp_path / "hcs" / "P1.zarr"
    write_hcs_by_hand_v3(hcs, pixels, HCS_WELLS + [("C", "3")])
    assert_hcs_ingest_fails(tmp_path, hcs, r"P1\.zarr: well\(s\) \['C03'\] of the HCS plate are not in the plate map")


def test_hcs_fields_of_different_size_are_an_error(tmp_path: Path) -> None:
    pixels = hcs_pixels("uint8", (1, 2, 1, H, W), seed=5)
    pixels[("B2", 1)] = np.zeros((1, 2, 1, H, W + 2), np.uint8)
    hcs = tmp_path / "hcs" / "P1.zarr"
    write_hcs_by_hand_v3(hcs, pixels)
    assert_hcs_ingest_fails(tmp_path, hcs, r"B/2/1/0: \(C, Y, X\) \(2, 6, 12\) differs")


def test_hcs_float_array_is_an_error(tmp_path: Path) -> None:
    pixels = {k: v.astype(np.float32) for k, v in hcs_pixels("uint8", (1, 1, 1, H, W), seed=6).items()}
    hcs = tmp_path / "hcs" / "P1.zarr"
    write_hcs_by_hand_v3(hcs, pixels)
    assert_hcs_ingest_fails(tmp_path, hcs, r"A/1/0/0: unsupported pixel dtype float32")
