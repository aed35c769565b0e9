"""Reading recordings: whatever the user names, loaded as a transcript to replay.

The bottom of the tool: imports nothing of it but ``errors``. A new log format goes here.

* ``locate``: where the name given points (a file, a session directory or id, a Claude Code
  project folder or session id).
* ``transcripts``: loading a recorded session (the accepted layouts); ``conversations``: one
  conversation of a file holding one per line.
* ``session_dir``: reading an Amplifier session directory (metadata, the events log streamed,
  the recorded requests); ``known_windows``: the fallback table of model windows.
* ``claude_code_log``: reading a Claude Code session log into the same shape, with its
  recorded usage.
* ``codex_log``, ``pi_log``, ``opencode_log``, ``cline_task``: the other agents' logs (Codex
  rollouts, Pi sessions, OpenCode exports and databases, Cline task folders), read the same way;
  ``recorded_log``: what every agent's log is read into (messages, per-call usage, the agent's
  own compactions); ``agent_logs``: which format a file is, tried in order; ``agent_homes``:
  where each agent keeps its logs, by folder or session id.
* ``example_session``: the seeded built-in session.
"""
