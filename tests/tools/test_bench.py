"""tools/bench.py suite and its side measurements (io-baseline, checks-cost, memory-bound,
render): the harness's own logic on tiny data (objective, gaps, weight extraction, registry,
result schema, report, child processes). The benchmark runs themselves are not tests."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from tools.bench import _common, _table, _timed, peers, store_io, suite, suite_data, suite_runs
from tools.bench import evaluate as ev
from tools.bench import report as rep
from tools.bench import suite_targets, suites, worker
from tools.bench.cli import main


# -- data ------------------------------------------------------------------------------------

def _binary(n=60, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.6, format="csr", random_state=seed) * 3
    y = np.where(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n) > 0, 1.0, -1.0)
    return sp.csr_matrix(X), y


def _multiclass(n=90, d=4, k=3, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.argmax(X @ rng.normal(size=(d, k)), axis=1).astype(np.float64)
    return sp.csr_matrix(X), y


def _brute(W, b, X, y, C, loss, task):
    """The objective written out with dense loops (the definition, nothing shared)."""
    Xd = X.toarray()
    k = W.shape[0]
    total = 0.0
    for c in range(k):
        yc = y if task == "binary" else np.where(y == c, 1.0, -1.0)
        total += 0.5 * float(W[c] @ W[c]) + 0.5 * b[c] ** 2
        for i in range(len(yc)):
            xi = max(0.0, 1.0 - yc[i] * (Xd[i] @ W[c] + b[c]))
            total += C * (xi * xi if loss == "squared_hinge" else xi)
    return total


# -- objective, accuracy, gaps ----------------------------------------------------------------

@pytest.mark.parametrize("loss", ["hinge", "squared_hinge"])
def test_binary_objective_matches_definition(loss):
    X, y = _binary()
    rng = np.random.default_rng(3)
    W, b = rng.normal(size=(1, X.shape[1])), np.array([0.3])
    got = ev.primal_objective(W, b, X, y, C=0.7, loss=loss, task="binary")
    assert got == pytest.approx(_brute(W, b, X, y, 0.7, loss, "binary"), rel=1e-12)


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge"])
def test_multiclass_objective_is_sum_of_one_vs_rest(loss):
    X, y = _multiclass()
    rng = np.random.default_rng(4)
    W, b = rng.normal(size=(3, X.shape[1])), rng.normal(size=3)
    got = ev.primal_objective(W, b, X, y, C=2.0, loss=loss, task="multiclass")
    assert got == pytest.approx(_brute(W, b, X, y, 2.0, loss, "multiclass"), rel=1e-12)


def test_streaming_blocks_equal_one_block_and_accuracy():
    X, y = _multiclass(n=50)
    W, b = np.random.default_rng(5).normal(size=(3, 4)), np.zeros(3)
    acc = ev.ObjectiveAccumulator(W, b, C=1.0, loss="hinge", task="multiclass")
    for lo, hi in [(0, 7), (7, 31), (31, 50)]:
        acc.add(X[lo:hi], y[lo:hi])
    assert acc.primal == pytest.approx(ev.primal_objective(W, b, X, y, C=1.0, loss="hinge",
                                                           task="multiclass"), rel=1e-12)
    pred = np.argmax(X.toarray() @ W.T + b, axis=1)
    assert acc.accuracy == pytest.approx(np.mean(pred == y))


def test_bias_value_scales_the_regularized_weight():
    X, y = _binary(n=10)
    W, b = np.zeros((1, X.shape[1])), np.array([2.0])
    # intercept 2 with B = 2 is b_w = 1: regularizer 0.5 (not 2)
    p = ev.primal_objective(W, b, X, y, C=0.0, loss="hinge", task="binary", bias=2.0)
    assert p == pytest.approx(0.5)


def test_test_set_with_more_columns_is_cropped():
    X, y = _binary(n=20, d=4)
    W, b = np.ones((1, 4)), np.zeros(1)
    wide = sp.hstack([X, sp.csr_matrix(np.ones((20, 3)))]).tocsr()
    assert ev.accuracy(W, b, wide, y, task="binary") == ev.accuracy(W, b, X, y, task="binary")


def test_gap_best_and_first_within():
    assert ev.rel_gap(101.0, 100.0) == pytest.approx(0.01)
    assert ev.rel_gap(None, 1.0) is None and ev.rel_gap(1.0, None) is None
    assert ev.rel_gap(float("nan"), 1.0) is None
    assert ev.best_objective([3.0, None, float("inf"), 2.5]) == 2.5
    assert ev.best_objective([None]) is None
    steps = [{"rel_gap": 0.1}, {"rel_gap": None}, {"rel_gap": 5e-4}, {"rel_gap": 1e-5}]
    assert ev.first_within(steps, 1e-3) is steps[2]
    assert ev.first_within(steps[:2], 1e-3) is None


def test_parametrization_maps_give_the_same_objective():
    """SGD's (1/n)Σloss + α/2‖w‖² and VW's mean of loss_i + λ/2‖w‖², times C·n, are ours."""
    X, y = _binary()
    n = X.shape[0]
    W, b = np.random.default_rng(6).normal(size=(1, X.shape[1])), np.array([0.0])
    C = 0.3
    hinge = np.maximum(0, 1 - y * (X @ W[0])).sum()
    alpha, lam = peers.sgd_alpha(C, n), peers.vw_lambda(C, n)
    ours = ev.primal_objective(W, b, X, y, C=C, loss="hinge", task="binary")
    assert C * n * (hinge / n + alpha / 2 * W[0] @ W[0]) == pytest.approx(ours)
    assert C * n * np.mean([h + lam / 2 * W[0] @ W[0] for h in
                            np.maximum(0, 1 - y * (X @ W[0]))]) == pytest.approx(ours)


def test_encode_labels_follows_the_store():
    assert peers.encode_labels([1, 2, 2], [1.0, 2.0], "binary").tolist() == [-1.0, 1.0, 1.0]
    assert peers.encode_labels([5, 3, 9], [3.0, 5.0, 9.0], "multiclass").tolist() == [1, 0, 2]
    with pytest.raises(ValueError):
        peers.encode_labels([4], [3.0, 5.0, 9.0], "multiclass")


# -- LIBLINEAR ---------------------------------------------------------------------------------

def test_liblinear_weights_sign_and_classes():
    ll = pytest.importorskip("liblinear.liblinearutil")
    X, y = _binary(n=80)
    m = ll.train(y, X, "-s 3 -c 1 -B 1 -q")
    W, b = peers.liblinear_weights(m, X.shape[1], "binary", 2)
    _, _, dec = ll.predict(y, X, m, "-q")
    sign = 1.0 if m.get_labels()[0] == 1 else -1.0
    assert np.allclose(X @ W[0] + b[0], sign * np.asarray(dec)[:, 0])

    Xm, ym = _multiclass()
    m = ll.train(ym, Xm, "-s 1 -c 1 -B 1 -q")
    W, b = peers.liblinear_weights(m, Xm.shape[1], "multiclass", 3)
    _, _, dec = ll.predict(ym, Xm, m, "-q")
    dec = np.asarray(dec)[:, np.argsort(m.get_labels())]     # columns in label order
    assert np.allclose(Xm @ W.T + b, dec)


def test_liblinear_weights_flip_when_minus_one_is_first():
    import ctypes
    import types
    w = (ctypes.c_double * 4)(1.0, -2.0, 3.0, 0.5)          # 3 features + bias, nr_w = 1
    model = types.SimpleNamespace(nr_class=2, nr_feature=3, bias=1.0, w=w,
                                  param=types.SimpleNamespace(solver_type=3),
                                  get_labels=lambda: [-1, 1])
    W, b = peers.liblinear_weights(model, 4, "binary", 2)
    assert W.tolist() == [[-1.0, 2.0, -3.0, 0.0]] and b.tolist() == [-0.5]
    model.get_labels = lambda: [1, -1]
    W, b = peers.liblinear_weights(model, 3, "binary", 2)
    assert W.tolist() == [[1.0, -2.0, 3.0]] and b.tolist() == [0.5]


def test_parse_liblinear_output():
    dual = ("....\noptimization finished, #iter = 120\nObjective value = -3\n"
            "optimization finished, #iter = 300\nWARNING: reaching max number of iterations\n"
            "Switching to use -s 2\ninit f 3.5e+02 |g| 8.6e+03\n"
            "iter  1 f 3.4e+02 |g| 1.0e+04 CG   2 step_size 1.00e+00 \n"
            "iter  2 f 3.3e+02 |g| 3.3e+03 CG   5 step_size 1.00e+00 \n")
    r = peers.parse_liblinear_output(dual, 1)
    assert r["iters"] == [120, 300] and r["max_iter_warning"] and r["switched_to_primal"]
    assert r["passes"] == 420 + 1 + (2 + 2) + (5 + 2)
    newton = "init f 1e+02 |g| 1e+01\niter  1 f 9e+01 |g| 1e+00 CG   3 step_size 1.00e+00 \n"
    r = peers.parse_liblinear_output(newton, 2)
    assert r["passes"] == 1 + 5 and r["passes_kind"] == "approx" and r["cg_steps"] == 3


# -- Vowpal Wabbit -----------------------------------------------------------------------------

def test_vw_bits_avoid_the_constant():
    for d in (10, 123, 100_000, 116_060, 300_000):
        bits = peers.vw_bits(d)
        assert (1 << bits) > d and (peers.VW_CONSTANT_HASH & ((1 << bits) - 1)) > d


def test_parse_vw_readable_model_scales_by_l2_state():
    text = ("Version 9.11.9\nbits:18\nChecksum: 1\n:1\nl2_state 0.5\n"
            "1:0.25 2.4 1\n3:-1 4 1\n116060:2 9 1\n")
    W, b = peers.parse_vw_readable_model(text, 4, 18)
    assert W.tolist() == [[0.125, 0.0, -0.5, 0.0]] and b.tolist() == [1.0]
    with pytest.raises(ValueError):
        peers.parse_vw_readable_model("7:1\n", 4, 18)


def _write_rows(path, X, y, sep):
    """Rows as text, ``label<sep>j:v ...`` with 1-based j: libsvm (sep " "), VW (" | ")."""
    with open(path, "w") as f:
        for i in range(X.shape[0]):
            row = X[i]
            f.write(f"{int(y[i])}{sep}" + " ".join(f"{j + 1}:{v:.17g}" for j, v in
                                                  zip(row.indices, row.data)) + "\n")


def test_vw_weights_reproduce_vw_predictions(tmp_path):
    vw = pytest.importorskip("vowpalwabbit",
                             reason="needs the bench extra (pip install -e .[bench])")
    X, y = _binary(n=200, d=6, seed=2)
    X.sort_indices()
    path = tmp_path / "t.vw"
    _write_rows(path, X, y, " | ")
    bits = peers.vw_bits(6)
    ws = vw.Workspace(f"-d {path} --cache_file {tmp_path / 'c'} --passes 3 --holdout_off "
                      f"--loss_function hinge --l2 0.001 -b {bits} --quiet -f {tmp_path / 'm'} "
                      f"--readable_model {tmp_path / 'r.txt'}")
    ws.finish()
    W, b = peers.parse_vw_readable_model((tmp_path / "r.txt").read_text(), 6, bits)
    ws = vw.Workspace(f"-t -i {tmp_path / 'm'} -d {path} -p {tmp_path / 'p'} --quiet")
    ws.finish()
    pred = np.loadtxt(tmp_path / "p")
    assert np.allclose(pred, np.clip(X @ W[0] + b[0], -1, 1), atol=1e-4)


def test_libsvm_to_vw_and_split_tail(tmp_path):
    src = tmp_path / "a.svm"
    src.write_text("2 1:0.5 3:1\n1 2:2\n2 4:1\n1 1:1\n")
    n = suite_data.libsvm_to_vw(str(src), str(tmp_path / "a.vw"), [1.0, 2.0], "binary")
    assert n == 4
    assert (tmp_path / "a.vw").read_text().splitlines()[:2] == ["1 | 1:0.5 3:1", "-1 | 2:2"]
    suite_data.libsvm_to_vw(str(src), str(tmp_path / "m.vw"), [1.0, 2.0], "multiclass")
    assert (tmp_path / "m.vw").read_text().splitlines()[0] == "2 | 1:0.5 3:1"
    suite_data.libsvm_to_vw(str(src), str(tmp_path / "s.vw"), [1.0, 2.0], "binary", shuffle_seed=0)
    assert sorted((tmp_path / "s.vw").read_text().splitlines()) == sorted(
        (tmp_path / "a.vw").read_text().splitlines())
    suite_data.split_tail(str(src), 1, str(tmp_path / "tail.svm"))
    assert src.read_text() == "2 1:0.5 3:1\n1 2:2\n2 4:1\n"
    assert (tmp_path / "tail.svm").read_text() == "1 1:1\n"
    suite_data.split_tail(str(src), 3, str(tmp_path / "all.svm"))
    assert src.read_text() == "" and (tmp_path / "all.svm").read_text().count("\n") == 3


# -- registry and planning ---------------------------------------------------------------------

class _FakeSolver:
    """A registered solver that only knows the hinge loss."""

    def __init__(self, *, C=1.0, loss="hinge", tol=1e-3, max_passes=10, bias=1.0):
        from streamsvm.exceptions import InvalidParameterError
        if loss != "hinge":
            raise InvalidParameterError(f"loss {loss!r} not supported")

    def params(self):
        return {}


def test_methods_come_from_the_registry(monkeypatch):
    from streamsvm.solvers import SOLVERS
    monkeypatch.setitem(SOLVERS, "zz_fake", _FakeSolver)
    assert "zz_fake" in suite_runs.streamsvm_solvers() and "dcd" in suite_runs.streamsvm_solvers()
    ids = [m["id"] for m in suite_runs.plan_methods("binary", "hinge", ooc=False)]
    assert "streamsvm-zz_fake" in ids and "streamsvm-dcd" in ids
    assert ids[-4:] == ["liblinear-s3", "sklearn-linearsvc", "sklearn-sgd", "vw"]
    assert suite_runs.solver_supported("zz_fake", C=1, loss="hinge", tol=1e-3, max_passes=5)[0]
    ok, why = suite_runs.solver_supported("zz_fake", C=1, loss="squared_hinge", tol=1e-3,
                                     max_passes=5)
    assert not ok and "not supported" in why


def test_unsupported_solver_run_record(monkeypatch, tmp_path):
    from streamsvm.solvers import SOLVERS
    monkeypatch.setitem(SOLVERS, "zz_fake", _FakeSolver)
    m = next(m for m in suite_runs.plan_methods("binary", "squared_hinge", ooc=False)
             if m["id"] == "streamsvm-zz_fake")
    run = suite_runs.run_method(m, {"name": "x", "task": "binary"}, 1.0, "squared_hinge",
                           {"tol": 1e-3, "max_passes": 5, "out": str(tmp_path)}, None)
    assert run["status"] == "unsupported" and "not supported" in run["message"]
    assert not (tmp_path / "runs" / "x" / "C1" / "squared_hinge" / m["id"] / "spec.json").exists()


def test_plan_out_of_core_and_multiclass():
    ooc = suite_runs.plan_methods("binary", "hinge", ooc=True, solvers=["dcd"])
    skipped = {m["id"] for m in ooc if m.get("skip")}
    assert skipped == {"liblinear-s3", "sklearn-linearsvc"}
    multi = {m["id"]: m for m in suite_runs.plan_methods("multiclass", "hinge", ooc=False,
                                                    solvers=["dcd"])}
    assert multi["liblinear-s4"]["objective"] is None and multi["vw"]["objective"] is None
    sq = [m["id"] for m in suite_runs.plan_methods("multiclass", "squared_hinge", ooc=False,
                                              solvers=["dcd"])]
    assert sq == ["streamsvm-dcd", "liblinear-s1", "liblinear-s2", "sklearn-linearsvc"]


def test_synthetic_names_and_suites():
    assert suite_data.synth_rows("synth-1e6") == 10**6 and suite_data.synth_rows("a9a") is None
    assert suite_data.synth_rows("synth-1e6-f2e6") == 10**6
    assert suite_data.dataset_spec("synth-2e4-f3e5", {})["synthetic"]["features"] == 300_000
    assert (suite_data.dataset_spec("synth-2e4", {})["synthetic"]["features"]
            == suite_data.SYNTH["features"])
    spec = suite_data.dataset_spec("synth-1e7", suites.SUITES["dcd"])
    assert spec["ooc"] and spec["rows"] == 10**7
    assert not suite_data.dataset_spec("synth-1e5", suites.SUITES["quick"])["ooc"]
    assert set(suites.SUITES) >= {"quick", "full", "dcd"}
    with pytest.raises(SystemExit):
        suite_data.dataset_spec("nope", suites.SUITES["quick"])


# -- results: best, gaps, headline, schema -----------------------------------------------------

def _run(method, family, steps, status="ok", **kw):
    return dict({"dataset": "d", "task": "binary", "C": 1.0, "loss": "hinge",
                 "objective_loss": "hinge", "method": method, "label": method, "family": family,
                 "status": status, "message": None, "steps": steps,
                 "child": {"peak_rss_mb": 100.0, "startup_s": 0.5}}, **kw)


def _doc(runs, best):
    return {"schema": suites.SCHEMA, "created": "now", "command": "python tools/bench.py",
            "suite": "quick", "machine": {"cpu_model": "cpu", "cpu_count": 2},
            "versions": {"numpy": "x"}, "config": {"seed": 0, "memory": "1GB"},
            "datasets": [{"name": "d", "task": "binary", "n_rows": 10, "n_features": 3,
                          "nnz": 20, "decoded_bytes": 1e6, "test_text": None}],
            "runs": runs, "best": best}


def _fixture_runs():
    s = _run("streamsvm-dcd", "streamsvm", [
        {"role": "headline", "label": "tol=0.001", "fit_seconds": 1.0, "passes": 10.0,
         "passes_kind": "exact", "primal": 100.05, "converged": True, "certificate": 8e-4,
         "solver_dual": 99.95, "train_accuracy": 0.9, "test_accuracy": None},
        {"role": "curve", "label": "max_passes=1", "fit_seconds": 0.1, "passes": 1.0,
         "primal": 150.0},
        {"role": "reference", "label": "tol=1e-06", "fit_seconds": 3.0, "passes": 40.0,
         "primal": 100.0, "solver_dual": 99.999}],
        cli={"rc": 0, "wall_s": 2.0, "peak_rss_mb": 150.0, "summary": {"passes": 10}},
        history=[{"passes": 1.0, "seconds": 0.1, "gap": 0.5, "exact": False, "kind": "stream"},
                 {"passes": 3.0, "seconds": 0.4, "gap": 1e-4, "exact": True, "kind": "check"}])
    ll = _run("liblinear-s3", "liblinear", [
        {"role": "ladder", "label": "-e 0.1", "fit_seconds": 0.2, "passes": 30.0,
         "passes_kind": "upper bound", "primal": 102.0, "default": True},
        {"role": "ladder", "label": "-e 0.01", "fit_seconds": 0.3, "passes": 60.0,
         "passes_kind": "upper bound", "primal": 100.05, "default": False}])
    bad = _run("vw", "vw", [], status="unavailable", message="vowpalwabbit does not import")
    return [s, ll, bad]


def test_finalize_groups_best_gaps_headline_and_target():
    runs = _fixture_runs()
    best = suite_runs.finalize_groups(runs)
    b = best["d|1.0|hinge"]
    assert b["best_primal"] == 100.0 and b["best_by"] == "streamsvm-dcd tol=1e-06"
    assert b["best_dual"] == 99.999 and b["certified_gap"] == pytest.approx(1e-5)
    s, ll, bad = runs
    assert s["rel_gap"] == pytest.approx(5e-4) and s["passes"] == 10.0
    assert s["process_seconds"] == 2.0 and s["process_kind"] == "measured (CLI)"
    assert s["peak_rss_mb"] == 150.0
    assert ll["headline"] == 0 and ll["rel_gap"] == pytest.approx(0.02)
    assert ll["to_target"]["label"] == "-e 0.01"
    assert ll["to_target"]["process_seconds"] == pytest.approx(0.8)
    assert ll["process_seconds"] == pytest.approx(0.7) and ll["peak_rss_mb"] == 100.0
    assert bad["headline"] is None and bad["primal"] is None
    doc = _doc(runs, best)
    suite.validate_results(doc)
    json.dumps(_common.clean(doc))


def test_validate_results_rejects_bad_documents():
    runs = _fixture_runs()
    best = suite_runs.finalize_groups(runs)
    for breaker in (lambda d: d.pop("machine"), lambda d: d.update(schema="other"),
                    lambda d: d["runs"][0].pop("passes"),
                    lambda d: d["runs"][2].update(status="weird"),
                    lambda d: d["runs"][0]["steps"][0].update(rel_gap=-0.5)):
        doc = json.loads(json.dumps(_doc(runs, best)))
        breaker(doc)
        with pytest.raises(ValueError):
            suite.validate_results(doc)


def test_clean_json():
    out = _common.clean({"a": np.float64(1.5), "b": [np.int64(2), float("nan")],
                        "c": (np.inf, "x")})
    assert out == {"a": 1.5, "b": [2, None], "c": [None, "x"]}


def _ooc_results(hist, fit_seconds, passes, io):
    """A results document with one out-of-core streamsvm run on data set "d"."""
    run = _run("streamsvm-dcd", "streamsvm", [], fit_seconds=fit_seconds, passes=passes,
               peak_rss_mb=300.0, history=hist)
    return {"runs": [run], "datasets": [{"name": "d", "ooc": True, "budget_bytes": 250e6,
                                         "n_features": 1000, "task": "binary",
                                         "classes": [-1, 1]}],
            "io_baseline": {"d": io}, "rss_floor": {"d": 100.0}}


def test_pass_times_and_targets():
    hist = [{"passes": 1.0, "seconds": 2.0, "kind": "stream", "exact": False},
            {"passes": 2.0, "seconds": 3.0, "kind": "stream", "exact": False},
            {"passes": 2.5, "seconds": 3.1, "kind": "slab", "exact": False},
            {"passes": 4.5, "seconds": 6.1, "kind": "check", "exact": True}]
    pt = suite_targets.pass_times(hist)
    assert pt["first_sweep_s"] == 2.0 and pt["stream_s_per_pass"] == pytest.approx(1.5)
    assert pt["exact_s_per_pass"] == pytest.approx(1.5) and pt["stream_sweeps"] == 2
    t = suite_targets.dcd_targets(_ooc_results(hist, 9.0, 4.5, {"floor_s": 1.0,
                                                       "one_reader_pass_s": 1.2}))
    rss = next(v for v in t if "RSS" in v["target"])
    assert not rss["met"] and rss["met_net_of_import_floor"]
    ps = next(v for v in t if "pass" in v["target"])
    assert ps["stream_s_per_pass_ratio"] == 1.5 and not ps["met"]
    assert ps["overall_s_per_pass"] == 2.0
    assert ps["stream_s_per_pass_vs_one_reader"] == pytest.approx(1.25)
    assert ps["disk_sweeps"] == 0 and ps["disk_sweep_s"] is None
    table = rep.targets_tables({"targets": t})
    assert "| d | hinge | 1.00 | 2.00 | 2.00× | 1.50 | 1.50× |" in table and "| 1.20 | 1.25× |" in table


def test_pass_bound_from_kernel_and_decompression_seconds():
    hist = [{"passes": 1.0, "seconds": 2.0, "kernel_seconds": 1.5, "kind": "stream",
             "exact": False},
            {"passes": 3.0, "seconds": 4.0, "kernel_seconds": 0.4, "kind": "stream",
             "exact": False}]
    pt = suite_targets.pass_times(hist)
    assert pt["first_kernel_s"] == 1.5 and pt["stream_kernel_s_per_pass"] == pytest.approx(0.85)
    res = _ooc_results(hist, 3.0, 3.0, {"floor_s": 0.5, "scheduler_pass_cpu_s": 1.0})
    res["machine"] = {"cpus_usable": 2}
    ps = next(v for v in suite_targets.dcd_targets(res) if "pass" in v["target"])
    # first sweep: the kernel alone (1.5 s) exceeds (1.0 + 1.5) / 2 = 1.25 s
    assert ps["first_bound_s"] == 1.5 and ps["first_bound_ratio"] == 3.0
    assert ps["first_vs_bound"] == pytest.approx(2.0 / 1.5)
    # streamed: (1.0 + 0.85) / 2 = 0.925 s > 0.85 s of kernel
    assert ps["stream_bound_s"] == pytest.approx(0.925)
    assert ps["stream_vs_bound"] == pytest.approx(1.5 / 0.925)     # median of 2.0 and 1.0
    # each sweep against its own bound: 2.0 / 1.5 and 1.0 / max(0.2, 0.6)
    assert ps["stream_vs_own_bound"] == pytest.approx((2.0 / 1.5 + 1.0 / 0.6) / 2)
    table = rep.targets_tables({"targets": [ps]})
    assert "the least a pass can take" in table and "| d | hinge | 2 | 1.00 | 1.50 |" in table
    assert "| 1.62× | 1.50× |" in table
    # no kernel seconds (older histories) or no CPU measurement: no bound
    assert "first_bound_s" not in suite_targets.pass_bounds({"first_kernel_s": None}, 1.0, 2, 0.5)
    assert "stream_bound_s" not in suite_targets.pass_bounds({"stream_kernel_s_per_pass": 1.0},
                                                     None, 2, 0.5)


def test_run_child_reports_the_anonymous_and_file_backed_split(tmp_path):
    code = "import numpy as np, time; a = np.ones(40_000_000 // 8); time.sleep(0.3)"
    r = _timed.run_child([sys.executable, "-c", code], timeout=60,
                        stdout_path=str(tmp_path / "o"), stderr_path=str(tmp_path / "e"))
    assert r["rc"] == 0 and r["peak_rss_anon_mb"] >= 40e6 / _common.MB
    assert r["peak_rss_file_mb"] > 0
    assert r["sampled_peak_rss_mb"] == pytest.approx(r["peak_rss_mb"], rel=0.05)


def test_pass_times_of_disk_slab_sweeps():
    hist = [{"passes": 1.0, "seconds": 2.0, "kind": "stream", "exact": False},
            {"passes": 1.2, "seconds": 2.3, "kind": "disk", "exact": False},
            {"passes": 1.3, "seconds": 2.4, "kind": "disk", "exact": False},
            {"passes": 2.5, "seconds": 4.8, "kind": "check", "exact": True}]
    pt = suite_targets.pass_times(hist)
    assert pt["disk_sweeps"] == 2 and pt["disk_sweep_s"] == pytest.approx(0.2)
    assert pt["disk_s_per_pass"] == pytest.approx(1.25)
    assert pt["exact_s_per_pass"] == pytest.approx(2.0) and pt["stream_sweeps"] == 1
    res = _ooc_results(hist, 4.8, 2.5, {"floor_s": 0.5})
    table = rep.targets_tables({"targets": suite_targets.dcd_targets(res)})
    assert "disk slab" in table and "| d | hinge | 1 | 2 | 0.200 | 0.40× | 1.25 | 2.50× |" in table


def test_io_baseline_reads_with_two_and_one_threads(tmp_path):
    import scipy.sparse as sp
    X = sp.random(300, 20, density=0.2, format="csr", random_state=0)
    y = np.where(np.arange(300) % 2, 1.0, -1.0)
    from streamsvm.io import write_store
    write_store(tmp_path / "s.zarr", X, y, chunk_rows=64)
    r = store_io.io_baseline(str(tmp_path / "s.zarr"), repeat=1)
    assert r["one_reader_pass_s"] > 0 and len(r["one_reader_pass_all_s"]) == 1
    assert r["floor_s"] == min(r["read_chunk_loop_s"], r["scheduler_pass_s"])
    assert r["scheduler_pass_cpu_s"] > 0
    assert "one read-ahead thread" in rep.io_table({"s": r})


# -- report ------------------------------------------------------------------------------------

def test_fmt_and_table():
    assert _table.fmt(None) == "–" and _table.fmt(float("nan"), "s") == "–"
    assert _table.fmt(0.0123, "s") == "0.012" and _table.fmt(123.4, "s") == "123"
    assert _table.fmt(0.0, "gap") == "0 (best)" and _table.fmt(3.21e-4, "gap") == "3.2e-04"
    assert _table.fmt(11434.549, "obj") == "11,434.55" and _table.fmt(7.577591, "obj") == "7.57759"
    assert rep._passes(300, "upper bound") == "≤300" and rep._passes(12.5, "approx") == "≈12.5"
    t = _table.markdown_table(["a", "b"], [[1, 2]])
    assert t.splitlines() == ["| a | b |", "| :--- | ---: |", "| 1 | 2 |"]


def test_the_liblinear_ladder_is_graded_at_the_gap_asked():
    runs = _fixture_runs()                      # --tol 0.01: LIBLINEAR graded at 1e-2 too
    suite_runs.finalize_groups(runs, 1e-2)
    ll = runs[1]
    assert ll["to_target"]["label"] == "-e 0.01"    # -e 0.1: 2e-2 from the best
    row = rep._row(ll, False, False, to_target=True)
    assert "-e 0.01 (first within 1e-2)" in row
    ll["to_target"] = None
    assert "never within 1e-2 of best" in rep._row(ll, False, False, to_target=True)


def test_render_markdown_prints_only_results_numbers(tmp_path):
    runs = _fixture_runs()
    doc = _doc(runs, suite_runs.finalize_groups(runs))
    md = rep.render_markdown(doc)
    assert "| d | streamsvm-dcd | tol=0.001 | 10 | 1.00 | 2.00 | 150 | 100.05 | 5.0e-04 |" in md
    assert "-e 0.01 (first within 1e-3)" in md and "*unavailable*" in md
    series = rep.curves(runs)
    assert any(s["kind"] == "certificate" for s in series)
    assert any(s["kind"] == "objective" and s["passes"] == [1.0, 10.0] for s in series)
    pytest.importorskip("matplotlib",
                        reason="needs the bench extra (pip install -e .[bench])")
    assert rep.plot_group(series, str(tmp_path / "p.png"), "t")
    assert (tmp_path / "p.png").stat().st_size > 1000


# -- processes and workers --------------------------------------------------------------------

def test_run_child_reports_the_childs_own_peak_rss(tmp_path):
    ballast = bytearray(300 * 10**6)      # the harness's own memory must not leak into the child
    ballast[::4096] = b"x" * len(ballast[::4096])
    code = "import sys; b = bytearray(60 * 10**6); b[::4096] = b'x' * len(b[::4096]); sys.exit(3)"
    r = _timed.run_child([sys.executable, "-c", code], timeout=60,
                        stdout_path=str(tmp_path / "o"), stderr_path=str(tmp_path / "e"))
    assert r["rc"] == 3 and not r["timed_out"]
    assert 60 <= r["peak_rss_mb"] < 200
    del ballast
    r = _timed.run_child([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5,
                        stdout_path=str(tmp_path / "o"), stderr_path=str(tmp_path / "e"))
    assert r["timed_out"]


def _text_and_store(tmp_path, n, d, seed):
    """A binary data set as the suite prepares one: its text file and its float64 store."""
    import streamsvm as ss
    X, y = _binary(n=n, d=d, seed=seed)
    text = tmp_path / "t.svm"
    _write_rows(text, X, y, " ")
    store = ss.convert([str(text)], str(tmp_path / "t.zarr"), chunk_rows=64, dtype="float64",
                       n_features=d)
    ds = {"name": "t", "store": str(tmp_path / "t.zarr"), "train_text": str(text),
          "test_text": None, "n_rows": store.n_rows, "n_features": d, "task": "binary",
          "classes": [-1.0, 1.0], "ooc": False}
    return X, y, ds


def test_worker_streamsvm_and_liblinear_in_process(tmp_path):
    pytest.importorskip("liblinear")
    X, y, ds = _text_and_store(tmp_path, 300, 8, 7)
    results = {}
    for kind, extra in (("streamsvm", dict(solver="dcd", tol=1e-3, max_passes=50, memory="1GB",
                                           curve="rerun", reference_tol=1e-6)),
                        ("liblinear", dict(s=3, eps=[0.1, 0.001], default_eps=0.1))):
        out = tmp_path / kind
        out.mkdir()
        spec = dict(kind=kind, method=kind, C=1.0, loss="hinge", seed=0, outdir=str(out),
                    repeat=1, repeat_under=0.0, dataset=ds, **extra)
        (out / "spec.json").write_text(json.dumps(spec))
        assert worker.run_worker(str(out / "spec.json")) == 0
        res = json.loads((out / "result.json").read_text())
        assert res["status"] == "ok" and res["t_ready"] >= res["t_start"]
        z = np.load(out / "weights.npz")
        results[kind] = [(s, (z[s["weights"] + ".W"], z[s["weights"] + ".b"]))
                         for s in res["steps"]]
    roles = [s["role"] for s, _ in results["streamsvm"]]
    assert roles[0] == "headline" and roles[-1] == "reference" and "curve" in roles
    assert [s["label"] for s, _ in results["liblinear"]] == ["-e 0.1", "-e 0.001"]
    Xs = sp.csr_matrix(X)
    ref = next((w for s, w in results["streamsvm"] if s["role"] == "reference"))
    p_ref = ev.primal_objective(*ref, Xs, y, C=1.0, loss="hinge", task="binary")
    p_ll = ev.primal_objective(*results["liblinear"][1][1], Xs, y, C=1.0, loss="hinge",
                               task="binary")
    # both solve the same problem: LIBLINEAR -e 0.001 lands next to dcd's tol=1e-6 optimum
    assert p_ll == pytest.approx(p_ref, rel=1e-3) and p_ref <= p_ll * (1 + 1e-9)


def test_run_method_starts_the_worker_through_the_launcher(tmp_path):
    """One method's run as the suite does it: 'tools/bench.py worker SPEC' in a child process
    of its own (its peak RSS, its start-up), then its weights graded here."""
    pytest.importorskip("liblinear")
    _, _, ds = _text_and_store(tmp_path, 200, 6, 3)
    cfg = dict(suites.SUITES["quick"], out=str(tmp_path / "out"), seed=0, repeat=1,
               eps_dual=[0.1, 0.001])
    m = next(m for m in suite_runs.plan_methods("binary", "hinge", ooc=False, solvers=[])
             if m["id"] == "liblinear-s3")
    run = suite_runs.run_method(m, ds, 1.0, "hinge", cfg, suite_data.Evaluator(ds))
    assert run["status"] == "ok", run["message"]
    assert run["child"]["rc"] == 0 and run["child"]["peak_rss_mb"] > 20
    assert run["child"]["startup_s"] > 0
    assert [s["label"] for s in run["steps"]] == ["-e 0.1", "-e 0.001"]
    assert all(s["primal"] > 0 and s["train_accuracy"] > 0.5 for s in run["steps"])


def test_repeated_fit_times_keep_the_fastest():
    out = worker._Out({"method": "x"})
    step = out.add("headline", "l", None, [0.30, 0.12, 0.95])
    assert step["fit_seconds"] == 0.12 and step["fit_seconds_all"] == [0.30, 0.12, 0.95]
    assert out.add("curve", "l", None, 2.5)["fit_seconds"] == 2.5


def test_io_rss_measures_every_reading_path(tmp_path):
    X = sp.random(3000, 40, density=0.1, format="csr", random_state=1, dtype=np.float32)
    y = np.where(np.arange(3000) % 2, 1.0, -1.0)
    from streamsvm.io import write_store
    write_store(tmp_path / "s.zarr", X, y, chunk_rows=500)
    r = store_io.io_rss(str(tmp_path / "s.zarr"), str(tmp_path / "out"), budget=1 << 20)
    for key in ("import", "runtime", "read_chunk_loop", "scheduler_pass", "runtime_pass"):
        assert r[key + "_mb"] and r[key + "_mb"] > 20, key
    # loading (or, on a cold numba cache, compiling) the kernels adds to the import's RSS
    assert r["runtime_pass_mb"] > r["import_mb"] and r["runtime_mb"] > r["import_mb"]
    assert "no cache, no state" in rep.io_table({"s": {
        "n_rows": 3000, "decoded_bytes": 1e6, "bytes_on_disk": 1e6, "read_chunk_loop_s": 1.0,
        "scheduler_pass_s": 1.0, "floor_s": 1.0, "decoded_mb_per_s": 1.0, "rss": r}})


def test_io_rss_runtime_floor_on_a_store_too_wide_for_its_model(tmp_path):
    """The runtime probes load the kernels on narrow rows: with all 3·10^6 features dcd's
    model (48 MB with its sums) did not fit their 16MB run, and the floor fell back to the
    bare import (148 MB against 210 MB on the 2·10^6-feature store)."""
    rng = np.random.default_rng(2)
    indptr = np.arange(0, 2000 * 12 + 1, 12)
    indices = np.sort(rng.choice(3_000_000, size=(2000, 12), replace=False), axis=1).ravel()
    X = sp.csr_matrix((np.ones(len(indices), np.float32), indices, indptr),
                      shape=(2000, 3_000_000))
    y = np.where(np.arange(2000) % 2, 1.0, -1.0)
    from streamsvm.io import write_store
    write_store(tmp_path / "w.zarr", X, y, chunk_rows=500)
    r = store_io.io_rss(str(tmp_path / "w.zarr"), str(tmp_path / "out"), budget=1 << 20)
    assert r["runtime_mb"] and r["runtime_pass_mb"]
    assert r["runtime_mb"] > r["import_mb"]


def test_checks_cost_times_sweeps_with_and_without_the_checks(tmp_path, monkeypatch):
    import numpy as np
    import scipy.sparse as sp
    from streamsvm.io import _direct, _store, _writer, write_store
    monkeypatch.setattr(_writer, "INNER_ELEMS", 4096)
    X = sp.random(6000, 50, density=0.2, format="csr", random_state=0)
    write_store(tmp_path / "s.zarr", X, np.where(np.arange(6000) % 3, 1.0, -1.0),
                chunk_rows=1000)
    r = store_io.checks_cost(str(tmp_path / "s.zarr"), rounds=2, memory=600_000, passes=3)
    assert _direct.VERIFY_CHECKSUMS and _store.CHECK_ROWS          # switched back on
    assert len(r["all"]["later"]["True"]) == len(r["all"]["later"]["False"]) >= 2
    assert r["first_sweep_s"]["checks"] > 0 and r["later_sweep_s"]["no_checks"] > 0
    assert "| first streamed sweep" in store_io.checks_table(r)


def test_weston_watkins_problem_is_planned_and_graded():
    # loss "ww": only the solvers that train the joint problem; graded by the WW objective
    ids = [m["id"] for m in suite_runs.plan_methods("multiclass", "ww", ooc=False)]
    assert ids == ["streamsvm-ww"]
    assert "streamsvm-ww" not in [m["id"] for m in suite_runs.plan_methods("multiclass", "hinge",
                                                                      ooc=False)]
    assert worker.solver_params("ww", C=2.0, loss="ww", tol=1e-3, max_passes=5) == dict(
        C=2.0, tol=1e-3, max_passes=5, bias=1.0, gap_decay=0.0)
    from streamsvm.problem import Problem
    rng = np.random.default_rng(0)
    X = sp.random(40, 6, density=0.5, random_state=1, format="csr")
    y = rng.integers(0, 3, 40)
    W, b = rng.normal(size=(3, 6)), rng.normal(size=3)
    acc = ev.ObjectiveAccumulator(W, b, C=0.7, loss="ww", task="multiclass")
    acc.add(X, y)
    prob = Problem(loss="hinge", C=0.7, bias=1.0, layout="joint")
    classes = np.arange(3.0)
    ref = prob.regularizer(W, b) + prob.loss_sum(np.asarray(X @ W.T) + b, classes[y], classes,
                                                 prob.costs(classes))
    assert acc.primal == pytest.approx(ref, rel=1e-12)


# -- the command line -------------------------------------------------------------------------

def test_render_reprints_a_results_file(tmp_path, capsys):
    runs = _fixture_runs()
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_doc(runs, suite_runs.finalize_groups(runs))))
    assert main(["render", str(path), "--no-plots", "--markdown-out",
                 str(tmp_path / "r.md")]) == 0
    out = capsys.readouterr().out
    assert "| d | streamsvm-dcd | tol=0.001 | 10 |" in out
    assert (tmp_path / "r.md").read_text().strip() == out.strip()


def test_options_without_a_subcommand_run_the_suite(tmp_path, capsys):
    # the suite's command line before the subcommands: --suite ... is 'suite --suite ...'
    with pytest.raises(SystemExit, match="unknown data set 'nope'"):
        main(["--suite", "quick", "--datasets", "nope", "--prepare-only", "--work",
              str(tmp_path)])
    with pytest.raises(SystemExit) as exc:
        main(["--io-budget", "1MB"])                   # io-baseline's, not the suite's
    assert exc.value.code == 2 and "--io-budget" in capsys.readouterr().err


def test_scheduler_refuses_an_unknown_solver_by_name(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["scheduler", "nowhere.zarr", "--dask-solvers", "alm,svm"])
    assert exc.value.code == 2 and "unknown solver 'svm'" in capsys.readouterr().err


def test_memory_bound_measures_floor_and_peak_of_each_solver(tmp_path, linear_store, capsys):
    out = tmp_path / "mb"
    assert main(["memory-bound", str(linear_store), "--memory", "64MB", "--methods", "dcd",
                 "--max-passes", "3", "--out", str(out)]) == 0
    r = json.loads((out / "memory-bound.json").read_text())
    assert r["command"].startswith("python tools/bench.py memory-bound ")
    (row,) = r["runs"]
    assert row["solver"] == "dcd" and row["rc"] == 0 and row["passes"] > 0
    assert row["floor_mb"] > 20 and row["peak_rss_mb"] > 20
    assert row["bound_mb"] == pytest.approx(row["floor_mb"] + row["budget_mb"] + row["model_mb"])
    assert row["ratio"] == pytest.approx(row["peak_rss_mb"] / row["bound_mb"])
    assert "| dcd |" in capsys.readouterr().out
    assert r["units"] == "MB" and row["budget_mb"] == 64.0          # 10^6 bytes, as --memory
    # --render prints a saved result again; one written with 2^20-byte budget and model
    # columns (no "units") is converted before its bounds are computed
    old = dict(r, runs=[dict(row, budget_mb=64e6 / 2**20, model_mb=row["model_mb"] * 1e6 /
                             2**20)])
    del old["units"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert main(["memory-bound", str(tmp_path / "old.json"), "--render"]) == 0
    shown = capsys.readouterr().out
    assert f"| {row['bound_mb']:.0f} | {row['ratio']:.2f} |" in shown
