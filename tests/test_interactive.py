"""The interactive results page (phenoica.report._interactive) on the tiny screen of tests/report_fixtures.py,
in a real browser (headless Chromium): no console errors, hover a point, click it, find the gene's
panel, an inspected screenshot, the hit table's filter and sort, non-overlapping labels."""

from __future__ import annotations

import html
import io
import json
import time

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from plotly.offline import get_plotlyjs

from phenoica.report import ASSETS, PAGE, PageInputs, channel_styles, write_interactive
from phenoica.report import _gallery as G
from phenoica.report import _render as render
from phenoica.report._gallery import panel_file
from phenoica.report._interactive import gene_records, place_labels
from tests import report_fixtures as F
from tests.browser import chromium, console_errors


def biomap_summary() -> pd.DataFrame:
    """pca, pca_ica and pca_rand at one point (rotations), base close by."""
    return pd.DataFrame(
        {
            "model": ["mae"] * 4,
            "variant": F.VARIANTS,
            "batch_removal_controls": [0.60, 0.62, 0.62, 0.62],
            "recall_annotations": [0.30, 0.31, 0.31, 0.31],
        }
    )


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = tmp_path_factory.mktemp("interactive")
    files, stores = F.write_screen(root)
    options = F.report_options(gallery={"tile_px": 32}).gallery
    gallery = G.write_gallery(root / "report" / "gallery", ["G1"], files, stores, channel_styles(F.CHANNELS), options)
    scores = F.score_tables()
    inputs = PageInputs(
        hits=scores["hits"],
        genes=scores["genes"],
        guide_folds=scores["guide_folds"],
        neighbors=F.neighbors(),
        annotations={"demo_pairs": pd.DataFrame({"entity1": ["G1"], "entity2": ["G2"]})},
        biomap_summary=biomap_summary(),
        gallery=gallery.panels,
        q_threshold=0.05,
    )
    write_interactive(root / "report", inputs)
    return root / "report", inputs


def test_page_is_self_contained_and_gene_records_are_complete(page):
    out, inputs = page
    text = (out / PAGE).read_text()
    assert text.count(get_plotlyjs()) == 1  # plotly.js inline, once
    own = text.replace(get_plotlyjs(), "")
    assert "<script src=" not in own and "http://" not in own and "https://" not in own
    assert (out / ASSETS / "genes_0000.js").is_file()
    rec = gene_records(inputs)["G1"]
    assert (
        len(rec["guides"]) == 2 * 4
        and len(rec["folds"]) == 2 * 4 * 2
        and rec["gallery"] == f"gallery/{panel_file('G1')}"
    )
    assert ["demo_pairs", "G2"] in rec["known"] and ["demo_pairs", "G1"] in gene_records(inputs)["G2"]["known"]
    data = json.loads(text.split('id="phenoica-data" type="application/json">', 1)[1].split("</script>", 1)[0])
    assert data["genes"] == F.GENES and len(data["table"]["rows"]) == 3 * 4
    # every row carries its effect size, in rank order, and no p-value below the null's bound (0.01 here)
    cols, rows = data["table"]["cols"], data["table"]["rows"]
    assert {"rank", "distance_sd", "distance_sd_low", "distance_sd_high", "p_beyond_null"} <= set(cols)
    first = [r for r in rows if r[:2] == ["mae", "pca"]]
    assert [r[cols.index("rank")] for r in first] == [1, 2, 3] and first[0][cols.index("Metadata_Gene")] == "G1"
    assert min(r[cols.index("p_value")] for r in rows) >= 0.01
    gcols = data["guide_cols"]
    assert "distance_sd" in gcols and all(g[gcols.index("p_value")] >= 0.01 for g in rec["guides"])
    assert data["fold_cols"][4:] == ["auroc", "distance_sd"] and len(rec["folds"][0]) == 6


