"""A pod's summary from digests against from run files: 64, 256 and 1024 ranks of 10k and
100k steps (issue 37; goal: 1024 x 100k from digests under 60 s and 4 GB).

Each pod is ``report_scale.py``'s synthetic rank file (per-batch padding to 40 lengths, an
``.item()`` every 50 steps, a print every 1000, batched samples: 2.6 MB per 10k steps) copied
once per rank with its rank in the header. For each size, in this order:

1. ``xprof summary DIR`` from the run files (none has a digest yet): wall time and peak RSS of
   the whole process tree (workers included);
2. the digest cost of one rank: the real ``xprof digest FILE`` of rank 0 (what ``watch()``'s
   exit child adds after the exit summary: start-up, read, analyse, write), and
   ``digest_file`` in this process (read + analyse + write, no start-up);
3. the other ranks' digests: rank 0's digest with the rank and the run-file key changed (the
   ranks differ only in their rank; analysing each again would take the rank count times
   step 2 and measure nothing new). ``--real-digests`` runs ``xprof digest DIR`` instead and
   times it (many files in one call);
4. ``xprof summary DIR`` from the digests: wall time and peak RSS.

1024 x 100k steps would be 27 GB of run files; written 1024 times on this machine's disk
(155 MB/s) that is minutes and a third of the free space. So at that size (``--links``, the
default from 10 GB) the run files are hard links of one file whose header names the world
size but not the rank (the reader takes the rank from the file name, ``run.rankN.json``, as
it does for any file without one), and the digests are copies of its digest. The digest
path reads 1024 distinct digest files and checks 1024 run-file keys either way; the run-file
path would read the same inode 1024 times, from the page cache, so it is not run at that
size unless asked (``--runfiles-big``).

Generated pods go under ``--dir`` (default /tmp) and are removed after each size.

    .venv/bin/python benchmarks/pod_scale.py                          # all six sizes
    .venv/bin/python benchmarks/pod_scale.py --sizes 256x10000        # one size
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import emit_json, table
from report_scale import _load, run_cli, write_synthetic

SIZES = ("64x10000", "256x10000", "1024x10000", "64x100000", "256x100000", "1024x100000")
LINKS_FROM_BYTES = 10 << 30


def _name(folder: str, rank: int) -> str:
    return os.path.join(folder, f"run.rank{rank}.json")


def write_runs(folder: str, ranks: int, steps: int, links: bool) -> None:
    """``ranks`` run files of ``steps`` steps (hard links of one file without a rank in its header
    when ``links``)."""
    os.makedirs(folder, exist_ok=True)
    first = _name(folder, 0)
    write_synthetic(first, steps, rank=0, world_size=ranks)
    with open(first, encoding="utf-8") as f:
        header, rest = f.read().split("\n", 1)
    if links:
        with open(first, "w", encoding="utf-8") as f:
            f.write(header.replace('"rank":0,', "") + "\n" + rest)
        for r in range(1, ranks):
            os.link(first, _name(folder, r))
        return
    for r in range(1, ranks):
        with open(_name(folder, r), "w", encoding="utf-8") as f:
            f.write(header.replace('"rank":0,', f'"rank":{r},') + "\n" + rest)


def copy_digests(folder: str, ranks: int, links: bool) -> float:
    """Every other rank's digest from rank 0's (its rank and run-file key changed); seconds."""
    import duckdb

    from xprof.analysis.digest import digest_path, source_key

    t = time.perf_counter()
    src = digest_path(_name(folder, 0))
    if links:
        for r in range(1, ranks):
            shutil.copyfile(src, digest_path(_name(folder, r)))
        return time.perf_counter() - t
    con = duckdb.connect(":memory:")
    con.execute(f"CREATE TABLE d AS SELECT * FROM read_parquet('{src}')")
    for r in range(1, ranks):
        size, key = source_key(_name(folder, r))
        con.execute(f"COPY (SELECT * REPLACE (CASE WHEN kind = 0 THEN {r} END AS rank, "
                    f"CASE WHEN kind = 0 THEN {size} END AS src_size, "
                    f"CASE WHEN kind = 0 THEN '{key}' END AS src_hash) FROM d) "
                    f"TO '{digest_path(_name(folder, r))}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 16384)")
    con.close()
    return time.perf_counter() - t


def _mb(paths: list[str]) -> float:
    return sum(os.path.getsize(p) for p in paths) / 1e6


def measure(ranks: int, steps: int, root: str, links: bool, runfiles: bool, real: bool) -> dict[str, Any]:
    from xprof.analysis.digest import digest_file, digest_path

    folder = tempfile.mkdtemp(prefix=f"pod{ranks}x{steps}-", dir=root)
    out: dict[str, Any] = {"ranks": ranks, "steps": steps, "links": links}
    try:
        t = time.perf_counter()
        write_runs(folder, ranks, steps, links)
        out["write_s"] = time.perf_counter() - t
        files = [_name(folder, r) for r in range(ranks)]
        out["run_files_mb"] = _mb(files) if not links else _mb(files[:1]) * ranks
        if runfiles:
            cli = run_cli(["summary", folder])
            out["runfile_s"], out["runfile_rss_mb"] = cli["wall_s"], cli["peak_rss_mb"]
            print(f"  from run files: {cli['wall_s']:.2f} s, {cli['peak_rss_mb']:.0f} MB", flush=True)
        one = run_cli(["digest", files[0]])
        out["digest_cli_s"], out["digest_cli_rss_mb"] = one["wall_s"], one["peak_rss_mb"]
        t = time.perf_counter()
        digest_file(files[0])
        out["digest_inproc_s"] = time.perf_counter() - t
        if real:
            cli = run_cli(["digest", folder])
            out["digest_all_s"] = cli["wall_s"]
        else:
            out["digest_copies_s"] = copy_digests(folder, ranks, links)
        out["digest_mb"] = _mb([digest_path(f) for f in files])
        cli = run_cli(["summary", folder])
        out["digests_s"], out["digests_rss_mb"] = cli["wall_s"], cli["peak_rss_mb"]
        print(f"  from digests: {cli['wall_s']:.2f} s, {cli['peak_rss_mb']:.0f} MB; one rank's digest "
              f"{out['digest_cli_s']:.2f} s (xprof digest), {out['digest_inproc_s']:.2f} s in process", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", help="comma-separated RANKSxSTEPS (default: 64, 256, 1024 ranks x 10k, 100k steps)")
    ap.add_argument("--dir", default="/tmp", help="where to generate the pods (default /tmp)")
    ap.add_argument("--links", choices=("auto", "yes", "no"), default="auto",
                    help="hard-linked run files (auto: from 10 GB of run files)")
    ap.add_argument("--runfiles-big", action="store_true", help="time the run-file path on hard-linked pods too")
    ap.add_argument("--real-digests", action="store_true", help="xprof digest DIR for every rank (slow)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    sizes = [tuple(int(x) for x in s.split("x")) for s in (args.sizes.split(",") if args.sizes else SIZES)]
    rows = []
    print(f"load average before: {_load()}", flush=True)
    for ranks, steps in sizes:
        big = ranks * steps * 265 >= LINKS_FROM_BYTES
        links = args.links == "yes" or (args.links == "auto" and big)
        print(f"{ranks} ranks x {steps} steps{' (hard-linked run files)' if links else ''}:", flush=True)
        rows.append(measure(ranks, steps, args.dir, links, runfiles=not links or args.runfiles_big,
                            real=args.real_digests))
    print()
    nan = float("nan")
    print(table([[f"{r['ranks']} x {r['steps']}", r["run_files_mb"], r.get("runfile_s", nan),
                  r.get("runfile_rss_mb", nan), r["digest_mb"], r["digests_s"], r["digests_rss_mb"],
                  r["digest_cli_s"], r["digest_inproc_s"]] for r in rows],
                ["pod", "run files MB", "from run files s", "peak MB", "digests MB", "from digests s",
                 "peak MB", "1 digest: xprof digest s", "in process s"]))
    print(f"load average after: {_load()}")
    figures = {"rows": rows}
    emit_json(args.json, figures)
    return figures


if __name__ == "__main__":
    main()
