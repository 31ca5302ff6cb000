"""Real exports in as they are: CSV / TSV / Parquet in the exporter's own column names, controls by a
column's values, per-file feature sets, whitespace and empty wells (phenoica.screen._exports,
phenoica.profiles._embeddings.shared_features); and the profile hygiene (phenoica.profiles._hygiene)
decided the same way at the door and in the job."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from phenoica.contract import ScreenError, run_models, validate_config
from phenoica.profiles import FeatureSelection, Hygiene, clean_profiles, gather_profiles, write_plan, write_profiles
from phenoica.profiles._hygiene import FeatureStats, footer_stats, hygiene_plan, import_pycytominer, normalize_plate
from phenoica.screen import ExportSpec
from phenoica.screen._exports import to_contract
from phenoica.workflow import _dag as wf
from phenoica.workflow import _digests as wdigests
from phenoica.workflow import _validate as validate

REPO = Path(__file__).resolve().parents[1]
VARCHAMP = REPO / "data" / "varchamp-batch12" / "2024_12_09_Batch_12_normalized_feature_select_batch.csv.gz"
REGEX = "(Cells|Nuclei)_.*"
#: The exporter's own names (pycytominer / VarChAMP style) for phenoica's roles.
OWN = {"batch": "Metadata_batch", "gene": "Metadata_symbol", "guide": "Metadata_gene_allele"}
SPEC = ExportSpec.from_config({"columns": OWN, "controls": {"column": "Metadata_node_type", "values": ["NC"]}})


def _contract(
    plates: int = 2, seed: int = 0, features: tuple[str, ...] = ("Cells_A", "Cells_B", "Nuclei_C")
) -> pd.DataFrame:
    """A per-well table in phenoica's contract: per plate 4 control wells of 2 constructs and 6 perturbation
    wells of 3 constructs of 2 genes."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(plates):
        for w in range(10):
            control = w < 4
            rows.append(
                {
                    "Metadata_Batch": f"B{p // 2 + 1}",
                    "Metadata_Plate": f"P{p + 1}",
                    "Metadata_Well": f"A{w + 1:02d}",
                    "Metadata_Gene": ["MAPK9", "RHEB"][w % 2] if control else f"G{w % 2}",
                    "Metadata_Guide": ["MAPK9", "RHEB"][w % 2] if control else f"G{w % 2}_{w % 3}",
                    "Metadata_PertType": "control" if control else "perturbation",
                }
            )
    df = pd.DataFrame(rows)
    for name in features:
        df[name] = rng.normal(size=len(df))
    return df


def _export(df: pd.DataFrame) -> pd.DataFrame:
    """The same table as an exporter names it: own column names, the role as NC / allele."""
    out = df.rename(columns={"Metadata_Batch": "Metadata_batch", "Metadata_Gene": "Metadata_symbol",
                             "Metadata_Guide": "Metadata_gene_allele"})  # fmt: skip
    out.insert(0, "Metadata_node_type", np.where(df["Metadata_PertType"] == "control", "NC", "allele"))
    return out.drop(columns=["Metadata_PertType"])


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".tsv", ".parquet"])
def test_an_export_in_its_own_names_reads_as_the_contract_table(tmp_path, suffix):
    """Round trip: a contract table written in an exporter's names and format, read with
    screen.columns and screen.controls, gives the same profiles as the contract table itself."""
    table = _contract()
    path = tmp_path / f"export{suffix}"
    own = _export(table)
    if suffix == ".parquet":
        own.to_parquet(path)
    else:
        own.to_csv(path, sep="\t" if suffix == ".tsv" else ",", index=False)
    table.to_parquet(tmp_path / "contract.parquet")
    selection = FeatureSelection.of(None, REGEX, None)
    got = gather_profiles([path], "well", selection=selection, spec=SPEC)
    want = gather_profiles([tmp_path / "contract.parquet"], "well", selection=selection)
    cols = ["Metadata_Batch", "Metadata_Plate", "Metadata_Well", "Metadata_Gene", "Metadata_Guide", "Metadata_PertType"]
    pd.testing.assert_frame_equal(got[cols + ["Cells_A", "Nuclei_C"]], want[cols + ["Cells_A", "Nuclei_C"]])


