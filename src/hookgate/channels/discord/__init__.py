"""Discord: approval messages with buttons, clicks as signed HTTP interactions."""
