"""Developer tools for streamsvm (synthetic data, benchmarks); not part of the installed package."""
