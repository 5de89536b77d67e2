"""Which error events mean refused credentials, and the OAUTHBEARER callback."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from conveyor import App
from conveyor.driver.credentials import refusal
from conveyor.driver.oauth import OAuthCallback, oauth_callback
from conveyor.errors import AuthenticationError, ConfigurationError, KafkaError

SASL = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}


def event(name: str, text: str) -> KafkaError:
    return KafkaError(f"librdkafka: {text}", code=-169, name=name)


def test_a_refused_login_and_a_failed_tls_handshake_are_refusals() -> None:
    wrong = refusal(event("_AUTHENTICATION", "SASL authentication error: Authentication "
                          "failed due to invalid credentials"), SASL, "producer")  # fmt: skip
    assert isinstance(wrong, AuthenticationError)
    assert "sasl.username and sasl.password" in str(wrong)
    untrusted = refusal(event("_SSL", "SSL handshake failed: certificate verify failed"),
                        SASL, "consumer")  # fmt: skip
    assert untrusted is not None
    assert "ssl.ca.location" in str(untrusted)
    no_certificate = event("_TRANSPORT", "Receive failed: ssl/tls alert bad certificate")
    assert refusal(no_certificate, {"security.protocol": "SSL"}, "admin client") is not None
    unsupported = event("_AUTHENTICATION", "SASL SCRAM-SHA-256 mechanism handshake failed: "
                        "Broker: Unsupported SASL mechanism")  # fmt: skip
    assert refusal(unsupported, SASL, "producer") is not None


def test_a_broken_off_handshake_and_other_errors_are_not() -> None:
    reauth = event("_AUTHENTICATION", "SASL OAUTHBEARER mechanism handshake failed: Broker: "
                   "Request not valid in current SASL state")  # fmt: skip
    assert refusal(reauth, SASL, "consumer") is None
    assert refusal(event("_TRANSPORT", "Connection refused"), SASL, "producer") is None
    assert refusal(event("_ALL_BROKERS_DOWN", "1/1 brokers are down"), SASL, "x") is None


def test_the_oauth_callback_hands_librdkafka_a_token_and_seconds() -> None:
    expiry = datetime(2030, 1, 1, tzinfo=UTC)
    callback = OAuthCallback(lambda: ("token-1", expiry))
    assert callback("ignored config") == ("token-1", expiry.timestamp())
    assert OAuthCallback(lambda: ("t", 12.5))() == ("t", 12.5)
    assert callback.issued == 1
    with pytest.raises(TypeError, match="time zone"):
        OAuthCallback(lambda: ("t", datetime(2030, 1, 1)))()  # naive: refused
    with pytest.raises(TypeError, match="not a token"):
        OAuthCallback(lambda: ("", 1.0))()


def test_the_app_checks_the_provider_and_the_mechanism() -> None:
    base = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT"}
    with pytest.raises(ConfigurationError, match="OAUTHBEARER") as caught:
        App(kafka={**base, "sasl.mechanism": "PLAIN"}, oauth_token_provider=lambda: ("t", 1.0))
    assert caught.value.setting == "sasl.mechanism"
    with pytest.raises(ConfigurationError, match="callable") as caught:
        App(kafka={**base, "sasl.mechanism": "OAUTHBEARER"}, oauth_token_provider="token")
    assert caught.value.setting == "oauth_token_provider"
    asked: list[int] = []
    app = App(kafka={**base, "sasl.mechanism": "OAUTHBEARER"},
              oauth_token_provider=lambda: (asked.append(1), ("t", 1.0))[1])  # fmt: skip
    assert isinstance(app.settings.kafka["oauth_cb"], OAuthCallback)
    assert asked == [], "building the app asks for no token"
    with pytest.raises(ConfigurationError, match="not both"):
        oauth_callback(lambda: ("t", 1.0), {"sasl.mechanism": "OAUTHBEARER", "oauth_cb": print})
