"""Data larger than RAM, read from disk on every pass: each method in a fresh process held by a
memory cgroup to less than the store, page cache included, the page cache dropped before it
starts::

    python tools/bench.py larger-than-ram --store STORE [--text FILE.svm] --limit 2GB \\
        --solvers dcd,newton --C 1 --tol 1e-3 --max-passes 200 --out DIR

First the disk's sequential read bandwidth on the store's own files (``O_DIRECT``, at least
1 GB: :mod:`.disk`), and (unless ``--no-cpu-bound``) the CPU seconds of decompressing one pass
(:func:`.store_io.io_baseline`). Then, each in its own cgroup of ``--limit`` bytes
(:mod:`.cgroup`): ``streamsvm train`` for each solver (the CLI, :func:`.suite_runs.run_cli`),
scikit-learn's ``SGDClassifier(loss="hinge").partial_fit`` over the store's chunks and Vowpal
Wabbit (hinge, ``--passes N`` from its cache file, its own holdout stop), both in the solver
suite's worker (:mod:`.peers`); the cache is built beforehand from ``--text``
(:func:`.suite_data.libsvm_to_vw`, then :func:`.peers.vw_cache`). LIBLINEAR is not run: its
row gives the memory it would need to load the data (:func:`liblinear_bytes`).

Per method: passes and seconds to its stop (the process's and the fit's own), seconds per
pass, the objective (streamsvm's from its summary; the peers' weights graded on the store,
streamed chunk by chunk: :class:`.suite_data.Evaluator`) and its gap to the best dual bound
any streamsvm run certified, peak RSS (``ru_maxrss``) and the cgroup's peak (the process and
its page cache), the bytes read from disk (the child's ``ru_inblock``: ``/proc/PID/io``'s
``read_bytes``, the libraries read at start-up included) against passes × the bytes of its
data, and each streamed pass's read rate against the disk's.
"""

from __future__ import annotations

import json
import os
import statistics

from ._common import MB, ROOT, log, write_json
from .larger_than_ram_report import ltr_tables

__all__ = ["liblinear_bytes", "default_budget", "pass_rates", "streamed_summary",
           "larger_than_ram", "ltr_tables", "register"]

#: The peers ``--peers`` names.
PEERS = ("sgd", "vw", "liblinear")
#: LIBLINEAR's ``feature_node``: an int index and a double value, padded to 16 bytes.
FEATURE_NODE = 16


def liblinear_bytes(nnz: int, n_rows: int, n_features: int) -> dict:
    """The least memory LIBLINEAR (``-s 3 -B 1``) needs to train on data of ``nnz``
    non-zeros in ``n_rows`` rows: a ``feature_node`` per non-zero plus two per row (the bias
    and the end marker), the row pointers and labels, the dual solver's per-row arrays
    (alpha and the diagonal as doubles, the order as ints, the signs) and the weights. The
    loader's own copy of the data (scipy or the text parser) comes on top."""
    nodes = FEATURE_NODE * (nnz + 2 * n_rows)
    problem = 8 * n_rows + 8 * n_rows            # x (pointers) and y (doubles)
    solver = (8 + 8 + 4 + 1) * n_rows + 8 * (n_features + 1)
    return {"feature_nodes": nodes, "problem": problem, "solver": solver,
            "total": nodes + problem + solver}


def default_budget(limit: int, floor: int) -> int:
    """``--memory`` when none is given: half of what the limit leaves above streamsvm's
    runtime floor (the other half is the room of the page cache and of the peaks)."""
    room = limit - floor
    if room <= 0:
        raise ValueError(f"--limit {limit / MB:,.0f} MB leaves nothing above the runtime "
                         f"floor of {floor / MB:,.0f} MB (--floor): give a larger limit")
    return room // 2


#: History kinds that sweep something other than the store: dcd's resident rows in RAM and
#: on scratch disk.
NOT_STORE = ("slab", "disk")


