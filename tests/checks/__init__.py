"""Tests of the runtime's ``checks`` folder (``amplifier_module_context_simple/checks``)."""
