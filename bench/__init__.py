"""bench: the benchmarks behind `kubemu bench`."""
