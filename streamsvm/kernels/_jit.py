"""The decorator for kernels that allocate nothing: ``@kernel``.

Such kernels are compiled without numba's reference-counting runtime (NRT, the private
option ``_nrt=False`` that numba's own string code uses): with it, every call of a helper
that receives an array, and every item taken from a tuple of arrays, costs an atomic
reference-count update that numba does not optimise away, which made the libsvm tokenizer
and the dual CD sweep several times slower in microbenchmarks while this module was written
(not re-measured by a tool in tools/). If a future numba drops the option,
kernels compile normally (slower, still correct). Kernels that allocate arrays must use
plain ``numba.njit(cache=True, nogil=True)``.

``inline="always"`` can miscompile without a word: numba 0.68.1 (with or without NRT) built
a version of ``avsf_visits`` that unpacked its ``model`` tuple inside the visit loop, next to
several inlined helpers, without the statements that update ``wb`` after the step — wrong
models, no error. Check a change to a kernel's structure bit for bit
(``tools/solver_identity.py``), not only by tests with tolerances.
"""

from __future__ import annotations

import numba
import numba.core.cpu

__all__ = ["kernel", "kernel_inline", "NO_NRT"]

NO_NRT = ({"_nrt": False} if hasattr(numba.core.cpu, "CPUTargetOptions")
          and hasattr(numba.core.cpu.CPUTargetOptions, "_nrt") else {})

kernel = numba.njit(cache=True, nogil=True, **NO_NRT)
# For small per-row helpers called in hot loops: inlined by numba itself, before LLVM.
kernel_inline = numba.njit(cache=True, nogil=True, inline="always", **NO_NRT)
