"""Health checks for load balancers, proxies and orchestrators: ``/healthz`` says the process
answers (liveness), ``/readyz`` that it can serve now, its database reachable and migrated
(readiness). Neither needs a token, and neither names the database or any secret.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from hookgate.server.auth import RuntimeDep
from hookgate.storage.database_check import readiness

router = APIRouter(tags=["health"])


class Health(BaseModel):
    #: ``ok``, or ``unavailable`` (``/readyz`` only, with the reason).
    status: str
    reason: str | None = None


@router.get("/healthz", summary="Liveness: the process answers", response_model=Health,
            response_model_exclude_none=True)
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: the database answers and its schema is current",
            response_model=Health,
            responses={503: {"model": Health, "description": "not ready; `reason` says why"}})
async def readyz(rt: RuntimeDep) -> JSONResponse:
    reason = await readiness(rt.db)
    if reason is not None:
        return JSONResponse({"status": "unavailable", "reason": reason}, status_code=503)
    return JSONResponse({"status": "ok"})
