"""Models written by the real LIBLINEAR (``liblinear-official``) read back: for every
classification solver it exports (``-s 0``..``7``), with and without ``-B 1``, binary and
multiclass, labels listed in an unsorted order of first appearance, negative and
non-integer labels: ``streamsvm predict`` and ``evaluate`` give LIBLINEAR's own
predictions, ties (rows scoring exactly 0) included, with exit 0 (issue 33, item 11)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamsvm.cli import main
from streamsvm.exceptions import ModelError
from streamsvm.model import load_model

ll = pytest.importorskip("liblinear.liblinearutil")

SOLVERS = range(8)          # L2R_LR .. L2R_LR_DUAL: LIBLINEAR's classifiers


def _data(labels, n=240, d=12, seed=0):
    """Rows around one centre per label, the labels first appearing in the order given;
    then test rows: ``n // 2`` more, an empty row and a row of unseen features only (both
    score exactly 0 without a bias: ties)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((len(labels), d)) * 1.5
    y = np.concatenate([np.arange(len(labels)), rng.integers(0, len(labels), n * 3 // 2)])
    X = centres[y] + rng.standard_normal((len(y), d))
    X[np.abs(X) < 0.4] = 0.0                       # sparse rows
    lab = np.asarray(labels, dtype=np.float64)[y]
    rows = [{j + 1: float(v) for j, v in enumerate(x) if v} for x in X]
    test = rows[n:] + [{}, {d + 3: 1.0}]
    return (lab[:n], rows[:n]), (np.concatenate([lab[n:], lab[:2]]), test)


def _libsvm(path, y, rows):
    with open(path, "w") as f:
        for label, row in zip(y, rows):
            f.write(" ".join([repr(float(label))] + [f"{j}:{v!r}" for j, v in row.items()])
                    + "\n")


DATASETS = {
    "binary-0-first": [0, 1],            # LIBLINEAR lists "0 1": w scores 0 positive
    "binary-5-first": [5, -3],
    "multiclass-satimage": [6, 2, 1, 5, 3, 4],
    "multiclass-negative": [-1, 7, -4],
    "multiclass-fractional": [2.5, -1.5, 0.5],   # LIBLINEAR keeps int(label): 2, -1, 0
}


@pytest.mark.parametrize("bias", ["-B -1", "-B 1"])
@pytest.mark.parametrize("solver", SOLVERS)
def test_liblinear_models_predict_like_liblinear(solver, bias, tmp_path, capsys):
    for name, labels in DATASETS.items():
        (y, X), (yt, Xt) = _data(labels, seed=solver)
        m = ll.train(y, X, f"-s {solver} {bias} -q")
        path = str(tmp_path / f"{name}.model")
        ll.save_model(path, m)
        yt = np.trunc(yt)                        # the labels LIBLINEAR's model knows
        p_ll, acc, dec_ll = ll.predict(list(yt), Xt, m, "-q")
        p_ll, dec_ll = np.asarray(p_ll), np.asarray(dec_ll)
        data = tmp_path / f"{name}.t"
        _libsvm(data, yt, Xt)
        model = load_model(path)
        assert (np.diff(model.classes) > 0).all()
        out = tmp_path / "p.txt"
        assert main(["predict", path, str(data), "-o", str(out)]) == 0, name
        np.testing.assert_array_equal(np.loadtxt(out), p_ll, err_msg=name)
        assert main(["evaluate", path, str(data), "--json"]) == 0, name
        ev = json.loads(capsys.readouterr().out)
        assert ev["correct"] == int(np.count_nonzero(p_ll == yt)), name
        assert ev["accuracy"] * 100 == pytest.approx(acc[0], abs=1e-9)
        # scores: streamsvm's convention (columns in increasing class order, a binary
        # model's positive class the larger label): LIBLINEAR's, permuted or negated
        assert main(["predict", path, str(data), "-o", str(out), "--scores"]) == 0
        dec = np.loadtxt(out).reshape(len(yt), -1)
        order = m.get_labels()
        if len(order) == 2:
            want = dec_ll[:, :1] * (1.0 if order[0] > order[1] else -1.0)
        else:
            want = np.empty_like(dec_ll)
            want[:, np.searchsorted(model.classes, order)] = dec_ll
        np.testing.assert_allclose(dec, want, rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("solver", [1, 4])
def test_ties_are_liblinears(solver, tmp_path):
    """Rows that score exactly 0 everywhere go where LIBLINEAR sends them: binary to its
    second label, multiclass to its first (not to streamsvm's first class)."""
    for labels, want in (([0, 1], 1.0), ([6, 2, 1, 5, 3, 4], 6.0), ([1, 0], 0.0)):
        (y, X), _ = _data(labels)
        m = ll.train(y, X, f"-s {solver} -B -1 -q")
        path = str(tmp_path / "m.model")
        ll.save_model(path, m)
        p_ll, _, _ = ll.predict([], [{}], m, "-q")
        model = load_model(path)
        assert p_ll == [want]
        assert model.predict(np.zeros((1, 12))).tolist() == [want]
        # and back: the export of the model read is LIBLINEAR's model again
        model.to_liblinear(tmp_path / "again.model")
        again = ll.load_model(str(tmp_path / "again.model"))
        assert again.get_labels() == m.get_labels()
        assert ll.predict([], X, again, "-q")[0] == ll.predict([], X, m, "-q")[0]


def test_streamsvm_export_reads_back_with_its_ties(tmp_path):
    """A model read from LIBLINEAR keeps its tie order through save / load as JSON."""
    (y, X), _ = _data([6, 2, 1, 5, 3, 4])
    ll.save_model(str(tmp_path / "m.model"), ll.train(y, X, "-s 2 -q"))
    a = load_model(tmp_path / "m.model")
    assert a.tie_break.tolist() == [6, 2, 1, 5, 3, 4]
    a.save(tmp_path / "m.json")
    b = load_model(tmp_path / "m.json")
    assert b.tie_break.tolist() == a.tie_break.tolist()
    assert np.array_equal(b.coef, a.coef) and np.array_equal(b.classes, a.classes)


GOOD = ("solver_type L2R_L2LOSS_SVC_DUAL\nnr_class 3\nlabel 2 1 3\nnr_feature 2\nbias 1\nw\n"
        "0.5 -0.25 1 \n-0.25 0.75 0.5 \n0.125 0 -1 \n")


@pytest.mark.parametrize("edit, line, needle", [
    (("0.75", "nan"), 8, "weight nan is not finite"),
    (("0.125", "inf"), 9, "weight inf is not finite"),
    (("-1 \n", "-INF \n"), 9, "weight -INF is not finite"),
    (("bias 1", "bias nan"), 5, "bad 'bias' line"),
    (("label 2 1 3", "label 2 1 nan"), 3, "bad 'label' line"),
    (("label 2 1 3", "label 2 1 2"), 3, "a label listed twice"),
    (("nr_class 3", "nr_class 1"), 2, "a single class"),
    (("0.5 -0.25 1 \n", "0.5 -0.25 1 7\n"), 9, "more weights than the 9"),  # 10th
    (("0.125 0 -1 \n", "0.125 0 \n"), 9, "expected 9 weights after 'w', found 8"),
    (("0.5 -0.25", "0.5 -0.2x5"), 7, "bad weight '-0.2x5'"),
])
def test_damaged_liblinear_models_exit_2_naming_the_line(edit, line, needle, tmp_path,
                                                         capsys):
    path = tmp_path / "m.model"
    path.write_text(GOOD.replace(*edit))
    data = tmp_path / "d.txt"
    data.write_text("2 1:1 2:1\n")
    for cmd in (["evaluate", str(path), str(data)],
                ["predict", str(path), str(data), "-o", str(tmp_path / "p")]):
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert f"model file '{path}', line {line}: " in err and needle in err, err
        assert len(err.strip().splitlines()) == 1
    with pytest.raises(ModelError) as exc:
        load_model(path)
    assert exc.value.line == line and isinstance(exc.value, ValueError)


def test_liblinear_model_much_larger_than_its_header_is_refused(tmp_path):
    path = tmp_path / "m.model"
    path.write_text(GOOD + " " * (9 * 64 + (1 << 24)))
    with pytest.raises(ModelError, match=r"line 4: .*more than its header allows \(3 rows"):
        load_model(path)
    path.write_text(GOOD)
    assert load_model(path).classes.tolist() == [1, 2, 3]
