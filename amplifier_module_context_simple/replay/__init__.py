"""The ``context-simple`` command-line tool: replay a session through the context manager.

Tooling, not runtime: ``amplifier_module_context_simple`` never imports this package, and this
package reads the runtime only through the package's ``__all__`` and private modules that
declare ``__all__``. Nothing is imported here, so the engine stays free of the command line's
optional dependencies (Typer, Rich, matplotlib).

Modules, by job:

* ``cli``: the Typer app, its two commands and the one-line error handling (console script).
* ``options``: the options both commands share, declared once; ``config_options``: the
  context-config options, one row per ``ContextConfig`` key, and the config they build.
* ``inputs``: the options checked and the messages they name; ``transcripts``: loading a
  recorded session; ``example_session``: the seeded built-in session.
* ``engine``: the replay itself; ``report``: its records and report; ``host_check``: the host's
  message models as a second validity check; ``simulation``: the simulated provider window;
  ``view_tally``: each view's sums, carried over from the view before.
* ``view``: one view described message by message (``inspect``).
* ``output``: the Rich tables; ``plot``: the ``--plot`` chart; ``errors``: the command's error.
"""
