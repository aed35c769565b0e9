"""Tests of the runtime's ``planning`` folder (``amplifier_module_context_simple/planning``)."""
