"""Bad input fails early, names what is wrong and leads to the fix: the data contract's
invariants, the messages that name the culprit and the fix, and the up-front check of a whole screen against its
models (``phenoica.workflow._validate``), before any plate is worked on."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from phenoica.contract import (
    ConfigError,
    ScreenError,
    read_plate_metadata,
    validate_config,
    validate_metadata,
    validate_screen_metadata,
)
from phenoica.workflow import _dag as wf
from phenoica.workflow import _digests as wdigests
from phenoica.workflow._results_folder import ResultsFolderError
from phenoica.workflow._validate import validate_screen
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
    wdigests.plate_digests.cache_clear()
    assert wf.screen_plates(cfg) == {"P1": "B1", "P2": "B1"}
    assert wdigests.plate_digest(cfg, "P1") and wdigests.plate_digest(cfg, "P1") != wdigests.plate_digest(cfg, "P2")
    rows = read_plate_metadata(path, "P1")
    assert set(rows["Metadata_Plate"]) == {"P1"} and len(rows) == (metadata["Metadata_Plate"] == "P1").sum()
    from phenoica.screen import validate_plate_map

    wells = metadata.drop(columns=["Metadata_Site", "Metadata_ImageIndex"]).drop_duplicates(
        ["Metadata_Plate", "Metadata_Well"]
    )
    wells["Metadata_Plate"] = wells["Metadata_Plate"] + " "
    assert set(validate_plate_map(wells)["Metadata_Plate"]) == {"P1", "P2"}


def test_plate_map_guide_under_two_genes():
    from phenoica.screen import validate_plate_map

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
    from phenoica.screen import prepare

    with pytest.raises(ScreenError, match="unsupported dtype int8; expected uint8 or uint16"):
        prepare(np.zeros((1, 2, 8, 8), np.int8), 8, source="P1.zarr")
    with pytest.raises(ScreenError, match="unsupported dtype int32"):
        prepare(np.zeros((1, 2, 8, 8), np.int32), 8, intensity_max=100.0)
    assert prepare(np.zeros((1, 2, 8, 8), np.uint16), 8).shape == (1, 1, 2, 8, 8)


def test_truncated_safetensors_names_its_path(tmp_path):
    from phenoica.models import CheckpointError, build_feature_extractor
    from phenoica.models._vit import build_encoder, save_checkpoint

    spec = validate_config({})["models"]["mae"]
    path = save_checkpoint(build_encoder(spec, 3), spec, tmp_path / "enc.safetensors")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=rf"{path}: cannot read safetensors checkpoint"):
        build_feature_extractor(spec, 3, path)


def test_misspelt_rule_under_resources_is_named():
    from phenoica.workflow import check_resource_rules, resource_rules

    rules = resource_rules(REPO / "rules")
    with pytest.raises(ConfigError, match=r"resources\.clasify \(did you mean classify\?\): no rule of that name"):
        check_resource_rules(validate_config({"resources": {"clasify": {"cpus": 2}}})["resources"], rules)
    resources = validate_config({"resources": {"classify": {"cpus": 2}, "ingest_images": {"cpus": 2}}})["resources"]
    check_resource_rules(resources, rules)  # a rule of another screen source is a rule too
    assert resources["classify"]["cpus"] == 2


def test_the_rules_that_take_resources_are_the_workflows_job_rules():
    import re

    from phenoica.workflow import resource_rules

    defined = set()
    for smk in (REPO / "rules").glob("*.smk"):
        defined |= set(re.findall(r"^\s*rule (\w+):", smk.read_text(), flags=re.M))
        # a family of rules written once in a loop (``rule:`` / ``name: embed_rule.name``) counts as its family
        defined |= set(re.findall(r"^\s*rule:\n\s*name:\n\s*(\w+)_rule\.name", smk.read_text(), flags=re.M))
    targets = {"all", "disentangle", "bilipschitz"}  # run nothing, take no resources
    assert resource_rules(REPO / "rules") == defined - targets


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
    from phenoica.models._vit import build_encoder, save_checkpoint

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
    from phenoica.screen import DemoOptions
    from phenoica.screen.demo import simulate_screen

    cfg = _tiny()
    meta = simulate_screen(DemoOptions.from_config(cfg)._replace(seed=0), tmp_path / "screen")
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
    from phenoica.workflow import _validate as validate

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
    wdigests.plate_digests.cache_clear()
    with pytest.raises(AssertionError, match="checked again"):
        validate.check_screen_once(cfg, plates, record)


def test_image_and_hcs_plate_geometry_without_reading_the_plates(tmp_path):
    """The screen check reads a plate's channels and image size from file names and one header
    (images) or from NGFF metadata (OME-Zarr), as ingest would find them."""
    from phenoica.screen import hcs_plate_geometry, image_plate_geometry
    from tests.test_ingest import H, W, hcs_pixels, make_pixels, write_hcs_by_hand_v3, write_png

    root = tmp_path / "images"
    for (well, site, ch), arr in make_pixels("uint8", 0, ["1", "2", "3"]).items():
        write_png(root / "P1" / f"{well}_s{site}_w{ch}.png", arr)
    pattern = "{plate}/{well}_s{site}_w{channel}.png"
    assert image_plate_geometry(root, pattern, "P1") == (["1", "2", "3"], (H, W))
    assert image_plate_geometry(root, pattern, "P1", ["3", "1"]) == (["3", "1"], (H, W))
    with pytest.raises(ScreenError, match=r"\(plate P9\): no image files match the pattern"):
        image_plate_geometry(root, pattern, "P9")
    write_hcs_by_hand_v3(tmp_path / "P1.zarr", hcs_pixels("uint16", (1, 2, 1, H, W), seed=0))
    assert hcs_plate_geometry(tmp_path / "P1.zarr") == (["c0", "c1"], (H, W))


# --------------------------------------------------------------------------- one table of cases
# Each case builds a bad input in tmp_path and calls what the workflow calls at the door (or the
# library function a user would); the error must name the file / column / row / key and what
# was expected. docs/bad-input.md lists the same cases.


def _emb(meta: pd.DataFrame, seed: int = 0, d: int = 3) -> pd.DataFrame:
    df = meta.copy()
    values = np.random.default_rng(seed).normal(size=(len(df), d)).astype(np.float32)
    for i in range(d):
        df[f"emb_{i:04d}"] = values[:, i]
    return df


def _emb_screen(tmp_path: Path, frames: dict[str, pd.DataFrame], **screen) -> dict:
    """A source-embeddings config over the given files (name -> table)."""
    folder = tmp_path / "emb"
    folder.mkdir(exist_ok=True)
    for name, df in frames.items():
        df.to_parquet(folder / name)
    cfg = {
        "results": str(tmp_path / "res"),
        "screen": {"source": "embeddings", "embeddings": str(folder / "*.parquet")},
    }
    cfg["screen"].update(screen)
    from phenoica.contract import run_models

    return validate_config(run_models(cfg))


def _door(cfg: dict, plates: dict | None = None) -> dict:
    from phenoica.workflow import _validate as validate

    wf._table.cache_clear()
    wdigests.plate_digests.cache_clear()
    return validate.check_screen_once(cfg, plates or {}, Path(cfg["results"]) / "validated.json")


def _four_plates() -> pd.DataFrame:
    return make_metadata(n_plates=4)  # batches B1 (P1, P2), B2 (P3, P4); guides G1_g1, G3_g1 everywhere


def _by_plate(meta: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {f"{p}.parquet": _emb(rows) for p, rows in meta.groupby("Metadata_Plate")}


def case_counter_column(tmp_path):
    frames = _by_plate(_four_plates())
    for df in frames.values():
        df["cell_id"] = np.arange(len(df), dtype=np.int64)  # an ImageNumber under another name
    _door(_emb_screen(tmp_path, frames, feature_regex="emb_.*|cell_id"))


def case_prefix_chooses_nothing(tmp_path):
    frames = {k: v.rename(columns=lambda c: c.replace("emb_", "f")) for k, v in _by_plate(_four_plates()).items()}
    _door(_emb_screen(tmp_path, frames))


def case_named_feature_absent(tmp_path):
    _door(_emb_screen(tmp_path, _by_plate(_four_plates()), feature_columns=["emb_0000", "emb_00001"]))


def case_reexported_plate(tmp_path):
    frames = _by_plate(_four_plates())
    frames["P1_reexport.parquet"] = frames["P1.parquet"]
    _door(_emb_screen(tmp_path, frames))


def case_duplicate_site_in_a_well(tmp_path):
    bad = _four_plates()
    bad.loc[1, "Metadata_Site"] = 0  # two rows are (P1, A01, site 0)
    validate_metadata(bad, source="meta.csv")


def case_plate_in_two_batches_across_files(tmp_path):
    meta = _four_plates()
    frames = _by_plate(meta)
    frames["P2.parquet"].loc[frames["P2.parquet"].index[:2], "Metadata_Batch"] = "B2"
    _door(_emb_screen(tmp_path, frames))


def case_well_with_two_perturbations_across_files(tmp_path):
    meta = _four_plates()
    frames = _by_plate(meta)
    extra = frames["P1.parquet"].iloc[[2]].copy()  # well A02 of P1 (gene G1) again, as gene G3
    extra[["Metadata_Gene", "Metadata_Guide", "Metadata_Site"]] = ["G3", "G3_g1", 9]
    frames["extra.parquet"] = extra
    _door(_emb_screen(tmp_path, frames))


def case_one_batch(tmp_path):
    _door(_emb_screen(tmp_path, _by_plate(make_metadata(n_plates=2))))


def case_guide_in_one_batch(tmp_path):
    meta = _four_plates()
    meta.loc[
        (meta["Metadata_Batch"] == "B2") & (meta["Metadata_Gene"] == "G3"), ["Metadata_Gene", "Metadata_Guide"]
    ] = [
        "G5",
        "G5_g1",
    ]
    _door(_emb_screen(tmp_path, _by_plate(meta)))


def case_controls_only(tmp_path):
    meta = _four_plates()
    meta = meta[meta["Metadata_PertType"] == "control"]
    _door(_emb_screen(tmp_path, _by_plate(meta)))


def case_batch_without_controls(tmp_path):
    meta = _four_plates()
    meta = meta[~((meta["Metadata_Batch"] == "B2") & (meta["Metadata_PertType"] == "control"))]
    _door(_emb_screen(tmp_path, _by_plate(meta)))


def case_annotations_semicolon(tmp_path):
    (tmp_path / "ann.csv").write_text("entity1;entity2\nG1;G3\n")
    cfg = _emb_screen(tmp_path, _by_plate(_four_plates()), feature_prefix="emb_")
    cfg["biomap"]["annotations"] = {"mine": str(tmp_path / "ann.csv")}
    _door(cfg)


def case_float32_overflow(tmp_path):
    from phenoica.profiles import write_profiles

    df = _emb(_four_plates())
    df["emb_0001"] = df["emb_0001"].astype(np.float64)
    df.loc[5, "emb_0001"] = 1e39
    df.to_parquet(tmp_path / "big.parquet")
    write_profiles([tmp_path / "big.parquet"], tmp_path / "out.parquet")


def case_results_empty(tmp_path):
    validate_config({"results": ""})


def case_moved_key(tmp_path):
    validate_config({"classify": {"q_threshold": 0.1}, "transforms": {"sweep_points": 0}})


def case_results_is_a_file(tmp_path):
    (tmp_path / "r").write_text("x")
    validate_config({"results": str(tmp_path / "r")})


def case_results_read_only(tmp_path):
    import os

    if os.geteuid() == 0:  # root writes anywhere: stand in for a read-only folder
        import phenoica.contract._config as config_module

        real = os.access
        config_module.os.access = lambda p, mode: False if str(p).endswith("classify") else real(p, mode)
        try:
            (tmp_path / "r" / "classify").mkdir(parents=True)
            validate_config({"results": str(tmp_path / "r")})
        finally:
            config_module.os.access = real
        return
    (tmp_path / "r" / "classify").mkdir(parents=True)
    (tmp_path / "r" / "classify").chmod(0o500)
    validate_config({"results": str(tmp_path / "r")})


def case_model_named_dotdot(tmp_path):
    validate_config({"models": {"..": {}}})


def case_model_named_with_slash(tmp_path):
    validate_config({"models": {"a/../../b": {}}})


def case_plate_name_traversal(tmp_path):
    meta = _four_plates()
    meta.loc[meta["Metadata_Plate"] == "P2", "Metadata_Plate"] = "../P2"
    meta.to_csv(tmp_path / "m.csv", index=False)
    cfg = validate_config({"screen": {"source": "zarr", "metadata": str(tmp_path / "m.csv"), "plates_dir": "x"}})
    wf._table.cache_clear()
    wf.screen_plates(cfg)


def case_plate_name_control_character(tmp_path):
    meta = _four_plates()
    meta.loc[meta["Metadata_Plate"] == "P2", "Metadata_Plate"] = "P\x072"
    meta.to_parquet(tmp_path / "m.parquet")
    cfg = validate_config({"screen": {"source": "zarr", "metadata": str(tmp_path / "m.parquet"), "plates_dir": "x"}})
    wf._table.cache_clear()
    wf.screen_plates(cfg)


def case_yaml_duplicate_key(tmp_path):
    from phenoica.contract import load_config

    (tmp_path / "c.yaml").write_text("classify:\n  n_shards: 2\nseed: 1\nclassify:\n  num_boost_round: 5\n")
    load_config(tmp_path / "c.yaml")


def case_yaml_python_tag(tmp_path):
    from phenoica.contract import load_config

    (tmp_path / "c.yaml").write_text("seed: !!python/object/apply:os.system ['true']\n")
    load_config(tmp_path / "c.yaml")


def case_n_components_negative(tmp_path):
    validate_config({"transforms": {"n_components": -3}})


def case_checkpoint_is_a_folder(tmp_path):
    (tmp_path / "ckpt").mkdir()
    cfg = _tiny()
    cfg["models"] = {"m": {**cfg["models"]["mae"], "checkpoint": str(tmp_path / "ckpt")}}
    validate_screen(cfg["screen"], wf.screen_plates(cfg), cfg["models"], None, cfg["demo"])


def case_latin1_csv(tmp_path):
    meta = _four_plates()
    meta.loc[0, "Metadata_Extra"] = "Zellkern-Färbung"
    (tmp_path / "m.csv").write_bytes(meta.to_csv(index=False).encode("latin-1"))
    read_plate_metadata(tmp_path / "m.csv", "P1")


def case_semicolon_csv(tmp_path):
    _four_plates().to_csv(tmp_path / "m.csv", index=False, sep=";")
    read_plate_metadata(tmp_path / "m.csv", "P1")


def case_embedding_column_and_emb_columns(tmp_path):
    frames = _by_plate(_four_plates())
    for df in frames.values():
        df["vec"] = list(df[["emb_0000", "emb_0001"]].to_numpy())
    _door(_emb_screen(tmp_path, frames, feature_regex="emb_.*", embedding_column="vec"))


def case_hostile_npz(tmp_path):
    from phenoica.transforms._serialize import read_transform

    np.savez(tmp_path / "t.npz", meta=np.array([{"x": 1}], dtype=object))
    read_transform(tmp_path / "t.npz")


def case_hostile_pickle_checkpoint(tmp_path):
    import pickle

    from phenoica.models._checkpoint import read_checkpoint

    class Boom:
        def __reduce__(self):
            return (exec, ("raise SystemExit('pickle code ran')",))

    (tmp_path / "evil.safetensors").write_bytes(pickle.dumps({"model": Boom()}))  # raw pickle, a safetensors name
    read_checkpoint(tmp_path / "evil.safetensors")


def case_hostile_torch_zip(tmp_path):
    import torch

    from phenoica.models._checkpoint import read_checkpoint

    class Boom:
        def __reduce__(self):
            return (exec, ("raise SystemExit('pickle code ran')",))

    torch.save({"model": Boom()}, tmp_path / "evil.pth")  # torch's zip layout, a pickle inside
    (tmp_path / "evil.pth").rename(tmp_path / "evil.safetensors")
    read_checkpoint(tmp_path / "evil.safetensors")


# --------------------------------------------------------------------------- LoadData
# Two LoadData plates (PL1 in batch B1, PL2 in B2; one CSV each, relative PathName, 32x32 uint16
# TIFFs: tests.test_loaddata.write_fixture) and their plate map. Each case breaks one thing and
# runs what the door runs before the models (phenoica.workflow._validate), or the ingest job.

LOADDATA_PLATES = ("PL1", "PL2")


def _loaddata_screen(tmp_path: Path, **screen) -> dict:
    """A source-loaddata config over the two plates' CSVs (a glob) and plate map."""
    from phenoica.contract import run_models
    from tests.test_loaddata import write_fixture

    maps = [
        write_fixture(tmp_path, plate=p, shape=(32, 32), batch=f"B{i + 1}")[1] for i, p in enumerate(LOADDATA_PLATES)
    ]
    pd.concat(maps).to_csv(tmp_path / "plate_map.csv", index=False)
    cfg = {
        "results": str(tmp_path / "res"),
        "screen": {
            "source": "loaddata",
            "plate_map": str(tmp_path / "plate_map.csv"),
            "loaddata": str(tmp_path / "load_data_with_illum_*.csv"),
            **screen,
        },
        "classify": {"n_null_guides": 10},  # one control well a batch: no note on pseudo-guides
    }
    return validate_config(run_models(cfg))


