"""The human approval gate: requests a person decides, kept in the database (SPEC §5)."""
