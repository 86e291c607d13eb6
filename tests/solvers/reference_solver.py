"""A small reference solver written against the solver contract alone (no engine change):
full-batch gradient descent on the squared hinge with Barzilai–Borwein steps.

    min_w  ½‖w‖² + ½b² + C Σ_i max(0, 1 − y_i (wᵀx_i + B·b))²

One pass per iteration computes the objective and the gradient at w (a fused ``map_reduce``
into scheduler-owned accumulators); the certificate is the gradient norm relative to the
first one, exact every iteration. It exists to show that a new solver is its module and its
registration, and it runs through the conformance suite like every registered solver.
"""

from __future__ import annotations

import numpy as np

from streamsvm.kernels import csr_matvec, csr_rmatvec_add
from streamsvm.problem import Problem
from streamsvm.schedule import Accumulator
from streamsvm.solvers._base import COMMON_PARAMS, Param, Solver


class ReferenceGD(Solver):
    name = "ref-gd"
    summary = "test reference: gradient descent with Barzilai-Borwein steps, squared hinge"
    certificate = "relative gradient norm"
    params = (Param("C", "float", 1.0, "cost of each row's loss", low=0.0, low_open=True,
                    flag="-C"),
              Param("bias", "float", 1.0, "value of the constant bias feature", low=0.0),
              *COMMON_PARAMS)

    def problem(self, store):
        return Problem(loss="squared_hinge", C=self.C, bias=self.bias)

    def check_store(self, store):
        from streamsvm.exceptions import InvalidParameterError
        if store.task != "binary":
            raise InvalidParameterError("ref-gd trains binary problems only")

    def start(self, sched):
        self.w = np.zeros(sched.n_features + 1)            # the last entry: the bias weight
        self.g = self.prev = self.g0 = None                 # gradient at w; previous (w, g)

    def step(self, sched):
        """A Barzilai–Borwein step from the last gradient, then one pass at the new w."""
        if self.g is not None:
            if self.prev is None:
                t = 1.0 / (1.0 + 2 * self.C * sched.n_rows)
            else:
                s, d = self.w - self.prev[0], self.g - self.prev[1]
                t = float(s @ s) / max(float(s @ d), 1e-300)
            self.prev = (self.w.copy(), self.g)
            self.w = self.w - t * self.g
        return self.final_check(sched)

    def final_check(self, sched):
        r = sched.map_reduce(_loss_grad, args=(self.w, self.C, self.bias),
                             acc={"f": Accumulator(()), "g": Accumulator(len(self.w))})
        self.g = self.w + r["g"]
        norm = float(np.linalg.norm(self.g))
        self.g0 = norm if self.g0 is None else self.g0
        return {"kind": "stream", "primal": 0.5 * self.w @ self.w + float(r["f"]),
                "dual": np.nan, "gap": norm / max(self.g0, 1e-300), "exact": True,
                "active": sched.n_rows}

    def state_dict(self):
        arrays = {"w": self.w}
        if self.g is not None:
            arrays["g"] = self.g
        if self.prev is not None:
            arrays.update(prev_w=self.prev[0], prev_g=self.prev[1])
        return arrays, {"g0": self.g0}

    def load_state_dict(self, arrays, meta):
        self.w = np.array(arrays["w"])
        self.g = np.array(arrays["g"]) if "g" in arrays else None
        self.prev = (np.array(arrays["prev_w"]), np.array(arrays["prev_g"])) \
            if "prev_w" in arrays else None
        self.g0 = meta["g0"]

    def coef(self):
        return self.w[None, :-1].copy(), np.array([self.w[-1] * self.bias])


def _loss_grad(block, views, args, acc):
    """Squared-hinge loss and its gradient (the bias weight last) of one block."""
    w, C, B = args
    X = (block.indptr, block.indices, block.data)
    m = np.empty(block.n_rows)
    csr_matvec(X, w[:-1], m)
    z = np.maximum(0.0, 1.0 - block.y * (m + B * w[-1]))
    acc["f"] += C * float(z @ z)
    coef = -2.0 * C * block.y * z
    csr_rmatvec_add(X, coef, acc["g"][:-1])
    acc["g"][-1] += B * float(coef.sum())
