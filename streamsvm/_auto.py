"""``--solver auto`` (the default): the solver chosen before the first pass from what the store
says of itself and what the run asks, by rules made from a measured matrix.

The matrix (``tools/bench.py matrix``, BENCHMARKS.md "Choosing a solver") times every
one-vs-rest solver to a certified relative gap of 1e-3 on data sets × C ∈ {0.01, 1, 100} ×
loss × {in memory, streamed at a quarter of the store}. What it shows, and the rules:

* The difficulty of dual coordinate descent grows with ``C·R²`` (R² the largest squared row
  norm, the bias included: the store keeps it per chunk at conversion): at small ``C·R²``
  dcd's epochs are few and cheap and nothing beats it; as ``C·R²`` grows its epochs run
  into the thousands while the primal solvers' passes grow slowly. Where it turns depends
  on the loss, the classes (one-vs-rest problems of many classes are easier for dcd) and
  whether the rows are in memory (streamed, each of dcd's epochs is a pass): the constants
  below, each with the cells it was read from.
* Past it: newton where its Newton steps have the rows resident and a dense Hessian
  (multiclass hinge; binary squared hinge), alm (accelerated passes) elsewhere; newton
  streamed needs a pass per CG step and lost every streamed cell but one.
* More features than rows: avsf (within 1.4× of the fastest in every such cell).
* On a dask cluster newton's passes with a dense Hessian are map/reduces (the local run
  bit for bit; the hinge polish runs here over the rows near the margin that the workers
  send): a9a, hinge, 5 passes and 2.3 s on two workers, where dcd's rounds of local dual
  CD took 68 passes, 2,742 rounds and 117 s. Too wide for a dense Hessian: dcd (within 2×
  its local passes on two workers, issue 36).

A parameter only some solvers take (``--l1``: newton; ``--penalty``: nesvm; ``--shrinking``:
dcd; ...) limits the choice to those solvers. ``ww`` is never chosen: it solves another
objective (the joint Weston–Watkins one). The choice and its reason are logged (``-v``) and
kept in the model (``summary["chosen_because"]``) and in ``train --json``.
"""

from __future__ import annotations

import dataclasses
import logging

from .exceptions import InvalidParameterError

__all__ = ["AUTO", "CHOICES", "Facts", "facts", "candidates", "choose"]

log = logging.getLogger(__name__)

AUTO = "auto"
#: The solvers auto chooses among (the one-vs-rest objective of LIBLINEAR -s 1 / -s 3).
CHOICES = ("dcd", "newton", "nesvm", "alm", "avsf")
#: The rows count as "in memory" when they take at most this share of the budget: newton
#: keeps every row resident there (``solvers/_newton_hessian.py``'s share).
IN_RAM_SHARE = 0.4


@dataclasses.dataclass(frozen=True)
class Facts:
    """What auto knows before the first pass."""

    rows: int
    features: int
    classes: int
    nnz_per_row: float
    r2: float           # the largest squared row norm, the bias feature's square included
    C: float            # the largest C of the run (a path: its largest)
    loss: str
    in_ram: bool        # the rows fit IN_RAM_SHARE of the budget
    cluster: bool

    @property
    def c_r2(self) -> float:
        return self.C * self.r2

    def describe(self) -> str:
        where = "on a cluster" if self.cluster else "in memory" if self.in_ram else "streamed"
        return (f"{self.rows} rows, {self.features} features, {self.classes} classes, "
                f"C·R² = {self.c_r2:.3g}, {self.loss}, {where}")


