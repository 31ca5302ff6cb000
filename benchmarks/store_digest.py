"""What keying plate jobs on store content costs when the DAG is built, on a genome-scale plate list.

Every invocation of the workflow (a dry run too) computes ``phenoica.workflow.store_digest`` of
each plate's store: one ``os.scandir`` walk (name, size and modification time of every file),
the whole of the small metadata documents and the first and last 4 KiB of four chunk files.
This script lays out ``--plates`` Zarr-shaped stores of ``--chunks`` chunk files each (default:
1,400 plates of 6,144 images in chunks of 64 images: 96 chunks, the size of a genome-wide
pooled screen; the chunk files are small, since only their count and a few bytes are read), then
times, in the same run:

- baseline: what building the DAG read of each store before (``os.stat`` of its two
  ``zarr.json`` documents, the screen check's key);
- digest: :func:`phenoica.workflow.store_digest` of every store, cold and warm (a second pass:
  the file system's metadata cached, as on a rerun).

It prints seconds, per-plate milliseconds and the ratio digest / baseline.

``--loaddata``: the same for source loaddata, whose key is per plate too
(:func:`phenoica.workflow.plate_store_digest`: the plate's rows of the LoadData CSVs and a
stat of every file they name, a few files' first and last bytes). It writes one LoadData CSV per
plate (``--sites`` rows, ``--channels`` ``FileName_``/``PathName_`` pairs; default 3,456 sites x
5 channels, a 384-well plate of 9 sites) and the (16-byte) files they name, then times, in the
same run: the baseline (what building the DAG read before: every CSV read once, as the door's
check does) and the digest of every plate after it, cold (a new process: the CSVs read and
indexed once) and warm (a second pass), beside the digest source images takes of the same files
(:func:`phenoica.workflow.store_digest` of each plate's folder). Run:

    python benchmarks/store_digest.py            # 1,400 plates x 96 chunks in a temp folder
    python benchmarks/store_digest.py --plates 100 --chunks 20
    python benchmarks/store_digest.py --loaddata --plates 20   # 20 plates x 17,280 files
    python benchmarks/store_digest.py --files --plates 10000   # the user's files and the outputs' receipts

``--files``: what keying the user's single files on their content costs
(:func:`phenoica.workflow.file_key`: embeddings, ``.h5ad``, exports, checkpoints, frozen
transforms), one file per plate (``--file-bytes`` each), and what telling the outputs phenoica
wrote costs (:func:`phenoica.workflow.untrusted_outputs`: one output and one benchmark
file per plate). It times, in the same run: the baseline (``os.stat`` of every file: what the
door's key read of them before, their sizes and times); the content keys on a first pass (every
file read and hashed: a new screen, or every file touched) and on a second pass from the saved
cache (a new process: the cache read, one ``os.stat`` per file); the receipts of the outputs; and
their jobs' stamps (:func:`phenoica.workflow.check_stamps`: one stamp read and one params
digest per job, an options object as the params).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from phenoica.classify import ClassifyOptions
from phenoica.contract import validate_config
from phenoica.screen import read_loaddata
from phenoica.workflow import (
    KeyCache,
    RuleFiles,
    check_stamps,
    plate_store_digest,
    store_digest,
    untrusted_outputs,
    write_stamp,
)


def lay_out(root: Path, plates: int, chunks: int, chunk_bytes: int) -> list[Path]:
    """``plates`` stores ``P0000.zarr ...`` with a group and array ``zarr.json`` and ``chunks``
    chunk files ``tiles/c/{i}/0/0/0`` of ``chunk_bytes`` bytes."""
    stores = []
    payload = os.urandom(chunk_bytes)
    for p in range(plates):
        store = root / f"P{p:04d}.zarr"
        (store / "tiles" / "c").mkdir(parents=True)
        (store / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group"}))
        (store / "tiles" / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "array"}))
        for i in range(chunks):
            folder = store / "tiles" / "c" / str(i) / "0" / "0"
            folder.mkdir(parents=True)
            (folder / "0").write_bytes(payload)
        stores.append(store)
    return stores


def timed(fn, stores: list[Path]) -> float:
    start = time.perf_counter()
    for store in stores:
        fn(store)
    return time.perf_counter() - start


def baseline(store: Path) -> None:
    for doc in (store / "zarr.json", store / "tiles" / "zarr.json"):
        os.stat(doc)


def lay_out_loaddata(root: Path, plates: int, sites: int, channels: int) -> list[str]:
    """One LoadData CSV per plate (``sites`` rows over 384 wells, ``channels`` channels, a
    relative ``PathName``) and the 16-byte files it names; returns the plate names."""
    import pandas as pd

    wells = [f"{r}{c:02d}" for r in "ABCDEFGHIJKLMNOP" for c in range(1, 25)]
    names = []
    for p in range(plates):
        plate = f"P{p:04d}"
        folder = root / "images" / plate
        folder.mkdir(parents=True)
        table = {"Metadata_Plate": plate, "Metadata_Well": [wells[i % 384] for i in range(sites)]}
        table["Metadata_Site"] = [i // 384 + 1 for i in range(sites)]
        for c in range(channels):
            files = [f"{table['Metadata_Well'][i]}_s{table['Metadata_Site'][i]}_ch{c}.tiff" for i in range(sites)]
            for name in files:
                (folder / name).write_bytes(b"0123456789abcdef")
            table[f"FileName_Orig{c}"], table[f"PathName_Orig{c}"] = files, f"images/{plate}"
        pd.DataFrame(table).to_csv(root / f"load_data_{plate}.csv", index=False)
        names.append(plate)
    return names


def run_loaddata(root: Path, args: argparse.Namespace) -> None:
    start = time.perf_counter()
    plates = lay_out_loaddata(root, args.plates, args.sites, args.channels)
    files = args.plates * args.sites * args.channels
    print(
        f"laid out {args.plates} LoadData plates x {args.sites} sites x {args.channels} channels ({files} files) "
        f"in {time.perf_counter() - start:.1f} s"
    )
    glob = str(root / "load_data_*.csv")
    config = {"screen": {"source": "loaddata", "loaddata": glob, "loaddata_channels": None, "loaddata_illum": False}}
    start = time.perf_counter()
    read_loaddata(glob)
    base = time.perf_counter() - start

    def digests() -> float:
        begin = time.perf_counter()
        for plate in plates:
            plate_store_digest(config, plate)
        return time.perf_counter() - begin

    cold, warm = digests(), digests()  # cold: the CSVs read and indexed (once), then each plate's files
    folders = timed(store_digest, [root / "images" / plate for plate in plates])
    n = len(plates)
    print(f"baseline (read every CSV once): {base:.3f} s ({1000 * base / n:.1f} ms/plate)")
    print(
        f"store_digest of each plate's image folder (source images, the same files): {folders:.3f} s "
        f"({1000 * folders / n:.1f} ms/plate, {1e6 * folders / files:.2f} us/file)"
    )
    for name, took in (("first pass", cold), ("second pass", warm)):
        print(
            f"plate_store_digest, {name}: {took:.3f} s ({1000 * took / n:.1f} ms/plate, "
            f"{1e6 * took / files:.2f} us/file), ratio {took / base:.1f}x"
        )


def run_files(root: Path, args: argparse.Namespace) -> None:
    """The content keys of ``--plates`` files of ``--file-bytes`` and the receipts of as many outputs."""
    start = time.perf_counter()
    payload = os.urandom(args.file_bytes)
    files = []
    for p in range(args.plates):
        f = root / "emb" / f"P{p:05d}.parquet"
        f.parent.mkdir(exist_ok=True)
        f.write_bytes(payload[p % 97 :] + payload[: p % 97])
        files.append(f)
        for folder, suffix in (("embed/m", "parquet"), ("benchmarks/embed/m", "tsv")):
            out = root / "results" / folder / f"P{p:05d}.{suffix}"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(b"x")
    total = args.plates * args.file_bytes
    print(
        f"laid out {args.plates} files of {args.file_bytes} bytes ({total / 1e9:.2f} GB) in {time.perf_counter() - start:.1f} s"
    )
    time.sleep(1.0)  # older than the cache's window for files changed a moment ago
    base = timed(os.stat, files)
    keys = KeyCache(root / "keys.json", racy_seconds=0.5)
    cold = timed(keys.key, files)
    start = time.perf_counter()
    keys.save()
    saved = time.perf_counter() - start
    start = time.perf_counter()
    again = KeyCache(root / "keys.json", racy_seconds=0.5)
    timed(again.key, files)
    warm = time.perf_counter() - start  # the cache read and every file's key
    assert not again.changed
    rules = [
        RuleFiles(
            "embed",
            (f"{root}/results/embed/{{model}}/{{plate}}.parquet",),
            f"{root}/results/benchmarks/embed/{{model}}/{{plate}}.tsv",
        )
    ]
    start = time.perf_counter()
    found = untrusted_outputs(rules)
    receipts = time.perf_counter() - start
    options = ClassifyOptions.from_config(validate_config({}))
    results = {"results": str(root / "results")}
    for out in sorted((root / "results" / "embed" / "m").glob("*.parquet")):
        write_stamp(SimpleNamespace(rule="embed", params=[options, "m"], input=[], output=[str(out)], config=results))
    stamped = [rules[0]._replace(params=lambda w: [options, w["model"]])]
    start = time.perf_counter()
    checks = check_stamps(root / "results", stamped)
    stamps = time.perf_counter() - start
    n = len(files)
    print(f"baseline (os.stat of every file): {base:.3f} s ({1e6 * base / n:.1f} us/file)")
    print(
        f"file_key, first pass (every file read and hashed): {cold:.3f} s ({1e3 * cold / n:.2f} ms/file, "
        f"{total / cold / 1e6:.0f} MB/s), ratio {cold / base:.0f}x; cache written in {saved:.3f} s "
        f"({(root / 'keys.json').stat().st_size / 1e6:.1f} MB)"
    )
    print(
        f"file_key, second pass (cache read, one stat a file): {warm:.3f} s ({1e6 * warm / n:.1f} us/file), ratio {warm / base:.1f}x"
    )
    print(
        f"untrusted_outputs of {n} outputs and their benchmark files: {receipts:.3f} s ({1e6 * receipts / n:.1f} us/output), {len(found)} found"
    )
    same = sum(c.status == "same" for c in checks)
    print(f"check_stamps of {n} jobs: {stamps:.3f} s ({1e6 * stamps / n:.1f} us/job), {same} same")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plates", type=int, default=1400)
    parser.add_argument("--chunks", type=int, default=96, help="chunk files per store")
    parser.add_argument("--chunk-bytes", type=int, default=16384)
    parser.add_argument("--dir", type=Path, default=None, help="where to lay out the stores (default: a temp folder)")
    parser.add_argument("--loaddata", action="store_true", help="source loaddata: CSVs and the files they name")
    parser.add_argument("--sites", type=int, default=3456, help="--loaddata: sites (CSV rows) per plate")
    parser.add_argument("--channels", type=int, default=5, help="--loaddata: channels per site")
    parser.add_argument("--files", action="store_true", help="the user's single files' content keys, the receipts")
    parser.add_argument("--file-bytes", type=int, default=262144, help="--files: bytes per file")
    args = parser.parse_args()
    if args.files:
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            run_files(Path(tmp), args)
        return
    if args.loaddata:
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            run_loaddata(Path(tmp), args)
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        start = time.perf_counter()
        stores = lay_out(Path(tmp), args.plates, args.chunks, args.chunk_bytes)
        made = time.perf_counter() - start
        print(
            f"laid out {args.plates} stores x {args.chunks} chunks ({args.plates * (args.chunks + 2)} files) in {made:.1f} s"
        )
        base = timed(baseline, stores)
        cold = timed(store_digest, stores)
        warm = timed(store_digest, stores)
        n = len(stores)
        print(f"baseline (stat of each store's zarr.json): {base:.3f} s ({1000 * base / n:.3f} ms/plate)")
        print(f"store_digest, first pass:  {cold:.3f} s ({1000 * cold / n:.3f} ms/plate), ratio {cold / base:.1f}x")
        print(f"store_digest, second pass: {warm:.3f} s ({1000 * warm / n:.3f} ms/plate), ratio {warm / base:.1f}x")


if __name__ == "__main__":
    main()
