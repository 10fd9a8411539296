"""The demo's world: one org, two people, a purchasing agent on a scripted model that pays
what the message asks, and a payment tool that needs a person's approval above 50,000."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from hookgate.agent import Agent
from hookgate.demo.model import demo_turn
from hookgate.examples.purchasing import oa__list_vendors, oa__purchase_pay
from hookgate.llm.scripted import ScriptedLLM
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest

#: The demo's SQLite file, in the folder ``hookgate demo --dir`` names.
DEMO_FILE = "hookgate-demo.db"
DEMO_MESSAGE = "Pay ACME for the Q3 hardware order: 12,000 now and the 60,000 balance."


def demo_agent() -> Agent:
    return Agent(
        id="buyer",
        name="Purchasing agent",
        instructions="You pay approved vendors for what the user asks.",
        tools=[oa__purchase_pay, oa__list_vendors],
        org_id="acme",
        owner_user_id="alice",
        confirmation_mode="inline_only",
        confirmation_approver_scope="org_members",
        model_config_json={"hooks": {"class_hooks": ["result_truncate"]}},
    )


class DemoDataBusy(Exception):
    """Another demo serves the data this one would remove."""


@dataclass(frozen=True)
class DemoData:
    """The demo's database file in ``directory``: started fresh, or kept on request."""

    directory: Path

    @property
    def file(self) -> Path:
        return self.directory / DEMO_FILE

    def keep(self) -> bool:
        """Whether there is earlier data to keep."""
        return self.file.exists()

    def reset(self) -> bool:
        """Remove an earlier demo's database; whether there was one. Refused while another
        demo serves it."""
        from hookgate.runs.executors.in_process import InstanceLock, InstanceLocked

        files = [self.file, *(self.file.with_name(self.file.name + s)
                              for s in ("-wal", "-shm", "-journal"))]
        if not any(f.exists() for f in files):
            return False
        lock = InstanceLock(self.file)
        try:
            lock.acquire()
        except InstanceLocked as exc:
            raise DemoDataBusy(f"{exc} (stop that demo, or pick another --dir)") from None
        try:
            for f in files:
                f.unlink(missing_ok=True)
        finally:
            lock.release()
        return True


def demo_deployment(directory: Path, public_url: str) -> tuple[Deployment, str]:
    """The demo deployment with a SQLite file in ``directory``, and a fresh token for alice."""
    token = "demo-" + secrets.token_urlsafe(18)
    deployment = Deployment(
        database_url=f"sqlite+aiosqlite:///{directory / DEMO_FILE}",
        orgs=[OrgSpec("acme", "ACME Corp")],
        users=[
            UserSpec("alice", "acme", admin=True, name="Alice (finance)",
                     token_sha256=token_digest(token)),
            UserSpec("bob", "acme", name="Bob (buyer)"),
        ],
        agents={"buyer": demo_agent()},
        model_for=lambda _agent_id: ScriptedLLM(demo_turn),
        public_url=public_url,
    )
    return deployment, token
