"""The whole workflow through Snakemake on the tiny config: a real run, lint, and the jobs a
dry run plans after adding plates or changing a parameter."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO

SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [*SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(workdir / "config.yaml"), "--cores", "2", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def planned_jobs(workdir: Path, *args: str) -> dict[str, int]:
    """Rule -> job count of a dry run (the 'Job stats' table)."""
    out = snakemake(workdir, "-n", "--quiet", "rules", *args).stdout
    counts = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([A-Za-z_]\w*)\s+(\d+)\s*$", line)
        if m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


def write_config(workdir: Path, **changes) -> dict:
    cfg = yaml.safe_load((REPO / "tests" / "data" / "tiny.yaml").read_text())
    for section, values in changes.items():
        cfg.setdefault(section, {}).update(values)
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    return cfg


def test_default_config_dry_run_plans_every_stage(tmp_path):
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    jobs = planned_jobs(tmp_path)
    assert jobs["simulate_plate"] == 8 and jobs["embed"] == 2 * 8 and jobs["train_mae"] == 2
    assert jobs["classify"] == 2 * 4 * 2 and jobs["apply_transform"] == 2 * 4 and jobs["report"] == 1
    assert jobs["align"] == 4 and jobs["structural"] == 2 * 4


def test_lint_is_clean(tmp_path):
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    proc = snakemake(tmp_path, "--lint", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Lints for" not in text, text[-3000:]


@pytest.mark.slow
def test_tiny_workflow_end_to_end_and_incremental(tmp_path):
    write_config(tmp_path)
    snakemake(tmp_path)
    res = tmp_path / "results"
    genes = pd.read_parquet(res / "scores" / "genes.parquet")
    assert set(genes["variant"]) == {"base", "pca", "pca_ica", "pca_rand"}
    assert genes["auroc"].between(0, 1).all()
    emb = pd.read_parquet(res / "embeddings" / "mae" / "B01P01.parquet")
    assert emb.filter(like="emb_").shape[1] == 32 and emb["Metadata_ImageIndex"].is_monotonic_increasing
    assert (res / "report" / "index.html").exists() and (res / "report" / "report.md").exists()
    table1 = pd.read_parquet(res / "identifiability" / "table1.parquet")
    assert len(table1) == 4 * 2 and set(table1["model_a"]) == {"mae", "mae_seed1"}
    assert table1[["perm", "rigid", "linear", "ica"]].notna().all().all()
    assert (table1["rms_train_linear"] <= table1["rms_train_rigid"] + 1e-9).all()
    structural = pd.read_parquet(res / "identifiability" / "structural.parquet")
    assert len(structural) == 2 * 4 and structural["mcc"].between(0, 1).all()
    assert (res / "report" / "figures" / "identifiability.png").exists()
    for rule in ("embed", "classify", "train_mae"):
        assert any((res / "logs").rglob("*.log")), rule
    assert any((res / "benchmarks" / "embed").rglob("*.tsv"))

    # Nothing to do on a rerun.
    assert planned_jobs(tmp_path) == {}

    # Adding plates (a new batch) re-runs only their simulation and embedding + what gathers them.
    write_config(tmp_path, demo={"n_batches": 4})
    jobs = planned_jobs(tmp_path)
    assert jobs.get("simulate_plate") == 1 and jobs.get("embed") == 2, jobs
    assert "train_mae" not in jobs and jobs.get("gather_profiles") == 2

    # Changing a classification parameter re-runs classification and report, not embedding.
    write_config(tmp_path, classify={"num_boost_round": 12})
    jobs = planned_jobs(tmp_path)
    assert "embed" not in jobs and "train_mae" not in jobs and "fit_transforms" not in jobs, jobs
    assert jobs.get("classify") == 2 * 4 * 2 and jobs.get("report") == 1 and "align" not in jobs


def _tiny_screen(tmp_path: Path):
    """A small simulated screen written in the data contract (stores + one metadata table)."""
    from phenoica.simulate import simulate_screen

    cfg = yaml.safe_load((REPO / "tests" / "data" / "tiny.yaml").read_text())
    from phenoica.config import validate_config

    demo = validate_config(cfg)["demo"]
    meta = simulate_screen(demo, 0, tmp_path / "screen")
    return cfg, meta


def test_zarr_source_plans_one_job_per_plate_and_new_plates_alone(tmp_path):
    cfg, meta = _tiny_screen(tmp_path)
    table = tmp_path / "screen" / "metadata.parquet"
    cfg["screen"] = {"source": "zarr", "metadata": str(table), "plates_dir": str(tmp_path / "screen" / "plates")}
    work = tmp_path / "work"
    work.mkdir()
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    jobs = planned_jobs(work)
    assert jobs["plate_metadata"] == 3 and jobs["embed"] == 2 * 3 and "simulate_plate" not in jobs
    # The per-plate digest changes only for the plate whose rows change.
    from phenoica.config import validate_config
    from phenoica.workflow import plate_digest

    full = validate_config(cfg)
    before = {p: plate_digest(full, p) for p in ("B01P01", "B02P01", "B03P01")}
    edited = meta.copy()
    edited.loc[edited["Metadata_Plate"] == "B02P01", "Metadata_Site"] += 10
    edited.to_parquet(table)
    from phenoica import workflow

    workflow._table.cache_clear()
    workflow._plate_digests.cache_clear()
    after = {p: plate_digest(full, p) for p in before}
    assert [p for p in before if before[p] != after[p]] == ["B02P01"]


def _write_images(tmp_path: Path, meta: pd.DataFrame) -> Path:
    """The tiny screen's tiles as RxRx-style per-channel PNGs plus a plate map."""
    import numpy as np
    from PIL import Image

    from phenoica.screen import open_plate

    root = tmp_path / "images"
    for plate, rows in meta.groupby("Metadata_Plate"):
        tiles = open_plate(tmp_path / "screen" / "plates" / f"{plate}.zarr")[:]
        (root / plate).mkdir(parents=True)
        for _, r in rows.iterrows():
            for c in range(tiles.shape[1]):
                img = np.ascontiguousarray(tiles[r["Metadata_ImageIndex"], c])
                Image.fromarray(img).save(root / plate / f"{r['Metadata_Well']}_s{r['Metadata_Site']}_w{c + 1}.png")
    wells = meta.drop(columns=["Metadata_Site", "Metadata_ImageIndex"]).drop_duplicates(["Metadata_Plate", "Metadata_Well"])
    wells.to_csv(tmp_path / "plate_map.csv", index=False)
    return root


