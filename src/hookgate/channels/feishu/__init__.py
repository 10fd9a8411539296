"""Feishu / Lark: approval cards in a group chat, clicks via the card callback (schema 2.0)."""
