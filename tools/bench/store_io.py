"""What reading a store costs, before any solver: ``tools/bench.py io-baseline STORE`` (the
I/O floor: read and decompress every chunk once, and the peak RSS of the reading path in
fresh processes) and ``tools/bench.py checks-cost STORE`` (dcd's streamed sweeps with and
without the store's integrity checks). The suite measures the I/O floor of its out-of-core
data sets too (:func:`io_baseline`, :func:`io_rss`).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

from ._common import MB, ROOT, clean, log
from ._machine import save_stamped
from ._table import markdown_table
from ._timed import run_child
from .suites import OOC

__all__ = ["io_baseline", "io_rss", "checks_cost", "checks_table", "register"]


def io_baseline(store_url: str, repeat: int = 3, block_rows=None) -> dict:
    """Time to read and decompress every chunk once: a plain ``read_chunk`` loop, and a
    scheduler pass with read-ahead and no compute (what a solver pass costs at best), with
    two read-ahead threads and with one (what a training pass gets on 2 CPUs: one reader)."""
    import streamsvm as ss
    from streamsvm.schedule import PassScheduler
    store = ss.open_store(store_url)
    n = store.n_rows
    if block_rows is None:      # the default of streamsvm.estimators.train
        block_rows = int(min(store.chunk_rows, max(256, -(-n // 512))))
    loop, sched_t, one_t, cpu_t, nbytes = [], [], [], [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        nbytes = 0
        for i in range(store.n_chunks):
            nbytes += store.read_chunk(i).nbytes
        loop.append(time.perf_counter() - t0)
        for depth, times in ((2, sched_t), (1, one_t)):
            sched = PassScheduler(store, memory=0, block_rows=block_rows, prefetch=depth,
                                  readers=depth)
            t0, c0 = time.perf_counter(), time.process_time()
            sched.map_reduce(lambda b, *_: None)
            times.append(time.perf_counter() - t0)
            if depth == 2:      # CPU seconds of every thread: the work of decompressing
                cpu_t.append(time.process_time() - c0)
            sched.close()
    out = {"store": store_url, "n_rows": n, "n_chunks": store.n_chunks,
           "decoded_bytes": nbytes, "bytes_on_disk": store.bytes_on_disk(),
           "block_rows": block_rows, "repeat": repeat,
           "read_chunk_loop_s": statistics.median(loop), "read_chunk_loop_all_s": loop,
           "scheduler_pass_s": statistics.median(sched_t), "scheduler_pass_all_s": sched_t,
           # one read-ahead thread: the reading a pass gets when the solver's kernel keeps
           # the other core of a 2-core machine busy
           "one_reader_pass_s": statistics.median(one_t), "one_reader_pass_all_s": one_t,
           "scheduler_pass_cpu_s": statistics.median(cpu_t),
           "page_cache": "warm (the store was read just before; nothing was evicted)"}
    out["floor_s"] = min(out["read_chunk_loop_s"], out["scheduler_pass_s"])
    out["decoded_mb_per_s"] = nbytes / MB / out["floor_s"]
    return out


_IO_RSS_CODE = r"""
import sys, streamsvm, streamsvm.estimators, streamsvm.cli
from streamsvm.schedule import PassScheduler
store = streamsvm.open_store(sys.argv[1]); mode = sys.argv[2]
if mode == "loop":
    for i in range(store.n_chunks):
        store.read_chunk(i)
