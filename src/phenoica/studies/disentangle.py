"""AE + ICA disentanglement benchmark (PAPER.md Table 2), with the baselines trained in the same harness.

Models (:data:`MODELS`) share one convolutional encoder/decoder (the usual one of this
literature: 4x4 stride-2 convolutions halving the image down to 4x4, a 256-unit dense layer,
the latent; the decoder mirrors it and outputs Bernoulli logits) and one training loop (same
data, seeds, steps, batch size, Adam learning rate):

- ``ae``: reconstruction loss only (Bernoulli log-likelihood, summed over pixels).
- ``beta_vae``: reconstruction + ``beta`` x KL(q(z|x) || N(0, I)); latents = posterior means.
- ``beta_tcvae``: reconstruction + mutual information + ``beta`` x total correlation +
  dimension-wise KL (Chen et al. 2018), q(z) and prod_j q(z_j) estimated by minibatch-weighted
  sampling over the training set size; latents = posterior means.
- ``bioae``: the biologically-inspired AE of Whittington et al. (ICLR 2023). Our reading: a
  deterministic AE whose loss adds (i) a nonnegativity penalty ``sum_j relu(-z_j)^2``, (ii) an
  activity-energy penalty ``sum_j z_j^2`` (both averaged over the batch) and (iii) a
  weight-energy penalty, the summed squares of the decoder's weight matrices (biases excluded),
  each with its own coefficient; nonnegativity is the soft penalty (not a ReLU), so a latent
  can still be read as a signed value and no unit dies at initialization.

``ae_ica`` is not trained: the AE's latents are whitened with :class:`phenoica.transforms.PCAWhitener`
(``n_components`` = latent size unless configured) and rotated with
:class:`phenoica.transforms.ICARotation`, the same code as the screen's pca_ica variant. The
transform is unsupervised and is fitted on the evaluation latents themselves (no factor is used).

Scores per (dataset, model, seed) on a fixed seeded evaluation subset: InfoM, InfoE, InfoC
(:func:`phenoica.metrics.infomec`, followed as defined even where it behaves oddly: InfoM/InfoC
are ratios of NMIs and stay high for noise latents; read them beside InfoE), MCC, mean linear
R^2 (in-sample) and DCI (:func:`phenoica.metrics.dci`).
"""

from __future__ import annotations

import html
import json
import math
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from torch import nn
from torch.nn import functional as F

from phenoica import metrics
from phenoica.io import atomic_path, write_parquet
from phenoica.mae import resolve_device
from phenoica.studies.factor_data import FactorDataset, eval_index
from phenoica.transforms import ICARotation, PCAWhitener

MODELS: tuple[str, ...] = ("ae", "beta_vae", "beta_tcvae", "bioae")
EVALUATED: tuple[str, ...] = ("ae", "beta_vae", "beta_tcvae", "bioae", "ae_ica")
MODEL_LABELS: dict[str, str] = {"ae": "AE", "beta_vae": "beta-VAE", "beta_tcvae": "beta-TCVAE",
                                "bioae": "BioAE", "ae_ica": "AE + ICA"}
SCORE_COLUMNS: tuple[str, ...] = ("infom", "infoe", "infoc", "mcc", "r2", "dci_d", "dci_c", "dci_i")
SCORE_LABELS: dict[str, str] = {"infom": "InfoM", "infoe": "InfoE", "infoc": "InfoC", "mcc": "MCC", "r2": "R2",
                                "dci_d": "DCI-D", "dci_c": "DCI-C", "dci_i": "DCI-I"}
HIDDEN = 256


# --------------------------------------------------------------------------- networks


def _n_convs(image_size: int) -> int:
    if image_size < 16 or image_size & (image_size - 1):
        raise ValueError(f"image size must be a power of two >= 16, got {image_size}")
    return int(math.log2(image_size)) - 2  # halve down to 4 x 4


def _channels(n: int) -> list[int]:
    return [32] * (n - 2) + [64, 64] if n >= 2 else [64] * n


