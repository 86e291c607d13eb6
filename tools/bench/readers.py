"""Seconds per streamed dcd pass for several read-ahead settings, measured side by side.

How many blocks the scheduler reads ahead (``prefetch``) and how many threads decompress
them (``readers``) decide how well reading overlaps the solver's kernel. On a machine
with few cores the two compete for CPU, so the best setting is measured, not guessed::

    python tools/bench.py readers bench-out/work/synth-1e7/train.zarr --memory 256201675

Each setting trains ``dcd`` (hinge, C = 1, no disk slab) for ``--passes`` streamed passes in
a fresh process; the settings are run in turn, ``--repeat`` rounds, so that slow and fast
moments of a shared machine fall on all of them alike. Printed per run: the first sweep,
and the medians over the later sweeps of the sweep time, the time inside the kernels and
the time spent waiting for blocks (``kernel_seconds`` / ``wait_seconds`` of dcd's history).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from ._common import ROOT
from ._table import markdown_table

__all__ = ["parse_settings", "summarize", "register"]

_CHILD = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import streamsvm
from streamsvm._train import train
from streamsvm.solvers._driver import iteration_seconds
store_url, memory, passes, prefetch, readers = sys.argv[1:6]
_, res = train(streamsvm.open_store(store_url), C=1.0, loss="hinge", memory=int(memory),
               max_passes=float(passes), prefetch=int(prefetch), readers=int(readers),
               disk_slab=False)
print(json.dumps([{"sweep_seconds": t, "kernel_seconds": e["kernel_seconds"],
                   "wait_seconds": e["wait_seconds"]}
                  for e, t in zip(res.history, iteration_seconds(res.history))
                  if e["kind"] == "stream"]))
"""


def parse_settings(text: str) -> list[tuple[int, int]]:
    """``"2:2,4:1"`` -> ``[(2, 2), (4, 1)]`` (prefetch:readers)."""
    out = []
    for item in text.split(","):
        prefetch, _, readers = item.strip().partition(":")
        out.append((int(prefetch), int(readers)))
    return out


def summarize(sweeps: list[dict]) -> dict:
    """First sweep and medians of the later ones."""
    later = sweeps[1:] or sweeps
    med = (lambda key: statistics.median(e[key] for e in later))  # noqa: E731
    return {"first_s": sweeps[0]["sweep_seconds"], "sweep_s": med("sweep_seconds"),
            "kernel_s": med("kernel_seconds"), "wait_s": med("wait_seconds")}


def run(store: str, memory: int, passes: float, prefetch: int, readers: int,
        limit: int | None = None) -> dict:
    """One setting's run in a fresh process, its sweeps summarized (the child times them);
    with ``limit``, in a fresh memory cgroup of ``limit`` bytes (the process and its page
    cache), the page cache dropped before it: every pass then reads the store from the
    disk when it is larger than the limit."""
    argv = [sys.executable, "-c", _CHILD, store, str(memory), str(passes), str(prefetch),
            str(readers)]
    if limit is None:
        out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=True)
        return summarize(json.loads(out.stdout.strip().splitlines()[-1]))
    from .cgroup import MemoryCgroup, drop_caches
    drop_caches()
    with MemoryCgroup(f"streamsvm-bench-readers-{os.getpid()}", limit) as cg:
        procs = os.path.join(cg.path, "cgroup.procs")

        def enter():            # in the child before exec: in the cgroup from its start
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=True,
                             preexec_fn=enter)
        stats = cg.stats()
    return dict(summarize(json.loads(out.stdout.strip().splitlines()[-1])),
                cgroup_peak_mb=stats["max_usage_bytes"] / 2**20)


def table(results: dict) -> str:
    """Markdown table: one row per run of each setting (and the cgroup's peak, when the
    runs had one)."""
    peak = any("cgroup_peak_mb" in r for runs in results.values() for r in runs)
    return markdown_table(
        ["prefetch", "readers", "run", "1st sweep s", "later sweeps s (median)", "kernels s",
         "waiting s"] + (["cgroup peak MB"] if peak else []),
        [[prefetch, readers, i, f"{r['first_s']:.3f}", f"{r['sweep_s']:.3f}",
          f"{r['kernel_s']:.3f}", f"{r['wait_s']:.3f}"]
         + ([f"{r['cgroup_peak_mb']:,.0f}"] if peak else [])
         for (prefetch, readers), runs in results.items() for i, r in enumerate(runs, 1)],
        "r" * (8 if peak else 7))


# -- the subcommand --------------------------------------------------------------------------

def register(sub) -> None:
    """Add ``readers`` to the subcommands ``sub``."""
    p = sub.add_parser("readers", help="seconds per streamed dcd pass for read-ahead settings",
                       description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", help="a store from 'streamsvm convert'")
    p.add_argument("--memory", type=int, required=True, help="budget in bytes")
    p.add_argument("--passes", type=float, default=6, help="streamed passes per run")
    p.add_argument("--repeat", type=int, default=3, help="rounds over the settings")
    p.add_argument("--settings", default="2:2,4:2,4:1,8:1",
                   help="comma-separated prefetch:readers (default 2:2,4:2,4:1,8:1)")
    p.add_argument("--limit", default=None,
                   help="run each setting in a fresh memory cgroup of this size (e.g. "
                        "800MB; the process and its page cache), the page cache dropped "
                        "first: a store larger than it is read from the disk every pass "
                        "(root and cgroup v1 only)")
    p.set_defaults(run=_readers_cmd)


def _readers_cmd(args, argv) -> int:
    import streamsvm
    from streamsvm.exceptions import StreamSVMError
    from streamsvm.schedule._memory import parse_memory
    settings = parse_settings(args.settings)
    limit = None
    try:
        streamsvm.open_store(args.store)          # a bad store: one line, before any run
        if args.limit is not None:
            limit = parse_memory(args.limit, name="--limit", owner="bench.py readers")
    except StreamSVMError as exc:       # no or a damaged store, a bad --limit
        print(f"bench.py readers: error: {exc}", file=sys.stderr)
        return 2
    if limit is not None:
        from .cgroup import isolation_problem
        problem = isolation_problem(limit)
        if problem is not None:
            print(f"bench.py readers: error: --limit {args.limit}: {problem}", file=sys.stderr)
            return 2
    results: dict = {s: [] for s in settings}
    for _ in range(args.repeat):
        for s in settings:
            results[s].append(run(args.store, args.memory, args.passes, *s, limit=limit))
            print(f"prefetch {s[0]} readers {s[1]}: {results[s][-1]}", file=sys.stderr)
    print(table(results))
    return 0
