"""The training front end: :func:`train`, shared by the CLI and the estimators.

``train`` connects the pieces: store → :class:`~streamsvm.schedule.PassScheduler` → solver
(from :data:`~streamsvm.solvers.SOLVERS`, its parameters validated from its own table) →
the shared driver (``solvers/_driver.py``) → :class:`~streamsvm.model.LinearModel`, with
checkpoints through :class:`~streamsvm.checkpoint.CheckpointManager`. The options of a run
that are not the solver's (memory, seed, checkpoints, threads) are declared once here in
:data:`RUN_PARAMS`, from which the CLI's options are generated.
"""

from __future__ import annotations

import dataclasses
import logging
import time

import numpy as np

from ._auto import AUTO
from ._outputs import check_writable_dir
from .exceptions import InvalidParameterError
from .model import LinearModel
from .solvers import SOLVERS
from .solvers._base import Param
from .solvers._driver import run

#: The history columns a model keeps (those a resumed run reproduces exactly).
MODEL_HISTORY_KEYS = ("iteration", "kind", "passes", "primal", "dual", "gap", "exact",
                      "active")

__all__ = ["train", "RUN_PARAMS", "make_solver"]

log = logging.getLogger(__name__)

#: The options of a run that are not a solver's (name, kind, default, help); the CLI's
#: ``train`` options are generated from them and from each solver's table.
RUN_PARAMS = (
    Param("memory", "size", "1GB", "RAM budget for per-row state, resident rows, blocks in "
          "flight and cached blocks (e.g. 2GB, 512MiB); the process peaks near the runtime "
          "floor (about 190 MB) plus this. It decides what stays in RAM, so it steers the "
          "solver's path: resuming refuses a budget other than the checkpoint's (naming it). "
          "Per process: with --scheduler, each dask worker's budget for the blocks it "
          "caches (the rows it keeps for shrinking) and its per-row state"),
    Param("seed", "int", 0, "seed of every random order (the same seed gives the same "
          "model)", low=0),
    Param("checkpoint", "str", None, "directory or URL for checkpoints (any fsspec URL); "
          "one run per directory: the same command again continues the run there, another "
          "run is refused unless --overwrite-checkpoint"),
    Param("checkpoint_every", "float", 1.0, "passes over the data between checkpoints (a "
          "checkpoint is also written at the end and on SIGINT/SIGTERM)", low=0.0,
          flag="--checkpoint-every-passes"),
    Param("checkpoint_every_seconds", "float", 0.0, "seconds between checkpoints (0: only by "
          "passes)", low=0.0),
    Param("resume", "bool", True, "continue from the newest valid checkpoint in "
          "--checkpoint, bit for bit as if never stopped (the default, in Python too); the "
          "data, the solver's parameters, --seed, --memory and --readers must be the "
          "checkpoint's (a difference is refused, naming it; without --readers a resume "
          "takes the checkpoint's count). --no-resume: start afresh, "
          "refused where checkpoints already are unless --overwrite-checkpoint"),
    Param("overwrite_checkpoint", "bool", False, "delete the checkpoints already in "
          "--checkpoint and start afresh: those of another run, or this run's with "
          "--no-resume (otherwise this run's are continued). Without it such a directory "
          "is refused, the safe choice: a new run never prunes checkpoints it did not write"),
    Param("init_model", "str", None, "warm start: begin at the weights of this model file "
          "(newton, nesvm, alm; the same task, classes and at most the store's features), "
          "e.g. a run at a nearby C"),
    Param("scratch_dir", "str", None, "local directory for per-row state that does not fit "
          "--memory and for resident rows on disk (default: the system temporary directory); "
          "the space is reserved before the first pass, or the run refused with the bytes "
          "needed and free"),
    Param("readers", "int", None, "threads reading and decompressing blocks ahead of the "
          "solver (default: one fewer than the CPUs for a local store, so the solver keeps a "
          "core, as many as the CPUs when the store does not fit in the page cache and is "
          "read from the disk every pass; one per block in flight for a remote one; a "
          "resume: the checkpoint's count); charged to --memory, so a resume refuses "
          "another count",
          low=1),
    Param("scheduler", "str", None, "train on a dask cluster: the address of its scheduler "
          "(tcp://host:8786); its workers read the store themselves (shared filesystem or "
          "S3, with --storage-option) and --memory is each worker's budget; alm, nesvm and "
          "newton (dense Hessian) give the local weights bit for bit, dcd and avsf run "
          "rounds of dual CD with shrinking on every worker and an exact step on their "
          "changes, ww the same with Walrus steps, to the same certified optimum"),
)


