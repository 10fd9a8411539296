"""The protocol vectors of PROTOCOLS.md, reproduced byte for byte.

Each is either a platform's official vector or a fixture cross-checked with the platform's
own SDK; our crypto and signing must agree with them exactly, both ways.
"""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from hookgate.channels.base import CallbackRejected
from hookgate.channels.feishu import crypto as feishu_crypto
from hookgate.channels.slack import signing as slack_signing
from hookgate.channels.wecom import crypto as wecom_crypto

# -- Feishu ----------------------------------------------------------------------------------

FEISHU_KEY = "test-encrypt-key"
FEISHU_BODY = (
    b'{"encrypt":"AAAAAAAAAAAAAAAAAAAAAG+aT1OCpDhr+yXHVzHiOnaUcWtqZm0AZZ7aIMZd+2kQ4JHRyGWAsFLT8'
    b"C4/c62xu9ILA49IjWz93ELJf6wFPFGgUUD1S31WZ7sjVMIUUU6bB1/54ZTQmy1joiRu7Ktb56u3rPFAsPosPZw4HUj"
    b"4PgTvdkBIv25BMKOL/Xu9R6vF3NxVtLoGyovugl4E3VtQYhfviXcnW0XRWnyPzoJuaIey5an0WjU4W5g3JRrc8Gom+e"
    b"gx49vvY9Litue24ok991sAtIJJFqfhfV0HThBXpcUcxhh3NXyMiIhqukw32/Xy0pP49fLcJZ4RxeJSHVtK9VI3JysKJ"
    b"wXHBUnjUeKa2rHDuNv3cuTqS9wCUioUCnmTrPu+CXnXEOUepRcs1snmHCs9bf7aDno1y/JOUfBSN5rBtvidSSWqQ3PU"
    b'gcxh1vulaqLUlm4RaWmk8Ui1Ak/p+v/OM9zYd05Gp4ggOIdpDXg="}'
)
FEISHU_SIGNATURE = "5b7437712586c5dafc7c62aaae1fe4c2165a1a9b5226d9500de8585e4e784886"


def test_feishu_signature_of_the_fixture_matches_byte_for_byte() -> None:
    assert feishu_crypto.signature("1700000000", "n1", FEISHU_KEY, FEISHU_BODY) == (
        FEISHU_SIGNATURE
    )


def test_feishu_fixture_decrypts_to_the_documented_card_click() -> None:
    plaintext = feishu_crypto.decrypt(json.loads(FEISHU_BODY)["encrypt"], FEISHU_KEY)
    event = json.loads(plaintext)
    assert event["header"]["token"] == "vtok"
    assert event["header"]["event_type"] == "card.action.trigger"
    assert event["event"]["token"] == "c-abc"
    assert event["event"]["action"]["value"] == {"decision": "approve", "req": "r1"}
    assert event["event"]["context"]["open_message_id"] == "om_1"


def test_feishu_encrypting_the_plaintext_with_a_zero_iv_gives_the_fixture_back() -> None:
    encrypted = json.loads(FEISHU_BODY)["encrypt"]
    plaintext = feishu_crypto.decrypt(encrypted, FEISHU_KEY)
    assert feishu_crypto.encrypt(plaintext, FEISHU_KEY, iv=bytes(16)) == encrypted


def test_feishu_fixture_does_not_open_with_another_key() -> None:
    with pytest.raises(feishu_crypto.FeishuCryptoError):
        feishu_crypto.decrypt(json.loads(FEISHU_BODY)["encrypt"], "another-key")


# -- Slack -----------------------------------------------------------------------------------

SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id="
    b"G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-"
    b"collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F39770088"
    b"5554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447"
    b"fce8b6703c"
)
SLACK_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def test_slack_official_signing_vector_matches_byte_for_byte() -> None:
    assert slack_signing.signature(SLACK_SECRET, "1531420618", SLACK_BODY) == SLACK_SIGNATURE


def test_slack_official_vector_verifies_inside_its_time_window() -> None:
    headers = {"x-slack-request-timestamp": "1531420618", "x-slack-signature": SLACK_SIGNATURE}
    assert slack_signing.verify(SLACK_SECRET, headers, SLACK_BODY, now=1531420618 + 299) is None
    with pytest.raises(CallbackRejected) as stale:
        slack_signing.verify(SLACK_SECRET, headers, SLACK_BODY, now=1531420618 + 301)
    assert stale.value.status == 401


