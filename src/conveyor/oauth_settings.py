"""OAUTHBEARER's principal name and SASL extensions, checked before any client is built.

librdkafka takes them three ways, and checks none of them until a client first logs in (a
bad one then surfaces as a login that never happens, after a 10 s wait or not at all):

- ``sasl.oauthbearer.config`` with ``enable.sasl.oauthbearer.unsecure.jwt=true`` (librdkafka
  makes an unsecured JWT itself, for development brokers): ``principal=NAME`` (required; the
  token's subject, the principal the broker sees), ``extension_NAME=VALUE`` (each a SASL
  extension), and ``scope=``, ``scopeClaimName=``, ``principalClaimName=``,
  ``lifeSeconds=``, separated by spaces;
- ``sasl.oauthbearer.extensions`` with ``sasl.oauthbearer.method=oidc``: ``NAME=VALUE`` pairs
  separated by commas;
- a token provider's answer (``OAuthToken``'s ``principal`` and ``extensions``).

SASL extensions follow RFC 7628: a name of letters only (``auth`` is reserved), a value of
printable ASCII, spaces, tabs and line breaks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from conveyor.errors import ConfigurationError

__all__ = [
    "check_extensions",
    "check_oauth_settings",
    "check_principal_name",
    "unsecured_jwt_config",
]

_NAME = re.compile(r"[A-Za-z]+")
_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
_UNSECURED_KEYS = frozenset(
    {"principal", "principalClaimName", "scope", "scopeClaimName", "lifeSeconds"}
)
_TRUE = (True, 1, "true", "True", "TRUE", "1")


def check_extensions(extensions: Any, setting: str, where: str) -> dict[str, str]:
    """``extensions`` (a mapping of names to values) as a dict, each checked.

    Raises:
        ConfigurationError: naming ``setting``; the bad name is said, a bad value is not
            shown (it may be a secret).
    """
    if not isinstance(extensions, Mapping):
        raise ConfigurationError(
            f"{where}: SASL extensions are a mapping of names to values, got "
            f"{type(extensions).__name__}",
            setting,
        )
    checked: dict[str, str] = {}
    for name, value in extensions.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name == "auth":
            raise ConfigurationError(
                f"{where}: the SASL extension name {name!r} is not allowed: letters only, and "
                "not 'auth' (RFC 7628)",
                setting,
            )
        if not isinstance(value, str) or not _VALUE.fullmatch(value):
            raise ConfigurationError(
                f"{where}: the value of the SASL extension {name!r} must be a non-empty string "
                "of printable ASCII (spaces, tabs and line breaks allowed; RFC 7628)",
                setting,
            )
        checked[name] = value
    return checked


def check_principal_name(principal: Any, setting: str, where: str) -> str:
    """A principal name: a non-empty string without spaces or control characters."""
    if not isinstance(principal, str) or not re.fullmatch(
        r"[\x21-\x7E\u00A0-\U0010FFFF]+", principal
    ):
        raise ConfigurationError(
            f"{where}: the principal name must be a non-empty string without spaces or "
            f"control characters, got {principal!r}",
            setting,
        )
    return principal


def unsecured_jwt_config(
    principal: str,
    extensions: Mapping[str, str] | None = None,
    *,
    scope: str | None = None,
    lifetime: int | None = None,
) -> str:
    """librdkafka's ``sasl.oauthbearer.config`` for an unsecured JWT (with
    ``enable.sasl.oauthbearer.unsecure.jwt=true``): the token's ``principal`` (the principal
    the broker sees), its SASL ``extensions``, ``scope`` (space-free, comma-separated
    scopes) and ``lifetime`` in seconds (librdkafka's default: an hour).

    Example::

        kafka = {"bootstrap.servers": "127.0.0.1:9093", "security.protocol": "SASL_PLAINTEXT",
                 "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
                 "sasl.oauthbearer.config": unsecured_jwt_config("shop", {"tenant": "eu"})}

    Raises:
        ConfigurationError: a principal, an extension, a scope or a lifetime librdkafka would
            refuse (``setting`` is ``sasl.oauthbearer.config``).
    """
    where = "unsecured_jwt_config()"
    setting = "sasl.oauthbearer.config"
    parts = [f"principal={check_principal_name(principal, setting, where)}"]
    if scope is not None:
        if not isinstance(scope, str) or not re.fullmatch(r"[\x21-\x7E]+", scope):
            raise ConfigurationError(
                f"{where}: scope must be scopes separated by commas, without spaces, got {scope!r}",
                setting,
            )
        parts.append(f"scope={scope}")
    if lifetime is not None:
        if isinstance(lifetime, bool) or not isinstance(lifetime, int) or lifetime < 1:
            raise ConfigurationError(
                f"{where}: lifetime must be a whole number of seconds >= 1, got {lifetime!r}",
                setting,
            )
        parts.append(f"lifeSeconds={lifetime}")
    for name, value in check_extensions(extensions or {}, setting, where).items():
        if re.search(r"\s", value):
            raise ConfigurationError(
                f"{where}: the SASL extension {name!r} of an unsecured JWT cannot hold spaces "
                "(librdkafka separates the parts of sasl.oauthbearer.config with them)",
                setting,
            )
        parts.append(f"extension_{name}={value}")
    return " ".join(parts)


def _unsecured_parts(config: Any, where: str) -> None:
    """``sasl.oauthbearer.config`` as librdkafka reads it for an unsecured JWT."""
    setting = "sasl.oauthbearer.config"
    if not isinstance(config, str) or not config.strip():
        raise ConfigurationError(
            f'{where}["enable.sasl.oauthbearer.unsecure.jwt"] needs {where}["{setting}"] with '
            "principal=NAME (the token's subject; unsecured_jwt_config() writes it)",
            setting,
        )
    extensions: dict[str, str] = {}
    seen: set[str] = set()
    for part in config.split():
        key, equals, value = part.partition("=")
        if not equals or not value:
            raise ConfigurationError(
                f'{where}["{setting}"]: {key!r} is not KEY=VALUE (parts are separated by spaces)',
                setting,
            )
        if key.startswith("extension_"):
            extensions[key.removeprefix("extension_")] = value
            continue
        if key not in _UNSECURED_KEYS:
            raise ConfigurationError(
                f'{where}["{setting}"]: librdkafka does not know {key!r} (it takes principal, '
                "extension_NAME, scope, scopeClaimName, principalClaimName and lifeSeconds)",
                setting,
            )
        if key in seen:
            raise ConfigurationError(f'{where}["{setting}"]: {key!r} is given twice', setting)
        seen.add(key)
        if key == "lifeSeconds" and not (value.isdigit() and int(value) > 0):
            raise ConfigurationError(
                f'{where}["{setting}"]: lifeSeconds must be a whole number of seconds >= 1',
                setting,
            )
    if "principal" not in seen:
        raise ConfigurationError(
            f'{where}["{setting}"] has no principal=NAME: an unsecured JWT needs one (the '
            "token's subject, the principal the broker sees)",
            setting,
        )
    check_extensions(extensions, setting, f'{where}["{setting}"]')


def check_oauth_settings(kafka: Mapping[str, Any], where: str = "kafka") -> None:
    """Check the principal name and the SASL extensions of librdkafka's OAUTHBEARER settings
    (see the module) as librdkafka would read them when the first login happens.

    Raises:
        ConfigurationError: naming the setting.
    """
    if kafka.get("enable.sasl.oauthbearer.unsecure.jwt") in _TRUE:
        _unsecured_parts(kafka.get("sasl.oauthbearer.config"), where)
    listed = kafka.get("sasl.oauthbearer.extensions")
    if listed:
        setting = "sasl.oauthbearer.extensions"
        pairs: dict[str, str] = {}
        for item in str(listed).split(","):
            name, equals, value = item.partition("=")
            if not equals:
                raise ConfigurationError(
                    f'{where}["{setting}"]: {name.strip()!r} is not NAME=VALUE (pairs are '
                    "separated by commas)",
                    setting,
                )
            pairs[name.strip()] = value
        check_extensions(pairs, setting, f'{where}["{setting}"]')
