"""Tests of the runtime's ``session`` folder (``amplifier_module_context_simple/session``)."""