def _loaddata_csv(tmp_path: Path, plate: str = "PL1") -> Path:
    return tmp_path / f"load_data_with_illum_{plate}.csv"


def _edit_csv(path: Path, edit) -> None:
    """Rewrite a CSV after ``edit(table)`` (read as text, so that nothing else changes)."""
    edit(pd.read_csv(path, dtype=str, keep_default_na=False)).to_csv(path, index=False)


def _clear_loaddata_caches() -> None:
    from phenoica.screen import _loaddata as loaddata

    for cached in (
        wf._table,
        wdigests.plate_digests,
        loaddata.cached_table,
        loaddata._plate_index,
        loaddata._cached_map,
    ):
        cached.cache_clear()


def _loaddata_door(cfg: dict) -> dict:
    """The door of a LoadData screen up to the models: the contract and its notes, then each
    plate's files and geometry; raises as the door does, else returns the notes and geometry."""
    import logging

    from phenoica.contract import raise_problems
    from phenoica.workflow import _validate as validate

    _clear_loaddata_caches()
    plates = wf.screen_plates(cfg)
    problems, notes, _ = validate.contract_problems(cfg, plates, logging.getLogger("phenoica.test"))
    raise_problems("screen (loaddata)", problems)
    geometry = validate.plate_geometry(cfg["screen"], plates, problems)
    raise_problems("screen (loaddata)", problems)
    return {"notes": notes, "plates": geometry}


