"""The on-host shared-memory inference smoke test (seeds 000 §3.1-3.2, 001 §3)."""
