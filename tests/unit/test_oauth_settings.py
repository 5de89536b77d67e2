"""OAUTHBEARER's principal name and SASL extensions: a token provider's answer, librdkafka's
unsecured-JWT config and OIDC extensions, checked when the app or the producer is built, each
failure naming the setting (librdkafka would fail the first login, later and vaguely)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from conveyor import App, ConfigurationError, OAuthToken, Producer
from conveyor.driver.oauth import OAuthCallback
from conveyor.oauth_settings import unsecured_jwt_config

BASE = {
    "bootstrap.servers": "127.0.0.1:1",
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "OAUTHBEARER",
}
UNSECURED = {**BASE, "enable.sasl.oauthbearer.unsecure.jwt": True}


def test_a_provider_may_give_a_principal_and_extensions() -> None:
    expiry = time.time() + 60
    assert OAuthCallback(lambda: ("t", expiry))() == ("t", expiry), "as before: two"
    assert OAuthCallback(lambda: ("t", expiry, "shop"))() == ("t", expiry, "shop", {})
    token = OAuthToken("t", expiry, extensions={"logicalCluster": "lkc-1"})
    assert OAuthCallback(lambda: token)() == ("t", expiry, "", {"logicalCluster": "lkc-1"})
    assert OAuthCallback(lambda: ("t", expiry, "shop", {"tenant": "eu west"}))() == (
        "t", expiry, "shop", {"tenant": "eu west"},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "told"),
    [
        (("t", 60.0, "", None), "principal name"),
        (("t", 60.0, "two words", None), "principal name"),
        (("t", 60.0, None, {"auth": "x"}), "'auth' is not allowed"),
        (("t", 60.0, None, {"tenant1": "x"}), "'tenant1' is not allowed"),
        (("t", 60.0, None, {"tenant": ""}), "value of the SASL extension 'tenant'"),
        (("t", 60.0, None, {"tenant": "\x01"}), "value of the SASL extension 'tenant'"),
        (("t", 60.0, None, ["tenant"]), "a mapping of names to values"),
        (("t", 60.0, None, None, "more"), "a tuple of 5"),
    ],
)
def test_a_bad_principal_or_extension_fails_priming_naming_the_provider(
    answer: tuple[Any, ...], told: str
) -> None:
    with pytest.raises(ConfigurationError, match=told) as refused:
        OAuthCallback(lambda: answer).prime()
    assert refused.value.setting == "oauth_token_provider"
    assert "\x01" not in str(refused.value), "a value is not shown (it may be a secret)"


def test_a_producer_with_a_bad_extension_fails_at_once_not_after_librdkafkas_wait() -> None:
    started = time.monotonic()
    with pytest.raises(ConfigurationError, match="'auth' is not allowed") as refused:
        Producer(BASE, oauth_token_provider=lambda: ("t", time.time() + 60, "p", {"auth": "x"}))
    assert refused.value.setting == "oauth_token_provider"
    assert time.monotonic() - started < 5


def test_the_unsecured_jwt_config_is_written_and_checked() -> None:
    config = unsecured_jwt_config("shop", {"tenant": "eu", "traceId": "abc"}, scope="a,b",
                                  lifetime=600)  # fmt: skip
    assert (
        config
        == "principal=shop scope=a,b lifeSeconds=600 extension_tenant=eu extension_traceId=abc"
    )
    App(kafka={**UNSECURED, "sasl.oauthbearer.config": config})  # accepted as written
    for bad in (
        lambda: unsecured_jwt_config(""),
        lambda: unsecured_jwt_config("shop", {"auth": "x"}),
        lambda: unsecured_jwt_config("shop", {"tenant": "eu west"}),
        lambda: unsecured_jwt_config("shop", scope="a b"),
        lambda: unsecured_jwt_config("shop", lifetime=0),
    ):
        with pytest.raises(ConfigurationError) as refused:
            bad()
        assert refused.value.setting == "sasl.oauthbearer.config"


@pytest.mark.parametrize(
    ("config", "told"),
    [
        (None, "needs .* principal=NAME"),
        ("extension_tenant=eu", "has no principal=NAME"),
        ("principal=shop extension_auth=x", "'auth' is not allowed"),
        ("principal=shop extension_1x=y", "'1x' is not allowed"),
        ("principal=shop colour=blue", "does not know 'colour'"),
        ("principal=shop lifeSeconds=soon", "lifeSeconds"),
        ("principal=shop principal=other", "given twice"),
        ("principal", "not KEY=VALUE"),
    ],
)
def test_a_bad_unsecured_jwt_config_is_refused_naming_it(config: str | None, told: str) -> None:
    kafka = {**UNSECURED, **({} if config is None else {"sasl.oauthbearer.config": config})}
    for build in (lambda: App(kafka=kafka), lambda: Producer(kafka)):
        with pytest.raises(ConfigurationError, match=told) as refused:
            build()
        assert refused.value.setting == "sasl.oauthbearer.config"


def test_oidc_extensions_are_checked_and_the_environment_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good = {**BASE, "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-2"}
    App(kafka=good)
    with pytest.raises(ConfigurationError, match="'pool_id' is not allowed") as refused:
        App(kafka={**BASE, "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,pool_id=2"})
    assert refused.value.setting == "sasl.oauthbearer.extensions"
    with pytest.raises(ConfigurationError, match="not NAME=VALUE"):
        Producer({**BASE, "sasl.oauthbearer.extensions": "logicalCluster"})
    monkeypatch.setenv("CONVEYOR_KAFKA_SASL_OAUTHBEARER_CONFIG", "extension_tenant=eu")
    with pytest.raises(ConfigurationError, match=r"\$CONVEYOR_KAFKA_SASL_OAUTHBEARER_CONFIG"):
        App(kafka=UNSECURED)
