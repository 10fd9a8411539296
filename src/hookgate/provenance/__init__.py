"""Provenance of a call's argument values: the session's facts (the user's request, the tool
results it has seen, each trusted or untrusted by declaration) and which argument values
came only from untrusted content. Pure values; the database store is in hookgate.storage.
"""

from hookgate.hooks.facts import (
    PROVENANCE_KEY,
    UNTRUSTED_OUTPUT_KEY,
    Fact,
    FactKind,
    FactStore,
    MemoryFacts,
    PendingProvenance,
    ProvenanceNotTraced,
    facts_session,
    provenance_of,
)
from hookgate.provenance.origins import ArgumentOrigin, Provenance, directed_by, trace

__all__ = ["PROVENANCE_KEY", "UNTRUSTED_OUTPUT_KEY", "ArgumentOrigin", "Fact", "FactKind",
           "FactStore", "MemoryFacts", "PendingProvenance", "Provenance", "ProvenanceNotTraced",
           "directed_by", "facts_session", "provenance_of", "trace"]
