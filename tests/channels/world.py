"""A deployment whose approvals go to chat channels, and the HTTP steps the tests take.

ACME has alice (who starts runs), bob and olivia (the agent's owner); Other Inc has mallory.
Each has a chat identity on every platform. The purchasing agent's ``wire_transfer`` needs
approval above 50,000 and a hook rewrites the vendor before the gate, so the card must show
the arguments as rewritten: the ones that will run.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from hookgate import Agent, HookResult, PreToolUseHook, ScriptedLLM, tool
from hookgate.approvals.delivery_claims import is_delivery_claim
from hookgate.channels.notify_tool import UNBOUND_CHANNEL_NOTIFY
from hookgate.engines.state import RunState
from hookgate.hooks.model import HookContext
from hookgate.runs.executors.settings import WorkerSettings
from hookgate.runtime.deployment import (
    ChannelSpec,
    Deployment,
    OrgSpec,
    UserSpec,
    token_digest,
)
from hookgate.runtime.runtime import Runtime
from hookgate.tools.tool import Tool
from tests.fakes.server import BuiltCallback
from tests.live_server import LiveServer, live_server

TOKENS = {"alice": "tok-alice", "bob": "tok-bob", "olivia": "tok-olivia",
          "mallory": "tok-mallory"}
#: Each person's identity on Feishu (open_id), Slack (user id) and WeCom (userid).
CHAT = {
    "alice": ("ou_alice", "U_ALICE", "alice"),
    "bob": ("ou_bob", "U_BOB", "bob"),
    "olivia": ("ou_olivia", "U_OLIVIA", "olivia"),
    "mallory": ("ou_mallory", "U_MALLORY", "mallory"),
}
#: Each person's Telegram user id (callback_query.from.id).
TELEGRAM = {"alice": 1001, "bob": 1002, "olivia": 1003, "mallory": 1004}
#: Each person's Microsoft Entra object id (a Teams invoke's from.aadObjectId).
TEAMS = {name: f"aad-{name}" for name in TELEGRAM}
#: Each person's Discord user id (an interaction's member.user.id).
DISCORD = {"alice": "200000000000000001", "bob": "200000000000000002",
           "olivia": "200000000000000003", "mallory": "200000000000000004"}
#: Each person's address (email channel) and own ntfy topic.
EMAIL = {name: f"{name}@acme.example" for name in TELEGRAM}
NTFY = {name: f"approvals-{name}-7f3k9q" for name in TELEGRAM}
PUBLIC_URL = "https://gate.example"
#: How long the helpers below wait for something to happen.
WAIT_S = 15.0
#: On PostgreSQL a scheduled job (a follow-up, an expiry) starts when a worker next looks
#: for due jobs: every half second here instead of every 5 s, and expiries share half-second
#: ticks; what the tests check does not depend on either length.
WORKER = WorkerSettings(poll_s=0.5, expiry_tick_s=0.5)
API_TOKEN = "sk-live-9f8e7d"
PAY = {"amount": 60000, "vendor": "acme gmbh", "api_token": API_TOKEN}
#: What alice types to start the run; the approver reads it on the card.
RUN_MESSAGE = "Pay ACME GMBH the 60,000 balance of the Q3 order"
#: The context every card shows in full where there is room (Feishu, Slack).
CONTEXT = (f"User asked: {RUN_MESSAGE}", "What the tool does: Send money to a vendor.",
           "Why approval is needed: the tool's rule: transfers above 50,000",
           "Numbers: amount = 60,000")
PAY_TURNS: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "wire_transfer", "args": PAY}]},
    {"answer": "Paid ACME GMBH."},
]


class Bank:
    """Records every transfer that actually ran."""

    def __init__(self) -> None:
        self.transfers: list[dict[str, Any]] = []


class VendorCase(PreToolUseHook):
    """Writes vendor names the way the bank spells them (runs before the gate)."""

    name = "vendor_case"
    priority = 10

    async def execute(self, ctx: HookContext) -> HookResult:
        if "vendor" not in ctx.tool_args:
            return HookResult()
        return HookResult(modified_args={**ctx.tool_args,
                                         "vendor": ctx.tool_args["vendor"].upper()})


class NoSecretsInChat(PreToolUseHook):
    """Keeps anything that looks like a key out of chat messages."""

    name = "no_secrets_in_chat"
    priority = 20

    def should_trigger(self, ctx: HookContext) -> bool:
        return ctx.tool_name == "channel_notify"

    async def execute(self, ctx: HookContext) -> HookResult:
        if "sk-" in str(ctx.tool_args.get("text", "")):
            return HookResult(allow=False, error="Blocked: that message contains a key.")
        return HookResult()


HOOKS = {"hooks": {"class_hooks": ["tests.channels.world:VendorCase",
                                   "tests.channels.world:NoSecretsInChat"]}}


def wire_transfer_tool(bank: Bank) -> Tool:
    @tool(requires_confirmation=lambda a: a["amount"] > 50_000, writes=True,
          confirmation_reason="transfers above 50,000")
    async def wire_transfer(amount: float, vendor: str, api_token: str) -> str:
        """Send money to a vendor."""
        bank.transfers.append({"amount": amount, "vendor": vendor})
        return f"sent {amount:.0f} to {vendor}"

    return wire_transfer


def world(
    database_url: str,
    channels: list[ChannelSpec],
    *,
    approval_channel_id: str | None = None,
    scope: str = "initiator",
    turns: list[dict[str, Any]] | None = None,
    notify_on_completion: bool = False,
    public_url: str | None = PUBLIC_URL,
    agent_options: dict[str, Any] | None = None,
) -> tuple[Deployment, Bank]:
    """The deployment with ``channels``; the agent ``buyer`` runs ``turns``."""
    bank = Bank()
    agent = Agent(
        id="buyer", name="Purchasing agent", instructions="You buy things.",
        tools=[wire_transfer_tool(bank), UNBOUND_CHANNEL_NOTIFY], org_id="acme",
        owner_user_id="olivia", confirmation_approver_scope=scope,  # type: ignore[arg-type]
        approval_channel_id=approval_channel_id, model_config_json=HOOKS,
        notify_on_completion=notify_on_completion, **(agent_options or {}),
    )
    script = turns or PAY_TURNS
    orgs = {"alice": "acme", "bob": "acme", "olivia": "acme", "mallory": "other"}
    users = [
        UserSpec(name, org, admin=name == "alice", token_sha256=token_digest(TOKENS[name]),
                 feishu_open_id=CHAT[name][0], slack_user_id=CHAT[name][1],
                 wecom_userid=CHAT[name][2], telegram_user_id=str(TELEGRAM[name]),
                 teams_aad_object_id=TEAMS[name], discord_user_id=DISCORD[name],
                 email_address=EMAIL[name], ntfy_topic=NTFY[name])
        for name, org in orgs.items()
    ]
    deployment = Deployment(
        database_url=database_url,
        orgs=[OrgSpec("acme", "ACME Corp"), OrgSpec("other", "Other Inc")],
        users=users,
        agents={"buyer": agent},
        model_for=lambda _agent_id: ScriptedLLM(script),
        channels=channels,
        public_url=public_url,
        worker=WORKER,
    )
    return deployment, bank


@asynccontextmanager
async def buyer_runtime(database_url: str) -> AsyncIterator[tuple[Runtime, RunState]]:
    """The world's runtime (no channels), migrated and synced but not started, and a new
    (unsaved) run of the buyer: for tests that drive the runner directly."""
    deployment, _ = world(database_url, [])
    rt = Runtime(deployment)
    await rt.db.upgrade()
    await rt.sync()
    try:
        agent = deployment.agents["buyer"]
        yield rt, rt.runs.engine(agent).new_state(agent, "pay", user_id="alice",
                                                  org_id="acme")
    finally:
        await rt.db.dispose()


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


async def eventually(probe: Callable[[], Any], what: str) -> Any:
    """Poll ``probe`` (plain or async) until it returns something truthy; fail naming
    ``what``."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = probe()
        if inspect.isawaitable(found):
            found = await found
        if found:
            return found
        await asyncio.sleep(0.03)
    raise AssertionError(f"timed out waiting for {what}")