def case_loaddata_site_as_text(tmp_path):
    cfg = _loaddata_screen(tmp_path)
    _edit_csv(_loaddata_csv(tmp_path), lambda t: t.assign(Metadata_Site=[f"s{s}" for s in t["Metadata_Site"]]))
    _loaddata_door(cfg)


def case_loaddata_site_blank(tmp_path):
    cfg = _loaddata_screen(tmp_path)
    _edit_csv(_loaddata_csv(tmp_path), lambda t: t.assign(Metadata_Site=["1", "2", "", "2", "1", "2"]))
    _loaddata_door(cfg)


def case_loaddata_file_name_blank(tmp_path):
    cfg = _loaddata_screen(tmp_path)
    _edit_csv(
        _loaddata_csv(tmp_path),
        lambda t: t.assign(FileName_OrigER=[*t["FileName_OrigER"][:3], "", *t["FileName_OrigER"][4:]]),
    )
    _loaddata_door(cfg)


def case_loaddata_illum_without_columns(tmp_path):
    cfg = _loaddata_screen(tmp_path, loaddata_illum=True)
    _edit_csv(_loaddata_csv(tmp_path, "PL2"), lambda t: t.drop(columns=[c for c in t.columns if "_Illum" in c]))
    _loaddata_door(cfg)


def case_loaddata_illum_of_another_size(tmp_path):
    cfg = _loaddata_screen(tmp_path, loaddata_illum=True)
    np.save(tmp_path / "illum" / "PL1_IllumER.npy", np.ones((16, 16)))
    _loaddata_door(cfg)


def case_loaddata_csv_lacks_a_channel(tmp_path):
    cfg = _loaddata_screen(tmp_path)  # loaddata_channels not set: every channel, matched by name
    _edit_csv(_loaddata_csv(tmp_path, "PL2"), lambda t: t.drop(columns=["FileName_OrigMito", "PathName_OrigMito"]))
    _loaddata_door(cfg)


def case_loaddata_wells_left_out_leave_a_guide_in_one_batch(tmp_path):
    cfg = _loaddata_screen(tmp_path)
    _edit_csv(_loaddata_csv(tmp_path), lambda t: t[t["Metadata_Well"] != "B01"])  # TP53_2 now only in B2
    _loaddata_door(cfg)


def _ingest_pl1(tmp_path: Path, cfg: dict) -> None:
    """What the ingest job of plate PL1 runs (scripts/ingest_loaddata.py)."""
    from phenoica.screen import LoadDataIngestOptions, ingest_loaddata_plate, read_loaddata, read_plate_map

    options = LoadDataIngestOptions.from_config(cfg)
    ingest_loaddata_plate(
        read_loaddata(options.loaddata),
        read_plate_map(cfg["screen"]["plate_map"]),
        "PL1",
        tmp_path / "out" / "PL1.zarr",
        tmp_path / "out" / "PL1.parquet",
        options,
    )


def _pl1_file(tmp_path: Path, row: int, channel: str) -> Path:
    table = pd.read_csv(_loaddata_csv(tmp_path), dtype=str)
    return tmp_path / table[f"PathName_{channel}"][row] / table[f"FileName_{channel}"][row]


def case_loaddata_image_of_another_size_in_a_later_row(tmp_path):
    import tifffile

    cfg = _loaddata_screen(tmp_path)
    tifffile.imwrite(_pl1_file(tmp_path, 4, "OrigDNA"), np.ones((16, 16), np.uint16))
    _loaddata_door(cfg)  # the door reads one header a plate: the job finds it
    _ingest_pl1(tmp_path, cfg)


def case_loaddata_rgb_image_in_a_later_row(tmp_path):
    import tifffile

    cfg = _loaddata_screen(tmp_path)
    tifffile.imwrite(_pl1_file(tmp_path, 5, "OrigER"), np.ones((32, 32, 3), np.uint8), photometric="rgb")
    _ingest_pl1(tmp_path, cfg)


def case_loaddata_plate_not_in_the_plate_map(tmp_path):
    from tests.test_loaddata import write_fixture

    cfg = _loaddata_screen(tmp_path)
    write_fixture(tmp_path, plate="PL3", shape=(32, 32))  # its CSV matches the glob; the plate map lacks it
    return _loaddata_door(cfg)


def case_loaddata_plate_map_well_without_sites(tmp_path):
    cfg = _loaddata_screen(tmp_path)
    plate_map = pd.read_csv(tmp_path / "plate_map.csv", dtype=str)
    extra = plate_map.iloc[[0]].assign(Metadata_Well="C01")  # another control well of PL1, never imaged
    pd.concat([plate_map, extra]).to_csv(tmp_path / "plate_map.csv", index=False)
    return _loaddata_door(cfg)


def case_loaddata_sites_of_a_well_the_plate_map_lacks(tmp_path):
    cfg = _loaddata_screen(tmp_path)
    _edit_csv(_loaddata_csv(tmp_path), lambda t: pd.concat([t, t.iloc[:2].assign(Metadata_Well="C02")]))
    return _loaddata_door(cfg)


def _arrayed_door(tmp_path: Path, constructs: int = 4, control_wells_per_construct: int = 4, **classify) -> dict:
    """The door on a small simulated arrayed screen (one well per guide per plate, 2 batches of 4
    replicate plates, 4 control wells per plate of each of ``constructs`` control constructs),
    with ``classify`` settings."""
    from phenoica.contract import run_models
    from phenoica.screen import arrayed

    design = arrayed.ArrayedDesign(
        n_effect_genes=2,
        n_null_genes=1,
        n_latent=4,
        n_features=12,
        n_control_constructs=constructs,
        control_wells_per_construct=control_wells_per_construct,
    )
    paths = arrayed.write_arrayed_screen(tmp_path / "arrayed", 0, design)
    cfg = {
        "results": str(tmp_path / "res"),
        "screen": {
            "source": "embeddings",
            "embeddings": str(paths["profiles"] / "*.parquet"),
            "feature_regex": arrayed.FEATURE_REGEX,
        },
        "classify": classify,
    }
    return _door(validate_config(run_models(cfg)))


