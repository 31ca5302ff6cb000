"""Bad input fails early, names what is wrong and leads to the fix: the data contract's
invariants, the messages of issue 12, and the up-front check of a whole screen against its
models (``phenoica.validate``), before any plate is worked on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from phenoica import workflow as wf
from phenoica.config import ConfigError, validate_config
from phenoica.screen import ScreenError, read_plate_metadata, validate_metadata, validate_screen_metadata
from phenoica.validate import validate_screen
from tests.conftest import REPO, make_metadata

# --------------------------------------------------------------------------- data contract


def test_guide_under_two_genes_names_guide_genes_and_rows(metadata):
    bad = metadata.copy()
    bad.loc[bad["Metadata_Guide"] == "G3_g1", "Metadata_Guide"] = "G1_g1"  # G1_g1 now targets G1 and G3
    with pytest.raises(ScreenError) as err:
        validate_metadata(bad, source="meta.csv")
    first_g1 = int(bad.index[bad["Metadata_Gene"] == "G1"][0])
    first_g3 = int(bad.index[bad["Metadata_Gene"] == "G3"][0])
    assert (
        f"meta.csv: guide 'G1_g1' is listed under 2 genes: 'G1' (e.g. row {first_g1}), "
        f"'G3' (e.g. row {first_g3}); a guide targets one gene"
    ) in str(err.value)


def test_gene_under_two_pert_types_on_different_plates_is_a_screen_error(metadata):
    bad = metadata.copy()
    rows = bad.index[(bad["Metadata_Plate"] == "P2") & (bad["Metadata_Gene"] == "G1")]
    bad.loc[rows, ["Metadata_Gene", "Metadata_Guide"]] = ["non-targeting", "NTC"]
    bad.loc[rows, "Metadata_PertType"] = "perturbation"  # NTC is a control on P1, a perturbation on P2
    # each plate alone is consistent ...
    for plate in ("P1",):
        validate_metadata(bad[bad["Metadata_Plate"] == plate])
    # ... the screen is not, and the error names the rows of both
    with pytest.raises(
        ScreenError,
        match=r"gene 'non-targeting' is listed under both PertTypes: 'control' \(e\.g\. row 0\), "
        rf"'perturbation' \(e\.g\. row {rows[0]}\)",
    ):
        validate_screen_metadata(bad)


def test_well_with_two_perturbations_and_plate_in_two_batches(metadata):
    bad = metadata.copy()
    bad.loc[1, ["Metadata_Gene", "Metadata_Guide", "Metadata_PertType"]] = ["G1", "G1_g1", "perturbation"]
    bad.loc[bad["Metadata_Plate"] == "P2", "Metadata_Batch"] = "B1"
    bad.loc[len(bad) - 1, "Metadata_Batch"] = "B9"
    with pytest.raises(ScreenError) as err:
        validate_metadata(bad, source="meta.csv")
    text = str(err.value)
    assert (
        "well (P1, A01) holds more than one perturbation: Metadata_Gene 'G1' (e.g. row 1), 'non-targeting' "
        "(e.g. row 0); Metadata_Guide 'G1_g1' (e.g. row 1), 'NTC' (e.g. row 0); Metadata_PertType"
    ) in text
    assert "plate 'P2' is in 2 batches: 'B1' (e.g. row 8), 'B9' (e.g. row 15); a plate belongs to one batch" in text
    assert text.startswith("meta.csv: ") and "problems:" in text  # every problem at once


def test_batch_without_controls():
    meta = make_metadata(n_plates=4)  # batches B1 (P1, P2), B2 (P3, P4)
    meta.loc[(meta["Metadata_Batch"] == "B2") & (meta["Metadata_PertType"] == "control"), "Metadata_PertType"] = (
        "perturbation"
    )
    meta.loc[meta["Metadata_Gene"] == "non-targeting", "Metadata_PertType"] = "control"
    meta.loc[
        (meta["Metadata_Batch"] == "B2") & (meta["Metadata_Gene"] == "non-targeting"),
        ["Metadata_Gene", "Metadata_Guide", "Metadata_PertType"],
    ] = ["G8", "G8_g1", "perturbation"]
    validate_metadata(meta)  # per table it is fine
    with pytest.raises(ScreenError, match=r"batch\(es\) \['B2'\] have no control rows"):
        validate_screen_metadata(meta)


def test_near_miss_columns_are_all_named_with_the_column_meant(metadata):
    bad = metadata.rename(
        columns={
            "Metadata_Gene": "Metadata_gene",
            "Metadata_Guide": "Metadata_Guide ",
            "Metadata_Plate": "metadata_plate",
        }
    )
    with pytest.raises(ScreenError) as err:
        validate_metadata(bad, source="meta.csv")
    text = str(err.value)
    assert "missing required column(s) ['Metadata_Plate', 'Metadata_Gene', 'Metadata_Guide']" in text
    for meant, found in (
        ("Metadata_Gene", "Metadata_gene"),
        ("Metadata_Guide", "Metadata_Guide "),
        ("Metadata_Plate", "metadata_plate"),
    ):
        assert f"column {found!r} is probably {meant}" in text


def test_row_numbers_count_within_the_users_file(tmp_path, metadata):
    bad = metadata.copy()
    bad.loc[13, "Metadata_PertType"] = "treated"  # the 14th data row: plate P2, its 6th row
    for name in ("m.csv", "m.parquet"):
        path = tmp_path / name
        bad.to_csv(path, index=False) if name.endswith(".csv") else bad.to_parquet(path)
        with pytest.raises(ScreenError, match=rf"{name} \(plate P2\): column Metadata_PertType row 13 is 'treated'"):
            read_plate_metadata(path, "P2")


def test_zero_row_metadata_says_so(tmp_path, metadata):
    path = tmp_path / "empty.parquet"
    metadata.iloc[:0].to_parquet(path)
    cfg = validate_config({"screen": {"source": "zarr", "metadata": str(path), "plates_dir": str(tmp_path)}})
    wf._table.cache_clear()
    with pytest.raises(ScreenError, match=r"empty\.parquet: the table has no rows; expected one row per image"):
        wf.screen_plates(cfg)
    with pytest.raises(ScreenError, match="the table has no rows"):
        validate_metadata(metadata.iloc[:0])


def test_plate_names_with_whitespace_are_one_plate_everywhere(tmp_path, metadata):
    spaced = metadata.copy()
    spaced["Metadata_Plate"] = spaced["Metadata_Plate"] + " "
    spaced.loc[0, "Metadata_Plate"] = " P1"
    path = tmp_path / "m.parquet"
    spaced.to_parquet(path)
    cfg = validate_config({"screen": {"source": "zarr", "metadata": str(path), "plates_dir": str(tmp_path)}})
    wf._table.cache_clear()
    wf.plate_digests.cache_clear()
    assert wf.screen_plates(cfg) == {"P1": "B1", "P2": "B1"}
    assert wf.plate_digest(cfg, "P1") and wf.plate_digest(cfg, "P1") != wf.plate_digest(cfg, "P2")
    rows = read_plate_metadata(path, "P1")
    assert set(rows["Metadata_Plate"]) == {"P1"} and len(rows) == (metadata["Metadata_Plate"] == "P1").sum()
    from phenoica.ingest import validate_plate_map

    wells = metadata.drop(columns=["Metadata_Site", "Metadata_ImageIndex"]).drop_duplicates(
        ["Metadata_Plate", "Metadata_Well"]
    )
    wells["Metadata_Plate"] = wells["Metadata_Plate"] + " "
    assert set(validate_plate_map(wells)["Metadata_Plate"]) == {"P1", "P2"}


def test_plate_map_guide_under_two_genes():
    from phenoica.ingest import validate_plate_map

    wells = (
        make_metadata()
        .drop(columns=["Metadata_Site", "Metadata_ImageIndex"])
        .drop_duplicates(["Metadata_Plate", "Metadata_Well"])
        .reset_index(drop=True)
    )
    wells.loc[wells["Metadata_Guide"] == "G3_g1", "Metadata_Guide"] = "G1_g1"
    with pytest.raises(
        ScreenError,
        match=r"map\.csv: guide 'G1_g1' is listed under 2 genes: 'G1' \(e\.g\. row 1\), 'G3' \(e\.g\. row 3\)",
    ):
        validate_plate_map(wells, source="map.csv")


def test_embeddings_from_elsewhere_keep_the_contract_across_files(tmp_path, metadata, rng):
    from phenoica.profiles import write_profiles

    df = metadata.copy()
    df["emb_0000"] = rng.normal(size=len(df)).astype(np.float32)
    a, b = df[df["Metadata_Plate"] == "P1"], df[df["Metadata_Plate"] == "P2"].copy()
    b.loc[b["Metadata_Guide"] == "G1_g1", "Metadata_Gene"] = "G7"
    b.loc[b["Metadata_Gene"] == "G3", "Metadata_Gene"] = "G3"
    a.to_parquet(tmp_path / "a.parquet")
    b.to_parquet(tmp_path / "b.parquet")
    with pytest.raises(
        ScreenError, match=r"guide 'G1_g1' is listed under 2 genes: 'G1' in .*a\.parquet, 'G7' in .*b\.parquet"
    ):
        write_profiles([tmp_path / "a.parquet", tmp_path / "b.parquet"], tmp_path / "out.parquet")
    nocontrol = df[df["Metadata_Plate"] == "P2"].copy()
    nocontrol["Metadata_Batch"] = "B2"
    nocontrol = nocontrol[nocontrol["Metadata_PertType"] == "perturbation"]
    nocontrol.to_parquet(tmp_path / "b.parquet")
    with pytest.raises(ScreenError, match=r"batch\(es\) \['B2'\] have no control rows"):
        write_profiles([tmp_path / "a.parquet", tmp_path / "b.parquet"], tmp_path / "out.parquet")
    assert not (tmp_path / "out.parquet").exists()


# --------------------------------------------------------------------------- messages


def test_int8_tiles_are_rejected_by_the_library_as_by_the_workflow():
    from phenoica.preprocess import prepare

    with pytest.raises(ScreenError, match="unsupported dtype int8; expected uint8 or uint16"):
        prepare(np.zeros((1, 2, 8, 8), np.int8), 8, source="P1.zarr")
    with pytest.raises(ScreenError, match="unsupported dtype int32"):
        prepare(np.zeros((1, 2, 8, 8), np.int32), 8, intensity_max=100.0)
    assert prepare(np.zeros((1, 2, 8, 8), np.uint16), 8).shape == (1, 1, 2, 8, 8)


def test_truncated_safetensors_names_its_path(tmp_path):
    from phenoica.models.checkpoint import CheckpointError
    from phenoica.models.features import build_feature_extractor
    from phenoica.models.vit import build_encoder, save_checkpoint

    spec = validate_config({})["models"]["mae"]
    path = save_checkpoint(build_encoder(spec, 3), spec, tmp_path / "enc.safetensors")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=rf"{path}: cannot read safetensors checkpoint"):
        build_feature_extractor(spec, 3, path)


def test_misspelt_rule_under_resources_is_named():
    with pytest.raises(ConfigError, match=r"resources\.clasify \(did you mean classify\?\): no rule of that name"):
        validate_config({"resources": {"clasify": {"cpus": 2}}})
    assert validate_config({"resources": {"classify": {"cpus": 2}}})["resources"]["classify"]["cpus"] == 2


def test_rule_names_of_the_config_are_the_workflows_rules():
    import re

    from phenoica.config import RULE_NAMES

    defined = set()
    for smk in (REPO / "rules").glob("*.smk"):
        defined |= set(re.findall(r"^\s*rule (\w+):", smk.read_text(), flags=re.M))
    targets = {"all", "disentangle", "bilipschitz"}  # run nothing, take no resources
    assert set(RULE_NAMES) == defined - targets


# --------------------------------------------------------------------------- the screen vs its models


def _tiny() -> dict:
    return validate_config(yaml.safe_load((REPO / "config" / "scenarios" / "demo.yaml").read_text()))


def test_valid_demo_screen_passes_and_reports_its_geometry(tmp_path):
    cfg = _tiny()
    report = validate_screen(
        cfg["screen"], wf.screen_plates(cfg), cfg["models"], None, cfg["demo"], out=tmp_path / "v.json"
    )
    assert report["plates"]["B01P01"]["channels"] == cfg["demo"]["channels"]
    assert report["models"]["mae"]["crop_size"] == [16]
    assert (tmp_path / "v.json").exists()


def test_crop_and_channel_mismatches_are_all_found_up_front(tmp_path):
    from phenoica.models.vit import build_encoder, save_checkpoint

    cfg = _tiny()
    spec = dict(cfg["models"]["mae"])
    ckpt = save_checkpoint(build_encoder(spec, 3), spec, tmp_path / "three.safetensors")
    models = {
        "mae": {**spec, "checkpoint": str(ckpt)},  # 3 channels, the screen has 5
        "big": {**spec, "img_size": 64, "patch_size": 8},  # crop 64 > 32 px images
        "picky": {**spec, "channels": ["nucleus", "dapi"]},
    }  # no channel dapi
    with pytest.raises(ScreenError) as err:
        validate_screen(cfg["screen"], wf.screen_plates(cfg), models, None, cfg["demo"], out=tmp_path / "v.json")
    text = str(err.value)
    assert "3 problems" in text and str(ckpt) in text
    assert "smaller than model big's crop size 64" in text
    assert "channel(s) ['dapi'] named by config key models.picky.channels are not in the plate's channels" in text
    assert not (tmp_path / "v.json").exists()


def _zarr_screen(tmp_path: Path) -> tuple[dict, pd.DataFrame, Path]:
    from phenoica.sources.demo.plates import simulate_screen

    cfg = _tiny()
    meta = simulate_screen(cfg["demo"], 0, tmp_path / "screen")
    table = tmp_path / "screen" / "metadata.parquet"
    cfg["screen"] = {
        **cfg["screen"],
        "source": "zarr",
        "metadata": str(table),
        "plates_dir": str(tmp_path / "screen" / "plates"),
    }
    return cfg, meta, table


def test_zarr_screen_store_problems_are_found_before_any_plate_job(tmp_path):
    import shutil

    cfg, meta, table = _zarr_screen(tmp_path)
    plates = wf.screen_plates(cfg)
    assert validate_screen(cfg["screen"], plates, cfg["models"], None)["plates"]["B02P01"]["images"] == 72
    shutil.rmtree(tmp_path / "screen" / "plates" / "B03P01.zarr")
    bad = meta.copy()
    bad.loc[bad.index[bad["Metadata_Plate"] == "B02P01"][0], "Metadata_ImageIndex"] = 500
    bad.to_parquet(table)
    wf._table.cache_clear()  # a new process would read the edited table
    with pytest.raises(ScreenError) as err:
        validate_screen(cfg["screen"], plates, cfg["models"], None)
    text = str(err.value)
    assert "B03P01.zarr: plate store not found" in text
    assert "B02P01.zarr: metadata row (plate B02P01" in text and "out of range for 72 images" in text


def test_a_screen_that_passed_is_not_checked_again_until_it_changes(tmp_path, monkeypatch):
    from phenoica import validate

    cfg, meta, table = _zarr_screen(tmp_path)
    plates = wf.screen_plates(cfg)
    record = tmp_path / "validated.json"
    first = validate.check_screen_once(cfg, plates, record)
    assert record.exists() and first["plates"]["B01P01"]["images"] == 72

    def must_not_run(*args, **kwargs):
        raise AssertionError("checked again")

    monkeypatch.setattr(validate, "validate_screen", must_not_run)
    assert validate.check_screen_once(cfg, plates, record)["key"] == first["key"]
    # another crop size, or edited rows of a plate, are another screen: checked again
    with pytest.raises(AssertionError, match="checked again"):
        validate.check_screen_once({**cfg, "embed": {**cfg["embed"], "crop_size": 8}}, plates, record)
    meta.assign(Metadata_Extra=1).to_parquet(table)
    wf._table.cache_clear()
    wf.plate_digests.cache_clear()
    with pytest.raises(AssertionError, match="checked again"):
        validate.check_screen_once(cfg, plates, record)


def test_image_and_hcs_plate_geometry_without_reading_the_plates(tmp_path):
    """The screen check reads a plate's channels and image size from file names and one header
    (images) or from NGFF metadata (OME-Zarr), as ingest would find them."""
    from phenoica import ingest
    from tests.test_ingest import H, W, hcs_pixels, make_pixels, write_hcs_by_hand_v3, write_png

    root = tmp_path / "images"
    for (well, site, ch), arr in make_pixels("uint8", 0, ["1", "2", "3"]).items():
        write_png(root / "P1" / f"{well}_s{site}_w{ch}.png", arr)
    pattern = "{plate}/{well}_s{site}_w{channel}.png"
    assert ingest.image_plate_geometry(root, pattern, "P1") == (["1", "2", "3"], (H, W))
    assert ingest.image_plate_geometry(root, pattern, "P1", ["3", "1"]) == (["3", "1"], (H, W))
    with pytest.raises(ScreenError, match=r"\(plate P9\): no image files match the pattern"):
        ingest.image_plate_geometry(root, pattern, "P9")
    write_hcs_by_hand_v3(tmp_path / "P1.zarr", hcs_pixels("uint16", (1, 2, 1, H, W), seed=0))
    assert ingest.hcs_plate_geometry(tmp_path / "P1.zarr") == (["c0", "c1"], (H, W))
