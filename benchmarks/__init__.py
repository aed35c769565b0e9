"""Benchmarks of the context manager: cost per admitted message and per request.

Run ``uv run python -m benchmarks`` (see ``python -m benchmarks --help``). Every size runs in its
own child process on a session from ``generate_session``; each figure is reported in seconds and
as a ratio to one ``json.dumps(history)`` measured in the same process, so figures compare
across machines. Times are best-of-N (``time.perf_counter``, garbage collector paused around the
timed call, as ``timeit`` does); nothing here asserts on time.
"""
