"""Tests of the runtime's ``sizing`` folder (``amplifier_module_context_simple/sizing``)."""
