"""Tests of the runtime's ``vocabulary`` folder (``amplifier_module_context_simple/vocabulary``)."""
