"""``/api/channels/{channel_id}/callback``: where the chat platforms send clicks and URL
handshakes (and where email links and ntfy buttons lead). No bearer token: each platform
proves itself by its signature, JWT, secret token or signed link."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from hookgate.channels.base import CallbackRejected, CallbackRequest
from hookgate.channels.verification import MAX_CALLBACK_BYTES
from hookgate.runtime.runtime import Runtime
from hookgate.server.auth import RuntimeDep
from hookgate.server.callbacks import ChannelCallbacks

router = APIRouter(prefix="/api", tags=["channels"])


class _TooLarge(Exception):
    pass


async def _bounded_body(request: Request) -> bytes:
    # Read at most one byte past the limit, whatever Content-Length claims.
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_CALLBACK_BYTES:
            raise _TooLarge
    return bytes(body)


_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {"description": "the platform's own answer: a card update or toast (JSON), or the "
                         "handshake's challenge or echostr (text)",
          "content": {"application/json": {"schema": {"type": "object",
                                                      "additionalProperties": True}},
                      "text/plain": {"schema": {"type": "string"}}}},
    400: {"description": "unreadable or undecryptable callback"},
    401: {"description": "unsigned, wrongly signed, stale or replayed callback"},
    403: {"description": "the channel is disabled"},
    404: {"description": "no such channel"},
    503: {"description": "the platform's signing keys could not be fetched (Teams)"},
}


@router.post("/channels/{channel_id}/callback", response_class=Response,
             summary="Chat-platform callback: a button click or a URL handshake",
             responses=_RESPONSES)
async def channel_callback(channel_id: str, request: Request, rt: RuntimeDep) -> Response:
    """Verify and act on a platform callback. A refused click that was verified is still
    answered 200, with "not allowed" on the card (Feishu's toast), and changes nothing."""
    return await _handle(channel_id, request, rt)


@router.get("/channels/{channel_id}/callback", response_class=Response,
            summary="Chat-platform URL handshake by GET (WeCom's echostr; an email link's "
                    "confirmation page)",
            responses=_RESPONSES)
async def channel_handshake(channel_id: str, request: Request, rt: RuntimeDep) -> Response:
    """Answer WeCom's signed ``echostr`` check with the decrypted plaintext."""
    return await _handle(channel_id, request, rt)


async def _handle(channel_id: str, request: Request, rt: Runtime) -> Response:
    try:
        body = await _bounded_body(request)
    except _TooLarge:
        return JSONResponse({"error": f"callback body larger than {MAX_CALLBACK_BYTES} "
                                      "bytes"}, status_code=413)
    incoming = CallbackRequest(
        method=request.method,
        headers={k.lower(): v for k, v in request.headers.items()},
        query=dict(request.query_params),
        body=body,
    )
    callbacks = ChannelCallbacks(rt.db, rt.approvals, rt.channels)
    try:
        reply = await callbacks.handle(channel_id, incoming)
    except CallbackRejected as exc:
        return JSONResponse({"error": exc.reason}, status_code=exc.status)
    return Response(reply.body, status_code=reply.status_code, media_type=reply.content_type)
