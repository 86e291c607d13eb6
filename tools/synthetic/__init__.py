"""The parts of ``tools/make_synthetic.py``: :mod:`.text` writes rows as libsvm text (numba
kernels), :mod:`.rows` draws them from the hidden linear model (numba kernels and the block
generator); ``make_synthetic.py`` keeps the writer thread, compression, progress and the CLI."""
