"""Telegram: approval messages with an inline keyboard, clicks via the bot's webhook."""