def _store_record(store) -> dict:
    """What a model's summary says of its store (``info MODEL``): its ``store_id`` and the
    files it was converted from, not its path (a store moved or named by another path
    trains the same model file, byte for byte)."""
    meta = store.meta
    files = ((meta.get("source") or {}).get("files")) or []
    return {"store_id": meta.get("store_id"),
            "converted_from": [f.get("url") for f in files if isinstance(f, dict)]}


def _store_identity(store) -> dict:
    """What a checkpoint records of its store: counts plus the ``store_id`` written at
    conversion (the same wherever the store is and whatever path names it); stores
    converted before ids existed fall back to their source's CRC, in-memory stores to a
    content fingerprint."""
    meta = store.meta
    ident = {"n_rows": int(meta["n_rows"]), "n_features": int(meta["n_features"]),
             "nnz": int(meta["nnz"])}
    if meta.get("store_id"):
        ident["store_id"] = meta["store_id"]
    elif store.fingerprint:
        ident["fingerprint"] = store.fingerprint
    else:
        ident["crc32"] = (meta.get("source") or {}).get("crc32")
    return ident


def _checkpoint_readers(checkpoint, storage_options) -> int | None:
    """The reader threads of the newest readable checkpoint under ``checkpoint``, or None."""
    from .checkpoint import CheckpointManager
    from .exceptions import CheckpointError
    try:
        newest = CheckpointManager(checkpoint, storage_options=storage_options).newest()
    except (CheckpointError, OSError, ValueError):
        return None
    readers = (newest[1].get("identity") or {}).get("readers") if newest else None
    return readers if type(readers) is int and readers >= 1 else None


def _existing_checkpoints(manager, identity: dict, resume: bool, overwrite: bool):
    """The checkpoint this run continues (``resume``), else None; checkpoints it may not
    prune (another run's, or this run's without ``resume``) are refused unless
    ``overwrite``, which deletes them."""
    from .checkpoint import differences
    from .exceptions import CheckpointError
    where = f"checkpoint directory {manager.url}"
    if resume:
        try:
            state = manager.load_latest(expect={"identity": identity})
        except CheckpointError as exc:
            if not overwrite:
                raise CheckpointError(f"{exc}; --overwrite-checkpoint "
                                      f"(overwrite_checkpoint=True) deletes its checkpoints "
                                      f"and starts afresh") from None
            log.warning("%s; deleting them (overwrite_checkpoint)", exc)
            manager.clear()
            return None
        if state is None:
            log.info("no checkpoint under %s: starting from scratch", manager.url)
        return state
    if not manager.list():
        return None
    newest = manager.newest()
    if newest is None:
        why = f"{where} holds checkpoints that cannot be read (all damaged)"
    else:
        diffs = differences(newest[1], {"identity": identity})
        why = (f"{where} holds the checkpoints of another run (the newest, {newest[0]}, was "
               f"written by a run with {diffs}); they are kept: use another --checkpoint "
               f"directory" if diffs else
               f"{where} holds checkpoints of this same run (the newest is {newest[0]}): "
               f"continue it with resume=True (the default)")
    if not overwrite:
        raise CheckpointError(f"{why}, or pass --overwrite-checkpoint "
                              f"(overwrite_checkpoint=True) to delete them and start afresh")
    log.warning("%s: deleting them (overwrite_checkpoint)", why)
    manager.clear()
    return None


