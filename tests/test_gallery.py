"""The hit gallery (phenoica.report._gallery, phenoica.report._channels) on the tiny screen of tests/report_fixtures.py:
the images chosen by the stated rule, reads limited to the chunks that hold them, scaling identical
for a hit and its controls, and the bad-input errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from phenoica.report import _gallery as G
from phenoica.report import channel_styles
from phenoica.report._channels import CELL_PAINTING, default_style
from tests import report_fixtures as F

OPTIONS = F.report_options(gallery={"sites_per_guide": 2, "control_sites": 4, "tile_px": 16}, seed=0).gallery


@pytest.fixture(scope="module")
def screen(tmp_path_factory):
    root = tmp_path_factory.mktemp("gallery_screen")
    files, stores = F.write_screen(root)
    return root, files, stores


def test_sites_are_the_images_nearest_the_means(screen):
    _, files, _ = screen
    sites = G.select_sites(files, ["G1", "G2"], OPTIONS)
    guides = sites[sites["role"] == G.GUIDE_ROLE]
    assert sorted(guides["Metadata_Guide"].unique()) == ["G1_g1", "G1_g2", "G2_g1", "G2_g2"]
    # each guide: its two site-2 images (one per plate), at distance 0 from the guide's mean
    assert (guides["Metadata_Site"] == 2).all() and np.allclose(guides["distance"], 0)
    assert (
        guides.groupby("Metadata_Guide")["Metadata_Plate"].apply(sorted) == pd.Series([["P1", "P2"]] * 4).values
    ).all()
    controls = sites[sites["role"] == G.CONTROL_ROLE]
    first_two = controls[controls["rank"] < 2].sort_values(["Metadata_Plate", "rank"])
    assert list(first_two["Metadata_Well"]) == ["H01", "H02"] * 2 and (first_two["Metadata_Site"] == 2).all()
    assert np.allclose(first_two["distance"], [0.25, 1.25] * 2)


def test_ties_are_broken_by_the_seed_and_reproducibly(screen):
    _, files, _ = screen
    third = {}
    for seed in range(6):
        opts = F.report_options(gallery={"sites_per_guide": 3, "control_sites": 1}, seed=seed).gallery
        a = G.select_sites(files, ["G1"], opts)
        assert a.equals(G.select_sites(files, ["G1"], opts))  # same seed, same choice
        extra = a[(a["role"] == G.GUIDE_ROLE) & (a["rank"] == 2)]
        assert (extra["Metadata_Plate"] == "P1").all() and set(extra["Metadata_Site"]) <= {1, 3}
        third[seed] = tuple(extra["Metadata_Site"])
    assert len(set(third.values())) > 1  # the tie between P1's sites 1 and 3 goes either way


def test_reads_only_the_chunks_of_the_chosen_images(screen):
    _, files, stores = screen
    sites = G.select_sites(files, ["G1"], OPTIONS)
    rows = G.gene_images(sites, "G1", OPTIONS.control_sites)
    stats = G.ReadStats()
    tiles, missing = G.read_gene_tiles(rows, stores, stats)
    assert not missing and len(tiles) == len(rows) == 4 + 4
    # tile pixels equal 100 * (channel + 1) + image index: each tile is the image of its row
    for row, tile in zip(rows.itertuples(), tiles):
        assert tile[:, 0, 0].tolist() == [100 * (c + 1) + row.Metadata_ImageIndex for c in range(3)]
    n_images = len(F.plate_image_rows("P1"))
    assert stats.images == len(rows) and stats.bytes == stats.chunks * 4 * 3 * 16 * 16 * 2  # chunks of 4 images
    assert stats.chunks < 2 * n_images // 4  # fewer chunks than the two plates hold


def test_panel_scales_hit_and_controls_alike_and_states_it(screen, tmp_path):
    _, files, stores = screen
    styles = channel_styles(F.CHANNELS)
    result = G.write_gallery(tmp_path, ["G1"], files, stores, styles, OPTIONS)
    row = result.panels.iloc[0]
    assert row["status"] == G.STATUS_OK and row["n_guide_images"] == 4 and row["n_control_images"] == 4
    assert "percentile" in row["scaling"] and "DNA" in row["scaling"]
    # one range per channel, over the hit's and the controls' pixels together
    sel = G.gene_images(result.sites, "G1", 4)
    tiles, _ = G.read_gene_tiles(sel, stores, G.ReadStats())
    ranges = G.display_ranges(tiles, OPTIONS.percentiles)
    pooled = np.stack(tiles)[:, 0].ravel()
    assert ranges[0, 0] == pytest.approx(np.percentile(pooled, 0.5)) and ranges[0, 1] == pytest.approx(
        np.percentile(pooled, 99.5)
    )
    # a guide row and a control row holding the same pixels are drawn identically (one scaling)
    three = sel.iloc[[0, 4, 5]]
    bright, dark = max(tiles, key=lambda t: t.sum()), min(tiles, key=lambda t: t.sum())
    assert list(three["role"]) == [G.GUIDE_ROLE, G.CONTROL_ROLE, G.CONTROL_ROLE]
    panel = G.Panel("G1", three, [bright, bright, dark], styles, [0, 1, 2])
    image, _ = G.panel_image(panel, OPTIONS)
    img = np.asarray(image)
    label_w = img.shape[1] - 4 * (16 + 4) - 4
    first = img[34 : 34 + 16, label_w : label_w + 16]
    second = img[34 + 20 : 34 + 36, label_w : label_w + 16]
    assert np.array_equal(first, second) and first[..., 2].mean() > first[..., 0].mean()  # DNA: blue
    saved = Image.open(tmp_path / row["panel"])
    assert saved.size[0] > 4 * 16 and np.asarray(saved).std() > 10  # a drawn, not blank, panel


def test_cell_painting_defaults_and_aliases():
    assert set(CELL_PAINTING) >= {"DNA", "ER", "RNA", "AGP", "Mito", "Brightfield"}
    assert default_style("Hoechst").hex == CELL_PAINTING["DNA"][1] and default_style("nucleus").label == "nucleus (DNA)"
    assert default_style("brightfield").in_composite is False
    styles = channel_styles(["DNA", "odd"], {"DNA": {"colour": "#0000FF", "label": "Hoechst"}})
    assert (styles[0].hex, styles[0].label) == ("#0000ff", "Hoechst") and styles[1].label == "odd"


def test_colours_for_channels_the_screen_lacks_are_named():
    with pytest.raises(ValueError, match=r"\['Actin', 'WGA'\] name channel\(s\) the screen lacks.*'DNA'"):
        channel_styles(["DNA", "ER"], {"Actin": {"colour": "#ff0000"}, "WGA": {"colour": "#ffff00"}, "DNA": {}})


def test_unknown_genes_are_listed_with_the_closest_names():
    genes = F.score_tables()["genes"]
    with pytest.raises(G.GalleryError, match=r"'G11' \(closest: 'G1'.*'XYZ' \(closest: none\)"):
        G.gallery_genes(genes, ["G2", "G11", "XYZ"])
    assert G.gallery_genes(genes, ["G3", "G1"]) == ["G1", "G2", "G3"]  # hits by q, then requested


def test_a_moved_store_is_named_and_the_other_genes_are_drawn(screen, tmp_path):
    root, files, stores = screen
    moved = dict(stores, P2=str(tmp_path / "elsewhere" / "P2.zarr"))
    result = G.write_gallery(tmp_path / "g", ["G1", "G2"], files, moved, channel_styles(F.CHANNELS), OPTIONS)
    assert any("P2.zarr" in m and "not found" in m for m in result.missing_stores)
    assert result.panels["status"].str.startswith("partly drawn").all()
    assert (result.panels["n_guide_images"] == 2).all()  # P1's images only
    gone = {p: str(tmp_path / "none" / f"{p}.zarr") for p in stores}
    nothing = G.write_gallery(tmp_path / "h", ["G1"], files, gone, channel_styles(F.CHANNELS), OPTIONS)
    assert nothing.panels["status"].iloc[0].startswith("not drawn") and "P1.zarr" in nothing.panels["status"].iloc[0]


def test_report_gallery_skips_the_embeddings_source_and_builds_a_section(screen, tmp_path):
    _, files, stores = screen
    options = F.report_options(gallery={"enabled": True, "genes": ["G3"]}, seed=0)._replace(source="embeddings")
    skipped = G.report_gallery(tmp_path / "s", F.score_tables()["genes"], files, stores, options)
    section = G.gallery_section(skipped, tmp_path, tmp_path / "s")
    assert "source embeddings has no pixels" in section.blocks[0]
    off = G.report_gallery(
        tmp_path / "off",
        F.score_tables()["genes"],
        files,
        stores,
        options._replace(source="zarr", gallery_enabled=False),
    )
    assert "gallery.enabled is off" in G.gallery_section(off, tmp_path, tmp_path / "off").blocks[0]
    result = G.report_gallery(
        tmp_path / "gallery", F.score_tables()["genes"], files, stores, options._replace(source="zarr")
    )
    assert list(result.panels["gene"]) == ["G1", "G2", "G3"]
    section = G.gallery_section(result, tmp_path, tmp_path / "gallery")
    figures = [b for b in section.blocks if hasattr(b, "path")]
    assert [f.path for f in figures] == [f"gallery/{G.panel_file(g)}" for g in ("G1", "G2", "G3")]


def test_names_that_read_alike_get_a_panel_each(screen, tmp_path):
    """Two genes whose names sanitize alike (``<script>...`` and ``_script_...``) once shared one
    file, the second gene's image shown for both: now each has its own file, a readable stem
    plus a hash of the name, and gallery.csv maps each name to its file. A name of any length
    makes a short file name."""
    _, files, stores = screen
    alike = {"G1": "<script>alert(1)</script>", "G2": "_script_alert_1___script_"}
    renamed = []
    for path in files:
        table = pd.read_parquet(path)
        table["Metadata_Gene"] = table["Metadata_Gene"].replace(alike)
        renamed.append(tmp_path / path.name)
        table.to_parquet(renamed[-1], index=False)
    out = tmp_path / "g"
    result = G.write_gallery(out, list(alike.values()), renamed, stores, channel_styles(F.CHANNELS), OPTIONS)
    panels = pd.read_csv(out / G.PANELS_FILE).set_index("gene")["panel"]
    assert panels.index.tolist() == list(alike.values()) and panels.is_unique
    assert all(p.startswith("_script_alert_1___script_-") and p.endswith(".png") for p in panels)
    pixels = [np.asarray(Image.open(out / p)) for p in panels]
    assert pixels[0].shape != pixels[1].shape or not np.array_equal(*pixels)  # each its own gene's images
    assert dict(zip(result.panels["gene"], result.panels["panel"])) == panels.to_dict()
    assert len(G.panel_file("G" * 5000)) == len("G" * G.PANEL_STEM_CHARS) + len("-0123456789.png")


def test_the_options_name_the_gallery_model_and_whether_it_reads_pixels():
    options = F.report_options()
    assert options.gallery_model_of(["mae_seed1", "mae"]) == "mae"  # the first by name
    assert options._replace(gallery_model="mae_seed1").gallery_model_of(["mae", "mae_seed1"]) == "mae_seed1"
    with pytest.raises(ValueError, match=r"gallery\.model: 'other' is not a model of this run; models are \['mae'\]"):
        options._replace(gallery_model="other").gallery_model_of(["mae"])
    assert options.gallery_reads_pixels and not options._replace(source="embeddings").gallery_reads_pixels
    assert not options._replace(gallery_enabled=False).gallery_reads_pixels