def pass_rates(history: list[dict], disk_per_decoded: float, disk_mb_s) -> list[dict]:
    """Each iteration of a streamsvm history that read the store (every kind but those of
    ``NOT_STORE``; newton's are ``try``/``eval``): the passes it added, its seconds and per
    pass, its kernel seconds per pass, its decoded MB read (``mb_read``), the MB on disk they
    stand for (× ``disk_per_decoded``, the store's bytes on disk per decoded byte), that per
    second, and that rate ÷ the disk's ``disk_mb_s``."""
    from streamsvm.solvers._driver import iteration_seconds
    out, prev = [], 0.0
    for h, span in zip(history, iteration_seconds(history)):
        added, prev = h["passes"] - prev, h["passes"]
        if h.get("kind") in NOT_STORE or added <= 0 or span <= 0:
            continue
        disk_mb = (h.get("mb_read") or 0.0) * disk_per_decoded
        rate = disk_mb / span
        kern = h.get("kernel_seconds")
        out.append({"iteration": h.get("iteration"), "kind": h.get("kind"), "passes": added,
                    "seconds": span, "s_per_pass": span / added,
                    "kernel_s_per_pass": None if kern is None else kern / added,
                    "mb_read": h.get("mb_read"), "disk_mb": disk_mb, "disk_mb_per_s": rate,
                    "vs_disk": rate / disk_mb_s if disk_mb_s else None})
    return out


def streamed_summary(history: list[dict], store: dict, disk_mb_s, cpu: dict | None) -> dict:
    """A streamsvm run's passes over the store (:func:`pass_rates`) against the least a pass
    can take: the store's bytes over the disk's bandwidth (``disk_bound_s``) and, with ``cpu``
    (a pass's decompression CPU seconds, the cores, the I/O floor), the kernel and
    decompression bound of :func:`.suite_targets.pass_bounds` (``cpu_bound_s``); the median
    pass against the larger (``vs_bound``)."""
    from .suite_targets import pass_bounds
    rates = pass_rates(history, store["bytes_on_disk"] / store["decoded_bytes"], disk_mb_s)
    med = (lambda xs: statistics.median(xs) if xs else None)  # noqa: E731
    kern = [r["kernel_s_per_pass"] for r in rates if r["kernel_s_per_pass"] is not None]
    pt = {"first_sweep_s": rates[0]["s_per_pass"] if rates else None,
          "first_kernel_s": rates[0]["kernel_s_per_pass"] if rates else None,
          "stream_s_per_pass": med([r["s_per_pass"] for r in rates]),
          "stream_kernel_s_per_pass": med(kern),
          "stream_pairs": [(r["s_per_pass"], r["kernel_s_per_pass"]) for r in rates
                           if r["kernel_s_per_pass"] is not None]}
    out = {k: v for k, v in pt.items() if k != "stream_pairs"}
    out["store_passes"] = sum(r["passes"] for r in rates)
    out["passes"] = rates
    out["disk_mb_per_s_median"] = med([r["disk_mb_per_s"] for r in rates])
    out["disk_bound_s"] = store["bytes_on_disk"] / MB / disk_mb_s if disk_mb_s else None
    if cpu:
        out["cpu_bound_s"] = pass_bounds(pt, cpu["decode_cpu_s"], cpu["cores"],
                                         cpu["floor_s"]).get("stream_bound_s")
    bounds = [v for v in (out["disk_bound_s"], out.get("cpu_bound_s")) if v]
    out["bound_s"] = max(bounds) if bounds else None
    out["vs_bound"] = (pt["stream_s_per_pass"] / out["bound_s"]
                       if out["bound_s"] and pt["stream_s_per_pass"] else None)
    return out


# -- the runs --------------------------------------------------------------------------------

def store_facts(url: str) -> dict:
    """What the tables need of the store: shape, labels, bytes on disk and decoded."""
    import streamsvm as ss
    store = ss.open_store(url)
    info = store.info()
    return {"url": url, "n_rows": info["n_rows"], "n_features": info["n_features"],
            "nnz": info["nnz"], "task": info["task"], "n_chunks": info["n_chunks"],
            "classes": [float(c) for c in store.classes],
            "bytes_on_disk": info["bytes_on_disk"], "decoded_bytes": info["bytes_uncompressed"]}