def case_arrayed_training_rows_below_the_minimum(tmp_path):
    return _arrayed_door(tmp_path, min_train_samples=5)


def case_arrayed_no_readout_can_score(tmp_path):
    return _arrayed_door(tmp_path, min_train_samples=5, map_readout=False)


def case_arrayed_too_few_control_wells_for_the_null(tmp_path):
    # one control well per plate, 4 per batch: a pseudo-guide laid out like a guide takes 1 per plate
    # (4 per batch), and at least one must stay a control
    return _arrayed_door(tmp_path, constructs=1, control_wells_per_construct=1)


# names that are not text, feature rows that are not measurements, settings the schema states
def _named(column: str, name: str) -> dict[str, pd.DataFrame]:
    meta = _four_plates()
    meta.loc[meta["Metadata_Gene"] == "G3", column] = name
    return _by_plate(meta)


def case_gene_name_with_nul(tmp_path):
    _door(_emb_screen(tmp_path, _named("Metadata_Gene", "G\x003")))


def case_gene_name_5000_characters(tmp_path):
    _door(_emb_screen(tmp_path, _named("Metadata_Gene", "G" * 5000)))


def case_guide_name_with_rtl_override(tmp_path):
    _door(_emb_screen(tmp_path, _named("Metadata_Guide", "RTL\u202egnp.exe")))


def case_batch_name_with_newline_in_a_plate_map(tmp_path):
    from phenoica.screen import validate_plate_map

    wells = (
        _four_plates()
        .drop(columns=["Metadata_Site", "Metadata_ImageIndex"])
        .drop_duplicates(["Metadata_Plate", "Metadata_Well"])
    )
    wells.loc[wells["Metadata_Batch"] == "B2", "Metadata_Batch"] = "B\n2"
    validate_plate_map(wells.reset_index(drop=True), source="plate_map.csv")


def case_channel_name_with_rtl_override(tmp_path):
    validate_config({"screen": {"source": "images", "plate_map": "m.csv", "images_dir": "i", "channels": ["a\u202e"]}})


def case_store_channel_name_with_rtl_override(tmp_path):
    import zarr

    cfg, _, _ = _zarr_screen(tmp_path)
    store = zarr.open_group(str(tmp_path / "screen" / "plates" / "B01P01.zarr"), mode="r+")
    store.attrs["channels"] = ["DNA\u202e", *store.attrs["channels"][1:]]
    validate_screen(cfg["screen"], wf.screen_plates(cfg), cfg["models"], None)


def _constant_rows(tmp_path, value: float) -> dict:
    frames = _by_plate(_four_plates())
    for df in frames.values():
        df.loc[df["Metadata_Gene"] == "G3", ["emb_0000", "emb_0001", "emb_0002"]] = value
    return _door(_emb_screen(tmp_path, frames))


def case_gene_with_all_zero_features(tmp_path):
    return _constant_rows(tmp_path, 0.0)


def case_gene_with_all_equal_features(tmp_path):
    return _constant_rows(tmp_path, 0.5)


def case_n_components_one(tmp_path):
    validate_config({"transforms": {"n_components": 1}})


def case_n_components_above_the_features(tmp_path):
    cfg = _emb_screen(tmp_path, _by_plate(_four_plates()))
    cfg["transforms"]["n_components"] = 500
    _door(cfg)


def case_n_components_above_a_models_features(tmp_path):
    cfg = _tiny()
    cfg["results"], cfg["transforms"]["n_components"] = str(tmp_path / "res"), 500
    _door(cfg, wf.screen_plates(cfg))


def case_lightgbm_typos(tmp_path):
    cfg = _emb_screen(tmp_path, _by_plate(_four_plates()))
    cfg["classify"]["lightgbm"] |= {"num_leave": 7, "learnin_rate": 0.1}
    _door(cfg)


def case_names_in_markup_in_report_md(tmp_path):
    from phenoica.report import _render as render
    from tests.test_render import _payload_page

    page, _, report_md = _payload_page(tmp_path)
    return report_md + render.render_markdown(page)


def case_gene_names_that_read_alike_in_the_gallery(tmp_path):
    from phenoica.report import _gallery as G
    from phenoica.report import channel_styles
    from tests import report_fixtures as F

    files, stores = F.write_screen(tmp_path)
    names = {"G1": "<script>alert(1)</script>", "G2": "_script_alert_1___script_"}
    for path in files:
        table = pd.read_parquet(path)
        table.assign(Metadata_Gene=table["Metadata_Gene"].replace(names)).to_parquet(path, index=False)
    options = F.report_options(gallery={"sites_per_guide": 1, "control_sites": 2, "tile_px": 16}, seed=0).gallery
    G.write_gallery(tmp_path / "g", list(names.values()), files, stores, channel_styles(F.CHANNELS), options)
    return (tmp_path / "g" / G.PANELS_FILE).read_text()


def case_config_without_screen(tmp_path):
    from phenoica.contract import planned_demo_note
    from phenoica.workflow import _validate as validate

    raw = yaml.safe_load((REPO / "config" / "scenarios" / "demo.yaml").read_text())
    raw.pop("screen", None)
    cfg = validate_config({**raw, "results": str(tmp_path / "res")})
    record = tmp_path / "res" / "validated.json"
    return validate.check_screen_once(cfg, wf.screen_plates(cfg), record, notes=[planned_demo_note(raw)])


#: The "error" of a case whose input is legal and analysed: the message is what its output says.
OUTPUT = "output"

