"""AnnData export (phenoica.report.anndata) and reading back (phenoica.screen._h5ad): parquet ->
h5ad -> phenoica gives identical tables and identical guide and gene profiles; a results folder's
levels are written with the hit calls joined to obs."""

from __future__ import annotations

import pandas as pd
import pytest

from phenoica.biomap import aggregate_profiles
from phenoica.contract import ScreenError
from phenoica.report import anndata as h5ad_export
from phenoica.screen import _h5ad as h5ad
from phenoica.screen import parquet_source
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
    written = h5ad_export.write_h5ad(h5ad_export.to_anndata(table, "image", "mae", "base"), tmp_path / "image.h5ad")
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
    adata = h5ad_export.to_anndata(guides, "guide", "mae", "pca", hits)
    obs = adata.obs.set_index("Metadata_Guide")
    assert bool(obs.loc["G1_g1", "call_hit"]) is True and bool(obs.loc["G3_g2", "call_hit"]) is False
    assert obs.loc["G1_g1", "call_q_value"] == pytest.approx(0.001)
    controls = obs[obs["Metadata_PertType"] == "control"]
    assert len(controls) and controls["call_hit"].isna().all()  # controls have no call
    gene_calls = scores["genes"][scores["genes"]["variant"] == "pca_ica"]
    g = h5ad_export.to_anndata(genes, "gene", "mae", "pca_ica", gene_calls).obs.set_index("Metadata_Gene")
    assert bool(g.loc["G2", "call_hit"]) is True and g.loc["G2", "call_n_guides_hit"] == 2


def test_export_run_writes_every_level(screen, tmp_path):
    _, path, table = screen
    res = tmp_path / "results"
    (res / "transforms" / "mae").mkdir(parents=True)
    (res / "embed" / "mae").mkdir(parents=True)
    (res / "hits").mkdir()
    table.to_parquet(res / "transforms" / "mae" / "base.parquet", index=False)
    table.to_parquet(res / "embed" / "mae" / "P.parquet", index=False)
    guides, genes = aggregate_profiles(path, center_on_controls=True)
    (res / "biomap" / "mae" / "base").mkdir(parents=True)
    guides.to_parquet(res / "biomap" / "mae" / "base" / "guide_profiles.parquet", index=False)
    genes.to_parquet(res / "biomap" / "mae" / "base" / "gene_profiles.parquet", index=False)
    for name, df in F.score_tables().items():
        df.to_parquet(res / "hits" / f"{name}.parquet", index=False)
    written = h5ad_export.export_run(res)
    assert sorted(p.name for p in written) == ["gene.h5ad", "guide.h5ad", "image.h5ad", "profile.h5ad"]
    assert "call_hit" in ad.read_h5ad(res / "anndata" / "mae" / "base" / "guide.h5ad").obs
    with pytest.raises(FileNotFoundError, match="no transforms"):
        h5ad_export.export_run(tmp_path / "empty")


def _as_h5ad(files, folder, rename=None):
    """Each embeddings parquet as an ``.h5ad`` of image embeddings (features renamed by ``rename``)."""
    out = []
    for f in files:
        table = pd.read_parquet(f).rename(columns=rename or {})
        out.append(
            h5ad_export.write_h5ad(h5ad_export.to_anndata(table, "image", "other", "base"), folder / f"{f.stem}.h5ad")
        )
    return out


def _door(tmp_path, pattern, **screen):
    """The door (:func:`phenoica.workflow._validate.check_screen_once`) on a source-embeddings config."""
    from phenoica.contract import run_models, validate_config
    from phenoica.workflow import _validate as validate

    cfg = {"results": str(tmp_path / "res"), "screen": {"source": "embeddings", "embeddings": pattern, **screen}}
    cfg = validate_config(run_models(cfg))
    return validate.check_screen_once(cfg, {}, tmp_path / "res" / "validated.json")


def test_h5ad_embeddings_give_the_parquet_table_and_identical_scores(tmp_path):
    """parquet -> h5ad -> phenoica: the embeddings source reads an ``.h5ad`` as the table its
    parquet holds (same profiles, to the bit), and the guides' scores are identical."""
    from phenoica.classify import classify_guides, leave_one_batch_out, null_guide_design
    from phenoica.profiles import gather_profiles
    from phenoica.profiles._embeddings import plan_embeddings
    from tests.test_classify import classify_options

    files, _ = F.write_screen(tmp_path)
    h5ads = _as_h5ad(files, tmp_path)
    assert plan_embeddings(h5ads) == plan_embeddings(files)
    a, b = gather_profiles(files), gather_profiles(h5ads)
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(gather_profiles(files, "well"), gather_profiles(h5ads, "well"))
    cfg = {"num_boost_round": 20, "n_null_guides": 2, "min_train_samples": 3, "lightgbm": {"num_threads": 1}}
    options = classify_options(cfg, 0)
    scores = [
        classify_guides(t, None, leave_one_batch_out(t), options, "base", "m", nulls=null_guide_design(t, 2, seed=0))
        for t in (a, b)
    ]
    assert (scores[0]["status"] == "ok").any()
    pd.testing.assert_frame_equal(scores[0], scores[1])
    # the same table on disk
    pd.testing.assert_frame_equal(
        pd.read_parquet(h5ad.h5ad_to_parquet(h5ads[0], tmp_path / "x.parquet")), pd.read_parquet(files[0])
    )


