"""Tests of the runtime's ``history`` folder (``amplifier_module_context_simple/history``)."""