BAD_INPUT_CASES = [
    # (group of cases, case, error, what the message must say)
    ("1", case_counter_column, ScreenError, r"P1\.parquet: feature column 'cell_id' holds integers that increase"),
    ("1", case_prefix_chooses_nothing, ScreenError, r"no column is chosen by screen\.feature_prefix 'emb_'.*f0000"),
    ("1", case_named_feature_absent, ScreenError, r"'emb_00001' \(did you mean 'emb_0001'\?\) named by screen\.feat"),
    (
        "3",
        case_reexported_plate,
        ScreenError,
        r"duplicate \(plate, well, site\) \(P1, A01, 0\) at .*P1\.parquet row 0, ",
    ),
    ("3", case_duplicate_site_in_a_well, ScreenError, r"meta\.csv: duplicate \(plate, well, site\) \(P1, A01, 0\)"),
    ("6", case_plate_in_two_batches_across_files, ScreenError, r"plate 'P2' is in 2 batches: 'B1' \(e\.g\. .*P2\.parq"),
    (
        "6",
        case_well_with_two_perturbations_across_files,
        ScreenError,
        r"well \(P1, A02\) holds more than one pert.*extra",
    ),
    (
        "6",
        case_one_batch,
        ScreenError,
        r"under splits\.scheme leave_one_batch_out: leave-one-batch-out needs at least 2",
    ),
    ("6", case_guide_in_one_batch, ScreenError, r"guide\(s\) are present in only one batch: G3 / G3_g1 \(only in B1\)"),
    ("6", case_controls_only, ScreenError, r"the screen holds only controls"),
    ("6", case_batch_without_controls, ScreenError, r"batch\(es\) \['B2'\] have no control rows"),
    ("6", case_annotations_semicolon, ScreenError, r"biomap\.annotations\.mine: .*ann\.csv.*looks ';'-separated"),
    ("6", case_embedding_column_and_emb_columns, ConfigError, r"screen\.feature_regex and screen\.embedding_column"),
    (
        "7",
        case_float32_overflow,
        ScreenError,
        r"big\.parquet: feature column 'emb_0001' row 5 holds 1e\+39: finite, but",
    ),
    ("7", case_n_components_negative, ConfigError, r"transforms\.n_components is -3; expected an integer >= 2"),
    (
        "7",
        case_checkpoint_is_a_folder,
        ScreenError,
        r"model m: checkpoint .*ckpt.* is a folder; expected a weights file",
    ),
    ("7", case_latin1_csv, ValueError, r"m\.csv: not UTF-8 text \(byte 0xe4"),
    ("7", case_semicolon_csv, ValueError, r"m\.csv: the header is one column .*looks ';'-separated"),
    (
        "7",
        case_moved_key,
        ConfigError,
        r"classify\.q_threshold: moved to hits\.q_threshold.*\n.*transforms\.sweep_points: moved to sweep\.points",
    ),
    ("7", case_results_is_a_file, ConfigError, r"results .*r' is an existing file; expected a folder path"),
    ("7", case_results_read_only, ConfigError, r"results folder .*classify' is not writable"),
    (
        "7",
        case_plate_name_traversal,
        ScreenError,
        r"m\.csv: plate name '\.\./P2' in column Metadata_Plate holds a path sep",
    ),
    ("7", case_plate_name_control_character, ScreenError, r"plate name 'P\\x072' .* holds the control character"),
    ("5", case_results_empty, ConfigError, r"config key results: '' should be non-empty|results is empty"),
    (
        "5",
        case_model_named_dotdot,
        ConfigError,
        r"model name \(a key of models\) '\.\.' is '\.\.', which names a folder",
    ),
    ("5", case_model_named_with_slash, ConfigError, r"model name .*'a/\.\./\.\./b' holds a path separator"),
    (
        "5",
        case_yaml_duplicate_key,
        ConfigError,
        r"c\.yaml: key 'classify' appears twice in one mapping, at line 1 and li",
    ),
    ("hostile", case_yaml_python_tag, Exception, r"could not determine a constructor for the tag .*python/object"),
    ("hostile", case_hostile_npz, Exception, r"t\.npz|pickle|allow_pickle"),
    ("hostile", case_hostile_pickle_checkpoint, Exception, r"evil\.safetensors"),
    ("hostile", case_hostile_torch_zip, Exception, r"evil\.safetensors"),
    (
        "32",
        case_loaddata_site_as_text,
        ScreenError,
        r"illum_PL1\.csv: column Metadata_Site must hold integers; row 0 holds 's1'",
    ),
    ("32", case_loaddata_site_blank, ScreenError, r"illum_PL1\.csv: column Metadata_Site is empty at row\(s\) \[2\]"),
    (
        "32",
        case_loaddata_file_name_blank,
        ScreenError,
        r"illum_PL1\.csv: column FileName_OrigER is empty at row 3 \(plate PL1\)",
    ),
    (
        "32",
        case_loaddata_illum_without_columns,
        ScreenError,
        r"illum_PL2\.csv: channel 'OrigDNA' .* has no column\(s\) \['FileName_IllumDNA', 'PathName_IllumDNA'\] \(screen\.lo",
    ),
    (
        "32",
        case_loaddata_illum_of_another_size,
        ScreenError,
        r"PL1\.csv row 0 \(plate PL1, well A01, site 1\): illumination function .*PL1_IllumER\.npy has shape \(16, 16\); th",
    ),
    (
        "32",
        case_loaddata_csv_lacks_a_channel,
        ScreenError,
        r"PL2\.csv: no column\(s\) \['FileName_OrigMito'\] for channel\(s\) \['OrigMito'\], which .*PL1\.csv has",
    ),
    (
        "32",
        case_loaddata_wells_left_out_leave_a_guide_in_one_batch,
        ScreenError,
        r"plate_map\.csv: under splits\.scheme .*guide\(s\) are present in only one batch: TP53 / TP53_2 \(only in B2\)",
    ),
    (
        "32",
        case_loaddata_image_of_another_size_in_a_later_row,
        ScreenError,
        r"PL1\.csv row 4 \(plate PL1, well B01, site 1\): .*r03c01f01p01-ch1sk1fk1fl1\.tiff is \(16, 16\) uint16, but",
    ),
    (
        "32",
        case_loaddata_rgb_image_in_a_later_row,
        ScreenError,
        r"PL1\.csv row 5 \(plate PL1, well B01, site 2\): .*r03c01f02p01-ch2sk1fk1fl1\.tiff: image of shape \(32, 32, 3\)",
    ),
    # legal data, left out with a note (error None: the door's notes hold the message once)
    (
        "32",
        case_loaddata_plate_not_in_the_plate_map,
        None,
        r"LoadData: 1 plate\(s\) of the CSVs are not in the plate map and are not ingested: \['PL3'\] \(e\.g\. .*PL3\.csv row 0\)",
    ),
    (
        "32",
        case_loaddata_plate_map_well_without_sites,
        None,
        r"LoadData: 1 plate-map well\(s\) have no LoadData site and are left out of the screen: \['PL1 C01'\]",
    ),
    (
        "32",
        case_loaddata_sites_of_a_well_the_plate_map_lacks,
        None,
        r"LoadData: 2 site\(s\) in 1 well\(s\) the plate map lacks are skipped: \['PL1 C02'\] \(e\.g\. .*PL1\.csv row 6\)",
    ),
    # what each readout can score, counted before any job on the field's arrayed layout
    (
        "readouts",
        case_arrayed_training_rows_below_the_minimum,
        None,
        r"readout classifier: no classifier hit calls: the null would have 0 scored pseudo-guide\(s\) of 100 drawn.*"
        r"6 of 6 guides get no scored fold .*fewer than classify\.min_train_samples = 5 training rows in every fold: "
        r"at most 4.*GENE01/GENE01_1.*lower classify\.min_train_samples to 4",
    ),
    (
        "readouts",
        case_arrayed_no_readout_can_score,
        ScreenError,
        r"no readout can score any guide: classifier: .*min_train_samples = 5",
    ),
    (
        "readouts",
        case_arrayed_too_few_control_wells_for_the_null,
        None,
        r"readout classifier: no classifier hit calls: null guides: batch 'batch1' has 4 control well\(s\); a "
        r"pseudo-guide laid out like the real guides needs up to 4 there",
    ),
    # names that are not text, feature rows that are not measurements, settings the schema states
    (
        "names",
        case_gene_name_with_nul,
        ScreenError,
        r"column Metadata_Gene: 8 row\(s\) hold a name that is not plain text: .*P1\.parquet row 6 'G\\x003' holds "
        r"control or format character\(s\) U\+0000; .* and 3 more row\(s\); a name is plain text: no control",
    ),
    (
        "names",
        case_gene_name_5000_characters,
        ScreenError,
        r"column Metadata_Gene: .*'G{40}\.\.\.' is 5000 characters long.*at most 200 characters",
    ),
    (
        "names",
        case_guide_name_with_rtl_override,
        ScreenError,
        r"column Metadata_Guide: .*row 6 'RTL\\u202egnp\.exe' holds control or format character\(s\) U\+202E",
    ),
    (
        "names",
        case_batch_name_with_newline_in_a_plate_map,
        ScreenError,
        r"plate_map\.csv: column Metadata_Batch: 8 row\(s\) .*row 8 'B\\n2' holds control .* U\+000A",
    ),
    (
        "names",
        case_channel_name_with_rtl_override,
        ConfigError,
        r"config key screen\.channels: 'a\\u202e' holds control or format character\(s\) U\+202E",
    ),
    (
        "names",
        case_store_channel_name_with_rtl_override,
        ScreenError,
        r"a channel name: 'DNA\\u202e' holds control or format character\(s\) U\+202E",
    ),
    (
        "features",
        case_gene_with_all_zero_features,
        None,
        r"8 of 32 row\(s\) have every feature 0 \(failed segmentation.*e\.g\. .*P1\.parquet row 6, .*per gene: 'G3' 8 of 8",
    ),
    (
        "features",
        case_gene_with_all_equal_features,
        None,
        r"8 of 32 row\(s\) have every feature one value \(not 0\).*per gene: 'G3' 8 of 8",
    ),
    (
        "settings",
        case_n_components_one,
        ConfigError,
        r"transforms\.n_components is 1; expected an integer >= 2 \(a rule keeping fewer components is an error\)",
    ),
    (
        "settings",
        case_n_components_above_the_features,
        ConfigError,
        r"transforms\.n_components is 500, but model 'embeddings' has 3 feature\(s\) per profile; expected at most 3",
    ),
    (
        "settings",
        case_n_components_above_a_models_features,
        ConfigError,
        r"transforms\.n_components is 500, but model 'mae' has 32 feature\(s\) per profile; expected at most 32",
    ),
    (
        "settings",
        case_lightgbm_typos,
        ConfigError,
        r"config key\(s\) classify\.lightgbm\.num_leave, classify\.lightgbm\.learnin_rate: not LightGBM .* parameters",
    ),
    (
        "names",
        case_names_in_markup_in_report_md,
        OUTPUT,
        r"Model m\\<img src=x onerror=alert\(1\)\\>: highest mean guide AUROC(.|\n)*"
        r"!\[Gallery: \\<script\\>alert\(1\)\\</script\\>\]\(gallery/_script_alert_1___script_-[0-9a-f]{10}\.png\)"
        r"(.|\n)*!\[Clustered gene-gene cosine map, m\\<img src=x onerror=alert\(1\)\\> / pca\]"
        r"\(figures/biomap_heatmap_m%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E_pca\.png\)",
    ),
    (
        "names",
        case_gene_names_that_read_alike_in_the_gallery,
        OUTPUT,
        r"<script>alert\(1\)</script>,.*,(_script_alert_1___script_-[0-9a-f]{10}\.png),.*\n"
        r"_script_alert_1___script_,.*,(?!\1)_script_alert_1___script_-[0-9a-f]{10}\.png,",
    ),
    (
        "settings",
        case_config_without_screen,
        None,
        r"the config names no screen \(no screen\.source\): the simulated demo screen is planned \(.*, \d+ simulated plates",
    ),
]