async def start_run(client: httpx.AsyncClient, user: str = "alice") -> str:
    r = await client.post("/api/runs", json={"agent_id": "buyer", "message": RUN_MESSAGE},
                          headers=auth(user))
    assert r.status_code == 200, r.text
    return str(r.json()["run_id"])


async def finished_run(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    async def finished() -> dict[str, Any] | None:
        body: dict[str, Any] = (await client.get(f"/api/runs/{run_id}",
                                                 headers=auth("alice"))).json()
        return None if body["status"] in ("running", "awaiting_approval") else body

    return dict(await eventually(finished, f"run {run_id} to finish"))


async def requests(client: httpx.AsyncClient, status: str | None = None
                   ) -> list[dict[str, Any]]:
    """The org's requests as alice's inbox lists them (newest first)."""
    params = {"status": status} if status else {}
    r = await client.get("/api/confirmations", params=params, headers=auth("alice"))
    assert r.status_code == 200, r.text
    return list(r.json())


async def delivered_request(srv: LiveServer, client: httpx.AsyncClient) -> dict[str, Any]:
    """The first pending request once the server has recorded where its card landed.

    A fake platform holds the card a moment before the server has the platform's answer;
    a person cannot click that fast, a test can.
    """
    pending = (await eventually(lambda: requests(client, "pending"), "a pending request"))[0]

    def recorded() -> bool:
        request = srv.call(srv.runtime.approvals.store.get(pending["id"]))
        # Not the claim a sender takes before the platform answers: the card's own record.
        ref = request.delivery_ref if request is not None else None
        return ref is not None and not is_delivery_claim(ref)

    await eventually(recorded, f"the delivery record of {pending['id']}")
    return dict(pending)


def callback_url(channel_id: str) -> str:
    return f"/api/channels/{channel_id}/callback"


@dataclass
class Scene:
    """A run of the buyer waiting for approval, its card out on ``channel_id``."""

    srv: LiveServer
    client: httpx.AsyncClient
    bank: Bank
    run_id: str
    request_id: str
    channel_id: str

    async def send(self, callback: BuiltCallback, channel_id: str | None = None
                   ) -> httpx.Response:
        """Deliver ``callback`` as the platform would (to this scene's channel by default)."""
        return await callback.send(self.client, callback_url(channel_id or self.channel_id))

    async def decide_in_inbox(self, decision: str, reason: str | None = None, *,
                              arguments: dict[str, Any] | None = None,
                              message: str | None = None) -> None:
        r = await self.client.post(f"/api/confirmations/{self.request_id}/respond",
                                   json={"decision": decision, "reason": reason,
                                         "via": "inbox", "arguments": arguments,
                                         "message": message},
                                   headers=auth("alice"))
        assert r.status_code == 200, r.text

    async def record(self) -> dict[str, Any]:
        r = await self.client.get(f"/api/confirmations/{self.request_id}",
                                  headers=auth("alice"))
        assert r.status_code == 200, r.text
        return dict(r.json())

    async def finished(self) -> dict[str, Any]:
        return await finished_run(self.client, self.run_id)

    async def untouched(self) -> None:
        """The request is still pending with no decision, and nothing was paid."""
        record = await self.record()
        assert record["status"] == "pending"
        assert record["decision"] == {"responded_at": None, "responded_by": None,
                                      "channel_identity": None, "reason": None, "via": None,
                                      "message": None}
        assert record["payload"]["edited_args"] is None
        assert self.bank.transfers == []

    async def approve_for_real(self, callback: BuiltCallback,
                               channel_id: str | None = None) -> None:
        """After everything refused, the rightful approver's click still works."""
        reply = await self.send(callback, channel_id)
        assert reply.status_code == 200, reply.text
        assert (await self.finished())["status"] == "completed"
        assert len(self.bank.transfers) == 1


@asynccontextmanager
async def waiting_run(database_url: str, channels: list[ChannelSpec], channel_id: str,
                      card_out: Callable[[], Any], **options: Any) -> AsyncIterator[Scene]:
    """Serve ``channels``, start the buyer (approvals on ``channel_id``), and yield once its
    card is out (``card_out`` returns something truthy)."""
    deployment, bank = world(database_url, channels, approval_channel_id=channel_id,
                             **options)
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            run_id = await start_run(client)
            await eventually(card_out, "the approval card")
            pending = await delivered_request(srv, client)
            yield Scene(srv, client, bank, run_id, pending["id"], channel_id)


async def run_without_delivery(database_url: str, channels: list[ChannelSpec],
                               channel_id: str) -> tuple[dict[str, Any], dict[str, Any], Bank]:
    """Run the buyer while its channel's platform keeps failing: (the blocked call's trace
    event, the request as the inbox shows it, the bank)."""
    deployment, bank = world(database_url, channels, approval_channel_id=channel_id)
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            run = await finished_run(client, await start_run(client))
            [request] = await requests(client)
    blocked = [e for e in run["trace"] if e["type"] == "tool_blocked"]
    assert run["status"] == "completed" and len(blocked) == 1, run["trace"]
    return blocked[0], request, bank