def make_solver(solver: str, params: dict):
    """The solver named ``solver`` with ``params`` (validated from its table)."""
    if solver not in SOLVERS:
        raise InvalidParameterError(f"The 'solver' parameter must be one of "
                                    f"{sorted(SOLVERS)}. Got {solver!r} instead.")
    return SOLVERS[solver](**params)


def train(store, *, solver="auto", memory="1GB", seed=0, checkpoint=None, checkpoint_every=0,
          checkpoint_every_seconds=0.0, resume=True, overwrite_checkpoint=False, init_model=None,
          storage_options=None, callback=None,
          should_stop=None, block_rows=None, prefetch=8, readers=None, scratch_dir=None,
          progress=False, scheduler=None, **params):
    """Train a model on a store (or store URL) and return ``(LinearModel, SolveResult)``;
    with a path of C values (``C_path``: nesvm's in the same passes, any other solver's one
    run per C, :mod:`streamsvm._c_search`), a list of models, one per C in order.

    Parameters
    ----------
    store : Store, InMemoryStore or str
    solver : str, default "auto"
        A name in :data:`streamsvm.solvers.SOLVERS`, or ``"auto"``: chosen from the store
        and the parameters before the first pass (:mod:`streamsvm._auto`; the model's
        ``summary["chosen_because"]`` says why).
    memory : str or int
        Budget for per-row state, resident rows, blocks in flight and cached blocks.
    seed : int
    checkpoint : str, optional
        Directory or URL for checkpoints (any fsspec URL).
    checkpoint_every, checkpoint_every_seconds : float
        Passes over the data, or seconds, between checkpoints (0: only at the end or when
        interrupted).
    resume : bool, default True
        Continue from the newest valid checkpoint in ``checkpoint`` (as the CLI does by
        default): the store, the solver's parameters, ``seed``, ``block_rows``, ``memory``,
        ``readers`` and ``prefetch`` must be the checkpoint's (each steers the run's path); a
        difference raises ``CheckpointError`` naming it (``readers=None`` takes the
        checkpoint's count). False: start afresh, refused where
        checkpoints already are unless ``overwrite_checkpoint``.
    overwrite_checkpoint : bool
        Delete the checkpoints already in ``checkpoint`` (another run's, or with
        ``resume=False`` this run's) instead of refusing to start.
    init_model : str or LinearModel, optional
        Warm start (newton, nesvm, alm): begin at this model's weights
        (:mod:`streamsvm._warm_start`).
    scratch_dir : str, optional
        Local directory for spilled per-row state and resident rows on disk.
    block_rows, prefetch, readers : int, optional
        Rows per block (default: several hundred blocks a pass), blocks read ahead, and
        the threads reading them (:class:`~streamsvm.schedule.PassScheduler`).
    progress : bool
        Show a progress bar.
    should_stop : callable, optional
        Polled after every iteration (a checkpoint is then written and
        ``KeyboardInterrupt`` raised) and while the run sets up, before its first pass
        (``KeyboardInterrupt`` at once, the scratch files removed).
    scheduler : distributed.Client or str, optional
        Train on a dask cluster (a Client or a scheduler address, ``"tcp://host:8786"``):
        its workers read ``store`` themselves (a path on a shared filesystem or an S3 URL,
        with ``storage_options``) and keep the per-row state of their blocks; ``memory`` is
        each worker's budget. Solvers whose passes are all map/reduce (``alm``, ``nesvm``,
        ``newton`` with its dense Hessian) give the local run's weights bit for bit; the
        dual coordinate-descent solvers run rounds of local dual CD on every worker to the
        same certified optimum (``dcd``, ``avsf``: with shrinking and an exact step on the
        workers' changes, ``solvers/_cocoa.py``; ``ww``: the same with Walrus steps,
        ``solvers/_ww_cocoa.py``); what cannot run there (``newton``'s Hessian-free path
        and hinge polish) is refused before the first pass. A worker lost during a pass: the
        run resumes from its last snapshot on the workers left.
    **params
        The solver's parameters (its table: ``streamsvm train --solver NAME --help``).

    Raises
    ------
    InvalidParameterError
        Before the first pass: a bad parameter, a store with a single class or one the
        solver cannot train on, a memory budget too small.
    OutputNotWritableError
        Before the first pass: ``checkpoint`` or ``scratch_dir`` cannot be written.
    CheckpointError
        Before the first pass, ``checkpoint`` holding checkpoints of another run (every
        differing parameter named), or of this run with ``resume=False``, unless
        ``overwrite_checkpoint``; during training, a checkpoint that cannot be written (the
        last good one named).
    OutputLockedError
        Another run is using ``checkpoint`` (named: pid, host, command, start time).
    """
    if solver == AUTO:                      # the solver from the store and the parameters
        kw = dict(locals())             # (outside a comprehension: its own locals)
        return _train_auto(store, {k: v for k, v in kw.items()
                                   if k not in ("store", "solver", "params")}, params)
    from .checkpoint import CheckpointManager
    from .io import InMemoryStore, OutputLock, StoreMeta, open_store
    from .schedule import PassScheduler
    from ._c_search import sequential_path
    if sequential_path(solver, params):     # a path of C values, one run per C
        from ._c_search import train_path
        run_kw = dict(memory=memory, seed=seed, checkpoint_every=checkpoint_every,
                      storage_options=storage_options, callback=callback,
                      should_stop=should_stop, block_rows=block_rows, prefetch=prefetch,
                      readers=readers, scratch_dir=scratch_dir, progress=progress,
                      scheduler=scheduler)
        return train_path(lambda s, **kw: train(s, **run_kw, **kw), store, solver, params,
                          init_model, checkpoint)
    slv = make_solver(solver, params)       # validates every parameter before any pass
    if not isinstance(store, StoreMeta):
        store = open_store(store, storage_options=storage_options)
    if len(store.classes) < 2:
        raise InvalidParameterError(
            f"The number of classes has to be greater than one; got {len(store.classes)} "
            f"class (label {', '.join(store.label_counts) or 'none'} in "
            f"{'y' if store.url == 'memory' else f'store {store.url!r}'})")
    slv.check_store(store)
    if scheduler is not None:
        if isinstance(store, InMemoryStore):
            raise InvalidParameterError(
                "scheduler= trains on a dask cluster whose workers read the store "
                "themselves: give a store path or URL (shared filesystem or S3), not "
                "in-memory data")
        slv = slv.for_cluster(store)
    warm = None
    if init_model is not None:
        from ._warm_start import initial_weights
        slv.init_W, warm = initial_weights(init_model, store, slv, storage_options)
    problem = slv.problem(store).resolved(store.classes, store.label_counts)
    problem.costs(store.classes, store.label_counts)        # class weights name real labels
    if checkpoint is not None:
        check_writable_dir(checkpoint, what="checkpoint directory",
                           storage_options=storage_options)
    if scratch_dir is not None:
        check_writable_dir(scratch_dir, what="scratch directory")
    n_rows = store.n_rows
    if block_rows is None:    # several hundred blocks per pass (spec_003 §3.6)
        block_rows = int(min(store.chunk_rows, max(256, -(-n_rows // 512))))
    if checkpoint is not None and resume and readers is None:
        # the default count follows the machine (its CPUs, whether the store stays in its
        # page cache): a resume keeps the checkpoint's, as the budget charged it
        readers = _checkpoint_readers(checkpoint, storage_options)
    sched = PassScheduler(store, memory=memory, seed=seed, block_rows=block_rows,
                          prefetch=prefetch, readers=readers, scratch_dir=scratch_dir,
                          scheduler=scheduler, interrupt=should_stop)
    manager = state = lock = save = None
    # everything that steers the run's path: the budget decides what stays in RAM, and the
    # blocks read ahead and reader threads are charged to it (resume refuses another value)
    identity = {"store": _store_identity(store) if checkpoint is not None else None,
                "solver": solver, **slv.get_params(), "seed": seed, "block_rows": block_rows,
                "memory": sched.memory, "readers": sched.readers, "prefetch": sched.prefetch}
    if warm is not None:
        identity["init_model"] = "sha256:" + warm["sha256"]     # (its weights)
    t0 = time.perf_counter()
    try:
        if checkpoint is not None:
            # one run per checkpoint directory: its lock is held until the run ends
            lock = OutputLock(checkpoint, what="checkpoint directory", inside=True,
                              storage_options=storage_options).acquire()
            manager = CheckpointManager(checkpoint, storage_options=storage_options)
            state = _existing_checkpoints(manager, identity, resume, overwrite_checkpoint)

            def save(arrays, meta):
                manager.save(arrays, dict(meta, identity=identity))
        result = run(slv, sched, state=state, callback=callback, checkpoint=save,
                     every_passes=checkpoint_every, every_seconds=checkpoint_every_seconds,
                     should_stop=should_stop, progress=progress)
    finally:
        slv.close()
        sched.close()
        if lock is not None:
            lock.release()
    seconds = time.perf_counter() - t0
    # the history's deterministic columns: a run killed and resumed writes the same model
    # file, byte for byte (seconds and I/O are in train --json and SolveResult.history)
    summary = dict(result.summary(), block_rows=block_rows, n_rows=n_rows, seed=seed,
                   store=None if isinstance(store, InMemoryStore) else _store_record(store),
                   history=[{k: h[k] for k in MODEL_HISTORY_KEYS} for h in result.history])
    if warm is not None:
        summary["init_model"] = warm
    Cs = slv.Cs
    if len(Cs) > 1:          # a path of C values: one model per C (rows of the result)
        m = len(result.coef) // len(Cs)
        model = [LinearModel(result.coef[i * m:(i + 1) * m],
                             np.asarray(result.intercept[i * m:(i + 1) * m], dtype=np.float64),
                             store.classes, store.task,
                             {"solver": solver, **slv.get_params(), "C": C}, summary,
                             problem=dataclasses.replace(problem, C=C).to_dict())
                 for i, C in enumerate(Cs)]
    else:
        model = LinearModel(result.coef, np.asarray(result.intercept, dtype=np.float64),
                            store.classes, store.task, {"solver": solver, **slv.get_params()},
                            summary, problem=problem.to_dict())
    log.info("%s finished: %d iterations, %.2f passes, %s %.3g, converged %s, %.2fs", solver,
             result.n_iter, result.passes, slv.certificate, result.stop_value,
             result.converged, seconds)
    return model, result


def _train_auto(store, run: dict, params: dict):
    """:func:`train` with ``solver="auto"``: the solvers ranked for the store and the
    parameters (:func:`streamsvm._auto.choose`), the first whose needs fit ``memory`` trained
    (one that refuses the budget before its first pass gives way to the next), and the
    reason kept in each model's ``summary["chosen_because"]``."""
    from ._auto import choose
    from .exceptions import BudgetTooSmallError
    from .io import StoreMeta, open_store
    if not isinstance(store, StoreMeta):
        store = open_store(store, storage_options=run["storage_options"])
    ranked, because = choose(store, params, memory=run["memory"],
                             cluster=run["scheduler"] is not None)
    refused: list = []
    for solver in ranked:
        try:
            out = train(store, solver=solver, **run, **params)
        except BudgetTooSmallError as exc:
            refused.append((solver, exc))
            log.info("--solver auto: %s refused the memory budget, trying the next", solver)
            continue
        if refused:
            because += (f"; {', '.join(s for s, _ in refused)} refused the memory budget: "
                        f"the next ranked, {solver}")
        for m in out[0] if isinstance(out[0], list) else [out[0]]:
            m.summary["chosen_because"] = because
        return out
    raise refused[0][1]

