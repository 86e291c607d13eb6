"""Tampered and damaged model files (issue 33, item 4 and its acceptance): for each field
of a saved model a plausible edit; ``streamsvm evaluate`` and ``predict`` exit 2 with one
line naming the field, or give exactly the untampered result. Never exit 0 with another
answer, never a traceback. Also every single-bit flip of a model file, truncations, files
that are no model at all, and the memory a large model takes to load."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import numpy as np
import pytest

import streamsvm as ss
from streamsvm.cli import main
from streamsvm.exceptions import ModelError, StreamSVMError
from streamsvm.model import MODEL_FORMAT, LinearModel, load_model


def _xy(labels, n=300, d=8, seed=0):
    rng = np.random.default_rng(seed)
    y = np.asarray(labels, dtype=np.float64)[rng.integers(0, len(labels), n)]
    X = rng.standard_normal((n, d))
    for i, c in enumerate(labels):
        X[y == c, i % d] += 2.0
    return X, y


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A multiclass (one-vs-rest, class weights) and a binary model, a libsvm test file
    and the untampered results of ``evaluate --json`` and ``predict`` on it."""
    d = tmp_path_factory.mktemp("tamper")
    out = {}
    for name, labels in (("multiclass", [-1, 2, 5]), ("binary", [-1, 1])):
        X, y = _xy(labels)
        ss.LinearSVC(C=1.0, class_weight={2: 2.0} if len(labels) > 2 else None).fit(X, y) \
            .save(d / f"{name}.json")
        Xt, yt = _xy(labels, n=100, seed=1)
        with open(d / f"{name}.txt", "w") as f:
            for label, row in zip(yt, Xt):
                f.write(f"{label:g} " + " ".join(f"{j + 1}:{float(v)!r}" for j, v in enumerate(row))
                        + "\n")
        res = _results(d / f"{name}.json", d / f"{name}.txt", d)
        assert [rc for rc, _, _ in res] == [0, 0, 0], res
        out[name] = (d / f"{name}.json", d / f"{name}.txt", res)
    return out


def _results(model, data, tmp):
    """``(exit status, stderr, output)`` of ``evaluate --json``, ``predict`` and ``predict
    --scores`` (output: what it printed or wrote; None when it wrote no file)."""
    import contextlib
    import io
    runs = []
    for args in (["evaluate", str(model), str(data), "--json"],
                 ["predict", str(model), str(data), "-o", str(tmp / "p.txt")],
                 ["predict", str(model), str(data), "-o", str(tmp / "s.txt"), "--scores"]):
        err, out = io.StringIO(), io.StringIO()
        (tmp / "p.txt").unlink(missing_ok=True)
        (tmp / "s.txt").unlink(missing_ok=True)
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc = main(args)
        written = tmp / args[4] if args[0] == "predict" else None
        runs.append((rc, err.getvalue(), out.getvalue() if written is None else
                     written.read_text() if written.exists() else None))
    return runs


def _b64(a) -> str:
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f8").tobytes()).decode()


def _weights(d, key):
    return np.frombuffer(base64.b64decode(d[key]["base64"]), "<f8").reshape(d[key]["shape"])


def _set(key, value):
    def edit(d):
        d[key] = value
    return edit


def _sub(key, sub, value):
    def edit(d):
        d[key][sub] = value
    return edit


def _drop(key, sub=None):
    def edit(d):
        if sub is None:
            del d[key]
        else:
            del d[key][sub]
    return edit


def _array(key, change):
    def edit(d):
        a = _weights(d, key).copy()
        change(a)
        d[key]["base64"] = _b64(a)
    return edit


def _text(change):
    def edit(d):
        d["__text__"] = change
    return edit


def _nan(a):
    a.reshape(-1)[5] = np.nan


def _inf(a):
    a.reshape(-1)[-1] = -np.inf


def _swap_rows(a):
    a[[0, 1]] = a[[1, 0]]


def _coef_char(d):
    """Another base64 character in the middle of coef (still valid base64)."""
    s = d["coef"]["base64"]
    i = len(s) // 2
    d["coef"]["base64"] = s[:i] + ("B" if s[i] != "B" else "C") + s[i + 1:]


