"""Models: the offline ScriptedLLM and a client for OpenAI-compatible endpoints."""

from hookgate.llm.base import ChatModel, Message, ModelError, ModelTurn
from hookgate.llm.openai_compat import OpenAICompatibleModel
from hookgate.llm.scripted import ScriptedLLM

__all__ = [
    "ChatModel",
    "Message",
    "ModelError",
    "ModelTurn",
    "OpenAICompatibleModel",
    "ScriptedLLM",
]