def test_labels_never_overlap():
    pts = [(0.5, 0.5), (0.5, 0.5), (0.51, 0.5), (0.9, 0.1), (0.505, 0.502)]
    texts = ["mae/pca = mae/pca_ica", "b", "mae_seed1/base", "x", "a long label here"]
    offsets = place_labels(pts, texts)
    span = np.ptp(np.asarray(pts), axis=0)
    boxes = []
    for (x, y), (dx, dy), t in zip(pts, offsets, texts):
        cx, cy = (x - 0.5) / span[0] * 640 * 0.8 + dx, -(y - 0.1) / span[1] * 420 * 0.8 + dy
        boxes.append((cx - (7 * len(t) + 4) / 2, cy - 8, cx + (7 * len(t) + 4) / 2, cy + 8))
    for i in range(len(boxes)):
        for j in range(i):
            a, b = boxes[i], boxes[j]
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (texts[i], texts[j])


def _point(driver, div: str, guide: str) -> tuple[float, float]:
    """Page coordinates of a guide's point in the first (visible) trace of a plotly scatter."""
    return driver.execute_script(
        "var gd=document.getElementById(arguments[0]), t=gd._fullData[0], i=t.hovertext.indexOf(arguments[1]);"
        "var xa=gd._fullLayout.xaxis, ya=gd._fullLayout.yaxis, r=gd.getBoundingClientRect();"
        "return [r.left + xa._offset + xa.l2p(t.x[i]), r.top + ya._offset + ya.l2p(t.y[i])];",
        div,
        guide,
    )


def _wait(driver, script: str, timeout: float = 15.0):
    end = time.time() + timeout
    while time.time() < end:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for: {script}")


def test_in_chromium_hover_click_panel_screenshot_table(page):
    from selenium.webdriver.common.actions.action_builder import ActionBuilder
    from selenium.webdriver.common.by import By

    out, _ = page
    with chromium() as driver:
        driver.get((out / PAGE).as_uri())
        _wait(
            driver,
            "return document.querySelector('#volcano .main-svg') && document.querySelectorAll('#hit-table tbody tr').length",
        )
        driver.execute_script("document.getElementById('volcano').scrollIntoView()")
        x, y = _point(driver, "volcano", "G1_g1")
        pointer = ActionBuilder(driver)
        pointer.pointer_action.move_to_location(int(x), int(y))  # viewport coordinates
        pointer.perform()
        hover = _wait(
            driver, "var h=document.querySelector('#volcano .hoverlayer .hovertext'); return h && h.textContent"
        )
        assert "G1_g1" in hover and "gene G1" in hover and "mAP" in hover and "q 0.001" in hover
        assert "rank 2" in hover and "distance 4.10 SD [3.10, 5.10]" in hover and "AUROC 0.910" in hover
        click = ActionBuilder(driver)
        click.pointer_action.move_to_location(int(x), int(y)).click()
        click.perform()
        title = _wait(driver, "var t=document.getElementById('gene-panel-title'); return t && t.textContent")
        assert title == "Gene G1"
        panel = driver.find_element(By.ID, "gene-panel")
        assert "G2" in panel.text and "demo_pairs" in panel.text and "yes" in panel.text  # recalled partner
        assert "B1" in panel.text and "B2" in panel.text  # AUROC per held-out batch
        assert "Distance from the controls (control SDs) per held-out batch" in panel.text
        _wait(driver, "var i=document.getElementById('gene-gallery'); return i && i.complete && i.naturalWidth > 0")
        driver.execute_script("document.getElementById('gene-panel').scrollIntoView()")
        shot = np.asarray(Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")).astype(int)
        assert shot.std() > 20  # not blank
        rect = driver.execute_script(
            "var r=document.getElementById('gene-panel').getBoundingClientRect(); return [r.left, r.top, r.width]"
        )
        left, top, width = (int(round(v)) for v in rect)
        row = shot[max(top, 0) + 1, left + 10 : left + width - 10]  # the panel's top border, in view
        assert (np.abs(row - [0x1F, 0x77, 0xB4]).sum(axis=1) < 40).mean() > 0.9
        # the hit table: sort by q (header click), filter by name, hits only
        header = driver.find_element(By.CSS_SELECTOR, "#hit-table th[data-col='auroc']")
        header.click()
        header = driver.find_element(By.CSS_SELECTOR, "#hit-table th[data-col='auroc']")
        header.click()  # descending
        first = driver.find_element(By.CSS_SELECTOR, "#hit-table tbody tr td:nth-child(3)").text
        assert first == "G1"
        driver.find_element(By.ID, "table-hits").click()
        assert driver.find_element(By.ID, "table-count").text == "5 rows match"  # G1 x 4 variants + G2 in pca_ica
        driver.find_element(By.ID, "table-filter").send_keys("G2")
        assert driver.find_element(By.ID, "table-count").text == "1 rows match"
        # batch vs biology: the labels' boxes never overlap; coincident variants share one label
        boxes = driver.execute_script(
            "return Array.from(document.querySelectorAll('#batch-biology .annotation-text-g')).map(function(a){"
            "var r=a.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom, a.textContent];})"
        )
        assert len(boxes) == 2 and any("mae/pca = mae/pca_ica = mae/pca_rand" in b[4] for b in boxes)
        a, b = boxes
        assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])
        assert console_errors(driver) == []
        # the static report: a 40-column table scrolls in its own box, the page keeps its width
        wide = pd.DataFrame({f"a_long_column_name_{i}": [0.123456] * 3 for i in range(40)})
        render.write_page(render.Page("wide", sections=[render.PageSection("t", [render.Table(wide)])]), out / "static")
        driver.get((out / "static" / "index.html").as_uri())
        widths = driver.execute_script(
            "var d=document.querySelector('div.scroll');"
            "return [document.documentElement.scrollWidth, window.innerWidth, d.scrollWidth, d.clientWidth];"
        )
        assert widths[0] <= widths[1] and widths[2] > widths[3]


