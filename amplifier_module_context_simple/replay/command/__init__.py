"""The command line: the ``context-simple`` app, its options, and the inputs they name.

The top of the tool: nothing in it is imported by the other subpackages.

* ``cli``: the Typer app, its commands (replay, inspect, sweep) and the one-line error
  handling (console script).
* ``options``: the options the commands share, declared once (the context-config ones are read
  from ``ContextConfig`` by the engine).
* ``help_text``: a command's ``--help``, laid out by the tables' fitting rule (no option
  name cut at any width).
* ``inputs``: the options checked and the messages they name, and the recording they point
  at, loaded.
"""