class Encoder(nn.Module):
    """4x4 stride-2 conv stack (ReLU) down to 4x4, dense 256, dense ``n_out``."""

    def __init__(self, image_size: int, n_out: int) -> None:
        super().__init__()
        chans = [3] + _channels(_n_convs(image_size))
        layers: list[nn.Module] = []
        for c_in, c_out in zip(chans[:-1], chans[1:]):
            layers += [nn.Conv2d(c_in, c_out, 4, 2, 1), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Flatten(), nn.Linear(chans[-1] * 16, HIDDEN), nn.ReLU(),
                                 nn.Linear(HIDDEN, n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Decoder(nn.Module):
    """Mirror of :class:`Encoder`: dense 256, dense to 4x4, transposed convs; Bernoulli logits."""

    def __init__(self, image_size: int, latent_dim: int) -> None:
        super().__init__()
        chans = ([3] + _channels(_n_convs(image_size)))[::-1]
        self.top = chans[0]
        layers: list[nn.Module] = []
        for i, (c_in, c_out) in enumerate(zip(chans[:-1], chans[1:])):
            layers.append(nn.ConvTranspose2d(c_in, c_out, 4, 2, 1))
            if i < len(chans) - 2:
                layers.append(nn.ReLU())
        self.dense = nn.Sequential(nn.Linear(latent_dim, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, self.top * 16), nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(self.dense(z).view(-1, self.top, 4, 4))


class FactorAE(nn.Module):
    """Encoder + decoder; ``variational`` encoders output (mean, log-variance)."""

    def __init__(self, image_size: int, latent_dim: int, variational: bool) -> None:
        super().__init__()
        self.latent_dim = latent_dim
        self.variational = variational
        self.encoder = Encoder(image_size, 2 * latent_dim if variational else latent_dim)
        self.decoder = Decoder(image_size, latent_dim)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        h = self.encoder(x)
        if self.variational:
            mu, logvar = h.chunk(2, dim=1)
            return mu, logvar.clamp(-12.0, 8.0)
        return h, None


def build_model(model: str, image_size: int, latent_dim: int) -> FactorAE:
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    if latent_dim < 2:
        raise ValueError(f"latent_dim must be >= 2, got {latent_dim}")
    return FactorAE(image_size, latent_dim, variational=model in ("beta_vae", "beta_tcvae"))


# --------------------------------------------------------------------------- losses


def _gaussian_log_density(z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    return -0.5 * (math.log(2 * math.pi) + logvar + (z - mu) ** 2 * torch.exp(-logvar))


def tc_decomposition(z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor, dataset_size: int) -> dict[str, torch.Tensor]:
    """Minibatch-weighted-sampling estimates (Chen et al. 2018) of MI, TC and dimension-wise KL (batch means).

    ``log q(z_i) ~ logsumexp_j log q(z_i | x_j) - log(N M)`` and the same per dimension for
    ``prod_k q(z_ik)``, with ``N`` the dataset size and ``M`` the batch size.
    """
    m = z.shape[0]
    pairwise = _gaussian_log_density(z[:, None, :], mu[None, :, :], logvar[None, :, :])  # (M, M, D)
    log_nm = math.log(dataset_size * m)
    log_qz = torch.logsumexp(pairwise.sum(dim=2), dim=1) - log_nm
    log_prod_qzk = (torch.logsumexp(pairwise, dim=1) - log_nm).sum(dim=1)
    log_qz_x = _gaussian_log_density(z, mu, logvar).sum(dim=1)
    log_pz = _gaussian_log_density(z, torch.zeros_like(z), torch.zeros_like(z)).sum(dim=1)
    return {"mi": (log_qz_x - log_qz).mean(), "tc": (log_qz - log_prod_qzk).mean(),
            "dwkl": (log_prod_qzk - log_pz).mean()}


def model_loss(model_name: str, net: FactorAE, x: torch.Tensor, settings: Mapping[str, Any],
               dataset_size: int) -> tuple[torch.Tensor, dict[str, float]]:
    """The training loss of ``model_name`` on batch ``x`` (and its parts, as floats)."""
    mu, logvar = net.encode(x)
    if net.variational:
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
    else:
        z = mu
    recon = F.binary_cross_entropy_with_logits(net.decoder(z), x, reduction="sum") / x.shape[0]
    parts: dict[str, torch.Tensor] = {"recon": recon}
    if model_name == "beta_vae":
        kl = 0.5 * (mu ** 2 + logvar.exp() - 1.0 - logvar).sum(dim=1).mean()
        parts["kl"] = kl
        loss = recon + settings["beta_vae_beta"] * kl
    elif model_name == "beta_tcvae":
        d = tc_decomposition(z, mu, logvar, dataset_size)
        parts.update(d)
        loss = recon + d["mi"] + settings["beta_tcvae_beta"] * d["tc"] + d["dwkl"]
    elif model_name == "bioae":
        nonneg = (F.relu(-z) ** 2).sum(dim=1).mean()
        activity = (z ** 2).sum(dim=1).mean()
        weights = sum((p ** 2).sum() for n, p in net.decoder.named_parameters() if n.endswith("weight"))
        parts.update(nonneg=nonneg, activity=activity, weight_energy=weights)
        loss = (recon + settings["bioae_nonneg"] * nonneg + settings["bioae_activity"] * activity
                + settings["bioae_weight"] * weights)
    elif model_name == "ae":
        loss = recon
    else:
        raise ValueError(f"model must be one of {MODELS}, got {model_name!r}")
    return loss, {k: float(v.detach()) for k, v in parts.items()}


# --------------------------------------------------------------------------- training


def train_model(model_name: str, data: FactorDataset, settings: Mapping[str, Any], seed: int,
                device: str = "auto", log: Any = None) -> tuple[FactorAE, dict[str, Any]]:
    """Train one model with Adam for ``settings['steps']`` minibatches of ``settings['batch_size']``.

    Minibatches are drawn uniformly with replacement (seeded). Returns the network (on CPU, eval
    mode) and a summary: per-step ``loss`` list, ``images_per_s`` (training throughput,
    excluding the first 5 warm-up steps), ``seconds``, ``device``.
    """
    steps, batch_size, lr = int(settings["steps"]), int(settings["batch_size"]), float(settings["lr"])
    if steps < 1 or batch_size < 2 or lr <= 0:
        raise ValueError(f"steps >= 1, batch_size >= 2 and lr > 0 required, got {steps}, {batch_size}, {lr}")
    dev = resolve_device(device)
    torch.manual_seed(seed)
    net = build_model(model_name, data.image_size, int(settings["latent_dim"])).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    losses: list[float] = []
    net.train()
    start = time.perf_counter()
    t_warm = start
    for step in range(steps):
        if step == min(5, steps - 1):
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t_warm = time.perf_counter()
        x = torch.from_numpy(data.batch(rng.integers(0, len(data), size=batch_size))).to(dev)
        loss, parts = model_loss(model_name, net, x, settings, len(data))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if log is not None and (step % max(1, steps // 10) == 0 or step == steps - 1):
            log.info("%s step %d/%d loss %.2f %s", model_name, step + 1, steps, losses[-1],
                     {k: round(v, 3) for k, v in parts.items()})
    if dev.type == "cuda":
        torch.cuda.synchronize()
    end = time.perf_counter()
    timed_steps = steps - min(5, steps - 1)
    summary = {"loss": losses, "seconds": end - start, "device": str(dev),
               "images_per_s": timed_steps * batch_size / max(end - t_warm, 1e-9)}
    return net.cpu().eval(), summary


@torch.no_grad()
def encode(net: FactorAE, data: FactorDataset, index: np.ndarray, batch_size: int = 512) -> np.ndarray:
    """Deterministic latents (posterior means for VAEs) of the images at ``index``, ``(n, latent_dim)``."""
    out = []
    for i in range(0, len(index), batch_size):
        mu, _ = net.encode(torch.from_numpy(data.batch(index[i:i + batch_size])))
        out.append(mu.numpy())
    return np.concatenate(out).astype(np.float64)


def train_and_encode(data: FactorDataset, model_name: str, settings: Mapping[str, Any], seed: int,
                     latents_path: str | Path, checkpoint_path: str | Path, log: Any = None) -> dict[str, Any]:
    """Train one (dataset, model, seed), write the eval-set latents (npz) and the weights (safetensors)."""
    from safetensors.torch import save_file

    net, summary = train_model(model_name, data, settings, seed, settings.get("device", "auto"), log)
    index = eval_index(len(data), int(settings["n_eval"]), int(settings["eval_seed"]))
    latents = encode(net, data, index)
    with atomic_path(latents_path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, latents=latents, factors=data.factors[index], index=index,
                     factor_names=np.array(data.factor_names), loss=np.array(summary["loss"]),
                     images_per_s=summary["images_per_s"], seconds=summary["seconds"])
    with atomic_path(checkpoint_path) as tmp:
        save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(tmp),
                  metadata={"model": model_name, "seed": str(seed), "dataset": data.name,
                            "latent_dim": str(settings["latent_dim"]), "image_size": str(data.image_size)})
    return summary


def read_latents(path: str | Path) -> dict[str, Any]:
    """A training job's latents file; a clear error when keys are missing."""
    with np.load(path, allow_pickle=False) as z:
        missing = {"latents", "factors", "factor_names"} - set(z.files)
        if missing:
            raise ValueError(f"{path}: missing arrays {sorted(missing)}; expected a disentangle latents .npz")
        return {k: z[k] for k in z.files}


# --------------------------------------------------------------------------- evaluation


def ica_latents(latents: np.ndarray, n_components: int | None, method: str, seed: int) -> np.ndarray:
    """AE + ICA: PCA-whiten (``n_components`` or all latent dimensions) then ICA-rotate, as the screen's pca_ica."""
    k = latents.shape[1] if n_components is None else int(n_components)
    white = PCAWhitener(n_components=k, seed=seed).fit_transform(latents)
    return ICARotation(method=method, seed=seed).fit_transform(white)


def score_latents(latents: np.ndarray, factors: np.ndarray, settings: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """InfoM/E/C, MCC, mean linear R^2 and DCI of ``latents`` against discrete ``factors``.

    Returns the :data:`SCORE_COLUMNS` as floats, ``nmi`` (sources x all latents; inactive
    latents get 0) and ``active`` (mask).
    """
    m = settings["metrics"]
    info = metrics.infomec(factors, latents, n_neighbors=m["n_neighbors"], seed=seed, n_bins=m["n_bins"],
                           infoe_max_iter=m["infoe_max_iter"])
    nmi_full = np.zeros((factors.shape[1], latents.shape[1]))
    nmi_full[:, info["active"]] = info["nmi"]
    d = metrics.dci(latents, factors, seed=seed, n_bins=m["n_bins"])
    return {"infom": info["infom"], "infoe": info["infoe"], "infoc": info["infoc"],
            "mcc": metrics.mcc(latents, factors), "r2": float(metrics.linear_r2(latents, factors).mean()),
            "dci_d": d["disentanglement"], "dci_c": d["completeness"], "dci_i": d["informativeness"],
            "nmi": nmi_full, "active": info["active"]}


def evaluate(latents_path: str | Path, model_name: str, settings: Mapping[str, Any], seed: int,
             dataset: str, out_path: str | Path) -> pd.DataFrame:
    """Score one (dataset, model, seed) from its latents file; ``ae_ica`` transforms the AE's latents first."""
    if model_name not in EVALUATED:
        raise ValueError(f"model must be one of {EVALUATED}, got {model_name!r}")
    z = read_latents(latents_path)
    latents = z["latents"]
    if model_name == "ae_ica":
        ica = settings["ica"]
        latents = ica_latents(latents, ica["n_components"], ica["method"], seed)
    s = score_latents(latents, z["factors"], settings, seed)
    row = {"dataset": dataset, "model": model_name, "seed": int(seed),
           **{c: float(s[c]) for c in SCORE_COLUMNS},
           "nmi": json.dumps(np.round(s["nmi"], 5).tolist()), "factor_names": json.dumps([str(f) for f in z["factor_names"]]),
           "images_per_s": float(z["images_per_s"]) if "images_per_s" in z else float("nan"),
           "loss_first": float(np.mean(z["loss"][:10])) if "loss" in z else float("nan"),
           "loss_last": float(np.mean(z["loss"][-10:])) if "loss" in z else float("nan")}
    df = pd.DataFrame([row])
    write_parquet(df, out_path)
    return df


# --------------------------------------------------------------------------- tables, figures, report


def _ordered_models(values: Sequence[str]) -> list[str]:
    return [m for m in EVALUATED if m in set(values)] + sorted(set(values) - set(EVALUATED))


def summary_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Table 2 shape: per dataset and ``all`` (per seed, the mean over datasets), mean and SD over seeds.

    Columns: dataset, model, n_seeds, then ``<score>_mean`` and ``<score>_sd`` per score.
    """
    missing = {"dataset", "model", "seed", *SCORE_COLUMNS} - set(scores.columns)
    if missing:
        raise ValueError(f"scores: missing columns {sorted(missing)}")
    cols = list(SCORE_COLUMNS)
    per = scores[["dataset", "model", "seed", *cols]]
    if per["dataset"].nunique() > 1:
        agg = per.groupby(["model", "seed"], as_index=False)[cols].mean().assign(dataset="all")
        per = pd.concat([per, agg], ignore_index=True)
    grouped = per.groupby(["dataset", "model"])[cols]
    mean, sd = grouped.mean().add_suffix("_mean"), grouped.std(ddof=1).add_suffix("_sd")
    n = grouped.size().rename("n_seeds")
    out = pd.concat([n, mean, sd], axis=1).reset_index()
    order = {m: i for i, m in enumerate(_ordered_models(out["model"].unique()))}
    datasets = [d for d in scores["dataset"].unique()] + (["all"] if "all" in set(out["dataset"]) else [])
    out["_d"] = out["dataset"].map({d: i for i, d in enumerate(datasets)})
    out["_m"] = out["model"].map(order)
    out = out.sort_values(["_d", "_m"]).drop(columns=["_d", "_m"]).reset_index(drop=True)
    return out[["dataset", "model", "n_seeds"] + [f"{c}_{s}" for c in cols for s in ("mean", "sd")]]


def display_table(summary: pd.DataFrame) -> pd.DataFrame:
    """``mean ± sd`` strings with readable model and score names."""
    out = pd.DataFrame({"Dataset": summary["dataset"], "Model": summary["model"].map(lambda m: MODEL_LABELS.get(m, m)),
                        "Seeds": summary["n_seeds"]})
    for c in SCORE_COLUMNS:
        mean, sd = summary[f"{c}_mean"], summary[f"{c}_sd"]
        out[SCORE_LABELS[c]] = [f"{a:.2f} ± {b:.2f}" if np.isfinite(b) else f"{a:.2f}" for a, b in zip(mean, sd)]
    return out


def nmi_figure(scores: pd.DataFrame, dataset: str) -> Figure:
    """NMI heatmaps (factors x latents) of each model on ``dataset`` for its lowest seed.

    Latent columns are ordered by their most-informed factor, then by NMI, for readability.
    """
    rows = scores[scores["dataset"] == dataset]
    models = _ordered_models(rows["model"].unique())
    fig = Figure(figsize=(3.2 * len(models), 3.4), layout="constrained")
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    image = None
    for ax, m in zip(axes, models):
        row = rows[rows["model"] == m].sort_values("seed").iloc[0]
        nmi = np.array(json.loads(row["nmi"]), dtype=float)
        names = json.loads(row["factor_names"])
        order = np.lexsort((-nmi.max(axis=0), nmi.argmax(axis=0)))
        image = ax.imshow(nmi[:, order], vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_title(f"{MODEL_LABELS.get(m, m)} (seed {int(row['seed'])})")
        ax.set_xlabel("latent (sorted)")
        ax.set_xticks(range(nmi.shape[1]))
        ax.set_xticklabels([str(i) for i in order], fontsize=7)
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names if ax is axes[0] else [""] * len(names), fontsize=8)
    axes[0].set_ylabel("factor")
    if image is not None:
        fig.colorbar(image, ax=list(axes), label="NMI  I(s;z)/H(s)", shrink=0.9)
    fig.suptitle(f"{dataset}: normalized mutual information, factors x latents")
    return fig


def write_report(scores: pd.DataFrame, out_dir: str | Path, settings: Mapping[str, Any] | None = None) -> dict[str, Path]:
    """Write tables (CSV), NMI figures (PNG), ``report.md`` and ``index.html`` into ``out_dir`` atomically."""
    out_dir = Path(out_dir)
    written: dict[str, Path] = {}
    summary = summary_table(scores)
    shown = display_table(summary)
    tables = {"table2.csv": summary, "scores.csv": scores.drop(columns=["nmi"])}
    for name, df in tables.items():
        with atomic_path(out_dir / name) as tmp:
            df.to_csv(tmp, index=False)
        written[name] = out_dir / name
    figures = []
    for ds in scores["dataset"].unique():
        path = out_dir / "figures" / f"nmi_{ds}.png"
        with atomic_path(path) as tmp:
            nmi_figure(scores, ds).savefig(tmp, format="png", dpi=110)
        written[f"nmi_{ds}"] = path
        figures.append((ds, f"figures/nmi_{ds}.png"))
    speed = (scores[scores["model"] != "ae_ica"].groupby(["dataset", "model"])["images_per_s"].mean()
             .rename("train images/s").reset_index())
    speed["model"] = speed["model"].map(lambda m: MODEL_LABELS.get(m, m))
    cfg = dict(settings or {})
    setup = ", ".join(f"{k} = {cfg[k]}" for k in ("latent_dim", "steps", "batch_size", "lr", "n_eval") if k in cfg)
    intro = ("Disentanglement of factor datasets (PAPER.md Table 2), every model trained in the same harness "
             "(same encoder/decoder, data, seeds and budget); AE + ICA = the AE's latents PCA-whitened and "
             "ICA-rotated with phenoica.transforms. Mean ± SD over seeds; `all` averages datasets per seed. "
             "InfoM and InfoC are ratios of NMIs: they stay high even for uninformative latents, so read them "
             "beside InfoE (PAPER.md). " + (f"Setup: {setup}." if setup else ""))
    paper = ("Paper (aggregated over Shapes3D, MPI3D, Falcor3D, Isaac3D; InfoM, InfoE, InfoC): AE (0.39, 0.76, 0.25), "
             "beta-VAE (0.59, 0.81, 0.55), beta-TCVAE (0.58, 0.72, 0.59), BioAE (0.54, 0.75, 0.36), "
             "AE + ICA (0.65, 0.83, 0.40); baselines quoted from Hsu et al. 2023.")
    md = ["# Disentanglement benchmark (Table 2)", "", intro, "", paper, "", "## Table 2 (this run)", "",
          _markdown(shown), "",
          "## Training throughput", "", _markdown(speed.round(0)), "", "## NMI matrices", ""]
    md += [f"![NMI {ds}]({rel})" for ds, rel in figures]
    md += ["", "Tables: [table2.csv](table2.csv), [scores.csv](scores.csv)", ""]
    with atomic_path(out_dir / "report.md") as tmp:
        tmp.write_text("\n".join(md), encoding="utf-8")
    written["report_md"] = out_dir / "report.md"
    esc = html.escape
    body = ["<h1>Disentanglement benchmark (Table 2)</h1>", f"<p>{esc(intro)}</p>", f"<p>{esc(paper)}</p>",
            "<h2>Table 2 (this run)</h2>", shown.to_html(index=False, border=0, classes="tbl"),
            "<h2>Training throughput</h2>", speed.to_html(index=False, border=0, classes="tbl", float_format="%.0f"),
            "<h2>NMI matrices</h2>"]
    body += [f'<figure><img src="{esc(rel)}" alt="NMI {esc(ds)}" style="max-width:100%"><figcaption>{esc(ds)}</figcaption></figure>'
             for ds, rel in figures]
    body.append('<p>Tables: <a href="table2.csv">table2.csv</a>, <a href="scores.csv">scores.csv</a></p>')
    style = "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}.tbl td,.tbl th{padding:2px 8px}</style>"
    page = ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Disentanglement (Table 2)</title>'
            + style + "</head><body>\n" + "\n".join(body) + "\n</body></html>\n")
    with atomic_path(out_dir / "index.html") as tmp:
        tmp.write_text(page, encoding="utf-8")
    written["index_html"] = out_dir / "index.html"
    return written


def _markdown(df: pd.DataFrame) -> str:
    """A pipe table of ``df`` (no index)."""
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)
