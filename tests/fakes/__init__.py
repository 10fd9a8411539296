"""Real stand-ins for outside systems (chat-completions endpoints, chat platforms) on loopback."""
