"""WeCom's callback XML is read with defusedxml: entity expansion (billion laughs), external
entities and any DTD are refused with a 400 that names what was refused, in the outer body
(read before its signature is checked) and in a correctly signed, decrypted message."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from hookgate.channels.base import CallbackRejected
from hookgate.channels.wecom.channel import WeComChannel
from tests.channels.conftest import parse
from tests.fakes.server import BuiltCallback
from tests.fakes.wecom import FakeWeCom

LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
          + b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;")
                                                 * 10) for i in range(1, 10))
          + b"]><xml><Encrypt>&lol9;</Encrypt></xml>")
EXTERNAL_ENTITY = (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY ext SYSTEM '
                   b'"file:///etc/passwd">]><xml><Encrypt>&ext;</Encrypt></xml>')
EXTERNAL_DTD = (b'<?xml version="1.0"?><!DOCTYPE xml SYSTEM "http://127.0.0.1:9/evil.dtd">'
                b"<xml><Encrypt>x</Encrypt></xml>")
PARAMETER_ENTITY = (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY % p SYSTEM '
                    b'"http://127.0.0.1:9/p.dtd"> %p;]><xml><Encrypt>x</Encrypt></xml>')
#: The same bomb in UTF-16: no ASCII "<!DOCTYPE" bytes for a byte search to find.
UTF16_LAUGHS = LAUGHS.replace(b'<?xml version="1.0"?>', b"").decode().join(
    ['<?xml version="1.0" encoding="UTF-16"?>', ""]).encode("utf-16")

HOSTILE = {
    "billion laughs": LAUGHS,
    "external entity": EXTERNAL_ENTITY,
    "external DTD": EXTERNAL_DTD,
    "parameter entity": PARAMETER_ENTITY,
    "billion laughs in UTF-16": UTF16_LAUGHS,
}


@pytest.fixture
async def channel(wecom: FakeWeCom) -> AsyncIterator[WeComChannel]:
    ch = WeComChannel("ch-wecom", "org-1", wecom.channel_config())
    yield ch
    await ch.aclose()


def refusal(channel: WeComChannel, callback: BuiltCallback) -> CallbackRejected:
    with pytest.raises(CallbackRejected) as caught:
        parse(channel, callback)
    return caught.value


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_an_outer_body_with_a_dtd_is_refused_before_anything_expands(
        wecom: FakeWeCom, channel: WeComChannel, name: str) -> None:
    genuine = wecom.card_click("r", "approve")
    refused = refusal(channel, BuiltCallback("POST", {}, genuine.query, HOSTILE[name]))
    assert refused.status == 400
    assert "callback body refused" in str(refused) and "DOCTYPE" in str(refused)


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_a_signed_message_whose_decrypted_xml_has_a_dtd_is_refused(
        wecom: FakeWeCom, channel: WeComChannel, name: str) -> None:
    signed = wecom.card_click("r", "approve", inner_xml=HOSTILE[name])
    refused = refusal(channel, signed)
    assert refused.status == 400
    assert "decrypted callback refused" in str(refused) and "DOCTYPE" in str(refused)
    assert wecom.cards == {}  # nothing was decided or updated


async def test_the_genuine_click_beside_them_still_parses(
        wecom: FakeWeCom, channel: WeComChannel) -> None:
    action = parse(channel, wecom.card_click("r1", "approve"))
    assert action.kind != "ignored"
