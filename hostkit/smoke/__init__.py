"""The on-host shared-memory inference smoke test (docs/operator-guide.md, "The smoke test")."""
