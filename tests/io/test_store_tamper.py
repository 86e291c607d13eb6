"""Tampering: a store's attributes edited and sealed again (a valid checksum) are not believed.

For every key of a store's ``streamsvm`` attributes, plausible edits (the issue's cases among
them), a deletion, a null and a value of another JSON type, each sealed again so the
checksum passes. Then ``streamsvm verify``, ``train`` and ``evaluate`` through the CLI: each
ends with exit 2 and a message naming the attribute, or gives exactly the untampered result
(the same model file bytes, the same evaluate output, a sound verify). Never exit 0 with
another answer, never a traceback (an exception out of ``main``). On an a9a-like binary store
of ones, a binary store with values, and a letter-like multiclass store.
"""

from __future__ import annotations

import copy
import json
import shutil

import numpy as np
import pytest

from streamsvm.cli import main
from streamsvm.data import sample_path

from .helpers import reseal

TRAIN = ["--solver", "dcd", "--max-passes", "4", "--class-weight", "balanced",
         "--memory", "64MB", "-q"]


def _text(rows: int, n_features: int, labels, probs, seed: int) -> str:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((len(labels), n_features))
    lines = []
    for _ in range(rows):
        ids = np.sort(rng.choice(n_features, size=int(rng.integers(1, 9)), replace=False))
        vals = np.round(rng.standard_normal(len(ids)), 3)
        k = rng.choice(len(labels), p=probs) if rng.random() < 0.3 else \
            int(np.argmax(w[:, ids] @ vals))
        lines.append(f"{labels[k]} " + " ".join(f"{i + 1}:{v:g}" for i, v in zip(ids, vals)))
    return "\n".join(lines) + "\n"


def _a9a_head(rows: int) -> str:
    import bz2
    with bz2.open(sample_path("a9a"), "rt") as f:
        return "".join(next(f) for _ in range(rows))


@pytest.fixture(scope="module", params=["a9a-ones", "binary-values", "letter-multiclass"])
def clean(request, tmp_path_factory):
    """(store path, its attributes, the clean results) for one kind of store."""
    kind = request.param
    root = tmp_path_factory.mktemp(kind)
    text = {"a9a-ones": lambda: _a9a_head(500),
            "binary-values": lambda: _text(500, 30, [-1, 1], [0.75, 0.25], 1),
            "letter-multiclass": lambda: _text(500, 16, [1, 2, 3, 5, 8, 13],
                                               [0.3, 0.25, 0.2, 0.1, 0.1, 0.05], 2)}[kind]()
    (root / "in.svm").write_text(text)
    src = root / "clean.zarr"
    assert main(["convert", str(root / "in.svm"), str(src), "--chunk-rows", "60", "-q"]) == 0
    import json
    attrs = json.loads((src / "zarr.json").read_text())["attributes"]["streamsvm"]
    assert attrs["binary_values"] is (kind == "a9a-ones")
    case = root / "case.zarr"
    shutil.copytree(src, case)
    results = _run(root, case)
    assert [r[0] for r in results.values()] == [0, 0, 0], results
    shutil.rmtree(case)
    return root, src, attrs, results


def _run(root, case) -> dict:
    """Exit code and output of verify, train and evaluate on ``case``."""
    import contextlib
    import io
    out = {}
    model = root / "m.json"
    model.unlink(missing_ok=True)
    cmds = {"verify": ["verify", str(case), "-q"],
            "train": ["train", str(case), "-o", str(model), *TRAIN],
            "evaluate": ["evaluate", str(root / "clean-model.json"), str(case), "--json"]}
    for name, argv in cmds.items():
        so, se = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
            rc = main(argv)                     # anything but StreamSVMError: a traceback
        result = so.getvalue()
        if name == "train":
            result = model.read_bytes() if rc == 0 else None
            if rc == 0 and not (root / "clean-model.json").exists():
                shutil.copy(model, root / "clean-model.json")
        out[name] = (rc, result, se.getvalue())
    return out


def _drop(key):
    return lambda a: a.pop(key)


def _set(key, value):
    return lambda a: a.__setitem__(key, value)


def _swap_counts(a):
    keys = list(a["label_counts"])
    vals = [a["label_counts"][k] for k in keys]
    a["label_counts"] = dict(zip(keys, vals[::-1]))


def _move_entries(a):
    a["chunk_nnz"][0] += 3
    a["chunk_nnz"][1] -= 3


def _rechunk(a):
    """chunk_rows doubled with n_chunks, chunk_nnz and chunk_max_sq_norm made to agree."""
    nnz, sq = a["chunk_nnz"], a["chunk_max_sq_norm"]
    a["chunk_rows"] *= 2
    a["n_chunks"] = len(nnz[::2])
    a["chunk_nnz"] = [sum(nnz[i:i + 2]) for i in range(0, len(nnz), 2)]
    a["chunk_max_sq_norm"] = [max(sq[i:i + 2]) for i in range(0, len(sq), 2)]


def _shift_classes(a):
    a["classes"] = [c + 1 for c in a["classes"]]


