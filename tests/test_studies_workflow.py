"""The two studies through Snakemake: the default plan, and a tiny real run of both targets whose
pages come from the shared renderer with their figures and a measured verdict."""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO
from tests.test_workflow import snakemake


def planned_jobs(workdir, *targets: str) -> dict[str, int]:
    """Rule -> job count of a dry run of ``targets`` (the 'Job stats' table)."""
    out = snakemake(workdir, *targets, "-n", "--quiet", "rules").stdout
    counts = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([A-Za-z_]\w*)\s+(\d+)\s*$", line)
        if m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


TINY_STUDIES = {
    "disentangle": {
        "datasets": ["scenes"],
        "models": ["ae", "beta_vae"],
        "seeds": [0, 1],
        "steps": 30,
        "batch_size": 16,
        "n_eval": 80,
        "device": "cpu",
        "scenes": {"n_images": 300, "image_size": 16},
        "metrics": {"infoe_max_iter": 200},
    },
    "bilipschitz": {
        "datasets": ["isometric", "digits"],
        "alphas": [0.0, 1.0],
        "seeds": [0, 1],
        "per_digit": [3],
        "n_samples": 80,
        "epochs": 4,
        "hidden": [8],
        "latent_dim": 3,
        "max_jacobian_samples": 20,
        "n_bootstrap": 20,
        "device": "cpu",
        "isometric": {"latent_dim": 2, "ambient_dim": 6},
    },
}


def test_bilipschitz_train_settings_carry_what_a_training_job_reads(tmp_path):
    # the rule's options are all the script hands run_alpha: one job trains every configured seed
    from phenoica.contract import load_config
    from phenoica.studies.bilipschitz import BilipschitzTrainOptions, run_alpha

    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    cfg = load_config(tmp_path / "config.yaml", {"bilipschitz": TINY_STUDIES["bilipschitz"]})
    table = run_alpha("isometric", "all", 0.0, BilipschitzTrainOptions.from_config(cfg))
    assert sorted(table["seed"].unique()) == [0, 1] and (table["alpha"] == 0.0).all()


def test_default_study_plan(tmp_path):
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    jobs = planned_jobs(tmp_path, "disentangle", "bilipschitz")
    # disentangle: 4 models x 3 seeds trained; 7 scored (the 4 + AE + ICA, random and factor-fitted rotation)
    assert jobs["disentangle_train"] == 4 * 3 and jobs["disentangle_evaluate"] == 7 * 3
    # bilipschitz: one job per (dataset, group, alpha): isometric + digits (all and 3 digits) x 5 alphas
    assert jobs["bilipschitz_train"] == (1 + 4) * 5 and jobs["bilipschitz_gather"] == 2
    assert jobs["disentangle_report"] == 1 and jobs["bilipschitz_report"] == 1


@pytest.mark.slow
def test_tiny_studies_end_to_end(tmp_path):
    cfg = yaml.safe_load((REPO / "config" / "scenarios" / "demo.yaml").read_text())
    cfg.update(TINY_STUDIES)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    snakemake(tmp_path, "disentangle", "bilipschitz")
    for study in ("disentangle", "bilipschitz"):
        page = tmp_path / "results" / "studies" / study
        html = (page / "index.html").read_text()
        md = (page / "report.md").read_text()
        assert "<h2>Verdict (measured)</h2>" in html and "## Verdict (measured)" in md
        figures = re.findall(r'<img src="([^"]+)"', html)
        assert figures and all((page / f).is_file() for f in figures)
        assert (tmp_path / "results" / "benchmarks").exists()
    table2 = pd.read_csv(tmp_path / "results" / "studies" / "disentangle" / "table2.csv")
    assert set(table2["model"]) == {"ae", "beta_vae", "ae_ica", "ae_rand", "ae_oracle"}
    assert (table2["n_seeds"] == 2).all() and table2["infom_lo"].notna().all()
    rho = pd.read_csv(tmp_path / "results" / "studies" / "bilipschitz" / "tables" / "spearman.csv")
    assert set(rho["dataset"]) == {"isometric", "digits"} and {"ci_low", "ci_high"} <= set(rho.columns)
    # each page leaves its one-line verdict for the main report to link (read when the DAG is built)
    from phenoica.workflow import _dag as workflow

    pages = workflow.study_pages(str(tmp_path / "results"))
    assert [p["page"] for p in pages] == [
        str(tmp_path / "results" / "studies" / s / "index.html") for s in ("disentangle", "bilipschitz")
    ]
    assert (
        pages[0]["verdict"].startswith("scenes: AE + ICA - AE InfoM") and "isometric: Spearman" in pages[1]["verdict"]
    )
    # a rerun does nothing
    assert "Nothing to be done" in snakemake(tmp_path, "disentangle", "bilipschitz").stderr