# --------------------------------------------------------------------------- results folder and stores
# A results folder that is phenoica's alone, and plate stores checked whole (docs/bad-input.md).


def case_results_folder_holding_a_users_files(tmp_path):
    from phenoica.workflow import check_results_folder

    res = tmp_path / "res"
    (res / "report" / "figures").mkdir(parents=True)
    (res / "report" / "figures" / "poster.png").write_bytes(b"mine")
    check_results_folder(res, tmp_path, validate_config({"results": str(res)}), [res / "report" / "figures"])


def case_results_folder_of_another_workflow_folder(tmp_path):
    from phenoica.workflow._provenance import RuleFiles, check_stamps, check_unstamped
    from phenoica.workflow._results_folder import record_build

    shared = tmp_path / "shared"
    cfg = validate_config({"results": str(shared)})
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    record_build(shared, tmp_path / "a", cfg)
    (shared / "hits").mkdir()
    (shared / "hits" / "hits.parquet").write_bytes(b"made before stamps were kept")
    rules = [RuleFiles("call_hits", (f"{shared}/hits/hits.parquet",), f"{shared}/benchmarks/call_hits.tsv")]
    check_unstamped(shared, tmp_path / "b", check_stamps(shared, rules))


def case_results_folder_built_with_other_settings(tmp_path):
    from phenoica.classify import ClassifyOptions
    from phenoica.workflow._provenance import RuleFiles, changed_jobs, check_stamps, set_aside_changed
    from phenoica.workflow._stamps import write_stamp

    shared = tmp_path / "shared"
    cfg = validate_config({"results": str(shared)})
    shard = shared / "classify" / "m" / "pca" / "shard_0.parquet"
    shard.parent.mkdir(parents=True)
    shard.write_bytes(b"scores")
    options = ClassifyOptions.from_config(cfg)
    write_stamp(SimpleNamespace(rule="classify", params=[options], input=[], output=[str(shard)], config=cfg))
    now = options._replace(num_boost_round=options.num_boost_round + 1)  # another run's classify.num_boost_round
    template = f"{shared}/classify/{{model}}/{{variant}}/shard_{{shard}}.parquet"
    rules = [RuleFiles("classify", (template,), f"{shared}/benchmarks/x.tsv", params=lambda w: [now])]
    return "\n".join(set_aside_changed(shared, changed_jobs(shared, check_stamps(shared, rules))))


def case_job_that_fails(tmp_path):
    import os
    import subprocess
    import sys

    job = (
        "import sys\nfrom phenoica.utils import end_job, rule_logger\nlog = rule_logger('phenoica.job', sys.argv[1])\n"
        "def main():\n    raise ValueError('no such column: gene')\nend_job(main, log)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-c", job, str(tmp_path / "job.log")], env=env, timeout=120)
    return f"status {proc.returncode}\n" + (tmp_path / "job.log").read_text()


def _first_chunk_of(cfg: dict, plate: str) -> Path:
    return Path(cfg["screen"]["plates_dir"]) / f"{plate}.zarr" / "tiles" / "c" / "1" / "0" / "0" / "0"


def case_zarr_store_missing_a_chunk(tmp_path):
    cfg, _, _ = _zarr_screen(tmp_path)
    _first_chunk_of(cfg, "B02P01").unlink()  # a copy that lost one file
    _door(cfg, wf.screen_plates(cfg))


def case_zarr_store_with_a_damaged_chunk(tmp_path):
    from phenoica.models._mae import sample_training_images

    cfg, _, _ = _zarr_screen(tmp_path)
    chunk = _first_chunk_of(cfg, "B02P01")
    chunk.write_bytes(chunk.read_bytes()[:20])  # truncated: zstd cannot decode it
    stores = sorted(Path(cfg["screen"]["plates_dir"]).glob("*.zarr"))
    sample_training_images(stores, max_images=10_000, seed=0)


def _frozen(tmp_path: Path, width: int, pickle_variant: str | None = None) -> dict:
    """An embeddings screen (3 features) with frozen transforms fitted on ``width`` features;
    ``pickle_variant``'s file holds a pickled object instead."""
    from phenoica.transforms import TransformOptions, fit_variants

    cfg = _emb_screen(tmp_path, _by_plate(_four_plates()))
    cfg["transforms"] = {**cfg["transforms"], "variants": ["base", "pca"], "n_components": 2}
    frozen = tmp_path / "frozen" / "embeddings"
    frozen.mkdir(parents=True)
    rng = np.random.default_rng(0)
    X, batches = rng.normal(size=(40, width)), np.repeat(["B1", "B2"], 20)
    names = [f"emb_{i:04d}" for i in range(width)]
    fitted = fit_variants(["base", "pca"], X, batches, np.arange(40) % 2 == 0, TransformOptions.from_config(cfg), names)
    for variant, transform in fitted.items():
        transform.save(frozen / f"{variant}.npz")
    if pickle_variant:
        np.savez(frozen / f"{pickle_variant}.npz", __meta__=np.array([{"evil": True}], dtype=object))
    cfg["transforms"]["frozen"] = str(tmp_path / "frozen")
    return cfg


def case_frozen_transform_holding_a_pickle(tmp_path):
    _door(_frozen(tmp_path, 3, pickle_variant="pca"))


def case_frozen_transform_of_another_width(tmp_path):
    _door(_frozen(tmp_path, 5))


def case_n_components_above_a_list_columns_width(tmp_path):
    frames = {}
    for name, df in _by_plate(_four_plates()).items():
        cols = [c for c in df.columns if c.startswith("emb_")]
        frames[name] = df.drop(columns=cols).assign(emb=list(df[cols].to_numpy()))
    cfg = _emb_screen(tmp_path, frames, embedding_column="emb")
    cfg["transforms"]["n_components"] = 500
    _door(cfg)


def case_model_name_over_200_bytes(tmp_path):
    validate_config({"results": str(tmp_path / "res"), "models": {"é" * 117: {}}})  # 117 characters, 234 bytes


