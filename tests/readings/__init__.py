"""Tests of the runtime's ``readings`` folder (``amplifier_module_context_simple/readings``)."""