# (edit, needles: the line names one of them); the multiclass model: classes -1, 2, 5,
# 8 features, coef 3 x 8
EDITS = {
    "format/3": (_set("format", "streamsvm-linear-model/3"), ["field 'labels': missing"]),
    "format/4": (_set("format", "streamsvm-linear-model/4"), ["field 'format'"]),
    "format/1": (_set("format", "streamsvm-linear-model/1"), ["field 'format'"]),
    "format-number": (_set("format", 2), ["field 'format'"]),
    "format-missing": (_drop("format"), ["field 'format'"]),
    "task-binary": (_set("task", "binary"), ["task 'binary'", "field 'task'"]),
    "task-bogus": (_set("task", "regression"), ["field 'task'"]),
    "task-missing": (_drop("task"), ["field 'task'"]),
    "classes-reversed": (_set("classes", [5.0, 2.0, -1.0]), ["field 'classes'"]),
    "classes-swapped": (_set("classes", [2.0, -1.0, 5.0]), ["field 'classes'"]),
    "classes-relabelled": (_set("classes", [-1.0, 2.0, 6.0]), ["field 'classes'"]),
    "classes-strings": (_set("classes", ["-1", "2", "5"]), ["field 'classes'"]),
    "classes-nan": (_set("classes", [-1.0, 2.0, float("nan")]), ["field 'classes'"]),
    "classes-duplicate": (_set("classes", [-1.0, 2.0, 2.0]), ["field 'classes'"]),
    "classes-two": (_set("classes", [-1.0, 2.0]), ["field 'coef'", "field 'classes'"]),
    "classes-four": (_set("classes", [-1.0, 2.0, 5.0, 7.0]),
                     ["field 'coef'", "field 'classes'"]),
    "classes-missing": (_drop("classes"), ["field 'classes'"]),
    "n_features+1": (_set("n_features", 9), ["field 'coef'", "field 'n_features'"]),
    "n_features-1": (_set("n_features", 7), ["field 'coef'", "field 'n_features'"]),
    "n_features-huge": (_set("n_features", 10 ** 12), ["field 'coef'", "field 'n_features'"]),
    "n_features-negative": (_set("n_features", -8), ["field 'n_features'"]),
    "n_features-string": (_set("n_features", "8"), ["field 'n_features'"]),
    "n_features-float": (_set("n_features", 8.0), ["field 'n_features'"]),
    "n_features-missing": (_drop("n_features"), ["field 'n_features'"]),
    "params-C": (_sub("params", "C", 10.0), ["field 'params'"]),
    "params-loss": (_sub("params", "loss", "hinge"), ["field 'params'"]),
    "params-solver": (_sub("params", "solver", 5), ["field 'params'"]),
    "params-list": (_set("params", []), ["field 'params'"]),
    "params-missing": (_drop("params"), ["field 'params'"]),
    "problem-C": (_sub("problem", "C", 10.0), ["field 'problem'"]),
    "problem-C-negative": (_sub("problem", "C", -1.0), ["field 'problem'"]),
    "problem-loss": (_sub("problem", "loss", "hinge"), ["field 'problem'"]),
    "problem-loss-bogus": (_sub("problem", "loss", "log"), ["field 'problem'"]),
    "problem-layout": (_sub("problem", "layout", "binary"), ["field 'problem'"]),
    "problem-joint": (_sub("problem", "layout", "joint"), ["field 'problem'"]),
    "problem-bias": (_sub("problem", "bias", 0.0), ["field 'problem'"]),
    "problem-power": (_sub("problem", "power", 0.5), ["field 'problem'"]),
    "problem-class_weight": (_sub("problem", "class_weight", {"2": 3.0}), ["field 'problem'"]),
    "problem-class_weight-label": (_sub("problem", "class_weight", {"7": 2.0}),
                                   ["field 'problem'"]),
    "problem-class_weight-balanced": (_sub("problem", "class_weight", "balanced"),
                                      ["field 'problem'"]),
    "problem-extra": (_sub("problem", "margin", 2.0), ["field 'problem'"]),
    "problem-no-loss": (_drop("problem", "loss"), ["field 'problem'"]),
    "problem-null": (_set("problem", None), ["field 'problem'"]),
    "problem-missing": (_drop("problem"), ["field 'problem'"]),
    "summary-passes": (_sub("summary", "passes", 1.0), ["field 'summary'"]),
    "summary-converged": (_sub("summary", "converged", "yes"), ["field 'summary'"]),
    "summary-n_iter": (_sub("summary", "n_iter", -3), ["field 'summary'"]),
    "summary-string": (_set("summary", "done"), ["field 'summary'"]),
    "summary-missing": (_drop("summary"), ["field 'summary'"]),
    "tie_break-order": (_set("tie_break", [5.0, 2.0, -1.0]), ["field 'tie_break'"]),
    "tie_break-short": (_set("tie_break", [5.0, 2.0]), ["field 'tie_break'"]),
    "tie_break-other": (_set("tie_break", [5.0, 2.0, 3.0]), ["field 'tie_break'"]),
    "tie_break-missing": (_drop("tie_break"), ["field 'tie_break'"]),
    "coef-dtype-f4": (_sub("coef", "dtype", "<f4"), ["field 'coef'"]),
    "coef-dtype-big-endian": (_sub("coef", "dtype", ">f8"), ["field 'coef'"]),
    "coef-shape-transposed": (_sub("coef", "shape", [8, 3]), ["field 'coef'"]),
    "coef-shape-1d": (_sub("coef", "shape", [24]), ["field 'coef'"]),
    "coef-shape-rows": (_sub("coef", "shape", [2, 8]), ["field 'coef'"]),
    "coef-nan": (_array("coef", _nan), ["field 'coef'"]),
    "coef-inf": (_array("coef", _inf), ["field 'coef'"]),
    "coef-rows-swapped": (_array("coef", _swap_rows), ["field 'coef'"]),
    "coef-scaled": (_array("coef", lambda a: a.__imul__(2.0)), ["field 'coef'"]),
    "coef-zero-weight": (_array("coef", lambda a: a.__setitem__((2, 3), 0.0)), ["field 'coef'"]),
    "coef-char": (_coef_char, ["field 'coef'"]),
    "coef-truncated": (lambda d: d["coef"].__setitem__("base64", d["coef"]["base64"][:-4]),
                       ["field 'coef'"]),
    "coef-longer": (lambda d: d["coef"].__setitem__("base64", d["coef"]["base64"] + "AAAA"),
                    ["field 'coef'"]),
    "coef-not-base64": (lambda d: d["coef"].__setitem__("base64", "!" + d["coef"]["base64"][1:]),
                        ["field 'coef'"]),
    "coef-padding-inside": (lambda d: d["coef"].__setitem__(
        "base64", d["coef"]["base64"][:40] + "AA==" + d["coef"]["base64"][44:]),
        ["field 'coef'"]),
    "coef-empty": (_sub("coef", "base64", ""), ["field 'coef'"]),
    "coef-list": (lambda d: d.__setitem__("coef", _weights(d, "coef").tolist()),
                  ["field 'coef'"]),
    "coef-extra-key": (_sub("coef", "order", "F"), ["field 'coef'"]),
    "coef-no-shape": (_drop("coef", "shape"), ["field 'coef'"]),
    "coef-missing": (_drop("coef"), ["field 'coef'"]),
    "intercept-shape": (_sub("intercept", "shape", [2]), ["field 'intercept'"]),
    "intercept-nan": (_array("intercept", lambda a: a.__setitem__(1, np.nan)),
                      ["field 'intercept'"]),
    "intercept-changed": (_array("intercept", lambda a: a.__iadd__(0.5)),
                          ["field 'intercept'"]),
    "intercept-missing": (_drop("intercept"), ["field 'intercept'"]),
    "checksum-changed": (lambda d: d["checksums"].__setitem__("classes", "crc32c:00000000"),
                         ["field 'classes'"]),
    "checksum-coef-changed": (lambda d: d["checksums"].__setitem__("coef", "crc32c:12345678"),
                              ["field 'coef'"]),
    "checksum-removed": (_drop("checksums", "summary"), ["field 'checksums'"]),
    "checksum-extra": (_sub("checksums", "weights", "crc32c:00000000"),
                       ["field 'checksums'"]),
    "checksums-string": (_set("checksums", "crc32c:00000000"), ["field 'checksums'"]),
    "checksums-missing": (_drop("checksums"), ["field 'checksums'"]),
    "unknown-field": (_set("weights", 1), ["field 'weights'"]),
    "duplicate-key": (_text(lambda t: t.replace('{"format"', '{"task": "binary", "format"', 1)),
                      ["field 'task'"]),
    "duplicate-coef": (_text(lambda t: t.replace(', "intercept"', ', "coef": {"dtype": "<f8", '
                                                 '"shape": [3, 8], "base64": "AAAA"}, '
                                                 '"intercept"', 1)), ["field 'coef'"]),
    "truncated-in-weights": (_text(lambda t: t[:t.index('"base64"') + 40]), ["truncated"]),
    "truncated-in-header": (_text(lambda t: t[:200]), ["truncated"]),
    "truncated-last-byte": (_text(lambda t: t[:-1]), ["truncated", "not valid JSON"]),
    "trailing-garbage": (_text(lambda t: t + "x"), ["not valid JSON"]),
    "not-utf8": (_text(lambda t: t.replace('"dcd"', '"d\udcffd"', 1)), ["not UTF-8"]),
    "json-list": (_text(lambda t: "[" + t + "]"), ["not a model"]),
    "empty": (_text(lambda t: ""), ["is empty"]),
    "libsvm-data": (_text(lambda t: "1 3:1 5:0.5\n-1 2:1\n"), ["not a model"]),
}
# edits a reader may accept: they must then give exactly the untampered result
SAME = {
    "reindented": _text(lambda t: json.dumps(json.loads(t), indent=2)),
    "keys-sorted": _text(lambda t: json.dumps(json.loads(t), indent=1, sort_keys=True)),
    "escaped-slashes": _text(lambda t: t.replace("/", "\\/")),
    "unicode-escapes": _text(lambda t: t.replace("A", "\\u0041")),
    "crlf-and-tabs": _text(lambda t: json.dumps(json.loads(t), indent="\t").replace("\n", "\r\n")),
    "written-as-format-1": lambda d: (d.pop("checksums"), d.pop("tie_break"),
                                      d.__setitem__("format", "streamsvm-linear-model/1")),
}