def case_yaml_alias_bomb(tmp_path):
    from phenoica.contract import check_yaml_files

    lines = ["classify:", "  lightgbm:", '    l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"    l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    (tmp_path / "config.yaml").write_text("\n".join(lines) + "\n")  # 9 ** 9 strings once expanded
    check_yaml_files([tmp_path / "config.yaml"])


RESULTS_AND_STORE_CASES = [
    (
        "results",
        case_results_folder_holding_a_users_files,
        ResultsFolderError,
        r"results folder .*/res holds 1 file\(s\) phenoica did not write there: .*/res/report/figures/poster\.png; a "
        r"rerun may delete or overwrite files in it\. Point results: at a new or empty folder, move those files out, or "
        r"set adopt_results: true",
    ),
    (
        "results",
        case_results_folder_of_another_workflow_folder,
        ResultsFolderError,
        r"results folder .*/shared was built from the workflow folder .*/a, not from .*/b, and 1 of its output\(s\) have "
        r"no stamp of the settings they were made with \(.*/shared/hits/hits\.parquet\)",
    ),
    (
        "results",
        case_results_folder_built_with_other_settings,
        OUTPUT,
        r"results folder .*/shared: 1 output\(s\) of rule classify \(classify/m/pca/shard_0\.parquet\) are rebuilt: was "
        r"made with other settings than this run's",
    ),
    (
        "results",
        case_job_that_fails,
        OUTPUT,
        r"^status 1\n(.|\n)*phenoica\.job ERROR failed: no such column: gene\nTraceback(.|\n)*ValueError: no such column: "
        r"gene\n.*job cpu end: [\d.]+ s\n$",
    ),
    (
        "stores",
        case_zarr_store_missing_a_chunk,
        ScreenError,
        r"B02P01\.zarr \(plate B02P01\): 1 chunk\(s\) of 'tiles' are absent: c/1/0/0/0 \(images \d+-\d+\); zarr would "
        r"read their \d+ image\(s\) as blank",
    ),
    (
        "stores",
        case_zarr_store_with_a_damaged_chunk,
        ScreenError,
        r"B02P01\.zarr \(plate B02P01\): images \d+-\d+ could not be read: a chunk among \['c/\d/0/0/0'.*\] \(images "
        r"\d+-\d+\) is damaged",
    ),
    (
        "settings",
        case_frozen_transform_holding_a_pickle,
        ConfigError,
        r"transforms\.frozen: .*/frozen/embeddings/pca\.npz: not a readable transform \.npz \(Object arrays cannot be "
        r"loaded when allow_pickle=False\)",
    ),
    (
        "settings",
        case_frozen_transform_of_another_width,
        ConfigError,
        r"transforms\.frozen: .*/frozen/embeddings/base\.npz: was fitted on 5 feature\(s\), but model 'embeddings' has 3 "
        r"per profile",
    ),
    (
        "settings",
        case_n_components_above_a_list_columns_width,
        ConfigError,
        r"transforms\.n_components is 500, but model 'embeddings' has 3 feature\(s\) per profile; expected at most 3",
    ),
    (
        "settings",
        case_model_name_over_200_bytes,
        ConfigError,
        r"model name \(a key of models\) 'é{117}' is 234 bytes long in UTF-8; expected at most 200 \(a file name "
        r"holds 255 bytes\)",
    ),
    (
        "settings",
        case_yaml_alias_bomb,
        ConfigError,
        r"config\.yaml: line 4: an aliased node holds another alias \(line 3\); aliases are expanded at most once",
    ),
]
BAD_INPUT_CASES = [*BAD_INPUT_CASES, *RESULTS_AND_STORE_CASES]


# --------------------------------------------------------------------------- rows that are not there
# An embedding file with no rows, and rows without a well, at the door (docs/bad-input.md).


def case_embedding_file_with_no_rows(tmp_path):
    frames = _by_plate(_four_plates())
    frames["P3.parquet"] = frames["P3.parquet"].iloc[:0]  # a valid file, its schema and no row
    _door(_emb_screen(tmp_path, frames))


def case_export_with_no_rows(tmp_path):
    (tmp_path / "emb").mkdir()
    for name, df in _by_plate(_four_plates()).items():
        (df.iloc[:0] if name == "P3.parquet" else df).to_csv(
            tmp_path / "emb" / name.replace("parquet", "csv"), index=False
        )
    screen = {"source": "embeddings", "embeddings": str(tmp_path / "emb" / "*.csv")}
    from phenoica.contract import run_models

    _door(validate_config(run_models({"results": str(tmp_path / "res"), "screen": screen})))


def case_rows_without_a_well(tmp_path):
    frames = _by_plate(_four_plates())
    frames["P2.parquet"].loc[frames["P2.parquet"].index[:3], "Metadata_Well"] = None
    _door(_emb_screen(tmp_path, frames))


ROW_CASES = [
    (
        "rows",
        case_embedding_file_with_no_rows,
        ScreenError,
        r"embeddings of model embeddings \(4 file\(s\): .*\): 1 of 4 file\(s\) hold no rows: .*/emb/P3\.parquet; the "
        r"other 3 file\(s\) hold 3 plate\(s\) in 2 batch\(es\) \(B1, B2\)\. An empty file is most often an export "
        r"that failed",
    ),
    (
        "rows",
        case_export_with_no_rows,
        ScreenError,
        r"P3\.csv: the file holds a header \(\d+ columns\) and no data rows",
    ),
    (
        "rows",
        case_rows_without_a_well,
        ScreenError,
        r"column Metadata_Well has missing values at .*/emb/P2\.parquet row 0 \(3 of 32 rows\)",
    ),
]
BAD_INPUT_CASES = [*BAD_INPUT_CASES, *ROW_CASES]


@pytest.mark.parametrize(
    ("section", "case", "error", "message"), BAD_INPUT_CASES, ids=[c[1].__name__[5:] for c in BAD_INPUT_CASES]
)
def test_bad_input_case(tmp_path, section, case, error, message):
    import re

    if error is None:  # legal input, left out of the screen: the door says so, once
        notes = case(tmp_path)["notes"]
        assert sum(bool(re.search(message, note)) for note in notes) == 1, notes
        return
    if error is OUTPUT:  # legal input, analysed: what the case returns (an output's text) says this
        text = case(tmp_path)
        assert re.search(message, text), text[:3000]
        return
    with pytest.raises(error, match=message) as err:
        case(tmp_path)
    assert not isinstance(err.value, SystemExit)  # hostile code never ran
    assert not list(tmp_path.rglob(".*.tmp-*"))  # nothing half-written


def test_identifier_columns_are_left_out_and_listed_once_in_the_log(tmp_path, caplog):
    """Section 1: CellProfiler's ImageNumber (counting up through the file) beside the emb_
    columns is not a feature by default, nor under a regex that would match it; the log lists
    every numeric column left out, once."""
    import logging

    from phenoica.profiles import FeatureSelection, gather_profiles
    from phenoica.profiles._columns import is_identifier

    df = _emb(_four_plates())
    df["ImageNumber"] = np.arange(len(df), dtype=np.int64) + 1
    df["Cells_Location_Center_X"] = np.linspace(0, 500, len(df))
    df["emb_note"] = "x"  # a text column under the prefix would be an error; left out of a regex
    df.drop(columns="emb_note").to_parquet(tmp_path / "a.parquet")
    with caplog.at_level(logging.INFO, logger="phenoica.profiles"):
        got = gather_profiles([tmp_path / "a.parquet"])
    assert [c for c in got.columns if not c.startswith("Metadata_")] == ["emb_0000", "emb_0001", "emb_0002"]
    lines = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert len(lines) == 1 and "ImageNumber" in lines[0] and "Cells_Location_Center_X" in lines[0]
    everything = gather_profiles([tmp_path / "a.parquet"], selection=FeatureSelection(regex=".*"))
    assert "ImageNumber" not in everything.columns and "emb_0002" in everything.columns
    named = gather_profiles([tmp_path / "a.parquet"], selection=FeatureSelection(columns=("emb_0000", "ImageNumber")))
    assert list(named.columns[-2:]) == ["emb_0000", "ImageNumber"]  # named: a feature, as the user says
    for name in (
        "ImageNumber",
        "Nuclei_Number_Object_Number",
        "TableNumber",
        "Cytoplasm_Parent_Cells",
        "AreaShape_Center_Y",
        "Image_Metadata_Site",
        "Location_CenterMassIntensity_X_DNA",
        "site",
    ):
        assert is_identifier(name), name
    assert not any(is_identifier(n) for n in ("emb_0000", "Cells_AreaShape_Area", "Nuclei_Intensity_MeanIntensity_DNA"))


def test_names_lose_surrounding_whitespace_in_embeddings_too(tmp_path):
    """Section 4: batch 'B1 ' in one file and 'B1' in another are one batch (one fold)."""
    from phenoica.profiles import gather_profiles

    frames = _by_plate(_four_plates())
    frames["P1.parquet"]["Metadata_Batch"] = "B1 "
    frames["P2.parquet"]["Metadata_Gene"] = frames["P2.parquet"]["Metadata_Gene"] + "  "
    for name, df in frames.items():
        df.to_parquet(tmp_path / name)
    got = gather_profiles(sorted(tmp_path.glob("*.parquet")))
    assert sorted(got["Metadata_Batch"].unique()) == ["B1", "B2"]
    assert "G1" in set(got["Metadata_Gene"]) and not any(g.endswith(" ") for g in got["Metadata_Gene"])


def test_a_rewritten_store_changes_its_digest_and_an_untouched_one_does_not(tmp_path):
    """Section 2: the store digest (a param of the plate's first rule) follows the pixels."""
    import os

    import zarr

    from phenoica.contract import write_plate

    tiles = np.random.default_rng(0).integers(0, 255, size=(8, 2, 8, 8), dtype=np.uint8)
    store = write_plate(tmp_path / "P1.zarr", tiles, ["a", "b"], chunk_images=2)
    before = wdigests.store_digest(store)
    assert wdigests.store_digest(store) == before  # nothing changed: nothing reruns
    arr = zarr.open_group(str(store), mode="r+")["tiles"]
    arr[:] = 255 - arr[:]  # every pixel inverted in place
    assert wdigests.store_digest(store) != before
    # same sizes and times restored, new bytes: the sampled bytes still tell
    after = wdigests.store_digest(store)
    chunk = next(p for p in sorted(store.rglob("*")) if p.is_file() and p.name != "zarr.json")
    st = chunk.stat()
    data = bytearray(chunk.read_bytes())
    data[-1] ^= 0xFF
    chunk.write_bytes(bytes(data))
    os.utime(chunk, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert wdigests.store_digest(store) != after
    assert wdigests.store_digest(tmp_path / "absent.zarr") == ""


def test_paths_and_names_read_as_the_user_wrote_them(tmp_path, monkeypatch):
    """Sections 5 and 7: ~ is the home folder; plate 001 read from a CSV stays '001'."""
    monkeypatch.setenv("HOME", str(tmp_path))
    assert validate_config({"results": "~/x"})["results"] == str(tmp_path / "x")
    meta = _four_plates()
    meta["Metadata_Plate"] = meta["Metadata_Plate"].map({"P1": "001", "P2": "002", "P3": "003", "P4": "004"})
    meta.to_csv(tmp_path / "m.csv", index=False)
    cfg = validate_config({"screen": {"source": "zarr", "metadata": str(tmp_path / "m.csv"), "plates_dir": "x"}})
    wf._table.cache_clear()
    assert list(wf.screen_plates(cfg)) == ["001", "002", "003", "004"]
    assert set(read_plate_metadata(tmp_path / "m.csv", "001")["Metadata_Plate"]) == {"001"}


def test_a_valid_embeddings_screen_passes_the_door_and_heavy_null_reuse_is_warned(tmp_path, caplog):
    """Sections 6 and 9: the door passes a valid screen (and records the features it chose);
    5000 pseudo-guides over 4 control wells a batch are warned about, recorded and logged again."""
    import logging

    cfg = _emb_screen(tmp_path, _by_plate(_four_plates()))
    cfg["classify"]["n_null_guides"] = 10  # 10 x 2 wells / 4 control wells: each well in 5 pseudo-guides
    cfg["classify"]["lightgbm"] = {"min_data_in_leaf": 3}  # 12 training rows a fold: LightGBM's 20 would not split
    report = _door(cfg)
    # two guides on 4 plates: the one note is the mAP readout's depth (no lone hit callable)
    assert report["models"]["embeddings"]["features"] == 3 and len(report["notes"]) == 1
    assert report["notes"][0].startswith("readout map: the mAP readout cannot call a lone hit among this screen's 2")
    cfg["classify"]["n_null_guides"] = 5000
    with caplog.at_level(logging.WARNING, logger="phenoica.workflow._validate"):
        report = _door(cfg)
        _door(cfg)  # recorded: not checked again, but said again
    reuse = [n for n in report["notes"] if "each control well sits in about" in n]
    assert len(reuse) == 2 and len(report["notes"]) == 3  # each batch's reuse, and the mAP depth as before
    assert sum("each control well sits in about" in r.getMessage() for r in caplog.records) == 2 * len(reuse)


def test_loaddata_digest_follows_each_plates_rows_and_the_files_they_name(tmp_path):
    """The content key of a LoadData plate (its ingest job's ``store`` param) changes
    when the plate's rows of the CSVs name other files, or a file they name is rewritten in
    place, and only for that plate; columns or rows in another order, or a column ingest does
    not read, leave it alone."""
    import tifffile

    cfg = _loaddata_screen(tmp_path)

    def digests(config: dict = cfg) -> dict[str, str]:
        _clear_loaddata_caches()
        return {p: wdigests.plate_store_digest(config, p) for p in LOADDATA_PLATES}

    before = digests()
    assert all(before.values()) and before["PL1"] != before["PL2"] and digests() == before
    _edit_csv(_loaddata_csv(tmp_path), lambda t: t[t.columns[::-1]].assign(Metadata_Note="x").iloc[::-1])
    assert digests() == before
    _edit_csv(
        _loaddata_csv(tmp_path),
        lambda t: t.assign(FileName_OrigDNA=t["FileName_OrigER"], FileName_OrigER=t["FileName_OrigDNA"]),
    )
    swapped = digests()
    assert swapped["PL1"] != before["PL1"] and swapped["PL2"] == before["PL2"]
    table = pd.read_csv(_loaddata_csv(tmp_path, "PL2"), dtype=str)
    image = tmp_path / table["PathName_OrigMito"][3] / table["FileName_OrigMito"][3]
    size = image.stat().st_size
    tifffile.imwrite(image, np.full((32, 32), 7, np.uint16))  # same name and size, other pixels
    assert image.stat().st_size == size
    rewritten = digests()
    assert rewritten["PL2"] != swapped["PL2"] and rewritten["PL1"] == swapped["PL1"]
    # an illumination function counts when it is applied
    with_illum = {**cfg, "screen": {**cfg["screen"], "loaddata_illum": True}}
    first = digests(with_illum)
    assert first["PL1"] != rewritten["PL1"]
    np.save(tmp_path / "illum" / "PL1_IllumER.npy", np.full((32, 32), 3.0))
    assert digests() == rewritten and digests(with_illum)["PL1"] != first["PL1"]
    assert digests(with_illum)["PL2"] == first["PL2"]


@pytest.mark.parametrize("pattern", ["{plate}/{well}_s{site}_w{channel}.png", "{well}/{plate}_s{site}_w{channel}.png"])
def test_image_digest_follows_each_plates_own_files(tmp_path, pattern):
    """Rewriting one image file in place changes that plate's digest alone, with the
    plate in the pattern's folder or further in; a file of another plate beside it does not."""
    from PIL import Image

    from tests.test_ingest import make_pixels, write_png

    root = tmp_path / "images"
    for plate, seed in (("P1", 0), ("P2", 1)):
        for (well, site, ch), arr in make_pixels("uint8", seed, ["1", "2"]).items():
            write_png(root / pattern.format(plate=plate, well=well, site=site, channel=ch), arr)
    screen = {"source": "images", "images_dir": str(root), "image_pattern": pattern, "plate_map": "unread.csv"}
    cfg = validate_config({"screen": screen})
    before = {p: wdigests.plate_store_digest(cfg, p) for p in ("P1", "P2")}
    assert all(before.values()) and before["P1"] != before["P2"]
    target = root / pattern.format(plate="P2", well="A01", site=1, channel="2")
    write_png(target, 255 - np.asarray(Image.open(target)))
    after = {p: wdigests.plate_store_digest(cfg, p) for p in ("P1", "P2")}
    assert after["P2"] != before["P2"] and after["P1"] == before["P1"]


def test_a_loaddata_screen_passes_the_whole_door_and_its_notes_are_recorded(tmp_path, caplog):
    """The door passes a valid LoadData screen (every file there, the models against
    the plates' geometry) and notes a CSV's plate the plate map lacks: recorded once in
    validated.json, logged again on the next invocation, which checks the key only."""
    import logging

    from phenoica.workflow import _validate as validate
    from tests.test_loaddata import write_fixture

    cfg = _loaddata_screen(tmp_path)
    write_fixture(tmp_path, plate="PL3", shape=(32, 32))
    _clear_loaddata_caches()
    plates = wf.screen_plates(cfg)
    record = tmp_path / "validated.json"
    with caplog.at_level(logging.WARNING, logger="phenoica.validate"):
        report = validate.check_screen_once(cfg, plates, record)
        again = validate.check_screen_once(cfg, plates, record)
    assert plates == {"PL1": "B1", "PL2": "B2"} and again["key"] == report["key"]
    assert report["plates"]["PL2"] == {
        "batch": "B2",
        "channels": ["OrigDNA", "OrigER", "OrigMito"],
        "height": 32,
        "width": 32,
        "images": None,
    }
    layout = [n for n in report["notes"] if not n.startswith("readout map: the mAP readout cannot call a lone hit")]
    assert len(report["notes"]) == 2 and len(layout) == 1 and "['PL3']" in layout[0]
    assert sum("not in the plate map" in r.getMessage() for r in caplog.records) == 2