# -- WeCom -----------------------------------------------------------------------------------

WECOM_TOKEN = "hJqcu3uJ9Tn2gXPmxx2w9kkCkCE2EPYo"
WECOM_AES_KEY = "6qkdMrq68nTKduznJYO1A37W2oEgpkMUvkttRToqhUt"
WECOM_CORP_ID = "ww1436e0e65a779aee"
WECOM_ECHOSTR = (
    "fsi1xnbH4yQh0+PJxcOdhhK6TDXkjMyhEPA7xB2TGz6b+g7xyAbEkRxN/3cNXW9qdqjnoVzEtpbhnFyq6SVHyA=="
)
WECOM_ENCRYPT = (
    "Kl7kjoSf6DMD1zh7rtrHjFaDapSCkaOnwu3bqLc5tAybhhMl9pFeK8NslNPVdMwmBQTNoW4mY7AIjeLvEl3NyeTkAgG"
    "zBhzTtRLNshw2AEew+kkYcD+Fq72Kt00fT0WnN87hGrW8SqGc+NcT3mu87Ha3dz1pSDi6GaUA6A0sqfde0VJPQbZ9U+"
    "3JWcoD4Z5jaU0y9GSh010wsHF8KZD24YhmZH4ch4Ka7ilEbjbfvhKkNL65HHL0J6EYJIZUC2pFrdkJ7MhmEbU2qARR4"
    "iQHE7wy24qy0cRX3Mfp6iELcDNfSsPGjUQVDGxQDCWjayJOpcwocugux082f49HKYg84EpHSGXAyh+/oxwaWbvL6aSD"
    "POYuPDGOCI8jmnKiypE+"
)


def test_wecom_verify_url_vector_signature_and_plaintext() -> None:
    assert wecom_crypto.signature(WECOM_TOKEN, "1476416373", "47744683", WECOM_ECHOSTR) == (
        "012bc692d0a58dd4b10f8dfe5c4ac00ae211ebeb"
    )
    opened = wecom_crypto.WeComCrypto(WECOM_AES_KEY, WECOM_CORP_ID).decrypt(WECOM_ECHOSTR)
    assert opened == b"1288432023552776189"


def test_wecom_decrypt_msg_vector_signature_and_plaintext() -> None:
    assert wecom_crypto.signature(WECOM_TOKEN, "1476422779", "1597212914", WECOM_ENCRYPT) == (
        "0c3914025cb4b4d68103f6bfc8db550f79dcf48e"
    )
    message = wecom_crypto.WeComCrypto(WECOM_AES_KEY, WECOM_CORP_ID).decrypt(WECOM_ENCRYPT)
    assert message.decode().startswith(f"<xml><ToUserName>{WECOM_CORP_ID}</ToUserName>")
    assert "<Content>你好</Content>" in message.decode()


def _raw_plaintext(encrypted: str) -> bytes:
    key = wecom_crypto.aes_key(WECOM_AES_KEY)
    decryptor = Cipher(algorithms.AES(key), modes.CBC(key[:16])).decryptor()
    return decryptor.update(base64.b64decode(encrypted)) + decryptor.finalize()


def test_wecom_vector_is_padded_to_32_bytes_with_pad_22_and_we_strip_it() -> None:
    raw = _raw_plaintext(WECOM_ENCRYPT)
    assert raw[-1] == 22 and raw[-22:] == bytes([22]) * 22  # a 16-byte unpadder would refuse
    message = wecom_crypto.WeComCrypto(WECOM_AES_KEY, WECOM_CORP_ID).decrypt(WECOM_ENCRYPT)
    assert message.endswith(b"</AgentID></xml>")


def test_wecom_encrypting_with_the_vectors_random_prefix_gives_the_vector_back() -> None:
    crypto = wecom_crypto.WeComCrypto(WECOM_AES_KEY, WECOM_CORP_ID)
    random16 = _raw_plaintext(WECOM_ENCRYPT)[:16]
    assert crypto.encrypt(crypto.decrypt(WECOM_ENCRYPT), random16) == WECOM_ENCRYPT


def test_wecom_vector_is_refused_for_another_corp_by_its_receive_id() -> None:
    crypto = wecom_crypto.WeComCrypto(WECOM_AES_KEY, "ww_someone_else")
    with pytest.raises(wecom_crypto.ReceiveIdMismatch):
        crypto.decrypt(WECOM_ENCRYPT)
