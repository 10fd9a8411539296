"""Error answers a person can read: validation problems as sentences, not stack traces."""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

#: What a strict field wanted, for "'x' must be …" (bodies are read strictly: schemas.py).
_EXPECTED = {"bool_type": "true or false", "string_type": "a string",
             "int_type": "a whole number", "float_type": "a number",
             "dict_type": "a JSON object", "list_type": "a JSON array"}


def _is_json(content_type: str | None) -> bool:
    media = (content_type or "").split(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _not_json_body(content_type: str | None) -> str:
    got = f"'{content_type}'" if content_type else "none"
    return (f"the request body must be JSON sent with 'Content-Type: application/json' "
            f"(this request's Content-Type: {got})")


def _sentence(err: dict[str, Any], content_type: str | None = None) -> str:
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
        if not _is_json(content_type):
            return _not_json_body(content_type)
        return "the request body must be a JSON object"
    if kind in _EXPECTED and where:
        return (f"'{where}' must be {_EXPECTED[kind]}, got "
                f"{json.dumps(err.get('input'), default=str)}")
    return f"{where}: {err.get('msg', 'invalid')}" if where else str(err.get("msg"))


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        content_type = request.headers.get("content-type")
        problems = [_sentence(e, content_type) for e in exc.errors()]
        return JSONResponse(
            {"error": "; ".join(problems), "problems": problems}, status_code=422
        )

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": exc.detail, "detail": exc.detail},
                            status_code=exc.status_code, headers=exc.headers)