def _write(src, edit, dst):
    d = json.loads(src.read_text())
    edit(d)
    text = d.pop("__text__", None)
    raw = json.dumps(d) if text is None else text(src.read_text())
    dst.write_bytes(raw.encode("utf-8", "surrogateescape"))


@pytest.mark.parametrize("name", list(EDITS))
def test_a_tampered_model_exits_2_naming_the_field(models, name, tmp_path):
    path, data, want = models["multiclass"]
    edit, needles = EDITS[name]
    _write(path, edit, tmp_path / "m.json")
    for (rc, err, out), (_, _, same), cmd in zip(_results(tmp_path / "m.json", data, tmp_path),
                                                want, ("evaluate", "predict", "predict")):
        if rc == 0:         # accepted: then it must be the untampered result exactly
            assert out == same, (name, cmd)
            continue
        assert rc == 2 and out in ("", None), err      # nothing printed, no file written
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"streamsvm {cmd}: error: model file "), err
        assert str(tmp_path / "m.json") in err and any(n in err for n in needles), err


@pytest.mark.parametrize("name", list(SAME))
def test_a_rewritten_but_equivalent_model_gives_the_same_results(models, name, tmp_path):
    for kind in ("multiclass", "binary"):
        path, data, want = models[kind]
        _write(path, SAME[name], tmp_path / "m.json")
        got = _results(tmp_path / "m.json", data, tmp_path)
        assert [(rc, out) for rc, _, out in got] == [(0, out) for _, _, out in want], \
            (kind, name, got)


