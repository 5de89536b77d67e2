"""Which settings are secrets, and how they are masked."""

from __future__ import annotations

import pytest

from conveyor.masking import MASK, is_secret, mask, mask_text


@pytest.mark.parametrize(
    "name",
    ["sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.key.pem", "ssl_key",
     "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config", "basic.auth.user.info",
     "sasl.jaas.config", "SASL.PASSWORD", "token"],
)  # fmt: skip
def test_secrets_are_recognised(name: str) -> None:
    assert is_secret(name)


@pytest.mark.parametrize(
    "name",
    ["bootstrap.servers", "sasl.username", "sasl.mechanism", "ssl.key.location",
     "ssl.keystore.location", "sasl.oauthbearer.token.endpoint.url", "ssl.ca.location",
     "sasl.oauthbearer.method", "group.id"],
)  # fmt: skip
def test_paths_urls_and_names_are_not(name: str) -> None:
    assert not is_secret(name)


def test_mask_replaces_only_secret_values_and_mask_text_hides_them_in_messages() -> None:
    settings = {"sasl.username": "ada", "sasl.password": "s3cret-pw", "group.id": "g"}
    assert mask(settings) == {"sasl.username": "ada", "sasl.password": MASK, "group.id": "g"}
    said = 'Invalid value "s3cret-pw" for configuration property "sasl.password"'
    assert "s3cret-pw" not in mask_text(said, settings)
    assert mask_text("nothing to hide", settings) == "nothing to hide"
