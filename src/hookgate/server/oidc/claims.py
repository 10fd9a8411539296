"""What an identity provider's claims make of a person in hookgate: their org, admin right
and groups (``oidc:`` org_claim, groups_claim, admin_groups), and whether they may sign in
at all (approver_groups). Read on every sign-in and every re-check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hookgate.config.oidc import OidcSpec
from hookgate.server.oidc.errors import OidcError
from hookgate.storage.oidc_sessions import Person


def groups_of(spec: OidcSpec, claims: Mapping[str, Any]) -> tuple[str, ...]:
    value = claims.get(spec.groups_claim)
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(sorted({str(g) for g in value if isinstance(g, (str, int))}))
    return ()


def person_of(spec: OidcSpec, claims: Mapping[str, Any]) -> Person:
    """The person ``claims`` describe; OidcError when they may not sign in (no org, or in
    none of the approver groups)."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise OidcError("the provider's claims carry no subject ('sub')")
    groups = groups_of(spec, claims)
    org = claims.get(spec.org_claim) if spec.org_claim else None
    if isinstance(org, list):
        org = org[0] if len(org) == 1 else None
    org_id = str(org) if isinstance(org, (str, int)) and str(org) else spec.org
    if org_id is None:
        raise OidcError(f"'{subject}' has no org: the provider sent no '{spec.org_claim}' "
                        "claim and oidc.org is not set")
    if spec.approver_groups and not set(groups) & set(spec.approver_groups):
        raise OidcError(f"'{subject}' is in none of the approver groups "
                        f"({', '.join(spec.approver_groups)}) the provider names")
    email = claims.get("email")
    name = claims.get("name") or claims.get("preferred_username") or ""
    return Person(issuer=spec.issuer, subject=subject, org_id=org_id,
                  admin=bool(set(groups) & set(spec.admin_groups)), groups=groups,
                  name=str(name), email=str(email) if isinstance(email, str) else None)
