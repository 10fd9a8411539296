"""A policy set loads whole or not at all: a writer cut at every byte of a new policy file
(replacing the file, or adding one to the folder) never puts a partial set in force, even a
prefix that parses as a smaller valid set; only the whole new set, once `hookgate policy
reload` stamps it, is taken. A stamp itself cut short is no version."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hookgate.policies import CallFacts
from hookgate.policies.live import LivePolicySet
from hookgate.policies.policy_set import policies_of
from hookgate.policies.reload import reload_policies
from hookgate.policies.schema import cedar_schema
from hookgate.policies.source import PolicyFile, read_policy_files, version_of
from hookgate.policies.stamp import stamp_path, write_stamp
from tests.policies.world import INVARIANTS, PAYMENTS_ONLY, TOOLS, write_policies

#: The new set: the invariants and a freeze (its reason is not ASCII, so some cuts split a
#: character). Its first policies alone are a valid smaller set that allows payments.
FROZEN = INVARIANTS + """
@id("payments-frozen")
@reason("payments are frozen — ask finance")
forbid(principal, action == Action::"oa__purchase_pay", resource);
"""
FREEZE_ONLY = """\
@id("payments-frozen")
@reason("payments are frozen — ask finance")
forbid(principal, action == Action::"oa__purchase_pay", resource);
"""


def pay(amount: int = 100) -> CallFacts:
    return CallFacts(tool_name="oa__purchase_pay", args={"amount": amount, "vendor": "ACME"},
                     user_id="alice", org_id="acme", agent_id="buyer", agent_audited=True,
                     writes=True)


def _write(path: Path, data: bytes) -> None:
    # Written in place, as an editor or `cp` does; a later mtime even within the file
    # system's timestamp granularity.
    with path.open("wb") as handle:
        handle.write(data)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def _parses_as_a_smaller_set(folder: Path) -> bool:
    try:
        policies_of(read_policy_files(folder), cedar_schema(TOOLS), "deny")
    except Exception:
        return False
    return True


@pytest.mark.parametrize("stamped_first", [False, True],
                         ids=["writer-then-reload", "new-set-stamped-before-the-write-ends"])
def test_a_file_rewritten_in_place_is_never_taken_part_way(
        folder: Path, stamped_first: bool) -> None:
    policy_file = write_policies(folder, PAYMENTS_ONLY) / "invariants.cedar"
    reload_policies(folder, "deny", TOOLS)
    live = LivePolicySet(folder, "deny", TOOLS, recheck_s=0)
    old = live.loaded.version
    data = FROZEN.encode()
    new = version_of([PolicyFile("policies/invariants.cedar", FROZEN)])
    if stamped_first:  # another host (or the writer) stamped the whole new set already
        write_stamp(folder, new)
    smaller_sets = 0

    for cut in range(len(data)):
        _write(policy_file, data[:cut])
        decision = live.decide(pay())
        assert decision.version == old, f"cut at byte {cut}: a partial set was taken"
        assert live.loaded.version == old and decision.effect == "allow"
        smaller_sets += _parses_as_a_smaller_set(folder)
    assert smaller_sets > 10  # the attack includes prefixes that are valid sets

    _write(policy_file, data)
    if not stamped_first:
        assert live.decide(pay()).version == old  # complete, but nobody said so yet
        assert live.status().state == "not reloaded"
        reload_policies(folder, "deny", TOOLS)
    decision = live.decide(pay())
    assert decision.version == new and decision.effect == "deny"
    assert decision.policy_ids == ("payments-frozen",)
    assert live.status().state == "in force" and live.status().error is None


def test_a_file_added_to_the_folder_is_never_taken_part_way(folder: Path) -> None:
    write_policies(folder, INVARIANTS)
    reload_policies(folder, "deny", TOOLS)
    live = LivePolicySet(folder, "deny", TOOLS, recheck_s=0)
    old = live.loaded.version
    added = folder / "freeze.cedar"
    data = FREEZE_ONLY.encode()

    for cut in range(len(data)):
        _write(added, data[:cut])
        decision = live.decide(pay())
        assert decision.version == old and decision.effect == "allow", f"cut at byte {cut}"

    _write(added, data)
    reload_policies(folder, "deny", TOOLS)
    decision = live.decide(pay())
    assert decision.version != old and decision.policy_ids == ("payments-frozen",)


def test_a_stamp_cut_short_or_written_by_hand_is_no_version(folder: Path) -> None:
    policy_file = write_policies(folder, PAYMENTS_ONLY) / "invariants.cedar"
    reload_policies(folder, "deny", TOOLS)
    live = LivePolicySet(folder, "deny", TOOLS, recheck_s=0)
    old = live.loaded.version
    _write(policy_file, FROZEN.encode())
    new = version_of(read_policy_files(folder))
    stamp = (new + "\n").encode()

    for cut in range(len(stamp) - 1):
        _write(stamp_path(folder), stamp[:cut])
        assert live.decide(pay()).version == old, f"stamp cut at byte {cut}"
    _write(stamp_path(folder), stamp)
    assert live.decide(pay()).version == new


def test_a_process_starting_on_files_that_are_not_the_stamped_set_refuses_them(
        folder: Path) -> None:
    policy_file = write_policies(folder, PAYMENTS_ONLY) / "invariants.cedar"
    reload_policies(folder, "deny", TOOLS)
    _write(policy_file, FROZEN.encode()[:200])

    with pytest.raises(Exception, match=r"not cedar-[0-9a-f]{12}, the set the last `hookgate "
                                        r"policy reload` stamped"):
        LivePolicySet(folder, "deny", TOOLS)


def test_opening_the_set_again_for_more_tools_mid_write_keeps_the_set_in_force(
        folder: Path) -> None:
    from hookgate.policies.live import open_policy_set

    policy_file = write_policies(folder, FROZEN) / "invariants.cedar"
    first = open_policy_set(folder, "deny", TOOLS[:1])
    old = first.loaded.version
    _write(policy_file, PAYMENTS_ONLY.encode()[:60])  # no stamp anywhere: a write under way

    again = open_policy_set(folder, "deny", TOOLS)  # another agent, one more tool

    assert again is not first and again.loaded.version == old
    assert again.decide(pay()).policy_ids == ("payments-frozen",)
    assert again.status().state == "not reloaded"
