"""What the provider's readings say: the meter that pairs views with readings (``_meter``,
``_meter_stats``), the usage payloads (``_usage``), the gate for implausible readings
(``_reading_gate``), the size model (``_size_model``), the learned overhead
(``_learned_overhead``) and the thinking blocks prefix edits cost (``_thinking_loss``)."""
