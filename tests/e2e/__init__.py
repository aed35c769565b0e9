"""End-to-end support: test modules the real kernel loads from this directory.

``modules/`` holds three module source trees laid out like published module repositories
(``amplifier-module-<id>/amplifier_module_<id_with_underscores>/__init__.py``): an
orchestrator (``loop-e2e``), a scripted provider (``provider-scripted``) and an echo tool
(``tool-echo``). ``sources`` has the module-source resolver that points the kernel's loader
at them, and at this package's own source tree.
"""