if mode in ("runtime", "runtime_pass"):
    # the solver's compiled kernels loaded (numba's on-disk cache) on a few rows, for the
    # in-memory and the streamed code paths: what a run costs before it holds any data
    import warnings
    import scipy.sparse as sp
    from streamsvm import InMemoryStore
    from streamsvm._train import train
    warnings.simplefilter("ignore")
    part = store.read_rows(0, min(store.n_rows, 2000))
    X = sp.csr_matrix((part.data, part.indices, part.indptr),
                      shape=(part.n_rows, store.n_features))
    # the first 1,000 features only: the kernels are the same for every width, and the
    # model is not the floor (the tables add it); with all of them a 2*10^6-feature store's
    # model did not fit the 16MB run, and the floor fell back to the bare import
    X = X[:, :min(store.n_features, 1000)]
    for memory, block_rows, slabs in (("1GB", None, True), ("16MB", 100, False)):
        train(InMemoryStore(X, part.y, chunk_rows=500, dtype=store.dtype),
              memory=memory, block_rows=block_rows, max_passes=3, tol=0.5,
              slab=slabs, disk_slab=slabs,
              loss=sys.argv[3] if mode == "runtime" and len(sys.argv) > 3 else "hinge")
if mode in ("scheduler", "runtime_pass"):
    n = store.n_rows
    s = PassScheduler(store, memory=int(sys.argv[3]) if mode == "scheduler" else 0,
                      block_rows=int(min(store.chunk_rows, max(256, -(-n // 512)))))
    s.map_reduce(lambda b, *_: None)
    s.close()
"""


def io_rss(store_url: str, out_dir: str, budget: int = 0) -> dict:
    """Peak RSS (MB) of fresh processes that import streamsvm and open the store, then
    (``import``) do nothing, (``runtime``) also load dcd's compiled kernels by training on
    the first 2,000 rows in memory and streamed, (``read_chunk_loop``) read every chunk
    once, or (``scheduler_pass``) run one no-compute scheduler pass with read-ahead and a
    cache budget of ``budget`` bytes: the memory the reading path needs before any solver;
    (``runtime_pass``) load the kernels, then one such pass with no cache and no per-row
    state: the least any streamed training pass can peak at."""
    os.makedirs(out_dir, exist_ok=True)
    out = {}
    for key, args in (("import", ["none"]), ("runtime", ["runtime"]),
                      ("read_chunk_loop", ["loop"]),
                      ("scheduler_pass", ["scheduler", str(int(budget))]),
                      ("runtime_pass", ["runtime_pass"])):
        r = run_child([sys.executable, "-c", _IO_RSS_CODE, store_url, *args], timeout=3600,
                      stdout_path=os.path.join(out_dir, f"io-rss-{key}.out"),
                      stderr_path=os.path.join(out_dir, f"io-rss-{key}.err"))
        out[key + "_mb"] = r["peak_rss_mb"] if r["rc"] == 0 else None
        out[key + "_anon_mb"] = r.get("peak_rss_anon_mb") if r["rc"] == 0 else None
        if r["rc"] != 0:
            log(f"RSS probe {key!r} failed (exit {r['rc']}): see "
                f"{os.path.join(out_dir, f'io-rss-{key}.err')}")
    out["scheduler_budget_bytes"] = int(budget)
    return out


def checks_cost(store_url: str, rounds: int = 6, memory=None, passes: int = 5) -> dict:
    """Seconds of dcd's streamed sweeps with the store's integrity checks (CRC-32C of the
    inner chunks, value ranges, row pointers) and without them, in alternation in this
    process: the first sweep (every chunk checked on first read) apart from the later ones
    (a local chunk is checked once per run). ``memory``: the training budget (default an
    eighth of the decoded store, as the out-of-core suites use), so every sweep streams."""
    import warnings
    import streamsvm as ss
    from streamsvm._train import train
    from streamsvm.io import _direct, _store
    store0 = ss.open_store(store_url)
    if memory is None:
        memory = int(store0.info()["bytes_uncompressed"] * OOC["budget_fraction"])
    first, later = {True: [], False: []}, {True: [], False: []}
    try:
        for i in range(rounds):
            for on in (True, False) if i % 2 == 0 else (False, True):
                _direct.VERIFY_CHECKSUMS = _store.CHECK_ROWS = on
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    _, res = train(ss.open_store(store_url), loss="hinge", memory=memory,
                                   max_passes=passes, disk_slab=False, slab=False)
                from streamsvm.solvers._driver import iteration_seconds
                sweeps = [t for h, t in zip(res.history, iteration_seconds(res.history))
                          if h["kind"] == "stream"]
                first[on].append(sweeps[0])
                later[on].extend(sweeps[1:])
    finally:
        _direct.VERIFY_CHECKSUMS = _store.CHECK_ROWS = True
    med = statistics.median
    out = {"store": store_url, "rounds": rounds, "memory": memory, "passes": passes,
           "first_sweep_s": {"checks": med(first[True]), "no_checks": med(first[False])},
           "later_sweep_s": {"checks": med(later[True]), "no_checks": med(later[False])},
           "later_sweep_min_s": {"checks": min(later[True]), "no_checks": min(later[False])},
           "all": {"first": {str(k): v for k, v in first.items()},
                   "later": {str(k): v for k, v in later.items()}}}
    out["first_slowdown"] = out["first_sweep_s"]["checks"] / out["first_sweep_s"]["no_checks"] - 1
    out["later_slowdown"] = out["later_sweep_s"]["checks"] / out["later_sweep_s"]["no_checks"] - 1
    return out


def checks_table(r: dict) -> str:
    """Markdown table of :func:`checks_cost`."""
    rows = [("first streamed sweep (every chunk checked)", r["first_sweep_s"],
             r["first_slowdown"]),
            ("later streamed sweeps, median", r["later_sweep_s"], r["later_slowdown"])]
    return markdown_table(["sweep", "with checks s", "without s", "slowdown"],
                          [[what, f"{t['checks']:.3f}", f"{t['no_checks']:.3f}",
                            f"{100 * slow:+.1f} %"] for what, t, slow in rows])


# -- the subcommands -------------------------------------------------------------------------

def register(sub) -> None:
    """Add ``io-baseline`` and ``checks-cost`` to the subcommands ``sub``."""
    p = sub.add_parser("io-baseline", help="time reading + decompressing a store once, and "
                       "the peak RSS of the reading path",
                       description=io_baseline.__doc__.split("\n\n")[0])
    p.add_argument("store", metavar="STORE")
    p.add_argument("--repeat", type=int, default=3,
                   help="timed reads, the median reported (default 3)")
    p.add_argument("--io-budget", metavar="SIZE",
                   help="cache budget of the scheduler pass whose peak RSS is reported "
                        "(default 0)")
    p.add_argument("--out", help="output directory (default bench-out/io-baseline)")
    p.set_defaults(run=_io_baseline_cmd)
    p = sub.add_parser("checks-cost", help="dcd's streamed sweeps with and without the "
                       "store's integrity checks",
                       description="Time dcd's streamed sweeps over STORE with and without "
                                   "the store's integrity checks, in alternation.")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--repeat", type=int, default=6, help="rounds (default 6)")
    p.add_argument("--out", help="output directory (default bench-out/checks-cost)")
    p.set_defaults(run=_checks_cost_cmd)


def _io_baseline_cmd(args, argv) -> int:
    from .report import io_table
    r = io_baseline(args.store, repeat=args.repeat)
    budget = 0
    if args.io_budget:
        from streamsvm.schedule._memory import parse_memory
        budget = parse_memory(args.io_budget)
    out_dir = args.out or os.path.join(ROOT, "bench-out", "io-baseline")
    r["rss"] = io_rss(args.store, out_dir, budget=budget)
    save_stamped(r, argv, out_dir, "io-baseline.json")
    print(json.dumps(clean(r), indent=1))
    print(io_table({os.path.basename(args.store.rstrip("/")): r}))
    return 0


def _checks_cost_cmd(args, argv) -> int:
    r = checks_cost(args.store, rounds=args.repeat)
    save_stamped(r, argv, args.out or os.path.join(ROOT, "bench-out", "checks-cost"),
                 "checks-cost.json")
    print(checks_table(r))
    return 0
