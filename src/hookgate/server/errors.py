"""Error answers a person can read: validation problems as sentences, not stack traces."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException


def _sentence(err: dict[str, Any]) -> str:
    loc = [str(x) for x in err.get("loc", ()) if x != "body"]
    where = ".".join(loc)
    kind = err.get("type", "")
    if kind == "json_invalid":
        return f"the request body is not valid JSON ({err.get('ctx', {}).get('error', '')})"
    if kind == "extra_forbidden":
        return f"unknown field '{where}'"
    if kind == "missing":
        return f"missing field '{where}'" if where else "the request body is missing"
    if kind == "model_attributes_type":
        return "the request body must be a JSON object"
    return f"{where}: {err.get('msg', 'invalid')}" if where else str(err.get("msg"))


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [_sentence(e) for e in exc.errors()]
        return JSONResponse(
            {"error": "; ".join(problems), "problems": problems}, status_code=422
        )

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": exc.detail, "detail": exc.detail},
                            status_code=exc.status_code, headers=exc.headers)