def facts(store, params: dict, *, memory, cluster: bool) -> Facts:
    """The :class:`Facts` of a run on ``store`` with solver ``params``."""
    from .schedule._budget import Budget
    from .solvers import SOLVERS
    from .solvers._base import BIAS_PARAM, C_PARAM, SVC_LOSS_PARAM
    meta = store.meta
    path = params.get("C_path")
    if path is not None:
        path = SOLVERS["nesvm"].param_table()["C_path"].validate("solver 'auto'", path)
    C = max(path or [params.get("C", C_PARAM.default)])
    bias = params.get("bias", BIAS_PARAM.default)
    r2 = max(meta.get("chunk_max_sq_norm") or [1.0]) + bias * bias
    rows = int(store.n_rows)
    return Facts(rows=rows, features=int(store.n_features), classes=len(store.classes),
                 nnz_per_row=int(store.nnz) / max(rows, 1), r2=float(r2), C=float(C),
                 loss=params.get("loss", SVC_LOSS_PARAM.default),
                 in_ram=not cluster and Budget.rows_fit(store, memory, IN_RAM_SHARE),
                 cluster=cluster)


def _takes(solver: str, params: dict) -> bool:
    """Whether ``solver`` takes every parameter of ``params`` with its value (nesvm alone
    takes ``loss="squared"``); ``C_path`` every solver takes (the driver runs the path)."""
    from .solvers import SOLVERS
    table = SOLVERS[solver].param_table()
    for k, v in params.items():
        if k == "C_path":
            continue
        if k not in table:
            return False
        try:
            table[k].validate(f"solver {solver!r}", v)
        except InvalidParameterError:
            return False
    return True


def candidates(params: dict) -> list[str]:
    """The solvers of :data:`CHOICES` that take every parameter given, with its value;
    none is an error naming the parameters (a value no solver takes: its solvers' error)."""
    from .solvers import SOLVERS
    out = [s for s in CHOICES if _takes(s, params)]
    if out:
        return out
    given = set(params) - {"C_path"}
    for s in CHOICES:
        table = SOLVERS[s].param_table()
        if given <= set(table):
            for k in sorted(given):
                table[k].validate("solver 'auto'", params[k])
    raise InvalidParameterError(
        f"--solver auto: no solver takes all of {', '.join(sorted(given))} (each solver's "
        f"parameters: streamsvm train --solver NAME --help); choose the solver")


#: C·R² up to which dcd is the fastest, hinge loss, two classes (the matrix: a9a 15 dcd,
#: synth-2e5 360 alm 1.8× faster; BENCHMARKS.md "Choosing a solver"). Past it alm when
#: streamed; in memory still dcd (below, in _ranked).
HINGE_BINARY_CR2 = 100.0
#: The same for more classes, whose one-vs-rest problems are easier for dcd (vowel 572 dcd,
#: letter 1080 newton 1.5× faster).
HINGE_MULTI_CR2 = 800.0
#: C·R² up to which dcd is the fastest, squared hinge, two classes, in memory (a9a 15 within
#: 1.1×; synth-2e5 360 newton 5.8× faster). More classes: dcd at every C measured.
SQUARED_CR2 = 100.0
#: The same streamed, where each of dcd's epochs is a pass (the matrix's dcd cells re-measured
#: once the blocks of a decoded window are shuffled, matrix-windows.json: a9a C·R² 0.15 dcd
#: 1.6× faster than alm; synth-5e5 C·R² 3.6 dcd and newton level; a9a C·R² 15 alm 9×
#: faster).
SQUARED_STREAMED_CR2 = 5.0
#: Streamed past it: alm on stores of at most this many features (a9a: alm the fastest at
#: every C, newton timed out), newton on wider ones (synth-5e5, 10^4 features: newton within
#: 1.0× at C·R² 3.6 and 357, alm 1.7× at 3.6).
ALM_FEATURES = 4096

_FIRST_ORDER = ["alm", "nesvm"]