def test_report_pages_write_the_gallery_and_the_page_and_return_their_sections(tmp_path):
    from phenoica.report import ReportInputs
    from phenoica.report._pages import report_pages

    files, stores = F.write_screen(tmp_path)
    scores = F.score_tables()
    inputs = ReportInputs(
        scores["guide_folds"],
        pd.DataFrame(),
        scores["genes"],
        hits=scores["hits"],
        gallery_embeddings=files,
        stores=stores,
    )
    options = F.report_options(gallery={"enabled": True, "genes": []}, seed=0)._replace(source="images")
    sections = report_pages(tmp_path / "report", inputs, options)
    assert [s.heading for s in sections] == ["Interactive results page", "Hit gallery"]
    gallery = tmp_path / "report" / "gallery"
    assert (tmp_path / "report" / PAGE).is_file() and (gallery / panel_file("G1")).is_file()
    assert (gallery / panel_file("G2")).is_file() and not (gallery / panel_file("G3")).exists()


#: A gene, guide and model name that plotly would draw as markup (bold, an image, a link) if given raw.
HOSTILE_GENE = "<b>G1</b><img src=x onerror=alert(1)>"
HOSTILE_GUIDE = '<a href="javascript:alert(1)">g1</a>'
HOSTILE_MODEL = "m<i>x</i>&amp;"


@pytest.fixture(scope="module")
def hostile_page(tmp_path_factory):
    """The tiny screen's page with gene G1, its first guide and the model renamed to markup."""
    root = tmp_path_factory.mktemp("hostile")
    scores = F.score_tables(model=HOSTILE_MODEL)
    tables = {}
    for name, df in {**scores, "neighbors": F.neighbors(model=HOSTILE_MODEL)}.items():
        df = df.replace({"Metadata_Gene": {"G1": HOSTILE_GENE}, "neighbor": {"G1": HOSTILE_GENE}})
        if "Metadata_Guide" in df:
            df["Metadata_Guide"] = df["Metadata_Guide"].replace({"G1_g1": HOSTILE_GUIDE})
        tables[name] = df
    inputs = PageInputs(
        hits=tables["hits"],
        genes=tables["genes"],
        guide_folds=tables["guide_folds"],
        neighbors=tables["neighbors"],
        q_threshold=0.05,
    )
    write_interactive(root, inputs)
    return root


