"""The names a tool's output shares with the next call (``_names``): a path's endings."""

from __future__ import annotations

from amplifier_module_context_simple.vocabulary._names import name_forms


def test_every_ending_of_a_path_that_is_a_name_is_a_form_of_it() -> None:
    assert name_forms("p/src/app.py") == {"p/src/app.py", "src/app.py", "app.py"}
    assert name_forms("docs/a/README") == {"docs/a/README", "a/README"}  # README alone is a word
