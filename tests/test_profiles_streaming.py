"""Streaming gather of per-plate embeddings into the profile parquet (image and well level)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from phenoica.contract import ScreenError, validate_config
from phenoica.contract import _screen_data as screen
from phenoica.profiles import FeatureSelection, GatherOptions, ProfileSource, gather_profiles, write_profiles
from tests.conftest import make_metadata

FEATURES = [screen.feature_name(i) for i in range(4)]


def plate_files(tmp_path, rng, n_plates=3, wells=5, sites=3):
    """One embedding parquet per plate (the embed rule's shape); returns (paths, all rows)."""
    meta = make_metadata(n_plates=n_plates, wells=wells, sites=sites)
    values = rng.normal(size=(len(meta), len(FEATURES))).astype(np.float32)
    table = pd.concat([meta, pd.DataFrame(values, columns=FEATURES)], axis=1)
    paths = []
    for plate, rows in table.groupby("Metadata_Plate", sort=True):
        path = tmp_path / f"{plate}.parquet"
        rows.to_parquet(path)  # a non-range index: pandas stores it as a column, which is not a feature
        paths.append(path)
    return paths, table.reset_index(drop=True)


def row_groups(path) -> list[int]:
    meta = pq.ParquetFile(path).metadata
    return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


def test_image_level_streams_every_row_in_row_groups(tmp_path, rng):
    paths, table = plate_files(tmp_path, rng)
    out = tmp_path / "profiles.parquet"
    assert write_profiles(paths, out, batch_rows=7) == len(table)
    assert row_groups(out) == [7] * (len(table) // 7) + [len(table) % 7]
    assert not list(tmp_path.glob(".*tmp*"))
    got = pd.read_parquet(out)
    assert list(got.columns) == list(table.columns)  # metadata, then features; no pandas index column
    pd.testing.assert_frame_equal(got[FEATURES], table[FEATURES])
    for col in screen.PROFILE_COLUMNS:
        assert got[col].tolist() == table[col].astype(str).tolist()
    assert got["Metadata_Site"].tolist() == table["Metadata_Site"].tolist()
    pd.testing.assert_frame_equal(gather_profiles(paths, batch_rows=4), got)


def test_well_level_averages_each_plate_file_and_keeps_columns_constant_in_every_well(tmp_path, rng):
    paths, table = plate_files(tmp_path, rng, sites=4)
    # Metadata_Extra is per well in the first file but per site in the others: dropped;
    # Metadata_Lane is per well everywhere: kept.
    for i, path in enumerate(paths):
        rows = pd.read_parquet(path)
        rows["Metadata_Lane"] = rows["Metadata_Well"].str[1:]
        if i == 0:
            rows["Metadata_Extra"] = rows["Metadata_Well"]
        rows.to_parquet(path)
    out = tmp_path / "wells.parquet"
    n = write_profiles(paths, out, level="well", batch_rows=3)  # a well's images span row batches
    wells = pd.read_parquet(out)
    expected = table.groupby(["Metadata_Plate", "Metadata_Well"], sort=True)[FEATURES].mean().reset_index()
    assert n == len(expected) == len(wells)
    np.testing.assert_allclose(wells[FEATURES].to_numpy(), expected[FEATURES].to_numpy(), rtol=1e-6)
    assert (
        wells[["Metadata_Plate", "Metadata_Well"]].values.tolist()
        == expected[["Metadata_Plate", "Metadata_Well"]].values.tolist()
    )
    assert (wells["Metadata_NImages"] == 4).all()
    assert "Metadata_Lane" in wells.columns and "Metadata_Gene" in wells.columns
    assert "Metadata_Extra" not in wells.columns and "Metadata_Site" not in wells.columns
    assert wells["Metadata_Lane"].tolist() == wells["Metadata_Well"].str[1:].tolist()


def test_a_well_split_over_two_files_is_an_error(tmp_path, rng):
    paths, table = plate_files(tmp_path, rng, n_plates=1)
    rows = table[table["Metadata_Plate"] == "P1"]
    rows.iloc[:4].to_parquet(tmp_path / "a.parquet")
    rows.iloc[4:].to_parquet(tmp_path / "b.parquet")
    with pytest.raises(ScreenError, match=r"b.parquet: well \(plate 'P1', well 'A02'\) also appears in .*a.parquet"):
        write_profiles([tmp_path / "a.parquet", tmp_path / "b.parquet"], tmp_path / "w.parquet", level="well")
    assert not (tmp_path / "w.parquet").exists()


def test_gene_under_two_pert_types_across_files_leaves_no_output(tmp_path, rng):
    paths, _ = plate_files(tmp_path, rng)
    rows = pd.read_parquet(paths[2])
    rows.loc[rows["Metadata_Gene"] == "G1", "Metadata_PertType"] = "control"
    rows.to_parquet(paths[2])
    out = tmp_path / "profiles.parquet"
    for level in ("image", "well"):
        with pytest.raises(ScreenError, match=r"gene 'G1'.*perturbation in .*P1.parquet, control in .*P3.parquet"):
            write_profiles(paths, out, level=level, batch_rows=4)
        assert not out.exists() and not list(tmp_path.glob(".*tmp*"))


def test_bad_files_are_named(tmp_path, rng):
    paths, _ = plate_files(tmp_path, rng)
    rows = pd.read_parquet(paths[1])
    good = rows.copy()
    rows.iloc[11, rows.columns.get_loc("emb_0002")] = np.inf  # in a later row batch of the file
    rows.to_parquet(paths[1])
    with pytest.raises(ScreenError, match=r"P2.parquet: infinite values \(inf\).*\['emb_0002'\]"):
        write_profiles(paths, tmp_path / "o.parquet", batch_rows=4)
    rows.drop(columns=["emb_0002"]).to_parquet(paths[1])
    identical = FeatureSelection.of(None, None, None, "identical")
    with pytest.raises(ScreenError, match=r"P2.parquet: feature columns differ from .*P1.parquet \(3 vs 4"):
        write_profiles(paths, tmp_path / "o.parquet", selection=identical)
    write_profiles(paths, tmp_path / "common.parquet")  # the default keeps the 3 features every file has
    assert [c for c in pq.read_schema(tmp_path / "common.parquet").names if c.startswith("emb_")] == [
        "emb_0000",
        "emb_0001",
        "emb_0003",
    ]
    rows.assign(emb_0002="x").to_parquet(paths[1])
    with pytest.raises(ScreenError, match=r"P2.parquet: non-numeric feature column\(s\) \['emb_0002'\]"):
        write_profiles(paths, tmp_path / "o.parquet")
    good.to_parquet(paths[1])
    rows = pd.read_parquet(paths[0])
    rows.loc[rows.index[13], "Metadata_PertType"] = "treated"
    rows.to_parquet(paths[0])
    with pytest.raises(
        ScreenError, match=r"P1.parquet: column Metadata_PertType row 13 is 'treated'"
    ):  # a row of the file
        write_profiles(paths, tmp_path / "o.parquet", batch_rows=6)
    with pytest.raises(ValueError, match="profiles.level"):
        write_profiles(paths, tmp_path / "o.parquet", level="plate")
    assert not (tmp_path / "o.parquet").exists()


def test_list_valued_embedding_column_streams(tmp_path, rng):
    paths, table = plate_files(tmp_path, rng)
    listed = []
    for i, path in enumerate(paths):
        rows = pd.read_parquet(path)
        rows = rows[screen.metadata_columns(rows)].assign(vec=list(rows[FEATURES].to_numpy()))
        rows.to_parquet(tmp_path / f"l{i}.parquet")
        listed.append(tmp_path / f"l{i}.parquet")
    out = tmp_path / "profiles.parquet"
    write_profiles(listed, out, embedding_column="vec", batch_rows=4)
    got = pd.read_parquet(out)
    assert "vec" not in got.columns
    np.testing.assert_array_equal(got[FEATURES].to_numpy(), table[FEATURES].to_numpy())
    rows = pd.read_parquet(listed[1])
    rows["vec"] = [v if i != 9 else v[:2] for i, v in enumerate(rows["vec"])]
    rows.to_parquet(listed[1])
    with pytest.raises(ScreenError, match=r"l1.parquet: column 'vec' row 9 has length 2, expected 4"):
        write_profiles(listed, out, embedding_column="vec", batch_rows=4)
    with pytest.raises(ScreenError, match=r"P1.parquet: embedding column 'vec' not found"):
        write_profiles(paths, out, embedding_column="vec")


def test_metadata_columns_are_the_union_over_files(tmp_path, rng):
    paths, table = plate_files(tmp_path, rng)
    rows = pd.read_parquet(paths[1]).drop(columns=["Metadata_Extra"])
    rows["Metadata_Site"] = rows["Metadata_Site"].astype(np.int32)
    rows.to_parquet(paths[1])
    got = gather_profiles(paths)
    plate2 = got["Metadata_Plate"] == "P2"
    assert got.loc[plate2, "Metadata_Extra"].isna().all() and got.loc[~plate2, "Metadata_Extra"].notna().all()
    assert got["Metadata_Site"].tolist() == table["Metadata_Site"].tolist()


def test_profile_source_batches_a_parquet_or_a_table(tmp_path, rng):
    _, table = plate_files(tmp_path, rng)
    table.iloc[::2].to_parquet(tmp_path / "t.parquet")  # index stored as a column
    src = ProfileSource(tmp_path / "t.parquet", batch_rows=5)
    assert src.num_rows == len(table.iloc[::2]) and src.columns == list(table.columns)
    sizes = [b.num_rows for b in src.batches(["Metadata_Batch", "emb_0001"])]
    assert max(sizes) <= 5 and sum(sizes) == src.num_rows
    memory = ProfileSource(table.iloc[::2], batch_rows=5)
    got = np.concatenate([b.column("emb_0001").to_numpy() for b in memory.batches(["emb_0001"])])
    np.testing.assert_array_equal(got, table["emb_0001"].to_numpy()[::2])
    with pytest.raises(ScreenError, match=r"t.parquet: missing column\(s\) \['Metadata_Nope'\]"):
        next(src.batches(["Metadata_Nope"]))


def test_the_gather_reads_its_level_and_features_from_the_validated_config(tmp_path, rng):
    """GatherOptions: the schema's defaults (image level, phenoica's own ``emb_`` features), the
    screen's feature keys as one FeatureSelection; the rows per batch are no part of the params."""
    paths, table = plate_files(tmp_path, rng)
    default = GatherOptions.from_config(validate_config({}))
    assert default.level == "image" and default.selection == FeatureSelection()
    config = {"screen": {"feature_columns": FEATURES[:2]}, "profiles": {"level": "well", "batch_rows": 3}}
    options = GatherOptions.from_config(validate_config(config))
    assert options.selection == FeatureSelection(columns=tuple(FEATURES[:2]))
    out = tmp_path / "profiles.parquet"
    write_profiles(paths, out, options.level, options.embedding_column, options.batch_rows, options.selection)
    got = pd.read_parquet(out)
    assert [c for c in got.columns if c.startswith("emb_")] == FEATURES[:2]
    assert len(got) == len(table.drop_duplicates(["Metadata_Plate", "Metadata_Well"]))
    assert max(row_groups(out)) == 3  # row groups of profiles.batch_rows rows
    assert repr(options._replace(batch_rows=99)) == repr(options) and "batch_rows" not in repr(options)
    assert repr(options._replace(level="image")) != repr(options)
    regex = GatherOptions.from_config(validate_config({"screen": {"feature_regex": "emb_000[13]"}}))
    assert regex.selection == FeatureSelection(regex="emb_000[13]")
    assert list(gather_profiles(paths, selection=regex.selection).columns[-2:]) == [FEATURES[1], FEATURES[3]]
