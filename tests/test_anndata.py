"""AnnData export (phenoica.sources.h5ad): parquet -> h5ad -> phenoica gives identical tables and identical
guide and gene profiles; a results folder's levels are written with the hit calls joined to obs."""

from __future__ import annotations

import pandas as pd
import pytest

from phenoica.biomap.aggregate import aggregate_profiles
from phenoica.screen import ScreenError
from phenoica.sources import h5ad
from tests import report_fixtures as F

ad = pytest.importorskip("anndata")  # extra 'scverse'


@pytest.fixture(scope="module")
def screen(tmp_path_factory):
    root = tmp_path_factory.mktemp("anndata")
    files, _ = F.write_screen(root)
    table = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    path = root / "profiles.parquet"
    table.to_parquet(path, index=False)
    return root, path, table


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_dtype=False)
    assert list(a.columns) == list(b.columns)


def test_round_trip_gives_identical_tables_and_scores(screen, tmp_path):
    root, path, table = screen
    written = h5ad.write_h5ad(h5ad.to_anndata(table, "image", "mae", "base"), tmp_path / "image.h5ad")
    adata = ad.read_h5ad(written)
    assert adata.shape == (len(table), F.DIM) and adata.uns["phenoica"]["level"] == "image"
    assert list(adata.obs.columns) == [c for c in table.columns if c.startswith("Metadata_")]
    back = h5ad.read_h5ad_profiles(written)
    _same(back, table)
    back_path = tmp_path / "back.parquet"
    back.to_parquet(back_path, index=False)
    guides_a, genes_a = aggregate_profiles(path, center_on_controls=True)
    guides_b, genes_b = aggregate_profiles(back_path, center_on_controls=True)
    _same(guides_a, guides_b)
    _same(genes_a, genes_b)


def test_guide_and_gene_levels_join_the_hit_calls(screen):
    _, path, _ = screen
    guides, genes = aggregate_profiles(path, center_on_controls=True)
    scores = F.score_tables()
    hits = scores["hits"][scores["hits"]["variant"] == "pca"]
    adata = h5ad.to_anndata(guides, "guide", "mae", "pca", hits)
    obs = adata.obs.set_index("Metadata_Guide")
    assert bool(obs.loc["G1_g1", "call_hit"]) is True and bool(obs.loc["G3_g2", "call_hit"]) is False
    assert obs.loc["G1_g1", "call_q_value"] == pytest.approx(0.001)
    controls = obs[obs["Metadata_PertType"] == "control"]
    assert len(controls) and controls["call_hit"].isna().all()  # controls have no call
    gene_calls = scores["genes"][scores["genes"]["variant"] == "pca_ica"]
    g = h5ad.to_anndata(genes, "gene", "mae", "pca_ica", gene_calls).obs.set_index("Metadata_Gene")
    assert bool(g.loc["G2", "call_hit"]) is True and g.loc["G2", "call_n_guides_hit"] == 2


def test_export_run_writes_every_level(screen, tmp_path):
    _, path, table = screen
    res = tmp_path / "results"
    (res / "variants" / "mae").mkdir(parents=True)
    (res / "embeddings" / "mae").mkdir(parents=True)
    (res / "scores").mkdir()
    table.to_parquet(res / "variants" / "mae" / "base.parquet", index=False)
    table.to_parquet(res / "embeddings" / "mae" / "P.parquet", index=False)
    guides, genes = aggregate_profiles(path, center_on_controls=True)
    (res / "biomap" / "mae" / "base").mkdir(parents=True)
    guides.to_parquet(res / "biomap" / "mae" / "base" / "guide_profiles.parquet", index=False)
    genes.to_parquet(res / "biomap" / "mae" / "base" / "gene_profiles.parquet", index=False)
    for name, df in F.score_tables().items():
        df.to_parquet(res / "scores" / f"{name}.parquet", index=False)
    written = h5ad.export_run(res)
    assert sorted(p.name for p in written) == ["gene.h5ad", "guide.h5ad", "image.h5ad", "profile.h5ad"]
    assert "call_hit" in ad.read_h5ad(res / "anndata" / "mae" / "base" / "guide.h5ad").obs
    with pytest.raises(FileNotFoundError, match="no variants"):
        h5ad.export_run(tmp_path / "empty")


def test_h5ad_embeddings_are_an_input_with_the_contract_checks(screen, tmp_path):
    _, _, table = screen
    renamed = table.rename(columns={f"emb_{i:04d}": f"PC{i + 1}" for i in range(F.DIM)})  # another tool's names
    path = h5ad.write_h5ad(h5ad.to_anndata(renamed, "image", "other", "base"), tmp_path / "in.h5ad")
    out = h5ad.h5ad_to_parquet(path, tmp_path / "in.parquet")
    _same(pd.read_parquet(out), table)  # features back as emb_0000 ..., identical values
    broken = h5ad.to_anndata(table.drop(columns=["Metadata_Plate"]), "image", "other", "base")
    bad = h5ad.write_h5ad(broken, tmp_path / "bad.h5ad")
    with pytest.raises(ScreenError, match=r"bad.h5ad: missing required column\(s\) \['Metadata_Plate'\]"):
        h5ad.read_h5ad_embeddings(bad)
