"""``python -m amplifier_module_context_simple``: the ``context-simple`` command."""

if __name__ == "__main__":
    from .replay.command.cli import main

    main()