@pytest.mark.slow
def test_images_source_ingests_and_embeds(tmp_path):
    cfg, meta = _tiny_screen(tmp_path)
    root = _write_images(tmp_path, meta)
    cfg["screen"] = {"source": "images", "images_dir": str(root), "plate_map": str(tmp_path / "plate_map.csv")}
    work = tmp_path / "work"
    work.mkdir()
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    snakemake(work, "results/embeddings/mae/B02P01.parquet")
    emb = pd.read_parquet(work / "results" / "embeddings" / "mae" / "B02P01.parquet")
    plate_rows = meta[meta["Metadata_Plate"] == "B02P01"]
    assert len(emb) == len(plate_rows)
    assert set(emb["Metadata_Guide"]) == set(plate_rows["Metadata_Guide"])


@pytest.mark.slow
def test_embeddings_source_runs_from_profiles_on(tmp_path):
    """Embeddings computed elsewhere (one list-valued column) are a complete entry point."""
    import numpy as np

    rng = np.random.default_rng(0)
    rows = []
    for b in range(3):
        for guide, gene, kind in [("NTC", "non-targeting", "control")] * 60 + [("G1_a", "G1", "perturbation")] * 10 \
                + [("G2_a", "G2", "perturbation")] * 10:
            rows.append({"Metadata_Batch": f"B{b}", "Metadata_Plate": f"P{b}", "Metadata_Gene": gene,
                         "Metadata_Guide": guide, "Metadata_PertType": kind})
    df = pd.DataFrame(rows)
    df["Metadata_Well"] = [f"W{i:03d}" for i in range(len(df))]
    x = rng.laplace(size=(len(df), 12)).astype("float32")
    x[df["Metadata_Gene"] == "G1", 0] += 6.0  # G1 has a strong effect, G2 none
    x += (df["Metadata_Batch"].str[1:].astype(int).to_numpy()[:, None] * rng.normal(size=12)).astype("float32")
    df["vector"] = list(x)
    (tmp_path / "emb").mkdir()
    for b, part in df.groupby("Metadata_Batch"):
        part.to_parquet(tmp_path / "emb" / f"{b}.parquet")
    cfg = {"screen": {"source": "embeddings", "embeddings": str(tmp_path / "emb" / "*.parquet"),
                      "embedding_column": "vector"},
           "transforms": {"n_components": 6},
           "classify": {"n_shards": 1, "num_boost_round": 20, "n_null_guides": 20, "min_train_samples": 3}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    jobs = planned_jobs(tmp_path)
    assert "embed" not in jobs and "train_mae" not in jobs and jobs["gather_profiles"] == 1
    snakemake(tmp_path)
    guides = pd.read_parquet(tmp_path / "results" / "scores" / "guides.parquet")
    base = guides[(guides["variant"] == "base") & ~guides["is_null_guide"]].set_index("Metadata_Guide")["auroc"]
    assert base["G1_a"] > 0.9 and base["G1_a"] > base["G2_a"]


def test_genome_scale_dag_stays_in_the_low_thousands(tmp_path):
    """17,000 genes x 6 guides, 40 batches, 400 plates, 4 variants: one embed job per plate,
    classification sharded, so the DAG stays small (timings: benchmarks/genome_dag.py)."""
    shutil.copy(REPO / "benchmarks" / "genome_scale.yaml", tmp_path / "config.yaml")
    jobs = planned_jobs(tmp_path)
    assert jobs["embed"] == 400 and jobs["classify"] == 4 * 250
    assert 1000 <= sum(jobs.values()) <= 3000, jobs


def test_frozen_transforms_are_applied_not_refitted(tmp_path):
    """transforms.frozen points at earlier fits: no fit job is planned, apply reads the frozen files."""
    frozen = tmp_path / "frozen"
    for model in ("mae", "mae_seed1"):
        (frozen / model).mkdir(parents=True)
        for name in ("base.npz", "pca.npz", "pca_ica.npz", "pca_rand.npz", "fit_report.json"):
            (frozen / model / name).write_text("")
    write_config(tmp_path, transforms={"frozen": str(frozen)})
    jobs = planned_jobs(tmp_path)
    assert "fit_transforms" not in jobs and jobs["apply_transform"] == 2 * 4