def test_whitespace_and_empty_wells_are_noted_with_counts_and_wells():
    own = _export(_contract())
    own.loc[5, "Metadata_symbol"] = "G1 "
    own.loc[[7, 8], "Metadata_symbol"] = np.nan  # two empty wells
    own.loc[9, "Metadata_node_type"] = None
    out, notes = to_contract(own, SPEC, "x.csv")
    assert len(out) == len(own) - 3 and out["Metadata_Gene"].str.strip().eq(out["Metadata_Gene"]).all()
    assert any("1 name(s) in Metadata_Gene lost surrounding whitespace" in n and "'G1 ' -> 'G1'" in n for n in notes)
    empty = next(n for n in notes if "empty wells" in n)
    assert (
        "3 row(s) without a gene, guide or role" in empty
        and "(P1, A08)" in empty
        and "1 without Metadata_PertType" in empty
    )


@pytest.mark.parametrize(
    "spec, match",
    [
        ({"columns": {"gene": "Metadata_Symbol"}}, r"x.csv: missing required column\(s\) \['Metadata_Symbol'\].*Metadata_symbol"),
        ({"columns": {"gene": "Metadata_symbol", "batch": "Metadata_batch", "guide": "Metadata_Plate"}},
         r"x.csv: screen.columns maps 'Metadata_Plate' to Metadata_Guide, but the file also has a column Metadata_Guide"),
        ({"rows": {"column": "Metadata_Plate", "values": ["P9"]}}, r"x.csv: screen.rows keeps rows whose 'Metadata_Plate'.*\['P1', 'P2'\]"),
    ],
)  # fmt: skip
def test_a_refused_export_names_the_file_the_column_and_what_was_expected(spec, match):
    own = _export(_contract())
    if "guide" in spec.get("columns", {}):
        own["Metadata_Guide"] = own["Metadata_gene_allele"]  # a second guide column: shadowed by the mapping
    with pytest.raises(ScreenError, match=match):
        to_contract(own, ExportSpec.from_config({"columns": OWN, **spec}), "x.csv")


def test_a_file_whose_controls_match_no_row_is_noted_for_the_door_to_weigh():
    """One file without a control row may be a plate that takes its controls from its batch's
    other plates: a note naming the values asked for and those the column holds (the door refuses
    a screen none of whose files holds one)."""
    spec = ExportSpec.from_config({"columns": OWN, "controls": {"column": "Metadata_node_type", "values": ["nc"]}})
    out, notes = to_contract(_export(_contract()), spec, "x.csv")
    assert not out["Metadata_PertType"].eq("control").any()
    assert any(
        re.search(r"x.csv: no row is a control: .*'Metadata_node_type' is one of \['nc'\].*holds \['NC', 'allele'\]", n)
        for n in notes
    ), notes


def test_files_with_different_feature_sets_keep_the_common_features_or_are_refused(tmp_path):
    first = _export(_contract(features=("Cells_A", "Cells_B", "Nuclei_C", "Nuclei_D")))
    second = _export(_contract(plates=4, features=("Cells_A", "Cells_B", "Nuclei_C", "Cells_E")).iloc[20:])
    first.to_csv(tmp_path / "b1.csv", index=False)
    second.to_csv(tmp_path / "b2.csv", index=False)
    paths = [tmp_path / "b1.csv", tmp_path / "b2.csv"]
    table = gather_profiles(paths, "well", selection=FeatureSelection.of(None, REGEX, None), spec=SPEC)
    assert [c for c in table.columns if not c.startswith("Metadata_")] == ["Cells_A", "Cells_B", "Nuclei_C"]
    from phenoica.profiles import plan_files

    plan = plan_files(paths, None, FeatureSelection.of(None, REGEX, None), SPEC)
    assert any("b1.csv: 1 of its 4 feature column(s)" in n and "Nuclei_D" in n for n in plan.notes)
    with pytest.raises(ScreenError, match=r"screen.feature_sets is 'identical'"):
        plan_files(paths, None, FeatureSelection.of(None, REGEX, None, "identical"), SPEC)
    with pytest.raises(ScreenError, match=r"share 3 feature column\(s\), fewer than screen.min_shared_features = 0.9"):
        plan_files(paths, None, FeatureSelection.of(None, REGEX, None, "common", 0.9), SPEC)


