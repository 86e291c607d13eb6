"""The problem's costs as every kernel reads them: one record (DESIGN.md §4, kernel vocabulary).

``Costs(pos, Cp, Cn, squared, B)``, built once per run from the solver's declared
:class:`~streamsvm.problem.Problem` (:meth:`Solver.kernel_costs`):

``pos`` : int32 array of shape (k,)
    Model ``c`` takes row ``i`` as positive when ``y[i] == pos[c]`` (binary: ``y`` is ±1 and
    ``pos = [1]``; one-vs-rest: ``y`` is the class index and ``pos = [0, …, k − 1]``).
``Cp``, ``Cn`` : float64 arrays of shape (k,)
    The cost of model ``c``'s positive and negative rows (``C`` times the class weights).
``squared`` : bool
    The squared hinge (dual bound ``inf``, diagonal ``1/(2 C_i)``); else the hinge.
``B`` : float
    The bias feature's value (0: none).

A namedtuple, so a kernel reads it by field or unpacks it, and one compiled signature
serves every solver that passes it; :func:`class_costs` is one model's record. A path of C
values (nesvm's ``C_path``) lists each C's models one after the other; ``ww`` passes its
joint problem's record (``pos = 0..k−1``: a row of class ``y`` costs ``Cp[y]``). What is not
a cost stays a kernel's own argument (alm's loss power, nesvm's smoothing and LS-SVM loss).
"""

from __future__ import annotations

import collections

from ._jit import kernel_inline

__all__ = ["Costs", "class_costs"]

Costs = collections.namedtuple("Costs", ["pos", "Cp", "Cn", "squared", "B"])


@kernel_inline
def class_costs(costs, c):
    """Model ``c``'s record alone (one-vs-rest class by class)."""
    e = c + 1
    return Costs(costs.pos[c:e], costs.Cp[c:e], costs.Cn[c:e], costs.squared, costs.B)
