"""What things cost and what a request may spend: the estimator (``_estimate``,
``_features``, ``_price``, ``_images``), the budget (``_budget``, ``_budget_record``,
``_budget_gate``, ``_provider_reads``), the tool definitions a request carries
(``_tool_definitions``), the measured path's counted envelopes (``_envelope``) and when a
room disproves the decisions made under it (``_room``)."""
