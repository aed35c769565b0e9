"""The command's output: the text report's tables and blocks, the JSON text, the chart.

Imports the subpackages below it; only ``command`` imports it. A new report table goes here.

* ``table_fit``: the one rule every table fits the terminal by; ``row_caps``: which
  per-compaction rows the text report shows (the largest).
* ``output``: the report's Rich tables, in order; ``budget_text``: its Budget line;
  ``settings_text``: its Settings block.
* ``window_tables``: the tables of the window by category and the cache; ``window_report``:
  which of them the report shows.
* ``findings_output``: the tables of drops, refusals and sweeps; ``evidence_output``: the
  text of evidence kept and rework.
* ``json_text``: the ``--json`` documents' text; ``plot``: the ``--plot`` chart.
"""
