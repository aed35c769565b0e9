"""What a replay finds, request by request: the records and what they show went wrong.

Imports only the subpackages below it (``recordings``, ``payloads``, ``provider``); the engine
fills these in as it runs.

* ``records``: one record per request and per compaction.
* ``drops``: what each view left out, shortened or stubbed, per history position
  (``inspect --why``).
* ``refusals``: what a provider would refuse (``replay --check``).
* ``evidence``: what the recorded next message's calls used that the view still showed
  (evidence kept), per request and per compaction.
* ``rework``: calls repeated after the session's own compactions.
"""
