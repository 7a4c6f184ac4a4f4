"""The on-host shared-memory inference smoke test (docs/smoke.md)."""
