"""The provider, as far as a replay needs it: its window, its cache and the price of both.

Imports only ``recordings`` and ``payloads`` below it.

* ``simulation``: the simulated provider window.
* ``pricing``: a request's priced input (fresh tokens, cache writes, cache reads, each at its
  price) and the table of model prices.
* ``cache_rules``: where a request first differs from the one before and why (the cause of a
  cache break), over fingerprints of its parts.
* ``cache_reuse``: cache reads and writes as recorded, and the breaks ``cache_rules`` finds,
  one linear tracker for a recorded payload and a Claude Code log's rebuilt request alike.
* ``cache_simulation``: the cache a provider would keep, simulated for a replay, and its
  priced cost; ``replay_cache``: that simulation run over a replay's views.
"""
