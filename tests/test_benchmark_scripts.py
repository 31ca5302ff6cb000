"""Benchmark scripts run end to end on a CPU with small settings: the prepared GPU benchmark with
its tiny setting, and the others, which can go weeks without a run (a check that each
script works, above all where no GPU is lent; their numbers are not measurements)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_embed_gpu_script_runs_on_cpu_with_the_tiny_setting(tmp_path):
    out = tmp_path / "gpu.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"))
    cmd = [
        sys.executable,
        str(REPO / "benchmarks" / "embed_gpu.py"),
        "--tiny",
        "--device",
        "cpu",
        "--batch-sizes",
        "2,4",
        "--iters",
        "2",
        "--warmup",
        "1",
        "--images",
        "16",
        "--job-images",
        "8",
        "--skip-tests",  # tests/test_gpu.py skips without CUDA; the GPU run records its result
        "--chunk-images",
        "8",
        "--loader-threads",
        "2",
        "--embed-repeats",
        "1",
        "--compile",  # one variant whose compilation fails at once: reported, and the run goes on
        "--compile-options",
        '{"no_such_option": 1}',
        "--json",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["device"] == "cpu" and result["tokens"] == 1 + 6 * 16 and result["flops_per_crop"] > 0
    sdpa = result["sdpa"]
    assert sdpa["shape"] == [4, 3, 97, 16] and sdpa["seconds"]["MATH"] > 0 and sdpa["fastest"] in sdpa["seconds"]
    forced = [r for r in result["sweep"] if "SDPA forced" in r["mode"]]
    eager, failed = result["sweep"][:2], result["sweep"][2 + len(forced) :]
    assert [r["batch"] for r in eager] == [2, 4] and all(r["images_per_s"] > 0 for r in eager)
    assert len(failed) == 1 and "no_such_option" in failed[0]["error"]
    assert result["embed_path"]["images"] == 16 and result["embed_path"]["ratio"] > 0
    (loop,) = result["embed_path"]["chunk_loop"]  # one run: where its chunk loop's time went
    assert loop["images"] == 16 and loop["chunks"] == 2
    assert 0 < loop["model_s"] <= loop["wall_s"] and loop["waiting_for_data_s"] >= 0 and loop["read_s"] > 0
    assert result["embed_path"]["left"] in ("forward", "reading", "writing")
    assert "waiting for data" in proc.stdout
    assert "ratio embed path / bare forward" in proc.stdout
    jobs = result["jobs"]  # fresh processes: cold and warm cache, a second plate, both in one job
    assert [jobs[k]["plates"] for k in ("cold", "warm", "second", "grouped")] == [1, 1, 1, 2]
    assert all(jobs[k]["fixed_s"] > 0 and jobs[k]["imports_s"] > 0 for k in ("cold", "warm", "second", "grouped"))
    assert [p["images"] for p in jobs["grouped"]["plate_loops"]] == [8, 8] and jobs["grouped_over_two_jobs"] > 0
    assert "tests" not in result


def test_biomap_scale_script_runs_small_and_prints_its_ratios(tmp_path):
    out = tmp_path / "biomap.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"))
    cmd = [
        sys.executable,
        str(REPO / "benchmarks" / "biomap_scale.py"),
        "--genes",
        "400",
        "--d",
        "32",
        "--pairs",
        "2000",
        "--block-rows",
        "64",
        "--json",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ratio time    stage / bare matmul" in proc.stdout and "ratio memory" in proc.stdout
    result = json.loads(out.read_text())
    assert result["results"]["stage"]["neighbor_rows"] == 400 * 10
    assert result["ratios"]["time_stage_over_matmul"] > 0


@pytest.mark.slow
def test_pipeline_growth_script_measures_every_stage_at_every_scale(tmp_path):
    """--tiny: the positive control at 1x and 2x its guides through every post-embedding stage,
    each in its own process; the rows each stage handles grow with the screen as its design says
    (2x the cells, wells, guides and genes; the null's 4 pseudo-guides the same), and the numbers
    are real: time spent, memory above the import floor, a slope and a verdict per stage."""
    out = tmp_path / "growth.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, str(REPO / "benchmarks" / "pipeline_growth.py"), "--tiny", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    stages = ["gather", "fit", "apply", "splits", "classify", "map", "hits", "gene_map", "batch"]
    assert result["scales"] == [1, 2] and list(result["results"]) == stages == list(result["summary"])
    runs = result["results"]
    assert all(set(runs[s]) == {"1", "2"} for s in stages)
    rows = {s: (runs[s]["1"]["rows"], runs[s]["2"]["rows"]) for s in stages}
    cells, wells, guides, nulls, folds = 3 * 64 * 16, 3 * 64, 24, 4, 3  # the shipped screen, one variant
    for s in ("gather", "fit", "apply", "splits"):
        assert rows[s] == (cells, 2 * cells)
    assert rows["batch"] == (wells, 2 * wells) and rows["map"] == (guides, 2 * guides)
    assert rows["classify"] == rows["hits"] == ((guides + nulls) * folds, (2 * guides + nulls) * folds)
    assert rows["gene_map"] == (12 + 1, 24 + 1)  # the genes and the controls' profile
    for s in stages:
        for r in runs[s].values():
            assert r["wall_s"] > 0 and r["cpu_s"] > 0 and r["peak_mb"] > r["import_mb"] > 50
    floors = [r["import_mb"] for s in stages for r in runs[s].values()]  # every stage's process, fresh
    assert result["driver_mb"] < min(floors) and max(floors) - min(floors) < 10
    assert all(isinstance(v["linear"], bool) and v["cpu_slope"] == v["cpu_slope"] for v in result["summary"].values())
    assert "grows worst:" in proc.stdout and "working-set MB" in proc.stdout


@pytest.mark.slow
def test_embed_foundation_script_runs_with_two_images(tmp_path):
    """The OpenPhenom-size benchmark builds its options and embeds through the library as the
    workflow does (it broke once when EmbedOptions stopped restating the schema's defaults)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, str(REPO / "benchmarks" / "embed_foundation.py"), "--images", "2", "--rss-images", "1"]
    proc = subprocess.run([*cmd, "--repeats", "1"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ratio = float(proc.stdout.split("ratio streamed / baseline")[1].split(":")[1].split()[0])
    assert ratio > 0, proc.stdout
    assert "growth N -> 4N" in proc.stdout, proc.stdout


def test_run_cost_sums_a_finished_runs_benchmark_files_and_job_cpu_marks(tmp_path):
    """benchmarks/run_cost.py on a small finished run laid out as the workflow writes it: two jobs
    of one rule and one of another, their benchmark files, their logs' CPU marks (one log resumed:
    the earlier run's marks are ignored) and /usr/bin/time -v's lines; known sums."""
    results = tmp_path / "results"
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    jobs = {  # (rule, wildcards): (wall s, RSS MB, cpu_time, start, work, end)
        ("classify", "m/pca/shard_0"): (10.0, 300.0, 9.0, 0.5, 2.0, 9.5),
        ("classify", "m/pca_ica/shard_0"): (12.0, 320.0, 11.0, 0.5, 2.0, 11.5),
        ("call_hits", ""): (2.0, 150.0, 1.5, 0.4, 1.0, 1.5),
    }
    for (rule, wildcards), (wall, rss, cpu, start, work, end) in jobs.items():
        name = f"{rule}/{wildcards}" if wildcards else rule
        bench, log = results / "benchmarks" / f"{name}.tsv", results / "logs" / f"{name}.log"
        bench.parent.mkdir(parents=True, exist_ok=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        bench.write_text(header + f"{wall}\t0:00:{int(wall):02d}\t{rss}\t0\t0\t0\t0\t0\t50\t{cpu}\n")
        earlier = "2026-01-01 00:00:00 phenoica.x INFO job cpu start: 7.000 s\n" if rule == "call_hits" else ""
        log.write_text(
            earlier
            + "".join(
                f"2026-01-01 00:00:01 phenoica.x INFO job cpu {p}: {v:.3f} s\n"
                for p, v in (("start", start), ("work", work), ("end", end))
            )
        )
    timing = tmp_path / "run.time"
    timing.write_text(
        "\tUser time (seconds): 30.00\n\tSystem time (seconds): 2.00\n"
        "\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:05.50\n\tMaximum resident set size (kbytes): 512000\n"
    )
    out = tmp_path / "cost.json"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, str(REPO / "benchmarks" / "run_cost.py"), "--results", str(results), "--time", str(timing)]
    proc = subprocess.run([*cmd, "--json", str(out)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    rules = {r["rule"]: r for r in result["rules"]}
    assert [r["rule"] for r in result["rules"]] == ["classify", "call_hits"]  # by CPU, largest first
    assert rules["classify"]["jobs"] == 2 and rules["classify"]["cpu_s"] == 20.0
    assert rules["classify"]["logged_cpu_s"] == 21.0 and rules["classify"]["outside_s"] == 4.0
    assert rules["call_hits"]["outside_s"] == 1.0 and rules["call_hits"]["max_rss_mb"] == 150.0
    assert result["sum"]["jobs"] == 3 and result["sum"]["cpu_s"] == 21.5 and result["sum"]["logged_cpu_s"] == 22.5
    assert result["fixed_job_cpu_s"] == 1.0
    assert result["run"]["cpu_s"] == 32.0 and result["run"]["wall_s"] == 65.5
    assert result["run"]["outside_jobs_cpu_s"] == 32.0 - 22.5
    lines = proc.stdout.splitlines()
    assert lines[1].split()[:3] == ["classify", "2", "20.0"] and lines[1].split()[-1] == "19%"  # 4 of 21
    assert any(line.startswith("sum ") for line in lines) and "Snakemake" in proc.stdout


def test_arrayed_run_cost_scales_the_plates_or_the_guides_and_points_the_scenario_at_its_screen(tmp_path):
    """The 1x shape is a real screen's width (2,304 wells x 300 features); 4x the plates has four
    times the wells and controls with the same guides, 4x the guides four times the guides on four
    plate maps at the same replicates; 40x the plates is a JUMP set's well count; the growth
    exponent is the log-log slope; the config is the arrayed scenario's, redirected."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from arrayed_run_cost import growth_exponent, scale_design, scenario_config
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    from phenoica.screen import ArrayedDesign

    base = ArrayedDesign(n_effect_genes=96, n_null_genes=40)
    plates, guides = scale_design(base, 4), scale_design(base, 4, "guides")
    assert [d.n_wells for d in (base, plates, guides)] == [2304, 9216, 9216]
    assert plates.n_guides == base.n_guides == 272 and guides.n_guides == 4 * 272
    assert guides.plates_per_batch == base.plates_per_batch and guides.wells_per_plate == base.wells_per_plate
    assert scale_design(base, 40).n_wells == 92160
    assert growth_exponent([1, 4, 16], [3, 12, 48]) == pytest.approx(1.0)
    assert growth_exponent([1, 4], [2, 32]) == pytest.approx(2.0) and np.isnan(growth_exponent([1], [2]))
    cfg = scenario_config(tmp_path / "profiles", tmp_path / "results", {"sweep.points": 2, "classify.n_shards": 1})
    assert cfg["screen"]["embeddings"] == str(tmp_path / "profiles" / "*.parquet")
    assert cfg["results"] == str(tmp_path / "results") and cfg["screen"]["source"] == "embeddings"
    assert cfg["sweep"]["points"] == 2 and cfg["classify"]["n_shards"] == 1 and "cellprofiler" in cfg["models"]


def test_tail_calibration_script_runs_small_and_prints_its_ratios(tmp_path):
    """A null of 10 and 100 held-out pseudo-guides on one arrayed draw, one variant: every level's
    line for both null models; the empirical p never goes below the null's reach, 1/11."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, str(REPO / "benchmarks" / "tail_calibration.py"), "--draws", "1", "--variants", "pca"]
    proc = subprocess.run([*cmd, "--n-null", "10"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if "alpha" in line and "(1 fits)" in line]
    assert len(lines) == 2 * 6 and all("parametric" in line and "empirical" in line for line in lines)
    beyond = [line for line in lines if "(n+1))" in line]
    assert beyond and all("empirical 0/100" in line for line in beyond)


def test_effect_interval_coverage_script_prints_both_intervals_coverage(tmp_path):
    """60 draws of a guide 3 control SDs out on 2 batches: one line with both intervals' coverage,
    the wells' interval narrower than the folds' and excluding 0 in most draws."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, str(REPO / "benchmarks" / "effect_interval_coverage.py"), "--draws", "60"]
    proc = subprocess.run(
        [*cmd, "--batches", "2", "--effects", "3"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [x for x in proc.stdout.splitlines() if "batches, effect" in x]
    widths = [float(w) for w in re.findall(r"median width ([\d.]+)", line)]
    covered = float(re.search(r"wells and folds ([\d.]+)", line).group(1))
    assert widths[0] < widths[1] and 0.75 <= covered <= 1.0
    assert int(re.search(r"excludes 0 in (\d+)%", line).group(1)) >= 80


@pytest.mark.slow
def test_classify_growth_script_times_every_setting_at_every_scale(tmp_path):
    """Two guides and two pseudo-guides at 1x and 2x the arrayed screen's guides: a line per
    setting and scale, the exponent row of each setting; the cap below 2x's training controls is
    said to be the fast protocol's."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, str(REPO / "benchmarks" / "classify_growth.py"), "--scales", "1", "2", "--sample", "2"]
    proc = subprocess.run([*cmd, "--caps", "16"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "1x: 2304 wells, 272 guides" in out and "2x: 4608 wells, 544 guides" in out
    assert out.count("ms per guide") == 4 and out.count("fast, cap 16") == 3
    summary = out.split("exponent")[-1].splitlines()[1:]
    assert [line.split()[0] for line in summary] == ["exact", "fast,"]
    assert all(np.isfinite(float(line.split()[-1])) for line in summary)


def test_classify_growth_times_the_plates_scope_whole(tmp_path):
    """``--control-scope plates`` on a small screen at 1x and 2x (1 and 2 plate maps): the setting
    is timed on every guide and pseudo-guide in one call, and gets its exponent row."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, str(REPO / "benchmarks" / "classify_growth.py"), "--scales", "1", "2", "--no-exact"]
    cmd += ["--caps", "--control-scope", "plates", "--effect-genes", "6", "--null-genes", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "1x: 256 wells, 16 guides" in out and "2x: 512 wells, 32 guides" in out
    assert out.count("every guide and pseudo-guide in one call") == 2 and "ms per guide" not in out
    (summary,) = out.split("exponent")[-1].splitlines()[1:]
    assert summary.startswith("exact, plates") and np.isfinite(float(summary.split()[-1]))


def test_null_likeness_compares_guides_without_effect_with_the_pseudo_guides(tmp_path):
    """A line per setting of the small screen (as exported, alike controls, not normalized) with
    both samples' sizes, and the mean differences over the seeds."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, str(REPO / "benchmarks" / "null_likeness.py"), "--seeds", "0", "--nulls", "12"]
    cmd += ["--effect-genes", "4", "--null-genes", "4"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines()[1:] if line and line[0] in "an"]
    assert [" ".join(r[:2]) for r in rows[:3]] == ["as exported", "alike controls", "not normalized"]
    assert all(r[3] == "8" and r[6] == "12" for r in rows[:3])  # 4 genes without effect, 2 guides each
    assert "mean difference over the seeds: as exported" in proc.stdout


def test_classify_growth_profile_times_each_step_of_the_engine(tmp_path):
    """``--profile``: per setting and kind of target a line of the engine's steps and their total,
    the trees' leaves and a round's CPU; the engine's own
    functions are back in place after each call (the second setting's figures are its own)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, str(REPO / "benchmarks" / "classify_growth.py"), "--profile", "--scales", "1"]
    proc = subprocess.run(
        [*cmd, "--sample", "2", "--caps", "16"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("  ")]
    assert [r.split("1x")[1].split()[0] for r in rows] == ["guides", "pseudo-guides"] * 2
    assert [r.split()[0] for r in rows] == ["exact", "exact", "fast,", "fast,"]
    for row in rows:
        steps, total, leaves, per_round = row.split("x ", 1)[1].split(";")
        own = [float(v) for v in steps.split()[1:]]
        assert len(own) == 11 and min(own[:-1]) >= 0 and own[6] > 0  # the boosting rounds
        assert float(total) > 0 and float(leaves) >= 1 and float(per_round) > 0


def test_classify_cost_profile_times_each_step_under_both_protocols(tmp_path):
    """``classify_cost.py --profile`` on a small screen: a line per protocol of the engine's steps,
    the boosting rounds among them (how the two compare is the benchmark's to print, not a test's)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, str(REPO / "benchmarks" / "classify_cost.py"), "--profile", "--guides", "2"]
    proc = subprocess.run(
        [*cmd, "--controls", "2000", "--features", "40"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.split()[:1] in (["exact"], ["fast"])}
    assert set(rows) == {"exact", "fast"}
    steps = {k: [float(v) for v in row.split(";")[0].split()[1:]] for k, row in rows.items()}
    assert all(len(v) == 11 and v[6] > 0 for v in steps.values())


def _sweep_point_cost(tmp_path, *args: str) -> str:
    """The output of ``benchmarks/sweep_point_cost.py`` on the narrowest point of ``pca`` at 1x,
    with ``args``; the run must succeed."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, str(REPO / "benchmarks" / "sweep_point_cost.py"), "--variants", "pca", "--points", "0"]
    proc = subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_sweep_point_cost_script_times_each_part_of_a_point(tmp_path):
    """The narrowest point of one variant on the 1x arrayed screen: its line holds a figure for
    every part, and the sweep's total line their shares."""
    out = _sweep_point_cost(tmp_path)
    rows = [line.split() for line in out.splitlines() if line.startswith("pca ")]
    assert len(rows) == 1 and rows[0][1] == "2" and len(rows[0]) == 2 + 6 + 2
    assert int(rows[0][-1]) >= 0  # the point's guide hits
    assert "shares: fit_variants" in out and "guide_retrieval" in out
    # the grids priced from the one point measured: 2 points at the width cost two of its jobs
    (two,) = [line.split() for line in out.splitlines() if line.split()[:3] == ["2", "300", "[2,"]]
    point, price = float(rows[0][-2]), float(two[-2])
    assert two[-1] == "(2)" and price == pytest.approx(2 * (point + 1.3), abs=0.11)


def test_sweep_point_cost_compares_a_gene_sample_with_every_gene(tmp_path):
    """``--compare 16``: the narrowest point of one variant run on every gene (the other settings
    as given) and on 16 of them; per point the five curves side by side, and the largest
    differences, the peaks and the CPU."""
    out = _sweep_point_cost(tmp_path, "--set", "sweep.null_guides=10", "--compare", "16")
    assert "every gene (the other settings as given)" in out and "max_genes 16 against the reference above" in out
    (point,) = [line for line in out.splitlines() if line.strip().startswith("pca          2:")]
    assert all(curve in point for curve in ("guide-hit share", "gene-hit share", "mAP share", "retrieval"))
    assert "batch accuracy 0.383/0.383 (+0.000)" in point  # computed on every well either way
    summary = out.split("largest difference: ")[-1]
    assert "peak guide-hit share at: pca 2 vs 2" in summary and "x)" in summary


def test_sweep_point_cost_sets_the_sweep_against_the_full_computation(tmp_path):
    """``--against-full``: the point as set (the fast protocol with a cap of 8 training controls,
    which acts at 1x) against the full computation, which turns every approximation of the sweep
    off, the protocol included: the two runs' hits differ, the well-level measures do not."""
    out = _sweep_point_cost(
        tmp_path,
        "--set",
        "sweep.protocol=fast",
        "classify.fast_train_controls=8",
        "--against-full",
    )
    assert "full computation (every gene, every row, the main fit's ICA iterations" in out
    assert "and classification protocol" in out and "against the reference above" in out
    full, as_set = [line.split() for line in out.splitlines() if line.startswith("pca ")]
    assert full[-1] != as_set[-1]  # the cap reached the point, not the reference
    (point,) = [line for line in out.splitlines() if line.strip().startswith("pca          2:")]
    assert "batch accuracy 0.383/0.383 (+0.000)" in point


def test_demo_truth_floors_sets_its_overrides_on_the_truth_checks_config():
    """The demo-change benchmark runs the truth check's own config (both seeds, both scored) with
    each --set value read as YAML on its dotted key; a pair without '=' is refused."""
    import importlib.util

    from phenoica.contract import run_models, validate_config

    spec = importlib.util.spec_from_file_location("demo_truth_floors", REPO / "benchmarks" / "demo_truth_floors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sets = module.parse_sets(["train.batch_size=32", "demo.sites_per_well=2", "classify.n_null_guides=auto"])
    assert sets == {"train.batch_size": 32, "demo.sites_per_well": 2, "classify.n_null_guides": "auto"}
    with pytest.raises(SystemExit, match="expected dotted.key=value"):
        module.parse_sets(["train.batch_size"])
    config = validate_config(run_models(module.truth_check_config(sets)))
    assert list(config["models"]) == ["mae", "mae_seed1"] and config["classify"]["models"] is None
    assert (config["train"]["batch_size"], config["demo"]["sites_per_well"]) == (32, 2)
    assert config["classify"]["n_null_guides"] == "auto" and config["sweep"]["points"] == 0
