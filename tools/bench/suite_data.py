"""The solver suite's data sets: the real ones of ``../shared/datasets`` and the synthetic
``synth-<rows>[-f<features>]`` (``tools/make_synthetic.py``), each converted once into a store
(``--shuffle --seed 0``) with its text and Vowpal Wabbit copies under the work directory, and
the :class:`Evaluator` that grades every method's weights on them.
"""

from __future__ import annotations

import os
import random
import shutil
import time

from ._common import DATASETS, MB, log
from .evaluate import ObjectiveAccumulator

__all__ = ["REAL", "SYNTH", "synth_rows", "synth_features", "dataset_spec", "split_tail",
           "libsvm_to_vw", "prepare_dataset", "Evaluator"]

#: The real data sets in ../shared/datasets (train file, test file or None).
REAL = {
    "a9a": ("a9a/a9a", "a9a/a9a.t"),
    "mushrooms": ("mushrooms/mushrooms", None),
    "dna": ("dna/dna.scale", "dna/dna.scale.t"),
    "letter": ("letter/letter.scale", "letter/letter.scale.t"),
    "pendigits": ("pendigits/pendigits", "pendigits/pendigits.t"),
    "usps": ("usps/usps.t", None),
    "vowel": ("vowel/vowel.scale", None),
}
#: Shape of the synthetic data (tools/make_synthetic.py): ~24.5 non-zeros per row after
#: de-duplication, so 10^7 rows decode to ~2.1 GB (int32 indices + float32 values).
SYNTH = dict(features=100_000, nnz_per_row=30, classes=2, noise=0.05, zipf=1.1, seed=0)
SYNTH_TEST_ROWS = 20_000


def synth_rows(name: str) -> int | None:
    """Rows of a synthetic data set name ``synth-1e6`` / ``synth-250000`` /
    ``synth-1e6-f2e6``; None if not one."""
    if not name.startswith("synth-"):
        return None
    return int(float(name[len("synth-"):].partition("-f")[0]))


def synth_features(name: str) -> int:
    """Features of a synthetic data set: ``synth-<rows>-f<features>`` (text-like sets with
    more features than rows), else the default ``SYNTH["features"]``."""
    _, sep, f = name[len("synth-"):].partition("-f")
    return int(float(f)) if sep else SYNTH["features"]


def dataset_spec(name: str, cfg: dict) -> dict:
    """Static description of a data set (paths are filled in by :func:`prepare_dataset`)."""
    rows = synth_rows(name)
    if rows is not None:
        ooc = cfg.get("ooc_rows") is not None and rows >= cfg["ooc_rows"]
        return {"name": name, "kind": "synthetic", "rows": rows, "ooc": ooc,
                "synthetic": dict(SYNTH, nnz_per_row=cfg.get("synthetic_nnz", SYNTH["nnz_per_row"]),
                                  features=synth_features(name), test_rows=SYNTH_TEST_ROWS)}
    if name not in REAL:
        raise SystemExit(f"bench.py suite: unknown data set {name!r}; known: {', '.join(REAL)}, "
                         f"synth-<rows>")
    train, test = REAL[name]
    return {"name": name, "kind": "real", "ooc": False,
            "train_text": os.path.join(DATASETS, train),
            "test_text": os.path.join(DATASETS, test) if test else None}


