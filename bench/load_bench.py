"""Loading time of a big instance (issue 9: 2,000 GPUs fully linked in at most 5 s).

Writes a 2,000-GPU fully linked instance (N (N - 1) = 3,998,000 directed links, the
canonical JSON of formats.md, written by ``json.dump``) and the same pool in the
``network`` shorthand into a temporary directory, then times ``load_instance`` on
each (median of ``--repeat`` runs, default 3) and prints seconds and peak RSS::

    python -m bench.load_bench [--n 2000] [--repeat 3]

Each load runs in a fresh process, so peak RSS is that of one load and the numba
cache state is the one a user's command sees (the scanner of big files is compiled
once and cached on disk; the first run after installing pays that compile, reported
separately as ``first``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = r"""
import resource, sys, time
from geoplan.model.instance import load_instance
t = time.perf_counter()
inst = load_instance(sys.argv[1])
s = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB -> GB (Linux)
print(s, rss, inst.n, len(inst.links))
"""


def write_instances(n: int, where: Path) -> tuple[Path, Path]:
    """(fully linked canonical file, network-shorthand file) of the same GPU pool."""
    sites = [f"S{i % 10}" for i in range(n)]
    gpus = [
        {"id": f"g{i}", "type": "A100-SXM-80GB", "site": sites[i], "peak_tflops": 312.0,
         "compute_util": 0.5 + 0.05 * (i % 10), "memory_gb": 80.0, "memory_util": 0.9,
         "idle_w": 60.0, "active_w": 400.0}
        for i in range(n)
    ]
    common = {
        "model": {"layers": 24, "hidden": 2048, "seq_len": 2048, "vocab": 50257},
        "training": {"batch_size": 32, "micro_batch_size": 1},
        "objective": {"lambda": 1.0, "t_ref_ms": None, "e_ref_j": None},
    }
    links = (
        {"src": f"g{i}", "dst": f"g{j}",
         "bandwidth_gbps": 100.0 if sites[i] == sites[j] else 10.0 + (i + j) % 7,
         "util": 1.0, "latency_ms": 0.1 if sites[i] == sites[j] else 5.0 + (i * j) % 13}
        for i in range(n) for j in range(n) if i != j
    )
    full = where / f"full-n{n}.json"
    with full.open("w") as f:  # streamed: the list of 4 million dicts is never built
        f.write(json.dumps({"name": f"full-n{n}", "gpus": gpus})[:-1] + ', "links": [')
        for k, e in enumerate(links):
            f.write((", " if k else "") + json.dumps(e))
        f.write("], " + json.dumps(common)[1:])
    net = where / f"network-n{n}.json"
    net.write_text(json.dumps({
        "name": f"network-n{n}", "gpus": gpus,
        "network": {"intra": {"latency_ms": 0.1, "bandwidth_gbps": 100.0},
                    "default_inter": {"latency_ms": 10.0, "bandwidth_gbps": 10.0}},
        **common,
    }))
    return full, net


def load_once(path: Path) -> tuple[float, float, int, int]:
    """(seconds, peak RSS GB, GPUs, links) of one load_instance in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True,
                         text=True, check=True)
    s, rss, n, m = out.stdout.split()
    return float(s), float(rss), int(n), int(m)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="GPUs (default 2000)")
    ap.add_argument("--repeat", type=int, default=3, help="timed loads per file (median)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="geoplan-load-") as tmp:
        full, net = write_instances(args.n, Path(tmp))
        for path in (full, net):
            size = path.stat().st_size / 1e6
            runs = [load_once(path) for _ in range(args.repeat)]
            secs = [r[0] for r in runs]
            print(f"{path.name}: {runs[0][2]} GPUs, {runs[0][3]:,} links, {size:.1f} MB: "
                  f"median {statistics.median(secs):.2f} s (first {secs[0]:.2f} s, "
                  f"runs {', '.join(f'{s:.2f}' for s in secs)}), "
                  f"peak RSS {max(r[1] for r in runs):.2f} GB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