def _in_cgroup(name: str, limit: int, limited: bool, fn):
    """``fn(cgroup)`` after dropping the page cache, ``cgroup`` a fresh memory cgroup of
    ``limit`` bytes (None when not ``limited``); returns fn's result and the cgroup's
    stats."""
    from .cgroup import MemoryCgroup, drop_caches, mapped_file_bytes
    if not limited:
        return fn(None), None
    drop_caches()
    with MemoryCgroup(f"streamsvm-bench-{os.getpid()}-{name}", limit) as cg:
        shared = mapped_file_bytes()
        out = fn(cg.path)
        return out, dict(cg.stats(), harness_mapped_file_bytes=shared)


def _oom(cg: dict | None) -> str | None:
    """The message of a run the cgroup's OOM killer ended, else None."""
    if not (cg and cg.get("oom_kills")):
        return None
    return (f"the cgroup's OOM killer, at {cg['limit_bytes'] / MB:,.0f} MB: lower --memory or "
            f"raise --limit")


def _status(child: dict, cg: dict | None, ok: bool) -> str:
    if _oom(cg):
        return "OOM-killed"
    if child.get("timed_out"):
        return "timeout"
    return "ok" if ok else "error"


def run_solver(solver: str, store: dict, cfg: dict, out_dir: str) -> dict:
    """``streamsvm train`` of ``solver`` in the cgroup (:func:`.suite_runs.run_cli`)."""
    from .suite_runs import run_cli, solver_supported
    row = {"method": f"streamsvm {solver}", "family": "streamsvm",
           "data_bytes": store["bytes_on_disk"]}
    ok, why = solver_supported(solver, C=cfg["C"], loss="hinge", tol=cfg["tol"],
                               max_passes=cfg["max_passes"])
    if not ok:
        return dict(row, status="unsupported", message=why)
    d = os.path.join(out_dir, "runs", solver)
    os.makedirs(d, exist_ok=True)
    log(f"streamsvm {solver}: --memory {cfg['memory']} in a cgroup of {cfg['limit']:,} bytes")
    cli, cg = _in_cgroup(solver, cfg["limit"], cfg["limited"], lambda path: run_cli(
        solver, {"store": store["url"]}, cfg["C"], "hinge", dict(cfg, cgroup=path), d))
    summary = cli.pop("summary", None)
    row.update(status=_status(cli, cg, cli["rc"] == 0 and summary is not None),
               message=_oom(cg) or cli.get("error"), child=cli, cgroup=cg)
    if summary:
        row.update(passes=summary["passes"], fit_s=summary["seconds"],
                   objective=summary["primal"], dual=summary["dual"],
                   certificate=summary["gap"], converged=summary["converged"],
                   history=summary["history"])
        row["streamed"] = streamed_summary(summary["history"], store, cfg["disk_mb_s"],
                                           cfg.get("cpu"))
        row["store_passes"] = row["streamed"]["store_passes"]
    return row


def run_peer(kind: str, label: str, spec: dict, data_bytes: int, store: dict, cfg: dict,
             out_dir: str, evaluator) -> dict:
    """A peer in the solver suite's worker (:func:`.suite_runs.run_worker_spec`) in the
    cgroup, its weights graded on the store."""
    from .suite_runs import run_worker_spec
    d = os.path.join(out_dir, "runs", kind)
    os.makedirs(d, exist_ok=True)
    spec = {"kind": kind, "method": kind, "C": cfg["C"], "loss": "hinge", "seed": cfg["seed"],
            "outdir": d, "repeat": 1, "repeat_under": 0.0,
            "dataset": {k: store[k] for k in ("n_rows", "n_features", "task", "classes")}
            | {"store": store["url"], "ooc": True}, **spec}
    run = {"method": label, "family": kind, "data_bytes": data_bytes}
    log(f"{label} in a cgroup of {cfg['limit']:,} bytes")
    _, cg = _in_cgroup(kind, cfg["limit"], cfg["limited"], lambda path: run_worker_spec(
        run, spec, d, timeout=cfg["timeout"], evaluator=evaluator, C=cfg["C"],
        objective_loss="hinge", cgroup=path))
    run["cgroup"] = cg
    if _oom(cg):                 # else the worker's status, or run_worker_spec's
        run.update(status="OOM-killed", message=_oom(cg))
    head = next((s for s in run.get("steps", []) if s.get("role") == "headline"), None)
    if head is not None:
        run.update(passes=head["passes"], store_passes=head["passes"],
                   fit_s=head["fit_seconds"], objective=head.get("primal"))
    run["curve"] = [{"label": s["label"], "passes": s["passes"], "fit_s": s["fit_seconds"],
                     "objective": s.get("primal")} for s in run.get("steps", [])]
    return run


