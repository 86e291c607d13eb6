"""streamsvm's benchmarks, one command line: ``python tools/bench.py SUBCOMMAND ...``.

==================  ==============================================================  ===================
subcommand          measures                                                        module
==================  ==============================================================  ===================
``suite``           every solver against LIBLINEAR, scikit-learn and VW             ``suite``
``render``          a suite's tables and plots again, from its JSON                 ``suite``
``io-baseline``     reading + decompressing a store once; the reading path's RSS    ``store_io``
``checks-cost``     dcd's sweeps with and without the store's integrity checks      ``store_io``
``memory-bound``    every solver's peak RSS against floor + budget + model          ``memory``
``larger-than-ram`` every method in a memory cgroup smaller than the store          ``larger_than_ram``
``scheduler``       passes/s on a dask LocalCluster of 1 and 2 workers              ``scheduler``
``convert``         ``streamsvm convert`` against scikit-learn's loader             ``convert``
``codecs``          store size, convert and read seconds per ``--compression``      ``codecs``
``readers``         seconds per streamed pass for read-ahead settings               ``readers``
``alm``             alm's optima, race to the optimum, inner solvers                ``alm``
``nesvm``           nesvm's homotopy modes and C paths                              ``nesvm``
``avsf``            avsf's chunk order, hot cache and lazy reading out of core      ``avsf``
``ww``              ww against a C++ reference and LIBLINEAR -s 4 / -s 3            ``ww``
``walrus``          Walrus's cost against k                                         ``walrus``
``matrix``          every solver × data set × C × loss, in RAM and streamed         ``matrix``
``cv``              ``--cv K`` against one run and K separate runs; C search        ``cv``
==================  ==============================================================  ===================

What they share: one timed-run helper (:mod:`._timed`: in-process fits with repeats, and
child processes with their own peak RSS), one table writer (:mod:`._table`), the paths and
JSON files (:mod:`._common`), the machine and versions stamped on results
(:mod:`._machine`).
"""