# --------------------------------------------------------------------------- hygiene


def test_hygiene_drops_missing_constant_and_outlier_features_as_pycytominer_does(tmp_path):
    """Known answer: a feature with one missing value, a constant one and one whose single well is
    1,000 SDs off are dropped; the outlier rule is pycytominer's own (same features on the rows)."""
    drop_outlier_features = import_pycytominer().cyto_utils.drop_outlier_features
    table = _contract(features=("Cells_A", "Cells_B", "Nuclei_C", "Nuclei_D", "Nuclei_E"))
    table.loc[3, "Cells_B"] = np.nan
    table["Nuclei_D"] = 2.0
    table.loc[11, "Nuclei_E"] = 1000.0
    table.to_parquet(tmp_path / "p.parquet")
    out = tmp_path / "profiles.parquet"
    write_profiles([tmp_path / "p.parquet"], out, "well", selection=FeatureSelection.of(None, REGEX, None))
    write_plan(clean_profiles(out, Hygiene()), tmp_path / "plan.json")
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert (
        plan["missing"] == ["Cells_B"] and plan["constant"] == ["Nuclei_D"] and list(plan["outliers"]) == ["Nuclei_E"]
    )
    assert pq.read_schema(out).names[-2:] == ["Cells_A", "Nuclei_C"]
    rest = table.drop(columns=["Cells_B", "Nuclei_D"])
    assert drop_outlier_features(rest, features=["Cells_A", "Nuclei_C", "Nuclei_E"]) == ["Nuclei_E"]
    write_profiles([tmp_path / "p.parquet"], out, "well", selection=FeatureSelection.of(None, REGEX, None))
    clean_profiles(out, Hygiene(outliers="clip", outlier_cutoff=10.0), batch_rows=7)
    clipped = pd.read_parquet(out)
    assert "Nuclei_E" in clipped and clipped["Nuclei_E"].max() == 10.0
    assert not list(tmp_path.glob(".*normalized*"))


def test_the_doors_footer_statistics_decide_as_the_job_does(tmp_path):
    table = _contract(features=("Cells_A", "Cells_B", "Nuclei_C"))
    table.loc[2, "Cells_B"] = np.nan
    table.loc[5, "Nuclei_C"] = -900.0
    table.to_parquet(tmp_path / "p.parquet", row_group_size=7)
    names = ["Cells_A", "Cells_B", "Nuclei_C"]
    door = hygiene_plan(footer_stats([str(tmp_path / "p.parquet")], names), Hygiene())
    stats = FeatureStats(names)
    for start in range(0, len(table), 6):
        stats.update(table[names].to_numpy()[start : start + 6])
    job = hygiene_plan(stats, Hygiene())
    assert door.as_dict() == job.as_dict() and door.missing == ["Cells_B"] and list(door.outliers) == ["Nuclei_C"]