@pytest.mark.parametrize("name, needle", [
    ("classes-reversed", "not strictly increasing"),
    ("task-multiclass", "task 'multiclass'"),
    ("coef-two-rows", "field 'coef'"),
])
def test_a_tampered_binary_model_exits_2(models, name, needle, tmp_path):
    path, data, _ = models["binary"]
    d = json.loads(path.read_text())
    if name == "classes-reversed":
        d["classes"] = d["classes"][::-1]
    elif name == "task-multiclass":
        d["task"] = "multiclass"
    else:
        d["coef"]["base64"] = _b64(np.vstack([_weights(d, "coef")] * 2))
        d["coef"]["shape"] = [2, 8]
    (tmp_path / "m.json").write_text(json.dumps(d))
    for rc, err, _ in _results(tmp_path / "m.json", data, tmp_path):
        assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_every_bit_flip_is_refused_or_harmless(models):
    """Each byte of a model file with one bit flipped: the reader raises ModelError or
    reads the very same model (never another one, never another exception)."""
    import io
    from streamsvm.model import _from_json
    import dataclasses
    m = load_model(models["binary"][0])
    ref = dataclasses.replace(m, summary=dict(m.summary, history=m.summary["history"][-2:]))
    raw = json.dumps(ref.to_dict()).encode()            # ~1,600 bytes
    fields = ("task", "params", "problem", "summary", "tie_break")
    survived = 0
    for i in range(len(raw)):
        b = bytearray(raw)
        b[i] ^= 1 << (i * 5 % 8)
        try:
            m = _from_json(io.BytesIO(bytes(b)), len(b), "m.json")
        except ModelError:
            continue
        survived += 1
        assert all(getattr(m, k) == getattr(ref, k) for k in fields), i
        for k in ("coef", "intercept", "classes"):
            assert np.array_equal(getattr(m, k), getattr(ref, k), equal_nan=True), i
    assert survived < len(raw) // 100