def prepare_vw(text: str, store: dict, work: str) -> dict:
    """VW's cache file of ``text`` under ``work`` (its VW text removed once the cache is
    built), or the one there when it was built from the same text (same size and mtime)."""
    from .peers import vw_bits, vw_cache
    from .suite_data import libsvm_to_vw
    os.makedirs(work, exist_ok=True)
    cache, stamp_path = os.path.join(work, "train.vw.cache"), os.path.join(work, "cache.json")
    st = os.stat(text)
    bits = vw_bits(store["n_features"])
    stamp = {"text": os.path.abspath(text), "size": st.st_size, "mtime": st.st_mtime,
             "bits": bits}
    try:
        with open(stamp_path) as f:
            old = json.load(f)
    except (OSError, ValueError):
        old = None
    if old is not None and old.get("source") == stamp and os.path.exists(cache):
        return old
    vw_text = os.path.join(work, "train.vw")
    log(f"VW: {text} → VW text → cache {cache}")
    libsvm_to_vw(text, vw_text, store["classes"], store["task"])
    seconds = vw_cache(vw_text, cache, bits)
    os.remove(vw_text)
    out = {"source": stamp, "cache": cache, "cache_bytes": os.path.getsize(cache),
           "cache_s": seconds}
    write_json(out, stamp_path)
    return out


def liblinear_row(store: dict, limit: int) -> dict:
    """LIBLINEAR's row: not run, the memory it would need (:func:`liblinear_bytes`)."""
    need = liblinear_bytes(store["nnz"], store["n_rows"], store["n_features"])
    over = need["total"] > limit
    return {"method": "LIBLINEAR -s 3", "family": "liblinear",
            "status": "cannot load" if over else "not run", "needs_bytes": need["total"],
            "needs": need,
            "message": f"needs ≥ {need['total'] / MB:,.0f} MB to hold the data "
                       f"({'above' if over else 'within'} the limit of {limit / MB:,.0f} MB)"}


def _grade(rows: list[dict]) -> dict:
    """The best objective and the best dual bound (streamsvm's) of the runs; each run's
    objective against both."""
    from .evaluate import best_objective, rel_gap
    ok = [r for r in rows if r.get("status") == "ok"]
    best = best_objective([r.get("objective") for r in ok])
    duals = [r["dual"] for r in ok if r.get("dual") is not None]
    dual = max(duals) if duals else None
    for r in ok:
        p = r.get("objective")
        r["vs_best"] = rel_gap(p, best)
        r["gap_to_best_dual"] = (p - dual) / abs(p) if p and dual is not None else None
        child = r.get("child") or {}
        rb, sp = child.get("read_bytes"), r.get("store_passes")
        r["read_vs_data"] = rb / (sp * r["data_bytes"]) if rb and sp else None
        r["read_mb_per_s"] = rb / MB / child["wall_s"] if rb and child.get("wall_s") else None
    return {"best_objective": best, "best_dual": dual}


