"""Tests of the runtime's ``views`` folder (``amplifier_module_context_simple/views``)."""