def test_h5ad_embeddings_pass_the_door_with_the_parquet_checks(tmp_path):
    """The door checks an ``.h5ad`` screen as a parquet one: the same report for a valid screen;
    for a broken one the same problems, naming the ``.h5ad`` files; features chosen by name."""
    files, _ = F.write_screen(tmp_path / "pq")
    _as_h5ad(files, tmp_path)
    want = _door(tmp_path / "a", str(tmp_path / "pq" / "embeddings" / "*.parquet"))
    got = _door(tmp_path / "b", str(tmp_path / "*.h5ad"))
    # emb_0003 is 0 in every row of this fixture: the profile hygiene drops it, decided at the door
    assert got["models"] == want["models"] and got["models"]["embeddings"]["features"] == F.DIM - 1
    assert got["models"]["embeddings"]["hygiene"]["constant"] == ["emb_0003"]
    # another tool's feature names: the same feature choice (feature_regex) as for parquet
    names = {f"emb_{i:04d}": f"PC{i + 1}" for i in range(F.DIM)}
    (tmp_path / "pcs").mkdir()
    _as_h5ad(files, tmp_path / "pcs", names)
    pcs = _door(tmp_path / "c", str(tmp_path / "pcs" / "*.h5ad"), feature_regex="PC[0-9]+")["models"]["embeddings"]
    assert pcs["features"] == F.DIM - 1 and pcs["hygiene"]["constant"] == ["PC4"]
    with pytest.raises(ScreenError, match=r"P1.h5ad.*no feature columns|no feature columns.*P1.h5ad"):
        _door(tmp_path / "d", str(tmp_path / "pcs" / "*.h5ad"))
    # a guide under two genes: the same problem as in parquet, named by the h5ad file and row
    bad = pd.read_parquet(files[1])
    bad.loc[bad["Metadata_Guide"] == "G1_g1", "Metadata_Gene"] = "G2"
    (tmp_path / "bad").mkdir()
    bad.to_parquet(tmp_path / "bad" / "P2.parquet", index=False)
    h5ad_export.write_h5ad(h5ad_export.to_anndata(bad, "image", "other", "base"), tmp_path / "bad" / "P2.h5ad")
    pd.read_parquet(files[0]).to_parquet(tmp_path / "bad" / "P1.parquet", index=False)
    _as_h5ad(files[:1], tmp_path / "bad")
    messages = []
    for ext in ("parquet", "h5ad"):
        with pytest.raises(ScreenError) as info:
            _door(tmp_path / f"e_{ext}", str(tmp_path / "bad" / f"*.{ext}"))
        messages.append(str(info.value))
    assert "G1_g1" in messages[1] and "P2.h5ad" in messages[1]
    assert messages[1] == messages[0].replace(".parquet", ".h5ad")


@pytest.mark.filterwarnings("ignore:Variable names are not unique")  # anndata's, for the duplicate made here
def test_broken_h5ad_embeddings_name_the_file(screen, tmp_path):
    """Missing Metadata_ columns, a file that is not AnnData, and a feature twice name the file."""
    _, _, table = screen
    broken = h5ad_export.to_anndata(table.drop(columns=["Metadata_Plate"]), "image", "other", "base")
    bad = h5ad_export.write_h5ad(broken, tmp_path / "bad.h5ad")
    with pytest.raises(ScreenError, match=r"bad.h5ad: missing required column\(s\) \['Metadata_Plate'\]"):
        h5ad.read_h5ad_embeddings(bad)
    junk = tmp_path / "junk.h5ad"
    junk.write_bytes(b"not an h5ad")
    with pytest.raises(ScreenError, match=r"junk.h5ad: not a readable .h5ad file"):
        parquet_source(junk)
    twice = h5ad_export.to_anndata(table, "image", "other", "base")
    twice.var_names = ["emb_0000"] * F.DIM
    with pytest.raises(ScreenError, match=r"twice.h5ad: feature name\(s\) \['emb_0000'\]"):
        h5ad.read_h5ad_profiles(h5ad_export.write_h5ad(twice, tmp_path / "twice.h5ad"))
