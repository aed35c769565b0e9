"""The ``context-simple`` command-line tool: replay a session through the context manager.

Tooling, not runtime: ``amplifier_module_context_simple`` never imports this package, and this
package reads the runtime only through the package's ``__all__`` and private modules that
declare ``__all__``. Nothing is imported here, so the engine stays free of the command line's
optional dependencies (Typer, Rich, matplotlib).

Subpackages, one per job, lowest first; a module imports its own subpackage and those below
it, never one above (``tests/replay/test_replay_package.py`` checks it). Each ``__init__`` lists its
modules' jobs.

* ``recordings``: reading recordings (Amplifier session directories, transcripts, Claude
  Code logs, conversations, the built-in example). A new log format goes here.
* ``payloads``: what each recorded request held (the window by category, the space parts).
* ``provider``: the provider's window, its cache (recorded and simulated) and their price.
* ``findings``: the replay's records and what they show (drops, refusals, evidence kept,
  rework).
* ``engine``: the replay itself, its settings, its report and the ``sweep`` of settings.
* ``output``: the text report's tables and blocks, the ``--json`` text, the ``--plot`` chart.
  A new report table goes here.
* ``command``: the Typer app (the console script), its options and the inputs they name.

One module sits beside them, shared by all: ``errors``, the command's one-line error.
"""