def _option(key, value):
    return lambda a: a["options"].__setitem__(key, value)


# (attribute named, edit, must be loud): the cases and other plausible edits
EDITS = {
    "binary_values true": ("binary_values", _set("binary_values", True), True),
    "binary_values false": ("binary_values", _set("binary_values", False), True),
    "n_chunks halved": ("n_chunks", lambda a: a.update(n_chunks=a["n_chunks"] // 2), True),
    "classes reversed": ("classes", lambda a: a["classes"].reverse(), True),
    "classes shifted": ("classes", _shift_classes, True),
    "classes missing": ("classes", _drop("classes"), True),
    "label_map reversed": ("label_map", lambda a: a.update(
        label_map=dict(zip(a["label_map"], list(a["label_map"].values())[::-1]))), True),
    "label_counts swapped": ("label_counts", _swap_counts, False),
    "label_counts one moved": ("label_counts", lambda a: a["label_counts"].update(
        {k: v + (1 if i == 0 else -1 if i == 1 else 0)
         for i, (k, v) in enumerate(a["label_counts"].items())}), False),
    "chunk_nnz entries moved": ("chunk_nnz", _move_entries, False),
    "chunk_rows doubled": ("chunk_rows", lambda a: a.update(chunk_rows=a["chunk_rows"] * 2),
                           True),
    "chunk_rows re-chunked": ("chunk_rows", _rechunk, True),
    "chunk_max_sq_norm doubled": ("chunk_max_sq_norm", lambda a: a.update(
        chunk_max_sq_norm=[2 * v for v in a["chunk_max_sq_norm"]]), False),
    "array_meta_crc32c missing": ("array_meta_crc32c", _drop("array_meta_crc32c"), True),
    "array_meta_crc32c one missing": ("array_meta_crc32c",
                                      lambda a: a["array_meta_crc32c"].pop("y"), True),
    "array_meta_crc32c changed": ("array_meta_crc32c", lambda a: a["array_meta_crc32c"].update(
        indptr=a["array_meta_crc32c"]["indptr"] ^ 1), True),
    "n_rows minus one": ("n_rows", lambda a: a.update(n_rows=a["n_rows"] - 1), True),
    "nnz plus one": ("nnz", lambda a: a.update(nnz=a["nnz"] + 1), True),
    "n_features plus one": ("n_features", lambda a: a.update(n_features=a["n_features"] + 1),
                            True),
    "n_features minus one": ("n_features", lambda a: a.update(n_features=a["n_features"] - 1),
                             True),
    "max_index minus one": ("max_index", lambda a: a.update(max_index=a["max_index"] - 1),
                            True),
    "task flipped": ("task", lambda a: a.update(
        task="binary" if a["task"] == "multiclass" else "multiclass"), True),
    "dtype float64": ("dtype", _set("dtype", "float64"), True),
    "index_dtype int64": ("index_dtype", _set("index_dtype", "int64"), True),
    "format_version 2": ("format_version", _set("format_version", 2), True),
    "complete false": ("complete", _set("complete", False), True),
    "options chunk_rows": ("options", _option("chunk_rows", 7), True),
    "options n_features": ("options", _option("n_features", 1000), True),
    "options seed": ("options", _option("seed", 99), False),
    "source files": ("source", lambda a: a["source"]["files"][0].update(url="/elsewhere.svm"),
                     False),
    "store_id": ("store_id", _set("store_id", "0" * 32), False),
    "converter version": ("converter", lambda a: a["converter"].update(version="0.0.1"),
                          False),
    "n_underflow": ("n_underflow", _set("n_underflow", 12), False),
}


def _generic(attrs) -> dict:
    """Every key deleted, set to null, and set to a value of another JSON type."""
    out = {}
    for key in attrs:
        if key == "checksum":
            continue
        other = 7 if isinstance(attrs[key], str) else "7"
        out[f"{key} deleted"] = (key, _drop(key), True)
        out[f"{key} null"] = (key, _set(key, None), True)
        out[f"{key} {type(other).__name__}"] = (key, _set(key, other), key != "store_id")
    return out


def _tampered(root, src, edit) -> dict:
    """:func:`_run` on a copy of ``src`` edited by ``edit`` and sealed again."""
    case = root / "case.zarr"
    shutil.copytree(src, case)
    try:
        reseal(case, edit)
        return _run(root, case)
    finally:
        shutil.rmtree(case)


def _answer(cmd, result):
    """What must not change: the output, but of a model file its provenance left out (its
    summary's ``store``: the store's id and source files, which say what the attributes say,
    and that field's checksum); every other byte of the model is compared."""
    if cmd != "train":
        return result
    doc = json.loads(result)
    doc["summary"].pop("store", None)
    doc["checksums"].pop("summary", None)
    return doc


def _check_case(root, src, results, what, key, edit, loud) -> None:
    got = _tampered(root, src, edit)
    for cmd, (rc, result, err) in got.items():
        assert rc in (0, 2), f"{what}, {cmd}: exit {rc}: {err}"
        if rc == 2:
            assert key in err, f"{what}, {cmd}: the message does not name {key!r}: {err}"
            if cmd != "verify":
                assert err.count("\n") == 1 and err.startswith(f"streamsvm {cmd}: error: "), err
        else:
            assert _answer(cmd, result) == _answer(cmd, results[cmd][1]), \
                f"{what}, {cmd}: exit 0 with another answer"
    if loud:
        assert all(rc == 2 for rc, _, _ in got.values()), \
            f"{what}: exit {[(cmd, r[0]) for cmd, r in got.items()]}"


def test_every_attribute_edit_is_loud_or_harmless(clean):
    root, src, attrs, results = clean
    cases = dict(EDITS)
    cases.update(_generic(attrs))
    for what, (key, edit, loud) in cases.items():
        edited = copy.deepcopy(attrs)
        try:
            edit(edited)
        except (KeyError, IndexError, TypeError):
            continue                   # the edit does not apply to this store
        if edited == attrs:
            continue                   # nor does one that changes nothing
        _check_case(root, src, results, what, key, edit, loud)
    # the keys a reader relies on are all covered by a generic case
    assert {"n_rows", "n_features", "nnz", "chunk_rows", "n_chunks", "task", "classes",
            "label_map", "label_counts", "binary_values", "dtype", "index_dtype", "chunk_nnz",
            "chunk_max_sq_norm", "array_meta_crc32c", "store_id", "format_version",
            "max_index"} <= set(attrs)


@pytest.mark.parametrize("what", ["label_counts swapped", "chunk_nnz entries moved"])
def test_edits_only_the_data_can_contradict_stop_train(clean, what):
    """label_counts (counted in y) and chunk_nnz (indptr at each chunk boundary) are
    contradicted by training, not by opening: exit 2 naming them, and verify too."""
    root, src, attrs, results = clean
    key, edit, _ = EDITS[what]
    got = _tampered(root, src, edit)
    assert got["train"][0] == 2 and key in got["train"][2], got["train"]
    assert got["verify"][0] == 2 and key in got["verify"][2], got["verify"]


def test_checksum_not_resealed_is_refused(clean, tmp_path):
    import json
    root, src, attrs, results = clean
    case = tmp_path / "case.zarr"
    shutil.copytree(src, case)
    doc = json.loads((case / "zarr.json").read_text())
    doc["attributes"]["streamsvm"]["n_chunks"] += 1
    (case / "zarr.json").write_text(json.dumps(doc))
    assert main(["train", str(case), "-o", str(tmp_path / "m.json"), "-q"]) == 2
    assert not (tmp_path / "m.json").exists()


def _small_store(path, chunk_rows=50):
    import scipy.sparse as sp
    from streamsvm.io._writer import write_store
    X = sp.random(300, 20, density=0.3, format="csr", random_state=4)
    y = np.random.default_rng(4).choice([-1.0, 1.0], 300, p=[0.7, 0.3])
    return write_store(path, X, y, chunk_rows=chunk_rows)


def test_row_range_reads_check_every_chunk_boundary_they_cover(tmp_path):
    """As the scheduler reads (row ranges, not chunk ids): a range covering a boundary that
    chunk_nnz misplaces stops; one covering only sound boundaries reads."""
    from streamsvm import open_store
    from streamsvm.exceptions import StoreCorruptError
    path = tmp_path / "s.zarr"
    _small_store(path)

    def move(a):
        a["chunk_nnz"][1] += 2
        a["chunk_nnz"][2] -= 2

    reseal(path, move)
    store = open_store(path)                 # the attributes agree with each other
    assert store.read_rows(0, 99).n_rows == 99 and store.read_rows(101, 300).n_rows == 199
    for start, stop in ((90, 110), (100, 101), (0, 300)):
        with pytest.raises(StoreCorruptError, match=r"before row 100, attribute 'chunk_nnz'"):
            store.read_rows(start, stop)
    with pytest.raises(StoreCorruptError, match="chunk_nnz"):
        store.read_chunk(2)


def test_label_counts_are_counted_when_first_used(tmp_path):
    """Opening reads no labels; the first use of label_counts counts y once."""
    from streamsvm import open_store
    from streamsvm.exceptions import StoreCorruptError
    path = tmp_path / "s.zarr"
    clean = _small_store(path)
    want = clean.label_counts
    reseal(path, lambda a: a.update(label_counts=dict(zip(a["label_counts"],
                                                          list(a["label_counts"].values())[::-1]))))
    store = open_store(path)
    assert store.read_rows(0, 10).n_rows == 10
    with pytest.raises(StoreCorruptError, match=r"attribute 'label_counts' is .*, but the "
                                                r"labels in array 'y' count"):
        store.label_counts
    reseal(path, lambda a: a.update(label_counts=want))
    store = open_store(path)
    assert store.label_counts == want and store._labels_checked
    import pickle
    assert pickle.loads(pickle.dumps(store))._labels_checked     # not counted again
