"""A request planned: the settings (``_config``), its thresholds (``_thresholds``), when to
escalate (``_timing``), the system prompt (``_system_prompt``), the planner's passes
(``_planner``, its records in ``_plan``), the escalation's statistics and notices
(``_compose``, the maps ordered and made in ``_map_maker``) and the resume walk over a stored
history (``_catch_up``)."""
