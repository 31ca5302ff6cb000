"""Size and load time of the interactive page at genome scale, in headless Chromium.

Synthetic gathered tables: ``--genes`` genes (default 20,000) x 4 guides x 4 variants of one model,
2 held-out batches, 10 map neighbours per gene; the baseline is the same page for 200 genes,
measured in the same run. Prints the HTML and asset sizes, the time from navigation to the
volcano drawn and the hit table filled, and the time from a gene click to its panel.

    python benchmarks/interactive_page.py [--genes 20000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.browser: the same Chromium as the tests

from phenoica.report import ASSETS, PAGE, PageInputs, write_interactive  # noqa: E402
from tests.browser import chromium  # noqa: E402

VARIANTS = ["base", "pca", "pca_ica", "pca_rand"]


def tables(n_genes: int, rng: np.random.Generator) -> PageInputs:
    genes = np.array([f"GENE{i:05d}" for i in range(n_genes)])
    g = np.repeat(genes, 4)
    guides = np.array([f"{x}_g{k}" for x, k in zip(g, np.tile(np.arange(4), n_genes))])
    hits, calls, folds = [], [], []
    for v in VARIANTS:
        auroc = rng.uniform(0.3, 1.0, len(g))
        q = np.clip(rng.uniform(0, 1, len(g)) ** 3, 1e-6, 1)
        hits.append(
            pd.DataFrame(
                {
                    "model": "mae",
                    "variant": v,
                    "Metadata_Gene": g,
                    "Metadata_Guide": guides,
                    "n_folds_ok": 2,
                    "auroc": auroc,
                }
                | {"p_value": q / 2, "q_value": q, "hit": q < 0.05, "mean_average_precision": auroc / 2}
                | {"map_p_value": q, "map_q_value": q, "map_hit": q < 0.05, "agreement": "both"}
            )
        )
        gq = q.reshape(-1, 4).min(axis=1)
        calls.append(
            pd.DataFrame(
                {
                    "model": "mae",
                    "variant": v,
                    "Metadata_Gene": genes,
                    "n_guides": 4,
                    "auroc": auroc.reshape(-1, 4).mean(1),
                }
                | {"n_guides_hit": (q.reshape(-1, 4) < 0.05).sum(1), "p_value": gq, "q_value": gq, "hit": gq < 0.05}
            )
        )
        for b in ("B1", "B2"):
            folds.append(
                pd.DataFrame(
                    {"model": "mae", "variant": v, "Metadata_Gene": g, "Metadata_Guide": guides, "is_null_guide": False}
                    | {"fold": b, "auroc": auroc, "status": "ok"}
                )
            )
    nb = pd.DataFrame(
        {
            "model": "mae",
            "variant": np.repeat(VARIANTS, n_genes * 10),
            "Metadata_Gene": np.tile(np.repeat(genes, 10), 4),
            "rank": np.tile(np.arange(1, 11), n_genes * 4),
            "neighbor": rng.choice(genes, n_genes * 40),
            "cosine": rng.uniform(0, 1, n_genes * 40),
            "neighbor_q_value": rng.uniform(0, 1, n_genes * 40),
        }
    )
    return PageInputs(pd.concat(hits), pd.concat(calls), pd.concat(folds), neighbors=nb, q_threshold=0.05)


def measure(out: Path) -> tuple[float, float, float, float]:
    """(HTML MB, assets MB, seconds to a drawn page, seconds from a click to the panel)."""
    html_mb = (out / PAGE).stat().st_size / 1e6
    assets_mb = sum(p.stat().st_size for p in (out / ASSETS).iterdir()) / 1e6
    with chromium() as driver:
        t0 = time.perf_counter()
        driver.get((out / PAGE).as_uri())
        while not driver.execute_script(
            "return document.querySelector('#volcano .main-svg') && document.querySelectorAll('#hit-table tbody tr').length"
        ):
            time.sleep(0.05)
        load = time.perf_counter() - t0
        gene = driver.execute_script(
            "return JSON.parse(document.getElementById('phenoica-data').textContent).genes.slice(-1)[0]"
        )
        t0 = time.perf_counter()
        driver.execute_script("window.phenoicaShowGene(arguments[0])", gene)
        while driver.execute_script("var t=document.getElementById('gene-panel-title'); return !(t && t.textContent)"):
            time.sleep(0.02)
        panel = time.perf_counter() - t0
    return html_mb, assets_mb, load, panel


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--genes", type=int, default=20000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for n in (200, args.genes):
            out = Path(tmp) / str(n)
            t0 = time.perf_counter()
            write_interactive(out, tables(n, rng))
            write_s = time.perf_counter() - t0
            results[n] = (*measure(out), write_s)
            html_mb, assets_mb, load, panel, write_s = results[n]
            print(
                f"{n:>6} genes ({4 * n * 4:,} guide points): HTML {html_mb:.1f} MB + assets {assets_mb:.1f} MB; "
                f"written in {write_s:.1f} s; load to drawn page {load:.2f} s; click to gene panel {panel:.2f} s"
            )
        base, big = results[200], results[args.genes]
        print(f"ratio {args.genes} / 200 genes: HTML size {big[0] / base[0]:.2f}, load time {big[2] / base[2]:.2f}")


if __name__ == "__main__":
    main()