def larger_than_ram(args) -> dict:
    """The whole benchmark (module doc) for the parsed command line ``args``."""
    from streamsvm.schedule._memory import parse_memory
    from .cgroup import isolation_problem
    from .disk import read_bandwidth, store_files
    from .suite_data import Evaluator
    from streamsvm.solvers import SOLVERS
    err = "tools/bench.py larger-than-ram: error: "
    if not os.path.isdir(args.store):
        raise SystemExit(f"{err}--store {args.store!r} is not a local store directory (the "
                         f"disk under it is measured)")
    solvers = [s.strip() for s in args.solvers.split(",") if s.strip()]
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    for names, known, what in ((solvers, sorted(SOLVERS), "--solvers"),
                               (peers, PEERS, "--peers")):
        if set(names) - set(known):
            raise SystemExit(f"{err}{what}: unknown {', '.join(sorted(set(names) - set(known)))}"
                             f" (known: {', '.join(known)})")
    try:
        limit, floor = (parse_memory(v, name=n, owner="larger-than-ram")
                        for v, n in ((args.limit, "--limit"), (args.floor, "--floor")))
        budget = (parse_memory(args.memory, name="--memory", owner="larger-than-ram")
                  if args.memory else default_budget(limit, floor))
    except ValueError as exc:
        raise SystemExit(f"{err}{exc}") from None
    problem = isolation_problem(limit)
    if problem and not args.allow_no_limit:
        raise SystemExit(f"{err}cannot hold the runs to --limit: {problem} (--allow-no-limit "
                         f"runs them without it, saying so in every table)")
    store = store_facts(args.store)
    out_dir = args.out
    os.makedirs(out_dir, exist_ok=True)
    r = {"store": store, "limit_bytes": limit, "memory_bytes": budget, "floor_bytes": floor,
         "limited": problem is None, "isolation_problem": problem, "C": args.C,
         "tol": args.tol, "max_passes": args.max_passes, "loss": "hinge"}
    vw = None
    if "vw" in peers and args.text and store["task"] == "binary":
        vw = prepare_vw(args.text, store, args.work or os.path.join(out_dir, "work"))
        r["vw_cache"] = vw
    try:
        r["disk"] = read_bandwidth(store_files(args.store), min_bytes=args.disk_bytes)
    except OSError as exc:
        r["disk"] = {"error": str(exc), "mb_per_s": None}
    log(f"disk: {r['disk'].get('mb_per_s') or 0:,.0f} MB/s")
    cfg = {"C": args.C, "tol": args.tol, "max_passes": args.max_passes, "seed": 0,
           "timeout": args.timeout, "readers": args.readers, "memory": str(budget),
           "limit": limit, "limited": problem is None, "disk_mb_s": r["disk"]["mb_per_s"]}
    if args.cpu_bound:
        from .store_io import io_baseline
        io = io_baseline(args.store, repeat=1)
        cfg["cpu"] = r["cpu"] = {"decode_cpu_s": io["scheduler_pass_cpu_s"],
                                 "floor_s": io["floor_s"],
                                 "cores": len(os.sched_getaffinity(0))}
    rows = [run_solver(s, store, cfg, out_dir) for s in solvers]
    evaluator = Evaluator({"store": store["url"], "task": store["task"],
                           "classes": store["classes"], "ooc": True, "test_text": None})
    if "sgd" in peers:
        rows.append(run_peer("sgd", "sklearn SGD (partial_fit)", {"epochs": args.sgd_epochs},
                             store["bytes_on_disk"], store, cfg, out_dir, evaluator))
    if "vw" in peers:
        if vw is None:
            rows.append({"method": "Vowpal Wabbit", "family": "vw", "status": "not run",
                         "message": "binary stores only" if store["task"] != "binary"
                         else "needs the libsvm text (--text) for its cache"})
        else:
            rows.append(run_peer("vw", "Vowpal Wabbit (holdout stop)",
                                 {"passes": [args.vw_passes], "holdout": True,
                                  "cache": vw["cache"], "workdir": os.path.join(out_dir, "vw")},
                                 vw["cache_bytes"], store, cfg, out_dir, evaluator))
    if "liblinear" in peers:
        rows.append(liblinear_row(store, limit))
    r["best"] = _grade(rows)
    r["runs"] = rows
    return r


