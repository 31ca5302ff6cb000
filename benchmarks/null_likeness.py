"""Are a screen's guides without effect scored like the null's pseudo-guides?

The classifier's empirical null is made of control wells laid out like guides
(:func:`phenoica.classify.null_guide_design`); it stands for guides without effect only if those
are scored like it. On the arrayed per-well screen (``benchmarks/classify_growth.py``'s, at
``--guides-scale`` times its guides, whose truth names the guides of genes without effect), this
scores every guide and ``--nulls`` pseudo-guides (exact protocol, concentration off, one thread)
and prints, per setting, the mean and 90% quantile of the held-out AUROC (mean over folds) of the
guides without effect and of the pseudo-guides, their difference and the two-sample
Kolmogorov-Smirnov p. Settings: the screen as exported (each plate normalized against its
control wells, as pycytominer's ``mad_robustize`` leaves a per-well export), the screen left as
measured (``ArrayedDesign.control_normalized`` False), and alike control constructs
(``control_effect`` 0), each at ``--seeds``; ``--control-scope`` as ``classify.control_scope``.

    python benchmarks/null_likeness.py [--seeds 0 1] [--guides-scale 1] [--nulls 300] [--control-scope fold]
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time

import pandas as pd
from classify_growth import arrayed_design
from scipy import stats

from phenoica.classify import ClassifyOptions, classify_guides, leave_one_batch_out, null_guide_design
from phenoica.contract import GUIDE, validate_config
from phenoica.screen import ArrayedDesign, screen_profiles

#: The settings compared: (name, what they change of the screen).
SETTINGS: tuple[tuple[str, dict[str, object]], ...] = (
    ("as exported", {}),
    ("alike controls", {"control_effect": 0.0}),
    ("not normalized", {"control_normalized": False}),
)


def likeness(design: ArrayedDesign, seed: int, options: ClassifyOptions, nulls: int) -> dict[str, float]:
    """The held-out AUROC of the guides without effect against the pseudo-guides' on one draw."""
    table, truth = screen_profiles(design, seed)
    inert = set(truth.loc[~truth["has_effect"].astype(bool), GUIDE])
    t0 = time.process_time()
    rows = classify_guides(
        table, None, leave_one_batch_out(table), options, "base", "m", nulls=null_guide_design(table, nulls, seed)
    )
    auroc = rows.groupby([GUIDE, "is_null_guide"])["auroc"].mean().reset_index()
    guides = auroc.loc[~auroc["is_null_guide"] & auroc[GUIDE].isin(inert), "auroc"]
    pseudo = auroc.loc[auroc["is_null_guide"], "auroc"]
    return {
        "guides": len(guides),
        "guides_mean": float(guides.mean()),
        "guides_q90": float(guides.quantile(0.9)),
        "pseudo": len(pseudo),
        "pseudo_mean": float(pseudo.mean()),
        "pseudo_q90": float(pseudo.quantile(0.9)),
        "ks_p": float(stats.ks_2samp(guides, pseudo).pvalue),
        "cpu": time.process_time() - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--guides-scale", type=int, default=1)
    ap.add_argument("--nulls", type=int, default=300)
    ap.add_argument("--control-scope", choices=["fold", "plates"], default="fold")
    ap.add_argument("--effect-genes", type=int, default=96)
    ap.add_argument("--null-genes", type=int, default=40)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    classify = {"concentration": False, "control_scope": args.control_scope, "lightgbm": {"num_threads": 1}}
    options = ClassifyOptions.from_config(validate_config({"seed": 0, "classify": classify}))
    base = arrayed_design(args.guides_scale, "guides", args.effect_genes, args.null_genes)
    print(
        "setting          seed  without effect: n, mean AUROC, q90   pseudo-guides: n, mean, q90   "
        "mean difference  KS p  CPU s"
    )
    out = []
    for name, change in SETTINGS:
        for seed in args.seeds:
            r = likeness(dataclasses.replace(base, **change), seed, options._replace(seed=seed), args.nulls)
            out.append({"setting": name, "seed": seed, **r})
            print(
                f"{name:16s} {seed:4d}  {r['guides']:4d} {r['guides_mean']:.3f} {r['guides_q90']:.3f}"
                f"   {r['pseudo']:4d} {r['pseudo_mean']:.3f} {r['pseudo_q90']:.3f}"
                f"   {r['guides_mean'] - r['pseudo_mean']:+.3f}  {r['ks_p']:.2g}  {r['cpu']:.0f}",
                flush=True,
            )
    table = pd.DataFrame(out)
    means = table.assign(diff=table["guides_mean"] - table["pseudo_mean"]).groupby("setting", sort=False)["diff"]
    print("\nmean difference over the seeds: " + ", ".join(f"{k} {v:+.3f}" for k, v in means.mean().items()))


if __name__ == "__main__":
    main()
