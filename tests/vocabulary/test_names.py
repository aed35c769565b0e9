"""The names a tool's output shares with the next call (``_names``): a path's endings."""

from __future__ import annotations

from amplifier_module_context_simple.vocabulary._names import name_forms, names_in


def test_every_ending_of_a_path_that_is_a_name_is_a_form_of_it() -> None:
    assert name_forms("p/src/app.py") == {"p/src/app.py", "src/app.py", "app.py"}
    assert name_forms("docs/a/README") == {"docs/a/README", "a/README"}  # README alone is a word


def test_names_at_their_edges() -> None:
    assert list(names_in("aBcdef")) == ["aBcdef"], "a camel step right after the first letter"
    assert list(names_in("getValue then src/app.py")) == ["getValue", "src/app.py"]
    assert list(names_in("see ./src/app.py.")) == ["src/app.py"], "trimmed of . and /"
    assert list(names_in("lib/MAX")) == ["lib/MAX"]
    assert list(names_in("0.55 and 1.2.3")) == [], "no letter: a number"
    assert list(names_in("see ./a_b")) == [], "three characters once trimmed"
    assert list(names_in("a_bc")) == ["a_bc"], "four are enough"
    assert list(names_in("a well-known src/app.py")) == ["src/app.py"], "read past a plain run"
