"""Which error events mean refused credentials, and the OAUTHBEARER callback."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import pytest

from conveyor import App, Producer
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


def test_a_primed_token_is_handed_to_librdkafkas_first_ask_only() -> None:
    tokens = iter(["token-1", "token-2"])
    callback = OAuthCallback(lambda: (next(tokens), 60.0))
    callback.prime()
    assert callback() == ("token-1", 60.0), "the primed token, not a second one"
    assert callback() == ("token-2", 60.0), "later asks go to the provider"
    assert callback.issued == 2


def test_a_provider_returning_no_token_fails_priming_naming_the_provider() -> None:
    for garbage, told in (((None, 60.0), "NoneType, not a token"), ("tok", "str, not (token")):
        with pytest.raises(ConfigurationError, match=re.escape(told)) as refused:
            OAuthCallback(lambda garbage=garbage: garbage).prime()
        assert refused.value.setting == "oauth_token_provider"
    with pytest.raises(RuntimeError, match="IdP down"):  # the provider's own error, as raised
        OAuthCallback(lambda: (_ for _ in ()).throw(RuntimeError("IdP down"))).prime()


def test_a_producer_takes_an_oauth_token_provider_as_the_app_does() -> None:
    """Checked as App(oauth_token_provider=) checks it; a provider that returns no token fails
    the producer's construction at once (librdkafka itself would wait 10 s for a token)."""
    base = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT"}
    oauth = {**base, "sasl.mechanism": "OAUTHBEARER"}
    with pytest.raises(ConfigurationError, match="OAUTHBEARER") as caught:
        Producer({**base, "sasl.mechanism": "PLAIN"}, oauth_token_provider=lambda: ("t", 1.0))
    assert caught.value.setting == "sasl.mechanism"
    with pytest.raises(ConfigurationError, match="callable") as caught:
        Producer(oauth, oauth_token_provider="token")  # type: ignore[arg-type]
    assert caught.value.setting == "oauth_token_provider"
    with pytest.raises(ConfigurationError, match="not both"):
        Producer({**oauth, "oauth_cb": print}, oauth_token_provider=lambda: ("t", 1.0))
    started = time.monotonic()
    with pytest.raises(ConfigurationError, match="NoneType, not a token") as caught:
        Producer(oauth, oauth_token_provider=lambda: (None, time.time() + 60))
    assert caught.value.setting == "oauth_token_provider"
    assert time.monotonic() - started < 5
    asked: list[float] = []
    with Producer(
        oauth, oauth_token_provider=lambda: (asked.append(1.0), ("t", time.time() + 60))[1]
    ) as producer:
        assert isinstance(producer.settings.kafka["oauth_cb"], OAuthCallback)
    assert asked == [1.0], "asked once, while the producer was built"
