"""The command's output: the text report's tables and blocks, the JSON text, the chart.

Imports the subpackages below it; only ``command`` imports it. A new report table goes here.

* ``table_fit``: the one rule every table fits the terminal by; ``row_caps``: which
  per-compaction rows the text report shows (the largest).
* ``first_screen``: the default report, one screen (cost, savings, losses, refusals);
  ``output``: the full report's Rich tables, in order (``--full``); ``report_rows``: the
  lines and rows both share; ``budget_text``: the Budget line; ``settings_text``: the
  Settings block.
* ``window_tables``: the tables of the window by category and the cache; ``window_report``:
  which of them the report shows.
* ``findings_output``: the tables of drops, refusals and sweeps; ``evidence_output``: the
  text of evidence kept and rework.
* ``json_text``: the ``--json`` documents' text; ``plot``: the ``--plot`` chart.
"""
