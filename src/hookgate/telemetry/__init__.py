"""OpenTelemetry for hookgate: spans in the GenAI conventions, hookgate.* spans and metrics.

The call sites (engines, the guarded path, the registry, the gate, the model clients, the
declarative hooks, the runs route) hold one-line hooks into the modules here; everything
else lives in this room. With no tracer or meter provider set, every hook is a flag test.
"""
