"""Framework adapters: each routes one agent framework's tool calls through a hookgate guard
(`hookgate.client`), using the framework's own extension point and its own durable pause.
They import only `hookgate.client`, never hookgate's internals."""
