"""The view of a history under sticky decisions: the decisions and their statistics
(``_decisions``), the ladder and the fit pass (``_ladder``, ``_working``, ``_protection``,
``_turns``), rendering and the shortened forms (``_render``, ``_forms``, ``_view_cache``), the
notice (``_notice``) and the map of what a view left out (``_left_out_map``,
``_map_reading``)."""
