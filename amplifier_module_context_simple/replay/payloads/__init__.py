"""payloads."""