# -- the subcommand --------------------------------------------------------------------------

def register(sub) -> None:
    """Add ``larger-than-ram`` to the subcommands ``sub``."""
    import argparse
    p = sub.add_parser("larger-than-ram", help="every method in a memory cgroup smaller than "
                       "the store, read from disk every pass",
                       description=__doc__.split("\n\n")[0].replace("::", "."),
                       epilog="\n\n".join(__doc__.split("\n\n")[1:3]),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", required=True, help="the store (a local directory); with "
                   "--render, a larger-than-ram.json to print again")
    p.add_argument("--render", action="store_true", help="print the tables of a saved "
                   "result (--store is its JSON) instead of measuring")
    p.add_argument("--text", help="the libsvm text the store came from: Vowpal Wabbit's cache "
                   "is built from it (not timed; reused under --work while the text is "
                   "unchanged); without it VW is not run")
    p.add_argument("--limit", default="2GB", help="each run's memory cgroup: the process and "
                   "its page cache together (default 2GB); give less than the store's bytes "
                   "on disk, so that no pass is served from the page cache")
    p.add_argument("--memory", help="streamsvm's --memory (default: half of what --limit "
                   "leaves above --floor, (limit - floor) / 2; the other half is the page "
                   "cache's and the peaks' room: a budget near the limit gets the run "
                   "OOM-killed)")
    p.add_argument("--floor", default="200MB", help="streamsvm's runtime floor, the memory a "
                   "run takes before any budget (default 200MB: README, memory-bound)")
    p.add_argument("--solvers", default="dcd,newton", help="comma-separated streamsvm solvers "
                   "(default dcd,newton)")
    p.add_argument("--peers", default="sgd,vw,liblinear", help="comma-separated peers among "
                   "sgd, vw, liblinear (default all; liblinear is a row, never run)")
    p.add_argument("--C", type=float, default=1.0, help="C (default 1)")
    p.add_argument("--tol", type=float, default=1e-3, help="streamsvm's certified relative "
                   "gap (default 1e-3)")
    p.add_argument("--max-passes", type=float, default=200, help="streamsvm's cap on passes "
                   "(default 200)")
    p.add_argument("--vw-passes", type=int, default=20, help="VW's --passes, the cap of its "
                   "holdout stop (default 20)")
    p.add_argument("--sgd-epochs", type=int, default=3, help="SGD's epochs over the store "
                   "(default 3)")
    p.add_argument("--readers", type=int, help="streamsvm's --readers (default its own)")
    p.add_argument("--disk-bytes", type=int, default=10**9, help="bytes read to measure the "
                   "disk (default 10^9, the store's files again when it holds fewer)")
    p.add_argument("--cpu-bound", action=argparse.BooleanOptionalAction, default=True,
                   help="also measure a pass's decompression CPU seconds (io-baseline, "
                   "three reads of the store) for the kernel + decode bound of a pass")
    p.add_argument("--allow-no-limit", action="store_true", help="when no memory cgroup can "
                   "be made or the page cache cannot be dropped (not root, no cgroup v1 "
                   "memory controller), run without them, every table saying NO MEMORY "
                   "LIMIT (default: refuse)")
    p.add_argument("--timeout", type=float, default=4 * 3600.0, help="seconds a run may take "
                   "(default 4 h)")
    p.add_argument("--work", help="where VW's cache is kept (default OUT/work)")
    p.add_argument("--out", default=os.path.join(ROOT, "bench-out", "larger-than-ram"),
                   help="output directory (default bench-out/larger-than-ram)")
    p.set_defaults(run=_cmd)


def _cmd(args, argv) -> int:
    from ._machine import save_stamped
    if args.render:
        with open(args.store) as f:
            print(ltr_tables(json.load(f)))
        return 0
    r = larger_than_ram(args)
    save_stamped(r, argv, args.out, "larger-than-ram.json")
    text = ltr_tables(r)
    with open(os.path.join(args.out, "larger-than-ram.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0
