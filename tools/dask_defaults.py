"""The default solver at default parameters (``--solver auto``, squared hinge, C = 1, tol
1e-3) on each store given, locally and on a dask ``LocalCluster`` of 2 worker processes:
which solver auto picks, its passes, gap and seconds (issue 36: the default converges on a
cluster).

    python tools/dask_defaults.py a9a.zarr mushrooms.zarr dna.zarr letter.zarr
"""

from __future__ import annotations

import os
import sys
import time
import warnings


def main(stores) -> int:
    import distributed
    from streamsvm._train import train
    from streamsvm.io import open_store
    warnings.simplefilter("ignore")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, worker_dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        print("| data | backend | solver | passes | gap | converged | s |")
        print("| :--- | :--- | :--- | ---: | ---: | :--- | ---: |")
        for path in stores:
            store = open_store(path)
            name = os.path.basename(path.rstrip("/")).removesuffix(".zarr")
            for backend, kw in (("local", {}), ("dask, 2 workers", {"scheduler": client})):
                t = time.perf_counter()
                model, res = train(store, **kw)
                print(f"| {name} | {backend} | {model.params['solver']} | {res.passes:.1f} | "
                      f"{res.stop_value:.2e} | {res.converged} | "
                      f"{time.perf_counter() - t:.1f} |", flush=True)
    finally:
        client.close()
        cluster.close()
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
