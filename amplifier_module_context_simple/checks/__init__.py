"""What holds a view to the providers' rules and tells a user what to act on: the checks of
every rule (``_invariants``, over ``_view_scan``'s one pass) and the warnings
(``_diagnostics``)."""
