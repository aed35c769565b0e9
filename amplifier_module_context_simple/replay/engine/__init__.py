"""The replay engine: a recorded session run through the context manager, and its report.

Imports the subpackages below it; nothing here draws a table or reads an option.

* ``engine``: the replay itself; ``recorded_feed``: the recorded system prompts and usage fed
  to it; ``given_overhead``: a bare transcript's ``--overhead`` as the stand-in tool
  definition the replayed budget holds back.
* ``config_options``: the context-config settings a replay can change, read from
  ``ContextConfig``'s fields, and the config they build; ``session_settings``: each setting
  and where it came from; ``setting_checks``: the settings that made no sense for a replay,
  named in warnings.
* ``report``: the report of a replay (and its ``--json`` document).
* ``session_analysis``: the recorded payloads and the cache followed through a replay, request
  by request (and each request's overhead).
* ``host_check``: the host's message models as a second validity check; ``view_tally``: each
  view's sums, carried over from the view before; ``view``: one view described message by
  message (``inspect``).
* ``sweep``: one replay per setting, compared (the ``sweep`` command).
"""
