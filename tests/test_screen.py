"""The data contract: metadata validation, plate stores, preprocessing, profiles."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from phenoica.contract import ScreenError, check_plate_against_metadata, open_plate, validate_metadata, write_plate
from phenoica.contract import _screen_data as screen
from phenoica.profiles import aggregate_wells, gather_profiles
from phenoica.profiles._columns import expand_embedding_column
from phenoica.screen import prepare, scale_intensity
from phenoica.screen._preprocess import crop_grid, normalize_per_channel


def test_valid_metadata_passes_and_extra_columns_travel(metadata):
    out = validate_metadata(metadata)
    assert list(out.columns) == list(metadata.columns)
    assert out["Metadata_Extra"].tolist() == metadata["Metadata_Extra"].tolist()


def test_missing_column_is_named(metadata):
    with pytest.raises(ScreenError, match="Metadata_Guide"):
        validate_metadata(metadata.drop(columns="Metadata_Guide"), source="meta.csv")


def test_duplicate_plate_well_site_names_rows(metadata):
    bad = pd.concat([metadata, metadata.iloc[[3]]], ignore_index=True)
    bad.loc[len(bad) - 1, "Metadata_ImageIndex"] = 99
    with pytest.raises(ScreenError, match=r"duplicate \(plate, well, site\).*rows \[3, 16\]"):
        validate_metadata(bad, source="meta.csv")


def test_gene_under_two_pert_types(metadata):
    bad = metadata.copy()
    bad.loc[1, "Metadata_Gene"] = "G1"
    with pytest.raises(ScreenError, match="gene 'G1'.*both PertTypes"):
        validate_metadata(bad)


def test_bad_pert_type_names_row(metadata):
    bad = metadata.copy()
    bad.loc[5, "Metadata_PertType"] = "treated"
    with pytest.raises(ScreenError, match="row 5"):
        validate_metadata(bad)


def test_plate_round_trip_and_streaming_write(tmp_path, rng):
    tiles = rng.integers(0, 65535, size=(10, 3, 8, 8), dtype=np.uint16)
    write_plate(tmp_path / "a.zarr", tiles, ["x", "y", "z"], chunk_images=4)
    write_plate(
        tmp_path / "b.zarr",
        (tiles[i : i + 3] for i in range(0, 10, 3)),
        ["x", "y", "z"],
        shape=tiles.shape,
        dtype=tiles.dtype,
        chunk_images=4,
    )
    for name in ("a.zarr", "b.zarr"):
        arr = open_plate(tmp_path / name)
        assert arr.chunks[0] == 4 and arr.dtype == np.uint16
        np.testing.assert_array_equal(arr[:], tiles)
    assert screen.plate_channels(tmp_path / "a.zarr") == ["x", "y", "z"]
    assert not list(tmp_path.glob(".*tmp*"))


def test_unsupported_dtype_and_channel_mismatch_leave_nothing(tmp_path):
    with pytest.raises(ScreenError, match="unsupported dtype float32"):
        write_plate(tmp_path / "f.zarr", np.zeros((2, 3, 8, 8), np.float32), ["a", "b", "c"])
    with pytest.raises(ScreenError, match="2 channels"):
        write_plate(tmp_path / "c.zarr", np.zeros((2, 3, 8, 8), np.uint8), ["a", "b"])
    assert list(tmp_path.iterdir()) == []


def test_missing_store_and_index_out_of_range(tmp_path, metadata):
    with pytest.raises(ScreenError, match="plate store not found"):
        open_plate(tmp_path / "nope.zarr")
    write_plate(tmp_path / "P1.zarr", np.zeros((4, 3, 8, 8), np.uint8), ["a", "b", "c"])
    rows = metadata[metadata["Metadata_Plate"] == "P1"]
    with pytest.raises(ScreenError, match=r"ImageIndex 4, out of range for 4 images"):
        check_plate_against_metadata(open_plate(tmp_path / "P1.zarr"), rows, "P1.zarr")


def test_preprocess_known_answers():
    tiles = np.zeros((1, 2, 4, 6), np.uint8)
    tiles[0, 0] = 255
    tiles[0, 1, :, :3] = 51
    x = scale_intensity(tiles)
    assert float(x[0, 0].max()) == 1.0 and abs(float(x[0, 1, 0, 0]) - 0.2) < 1e-6
    z = normalize_per_channel(x)
    assert torch.allclose(z[0, 1].mean(), torch.tensor(0.0), atol=1e-6)
    assert torch.allclose(z[0, 1].std(unbiased=False), torch.tensor(1.0), atol=1e-4)
    assert float(z[0, 0].abs().max()) == 0.0  # constant channel -> zeros, not NaN
    grid = torch.arange(2 * 1 * 5 * 7, dtype=torch.float32).reshape(2, 1, 5, 7)
    crops = crop_grid(grid, 2)  # 2x3 crops; one row and one column dropped (centred)
    assert crops.shape == (2, 6, 1, 2, 2)
    assert torch.equal(crops[0, 0, 0], grid[0, 0, 0:2, 0:2])
    assert torch.equal(crops[1, 5, 0], grid[1, 0, 2:4, 4:6])
    with pytest.raises(ScreenError, match="smaller than the crop size 8"):
        prepare(np.zeros((1, 1, 6, 6), np.uint8), 8, source="P1.zarr")


@pytest.mark.parametrize("as_tensor", [None, torch.float32, torch.bfloat16, torch.float64])
def test_non_finite_pixels_name_the_first_bad_image(as_tensor):
    tiles = np.full((4, 2, 4, 4), 0.5)
    tiles[2, 1, 3, 3], tiles[3, 0, 0, 0] = np.nan, np.inf
    bad = tiles if as_tensor is None else torch.from_numpy(tiles).to(as_tensor)
    with pytest.raises(ScreenError, match=r"^P1.zarr: non-finite pixels in image 2$"):
        scale_intensity(bad, source="P1.zarr")
    ok = tiles[:2] if as_tensor is None else torch.from_numpy(tiles[:2]).to(as_tensor)
    assert float(scale_intensity(ok).max()) == 0.5


def _embeddings(metadata, rng, d=3):
    df = metadata.copy()
    for i in range(d):
        df[screen.feature_name(i)] = rng.normal(size=len(df)).astype(np.float32)
    return df


def test_profiles_gather_list_column_and_well_mean(tmp_path, metadata, rng):
    df = _embeddings(metadata, rng)
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    df.iloc[:8].to_parquet(a)
    df.iloc[8:].to_parquet(b)
    image = gather_profiles([a, b])
    assert len(image) == len(df)
    listed = df[screen.metadata_columns(df)].copy()
    listed["vec"] = list(df[["emb_0000", "emb_0001", "emb_0002"]].to_numpy())
    listed.to_parquet(tmp_path / "l.parquet")
    expanded = gather_profiles([tmp_path / "l.parquet"], embedding_column="vec")
    np.testing.assert_allclose(expanded["emb_0002"], df["emb_0002"])
    wells = aggregate_wells(df)
    assert len(wells) == df.groupby(["Metadata_Plate", "Metadata_Well"]).ngroups
    first = df[(df.Metadata_Plate == "P1") & (df.Metadata_Well == "A01")]["emb_0000"].mean()
    got = wells[(wells.Metadata_Plate == "P1") & (wells.Metadata_Well == "A01")]["emb_0000"].iloc[0]
    assert abs(first - got) < 1e-6
    assert "Metadata_Site" not in wells.columns and "Metadata_Gene" in wells.columns


def test_profiles_reject_nonfinite_and_ragged(tmp_path, metadata, rng):
    df = _embeddings(metadata, rng)
    df.loc[2, "emb_0001"] = np.inf  # a missing value (NaN) is kept: the profile hygiene drops its feature
    df.to_parquet(tmp_path / "n.parquet")
    with pytest.raises(ScreenError, match=r"n.parquet: infinite values.*emb_0001"):
        gather_profiles([tmp_path / "n.parquet"])
    ragged = metadata.copy()
    ragged["vec"] = [np.zeros(3)] * 5 + [np.zeros(2)] + [np.zeros(3)] * (len(ragged) - 6)
    with pytest.raises(ScreenError, match="row 5 has length 2"):
        expand_embedding_column(ragged, "vec")


def test_read_plate_metadata_reads_one_plate(tmp_path, metadata):
    from phenoica.contract import read_plate_metadata

    shuffled = metadata.sample(frac=1.0, random_state=0)
    shuffled.to_parquet(tmp_path / "m.parquet")
    shuffled.to_csv(tmp_path / "m.csv", index=False)
    for name in ("m.parquet", "m.csv"):
        rows = read_plate_metadata(tmp_path / name, "P2")
        assert set(rows["Metadata_Plate"]) == {"P2"} and len(rows) == (metadata["Metadata_Plate"] == "P2").sum()
        assert rows["Metadata_ImageIndex"].is_monotonic_increasing