def _ranked(f: Facts) -> tuple[list[str], str]:
    """The solvers from the best to the worst for ``f``, and why (the matrix's rules)."""
    from .solvers import SOLVERS
    dense_ok = f.features + 1 <= SOLVERS["newton"].param_table()["max_dense"].default
    cr2 = f"C·R² = {f.c_r2:.3g}"
    if f.cluster:
        if dense_ok:
            return (["newton", "dcd", "alm", "nesvm"],
                    "on a cluster newton's passes are map/reduces with a dense Hessian (the "
                    "local run's passes; the hinge polish over the rows the workers send): "
                    "dcd's rounds cost a round trip each")
        return (["dcd", "alm", "nesvm", "newton"], "on a cluster, too wide for newton's dense "
                "Hessian: dcd runs rounds of local dual CD")
    if f.features > f.rows:
        return (["avsf", "dcd", "newton", "alm", "nesvm"],
                "more features than rows: avsf's feature-side steps")
    easy = ["dcd", "avsf", "newton", "alm", "nesvm"]
    if f.loss == "hinge":
        limit = HINGE_BINARY_CR2 if f.classes == 2 else HINGE_MULTI_CR2
        if f.c_r2 <= limit:
            return easy, f"{cr2} ≤ {limit:g}: dual coordinate descent needs few epochs"
        if f.classes > 2 and f.in_ram and dense_ok:
            return (["newton", "dcd", "alm", "nesvm", "avsf"],
                    f"{cr2} > {limit:g}, the rows in memory and a dense Hessian: newton")
        if f.classes == 2 and f.in_ram:
            # alm is up to 1.8× faster where it certifies (a9a, synth-2e5 at C = 100) but
            # timed out where dcd certified (synth-5e5-f1e4, mushrooms: nearly separable)
            return (["dcd", "alm", "nesvm", "newton", "avsf"],
                    f"{cr2} > {limit:g}, two classes, the rows in memory: dual coordinate "
                    f"descent, which certifies where alm stalls on nearly separable data")
        return (_FIRST_ORDER + ["dcd", "newton", "avsf"],
                f"{cr2} > {limit:g}: alm's accelerated passes")
    if f.in_ram:
        if f.classes > 2 or f.c_r2 <= SQUARED_CR2:
            return easy, (f"{cr2}, squared hinge, "
                          f"{f'{f.classes} classes' if f.classes > 2 else 'two classes'}"
                          ": dual coordinate descent needs few epochs")
        return (["newton"] + _FIRST_ORDER + ["dcd", "avsf"],
                f"{cr2} > {SQUARED_CR2:g}, squared hinge, the rows in memory: newton")
    if f.c_r2 <= SQUARED_STREAMED_CR2:
        return easy, (f"{cr2} ≤ {SQUARED_STREAMED_CR2:g}, squared hinge, streamed: dual "
                      f"coordinate descent needs few epochs")
    if f.features <= ALM_FEATURES:
        return (_FIRST_ORDER + ["newton", "dcd", "avsf"],
                f"{cr2} > {SQUARED_STREAMED_CR2:g}, squared hinge, streamed, at most "
                f"{ALM_FEATURES} features: alm's accelerated passes")
    return (["newton"] + _FIRST_ORDER + ["dcd", "avsf"],
            f"{cr2} > {SQUARED_STREAMED_CR2:g}, squared hinge, streamed, more than "
            f"{ALM_FEATURES} features: newton")


def choose(store, params: dict, *, memory, cluster: bool) -> tuple[list[str], str]:
    """The solvers for a run on ``store`` with ``params`` (given by the user: an explicit
    solver's defaults are not given), the best first (the next are for a budget the first
    refuses), and the reason for the first, one line."""
    allowed = candidates(params)
    f = facts(store, params, memory=memory, cluster=cluster)
    ranked, why = _ranked(f)
    order = [s for s in ranked if s in allowed] + [s for s in allowed if s not in ranked]
    if order[0] != ranked[0]:
        why = (f"{ranked[0]} would be first ({why}), but only "
               f"{', '.join(allowed)} take{'s' if len(allowed) == 1 else ''} "
               f"{', '.join(sorted(set(params) - {'C_path'}))}")
    because = f"{why} ({f.describe()})"
    log.info("--solver auto chose %s: %s", order[0], because)
    return order, because
