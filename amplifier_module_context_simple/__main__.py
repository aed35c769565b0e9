"""``python -m amplifier_module_context_simple``: the ``context-simple`` command."""

from .cli import main

if __name__ == "__main__":
    main()