def test_a_store_or_a_directory_given_as_the_model(models, tmp_path, capsys):
    from streamsvm.io import write_store
    path, data, _ = models["binary"]
    X, y = _xy([-1, 1], n=50)
    import scipy.sparse as sp
    write_store(str(tmp_path / "s.zarr"), sp.csr_matrix(X), y, chunk_rows=16)
    for cmd in ("evaluate", "predict"):
        args = [cmd, str(tmp_path / "s.zarr"), str(data)] + \
            (["-o", str(tmp_path / "p")] if cmd == "predict" else [])
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err == (f"streamsvm {cmd}: error: model file '{tmp_path / 's.zarr'}': is a "
                       f"directory (a store?), not a model file\n")
    assert not (tmp_path / "p").exists()


def test_the_real_cli_exits_2_without_a_traceback(models, tmp_path):
    path, data, _ = models["multiclass"]
    d = json.loads(path.read_text())
    d["classes"] = d["classes"][::-1]
    bad = tmp_path / "m.json"
    bad.write_text(json.dumps(d))
    r = subprocess.run([sys.executable, "-m", "streamsvm.cli", "evaluate", str(bad),
                        str(data)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr == (f"streamsvm evaluate: error: model file '{bad}', field 'classes': "
                        f"[5.0, 2.0, -1.0] is not strictly increasing\n")


def test_a_model_on_s3_in_any_key_order_and_a_prefix_given_as_the_model(models, s3):
    """The reader seeks back over an object store too (weights before the header)."""
    import s3fs
    bucket, opts = s3
    fs = s3fs.S3FileSystem(**opts)
    path, _, _ = models["multiclass"]
    ref = load_model(path)
    fs.pipe(f"{bucket}/m.json", json.dumps(json.loads(path.read_text()), sort_keys=True).encode())
    fs.pipe(f"{bucket}/store/zarr.json", b"{}")
    m = load_model(f"{bucket}/m.json", storage_options=opts)
    assert np.array_equal(m.coef, ref.coef) and m.summary == ref.summary
    with pytest.raises(ModelError, match="is a directory"):
        load_model(f"{bucket}/store", storage_options=opts)


# -- the format ---------------------------------------------------------------------------

def test_format_2_and_its_checksums(models):
    d = json.loads(models["multiclass"][0].read_text())
    assert d["format"] == MODEL_FORMAT == "streamsvm-linear-model/2"
    assert list(d)[-1] == "checksums"
    assert sorted(d["checksums"]) == sorted(
        ["format", "task", "classes", "n_features", "params", "problem", "summary",
         "tie_break", "coef", "intercept"])
    from streamsvm.io._integrity import crc32c
    assert d["checksums"]["coef"] == \
        f"crc32c:{crc32c(base64.b64decode(d['coef']['base64'])):08x}"


def test_from_dict_checks_like_load_model(models):
    d = json.loads(models["multiclass"][0].read_text())
    assert np.array_equal(LinearModel.from_dict(d).coef, load_model(models["multiclass"][0]).coef)
    d["classes"] = [5.0, 2.0, -1.0]
    with pytest.raises(ModelError, match="field 'classes'"):
        LinearModel.from_dict(d, source="mine")


# -- memory and size ----------------------------------------------------------------------

def _model(k, d, seed=0):
    rng = np.random.default_rng(seed)
    task = "binary" if k == 1 else "multiclass"
    return LinearModel(rng.standard_normal((k, d)), rng.standard_normal(k),
                       np.arange(1.0, max(k, 2) + 1), task, {"solver": "dcd", "C": 1.0},
                       {"passes": 1.0})


@pytest.mark.parametrize("layout", ["as-written", "keys-sorted"])
def test_loading_takes_the_weights_and_a_small_constant(layout, tmp_path):
    """2·10^6 features x 2 classes (32 MB of weights): the load peaks (tracemalloc) below
    the weights plus 8 MB, whether the header precedes the weights or not (before: the
    file, its text, the parsed document, the decoded bytes and the array, ~5x)."""
    import tracemalloc
    m = _model(2, 2 * 10 ** 6)
    path = tmp_path / "m.json"
    m.save(path)
    if layout == "keys-sorted":
        path.write_text(json.dumps(json.loads(path.read_text()), sort_keys=True))
    tracemalloc.start()
    try:
        back = load_model(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.array_equal(back.coef, m.coef) and np.array_equal(back.intercept, m.intercept)
    assert m.coef.nbytes < peak < m.coef.nbytes + (8 << 20), peak


def test_a_file_larger_than_its_header_allows_is_refused_unread(tmp_path, monkeypatch):
    from streamsvm import _model_json, _model_stream
    for mod in (_model_json, _model_stream):
        monkeypatch.setattr(mod, "HEADER_LIMIT", 1 << 16)
    m = _model(3, 1000)
    path = tmp_path / "m.json"
    m.save(path)
    good = path.read_bytes()
    path.write_bytes(good + b" " * (4 << 20))          # whitespace: still valid JSON
    reads = []
    real_more = _model_stream.DocumentReader._more

    def counting(self):
        reads.append(1)
        return real_more(self)
    monkeypatch.setattr(_model_stream.DocumentReader, "_more", counting)
    with pytest.raises(ModelError, match=r"field 'n_features'.*more than its header declares"
                                         r".*refused unread"):
        load_model(path)
    assert len(reads) == 1                 # one block: the header, not the megabytes after
    path.write_bytes(good + b" " * 100)
    assert np.array_equal(load_model(path).coef, m.coef)
    path.write_bytes(good[:len(good) // 2])
    with pytest.raises(ModelError, match="truncated"):
        load_model(path)


def test_a_header_value_beyond_the_limit_is_refused(tmp_path, monkeypatch):
    from streamsvm import _model_json, _model_stream
    for mod in (_model_json, _model_stream):
        monkeypatch.setattr(mod, "HEADER_LIMIT", 1 << 16)
    import dataclasses
    m = _model(1, 10)
    path = tmp_path / "m.json"
    dataclasses.replace(m, summary={"note": "x" * (1 << 20)}).save(path)
    with pytest.raises(ModelError, match=r"a value of more than 0 MiB besides the weights"):
        load_model(path)
    dataclasses.replace(m, summary={"notes": ["x" * 1000] * 100}).save(path)
    with pytest.raises(ModelError, match=r"more than 0 MiB besides its weights"):
        load_model(path)


def test_save_writes_in_pieces_and_checksums_as_it_goes(tmp_path, monkeypatch):
    from streamsvm import _model_json
    monkeypatch.setattr(_model_json, "PIECE", 15)
    m = _model(3, 41)
    pieces = list(_model_json.json_pieces(m))
    assert [len(p) for p in pieces[2:5]] == [20, 20, 20]     # the weights 15 bytes at a time
    assert b"".join(pieces) == json.dumps(m.to_dict()).encode()
    assert isinstance(ModelError("x", file="f"), (StreamSVMError, ValueError))