def split_tail(path: str, n_tail: int, tail_path: str) -> int:
    """Move the last ``n_tail`` lines of ``path`` into ``tail_path`` (truncating ``path``).

    Returns the byte offset where the tail started.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        pos, count, block = size, 0, 1 << 20
        # the file ends with '\n': the (n_tail + 1)-th newline from the end starts the tail
        while pos > 0:
            step = min(block, pos)
            pos -= step
            f.seek(pos)
            buf = f.read(step)
            for i in range(len(buf) - 1, -1, -1):
                if buf[i] == 10:
                    count += 1
                    if count == n_tail + 1:
                        start = pos + i + 1
                        break
            else:
                continue
            break
        else:
            start = 0
        f.seek(start)
        with open(tail_path + ".partial", "wb") as out:
            shutil.copyfileobj(f, out, 1 << 22)
    os.replace(tail_path + ".partial", tail_path)
    os.truncate(path, start)
    return start


def libsvm_to_vw(src: str, dst: str, classes, task: str, shuffle_seed=None,
                 max_shuffle_bytes: int = 1 << 29) -> int:
    """Write VW text: ``label | idx:val ...`` (1-based libsvm indices as VW feature names).

    Binary labels become ``1`` (the larger original label) and ``-1``; multiclass labels the
    class index + 1 (``--oaa``). Files under ``max_shuffle_bytes`` are shuffled with
    ``shuffle_seed`` (the store is shuffled at conversion; VW and SGD learn online, so they
    should not see a sorted file); larger files (the synthetic ones, i.i.d. rows) keep their
    order. Returns the number of rows written.
    """
    keys = {}
    for i, c in enumerate(classes):
        lab = ("1" if i == len(classes) - 1 else "-1") if task == "binary" else str(i + 1)
        keys[float(c)] = lab.encode()
    shuffle = shuffle_seed is not None and os.path.getsize(src) <= max_shuffle_bytes
    n = 0
    with open(src, "rb") as f, open(dst + ".partial", "wb") as out:
        if shuffle:
            lines = [ln for ln in f.read().split(b"\n") if ln.strip()]
            random.Random(shuffle_seed).shuffle(lines)
            it = iter(lines)
        else:
            it = (ln.rstrip(b"\n") for ln in f)
        buf = []
        for line in it:
            if not line.strip():
                continue
            head, _, rest = line.partition(b" ")
            buf.append(keys[float(head)] + b" | " + rest.strip())
            n += 1
            if len(buf) >= 65536:
                out.write(b"\n".join(buf) + b"\n")
                buf.clear()
        if buf:
            out.write(b"\n".join(buf) + b"\n")
    os.replace(dst + ".partial", dst)
    return n


def prepare_dataset(spec: dict, work: str, *, need_vw: bool) -> dict:
    """Make (or reuse) the store, the text files and the VW copies of one data set."""
    import streamsvm as ss
    from streamsvm.io import read_meta
    name = spec["name"]
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    ds = dict(spec)
    prep = {}
    if spec["kind"] == "synthetic":
        from tools.make_synthetic import make_synthetic
        sy = spec["synthetic"]
        tag = f"r{spec['rows']}_f{sy['features']}_k{sy['nnz_per_row']}_s{sy['seed']}"
        ds["train_text"] = os.path.join(d, f"train_{tag}.svm")
        ds["test_text"] = os.path.join(d, f"test_{tag}.svm")
        if not (os.path.exists(ds["train_text"]) and os.path.exists(ds["test_text"])):
            log(f"{name}: generating {spec['rows'] + sy['test_rows']:,} rows")
            t0 = time.perf_counter()
            make_synthetic(ds["train_text"], rows=spec["rows"] + sy["test_rows"],
                           features=sy["features"], nnz_per_row=sy["nnz_per_row"],
                           classes=sy["classes"], noise=sy["noise"], zipf=sy["zipf"],
                           seed=sy["seed"], progress=False)
            split_tail(ds["train_text"], sy["test_rows"], ds["test_text"])
            prep["generate_s"] = time.perf_counter() - t0
        n_features, dtype = sy["features"], "float32"
        chunk_rows = 65536
    else:
        n_features, dtype = None, "float64"
        chunk_rows = 4096
    store_path = os.path.join(d, "train.zarr")
    meta = read_meta(store_path) if os.path.exists(store_path) else None
    src_size = os.path.getsize(ds["train_text"])
    from streamsvm.io import FORMAT_VERSION
    ok = (meta is not None and meta.get("complete")
          and meta.get("format_version") == FORMAT_VERSION
          and meta.get("source", {}).get("files", [{}])[0].get("size") == src_size
          and meta.get("chunk_rows") == chunk_rows)
    if not ok:
        log(f"{name}: converting {src_size / MB:,.1f} MB of text (--shuffle)")
        t0 = time.perf_counter()
        scratch = os.path.join(d, "shuffle-scratch")
        os.makedirs(scratch, exist_ok=True)      # convert() does not create it
        ss.convert([ds["train_text"]], store_path, chunk_rows=chunk_rows, shuffle=True, seed=0,
                   n_features=n_features, dtype=dtype, overwrite=True,
                   scratch_dir=scratch)
        prep["convert_s"] = time.perf_counter() - t0
        shutil.rmtree(scratch, ignore_errors=True)
    store = ss.open_store(store_path)
    info = store.info()
    ds.update(store=store_path, n_rows=store.n_rows, n_features=store.n_features,
              nnz=store.nnz, task=store.task, classes=[float(c) for c in store.classes],
              chunk_rows=store.chunk_rows, n_chunks=store.n_chunks, dtype=str(store.dtype),
              store_bytes_on_disk=info["bytes_on_disk"], decoded_bytes=info["bytes_uncompressed"],
              text_bytes=src_size, prep=prep)
    if need_vw:
        ds["vw_train"] = os.path.join(d, "train.vw")
        if not os.path.exists(ds["vw_train"]):
            t0 = time.perf_counter()
            libsvm_to_vw(ds["train_text"], ds["vw_train"], ds["classes"], ds["task"],
                         shuffle_seed=0)
            prep["vw_text_s"] = time.perf_counter() - t0
        if ds["task"] == "multiclass" and ds.get("test_text"):
            ds["vw_test"] = os.path.join(d, "test.vw")
            if not os.path.exists(ds["vw_test"]):
                libsvm_to_vw(ds["test_text"], ds["vw_test"], ds["classes"], ds["task"])
    return ds


class Evaluator:
    """Grades weights on one data set: objective and accuracy on train, accuracy on test.

    Data that fit in memory are loaded once (train from the store — the exact values every
    method saw — test from its libsvm file); out-of-core stores are streamed chunk by chunk,
    all weights of one run in the same pass.
    """

    def __init__(self, ds: dict):
        import numpy as np
        import scipy.sparse as sp
        import streamsvm as ss
        self.ds = ds
        self.store = ss.open_store(ds["store"])
        self.task = ds["task"]
        self.k = 1 if self.task == "binary" else len(ds["classes"])
        self.train = None
        if not ds.get("ooc"):
            parts = list(self._chunks())
            self.train = (sp.vstack([p[0] for p in parts]).tocsr(),
                          np.concatenate([p[1] for p in parts]))
        self.test = None
        if ds.get("test_text"):
            self.test = self._load_test(ds["test_text"])

    def _chunks(self):
        import scipy.sparse as sp
        d = self.store.n_features
        for ch in self.store.iter_chunks():
            X = sp.csr_matrix((ch.data.astype("float64"), ch.indices, ch.indptr),
                              shape=(ch.n_rows, d))
            yield X, ch.y

    def _load_test(self, path):
        import numpy as np
        from sklearn.datasets import load_svmlight_file
        X, y = load_svmlight_file(path, dtype=np.float64)
        classes = np.asarray(self.ds["classes"])
        if self.task == "binary":
            yy = np.where(y == classes[-1], 1.0, -1.0)
        else:
            idx = np.searchsorted(classes, y)
            known = (idx < len(classes)) & (classes[np.minimum(idx, len(classes) - 1)] == y)
            yy = np.where(known, idx, -1)      # unknown test labels count as errors
        return X.tocsr(), yy

    def evaluate(self, weights: list, C: float, loss: str | None) -> list[dict]:
        """``weights``: list of (W, b); returns [{primal, train_accuracy, test_accuracy}]."""
        accs = [ObjectiveAccumulator(W, b, C=C, loss=loss, task=self.task) for W, b in weights]
        if self.train is not None:
            for a in accs:
                a.add(*self.train)
        else:
            for X, y in self._chunks():
                for a in accs:
                    a.add(X, y)
        out = []
        for (W, b), a in zip(weights, accs):
            r = {"primal": a.primal, "train_accuracy": a.accuracy, "test_accuracy": None}
            if self.test is not None:
                t = ObjectiveAccumulator(W, b, C=C, loss=None, task=self.task)
                t.add(*self.test)
                r["test_accuracy"] = t.accuracy
            out.append(r)
        return out
