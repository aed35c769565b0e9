"""The ``context-simple`` command-line tool: replay a session through the context manager.

Tooling, not runtime: ``amplifier_module_context_simple`` never imports this package, and this
package reads the runtime only through the package's ``__all__`` and private modules that
declare ``__all__``. Nothing is imported here, so the engine stays free of the command line's
optional dependencies (Typer, Rich, matplotlib).

Modules, by job:

* ``cli``: the Typer app, its commands (``replay``, ``inspect``, ``sweep``) and the one-line
  error handling (console script).
* ``options``: the options both commands share, declared once; ``config_options``: the
  context-config options, read from ``ContextConfig``'s fields, and the config they build.
* ``inputs``: the options checked and the messages they name; ``locate``: where the name
  given points (a file, a session directory or id, a Claude Code project folder or session
  id); ``transcripts``: loading a recorded session; ``conversations``: one conversation of a
  file holding one per line; ``claude_code_log``: reading a Claude Code session log into the
  same shape, with its recorded usage; ``example_session``: the seeded built-in session.
* ``session_dir``: reading a session directory (metadata, the events log streamed);
  ``known_windows``: the fallback table of model windows; ``session_settings``: each setting
  and where it came from; ``recorded_feed``: the recorded system prompts and usage fed to a
  replay; ``settings_text``: the report's Settings block.
* ``payload``: what one recorded request held, by category, beside the provider's usage;
  ``payload_match``: the payload matched to the transcript (conversation or injection);
  ``space_parts``: the tool definitions per tool and the system prompt per recorded part;
  ``cache_reuse``: cache reads and writes, and where each request first differs from the one
  before (a recorded payload, or a Claude Code log's rebuilt request);
  ``session_analysis``: both followed through a replay, request by request (and each
  request's overhead); ``window_tables``: their tables; ``window_report``: which of them the
  report shows.
* ``pricing``: a request's priced input (fresh tokens, cache writes, cache reads, each at its
  price) and the table of model prices; ``cache_simulation``: the cache a provider would keep,
  simulated for a replay, and its priced cost; ``replay_cache``: that simulation run over a
  replay's views.
* ``engine``: the replay itself; ``records``: one record per request and per compaction;
  ``given_overhead``: a bare transcript's ``--overhead`` as the stand-in tool definition the
  replayed budget holds back; ``report``: the report of them; ``budget_text``: its Budget
  line; ``host_check``: the host's message models as a second validity check;
  ``simulation``: the simulated provider window; ``view_tally``: each view's sums, carried
  over from the view before.
* ``view``: one view described message by message (``inspect``).
* ``evidence``: what the recorded next message's calls used that the view still showed
  (evidence kept), per request and per compaction; ``rework``: calls repeated after the
  session's own compactions; ``evidence_output``: their text.
* ``setting_checks``: the settings that made no sense for a replay, named in warnings.
* ``drops``: what each view left out, shortened or stubbed, per history position
  (``inspect --why``); ``refusals``: what a provider would refuse (``replay --check``);
  ``sweep``: one replay per setting, compared (the ``sweep`` command).
* ``table_fit``: the one rule every table fits the terminal by; ``output``: the Rich tables;
  ``findings_output``: the tables of drops, refusals and sweeps; ``row_caps``: which
  per-compaction rows the text report shows (the largest); ``json_text``: the ``--json``
  documents' text; ``plot``: the ``--plot`` chart; ``errors``: the command's error.
"""
