"""Email: approval mails with signed, single-use, expiring links; only a POST decides."""