def test_normalization_is_pycytominers_and_robust_to_one_outlier_control_well():
    normalize = import_pycytominer().normalize
    table = _contract(plates=1, features=("Cells_A", "Nuclei_C"))
    is_control = (table["Metadata_PertType"] == "control").to_numpy()
    ours = normalize_plate(table, ["Cells_A", "Nuclei_C"], is_control, "mad_robustize")
    theirs = normalize(table, features=["Cells_A", "Nuclei_C"], samples="Metadata_PertType == 'control'",
                       method="mad_robustize", output_type=None)  # fmt: skip
    np.testing.assert_allclose(ours[["Cells_A", "Nuclei_C"]], theirs[["Cells_A", "Nuclei_C"]])
    # a plate of the field's shape: 16 control wells; one of them far off changes the robust
    # normalization's values by a bounded share (one of 16 order statistics moves), and wipes out
    # the mean-and-SD one (every value scaled towards 0)
    controls = np.arange(40) < 16
    plate = pd.DataFrame({"Metadata_Plate": "P1", "Cells_A": np.random.default_rng(1).normal(size=40)})
    outlier = plate.copy()
    outlier.loc[0, "Cells_A"] = 1000.0

    def moved(method: str) -> float:
        before = normalize_plate(plate, ["Cells_A"], controls, method)["Cells_A"]
        after = normalize_plate(outlier, ["Cells_A"], controls, method)["Cells_A"]
        return float(np.abs(after - before)[~controls].max() / np.abs(before)[~controls].max())

    assert moved("mad_robustize") < 0.35 and moved("standardize") > 0.9


# --------------------------------------------------------------------------- the door on the real plate


def _varchamp_config(tmp_path: Path, **screen) -> dict:
    raw = {
        "results": str(tmp_path / "res"),
        "screen": {
            "source": "embeddings",
            "embeddings": str(VARCHAMP),
            "feature_regex": "(Cells|Cytoplasm|Nuclei|Image)_.*",
            "columns": {
                "batch": "Metadata_batch",
                "plate": "Metadata_Plate",
                "well": "Metadata_Well",
                "gene": "Metadata_symbol",
                "guide": "Metadata_gene_allele",
            },  # fmt: skip
            "controls": {"column": "Metadata_node_type", "values": ["NC"]},
            **screen,
        },
        "models": {"cellprofiler": {}},
        "splits": {"scheme": "in_distribution"},
    }
    wf._table.cache_clear()
    wdigests.plate_digests.cache_clear()
    return validate_config(run_models(raw))


def test_the_door_reads_the_real_export_with_a_config_and_says_what_it_found(tmp_path):
    cfg = _varchamp_config(tmp_path)
    record = validate.check_screen_once(cfg, {}, tmp_path / "res" / "validated.json")
    notes = "\n".join(record["notes"])
    assert "2 plates hold one plate map (2024-12-09_B12A1R2, 2024-12-09_B12A1R2_widefield; at least 352 of 352" in notes
    assert "'HPRT1 ' -> 'HPRT1'" in notes
    assert "15 row(s) without a gene, guide or role dropped as empty wells" in notes
    assert "Nuclei_Correlation_Costes_Mito_DNA (4.003e+04)" in notes and "dropped (profiles.outliers: drop)" in notes
    assert "2 feature(s) with a missing value dropped" in notes
    kept = record["models"]["cellprofiler"]
    assert kept["features"] == 695 - 2 - 5 and len(kept["hygiene"]["outliers"]) == 5


def test_one_image_set_advises_what_would_score_it_never_the_scheme_in_force(tmp_path):
    cfg = _varchamp_config(tmp_path, rows={"column": "Metadata_Plate", "values": ["2024-12-09_B12A1R2"]})
    record = validate.check_screen_once(cfg, {}, tmp_path / "res" / "validated.json")
    classifier = next(n for n in record["notes"] if n.startswith("readout classifier"))
    assert "lower classify.min_train_samples to 3" in classifier and "splits.scheme" not in classifier.split("Ways")[1]
    assert any("screen.rows keeps 360 of 719 rows" in n for n in record["notes"])
    assert not any("hold one plate map" in n for n in record["notes"])