def test_names_are_plotly_text_in_the_figures(hostile_page):
    """Plotly draws ``<b>``, ``<a href>`` ... in labels as markup: the page hands it names as
    entities (which it draws as the characters), never raw."""
    body = (hostile_page / PAGE).read_text().replace(get_plotlyjs(), "").split("</head>", 1)[1]
    figures = body
    for code, char in (("\\u003c", "<"), ("\\u003e", ">"), ("\\u002f", "/"), ("\\u0026", "&")):
        figures = figures.replace(code, char)  # plotly's JSON writes these as escapes

    def in_json(name: str) -> str:
        return json.dumps(name)[1:-1]

    assert not [n for n in (HOSTILE_GENE, HOSTILE_GUIDE, HOSTILE_MODEL) if in_json(n) in figures]
    assert all(in_json(html.escape(n, quote=False)) in figures for n in (HOSTILE_GENE, HOSTILE_GUIDE, HOSTILE_MODEL))


def test_in_chromium_hover_labels_and_panels_show_names_as_text(hostile_page):
    from selenium.webdriver.common.actions.action_builder import ActionBuilder

    with chromium() as driver:
        driver.get((hostile_page / PAGE).as_uri())
        _wait(driver, "return document.querySelector('#volcano .main-svg') && 1")
        driver.execute_script("document.getElementById('volcano').scrollIntoView()")
        x, y = _point(driver, "volcano", html.escape(HOSTILE_GUIDE, quote=False))
        pointer = ActionBuilder(driver)
        pointer.pointer_action.move_to_location(int(x), int(y))
        pointer.perform()
        hover = _wait(
            driver, "var h=document.querySelector('#volcano .hoverlayer .hovertext'); return h && h.textContent"
        )
        assert f"gene {HOSTILE_GENE}" in hover and f"guide {HOSTILE_GUIDE}" in hover  # the characters, as text
        made = driver.execute_script(
            "return Array.from(document.querySelectorAll('.js-plotly-plot svg a, .js-plotly-plot svg image, "
            ".js-plotly-plot img, #gene-panel img, #gene-panel a:not(.gene)')).length"
        )
        assert made == 0
        bold = driver.execute_script(
            "return Array.from(document.querySelectorAll('#volcano .hoverlayer tspan'))"
            ".filter(function(t){return /bold/.test(t.getAttribute('style') || '');}).length"
        )
        assert bold == 0
        click = ActionBuilder(driver)
        click.pointer_action.move_to_location(int(x), int(y)).click()
        click.perform()
        title = _wait(driver, "var t=document.getElementById('gene-panel-title'); return t && t.textContent")
        assert title == f"Gene {HOSTILE_GENE}"  # the click opened the gene by its own name
        legend = _wait(
            driver,
            "var l=document.querySelectorAll('#gene-variants-plot .legendtext');"
            "return l.length && Array.from(l).map(function(e){return e.textContent;})",
        )
        assert f"{HOSTILE_MODEL} {HOSTILE_GUIDE}" in legend
        menu = driver.execute_script(
            "return Array.from(document.querySelectorAll('#volcano .updatemenu-item-text, #volcano .updatemenu-header'))"
            ".map(function(e){return e.textContent;})"
        )
        assert any(m.startswith(f"{HOSTILE_MODEL}/") for m in menu), menu
        assert console_errors(driver) == []


def test_hit_table_data_keeps_unranked_genes_last(tmp_path):
    scores = F.score_tables()
    genes = scores["genes"].assign(rank=lambda d: d["rank"].astype("Int64"))
    genes.loc[(genes["variant"] == "pca") & (genes["Metadata_Gene"] == "G1"), "rank"] = pd.NA
    write_interactive(
        tmp_path, PageInputs(hits=scores["hits"], genes=genes, guide_folds=scores["guide_folds"], q_threshold=0.05)
    )
    text = (tmp_path / PAGE).read_text()
    data = json.loads(text.split('id="phenoica-data" type="application/json">', 1)[1].split("</script>", 1)[0])
    cols, rows = data["table"]["cols"], data["table"]["rows"]
    pca = [r for r in rows if r[:2] == ["mae", "pca"]]
    assert [r[cols.index("Metadata_Gene")] for r in pca] == ["G2", "G3", "G1"] and pca[-1][cols.index("rank")] is None
