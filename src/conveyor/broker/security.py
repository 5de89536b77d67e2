"""Secure listeners for the development broker (``conveyor broker start --security``).

Beside its PLAINTEXT listener the broker then listens with

- ``SASL_PLAINTEXT`` on ``port + 1``: PLAIN, SCRAM-SHA-512 and OAUTHBEARER (Kafka's unsecured
  JWT validator: any client-made token with a ``sub`` and an ``exp`` is accepted);
- ``SASL_SSL`` on ``port + 2``: the same mechanisms over TLS;
- ``SSL`` on ``port + 3``: TLS with a client certificate required (mutual TLS).

The certificates are throwaway ones made with the JDK's ``keytool`` (the broker needs a JDK
anyway) when the security folder is first made: a CA, the broker's certificate (for
127.0.0.1 and localhost) and a client certificate, in PKCS#12 stores that both the broker
and librdkafka read, plus the CA as PEM for clients. Passwords are random and kept in
``security.json``; one user, ``conveyor``, may log in with PLAIN and with SCRAM-SHA-512 (its
SCRAM credential is stored in the cluster at every start). Every session is re-authenticated
at least every 60 s (``connections.max.reauth.ms``), so a client whose token or password
expires is noticed.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from conveyor.broker.progress import ProgressCallback
from conveyor.errors import BrokerError, ToolMissingError

__all__ = [
    "SECURITY_USER",
    "SecurityMaterial",
    "client_settings",
    "ensure_material",
    "security_ports",
    "security_properties",
]

SECURITY_USER = "conveyor"
MECHANISMS = ("PLAIN", "SCRAM-SHA-512", "OAUTHBEARER")
_HOST = "127.0.0.1"
_VALIDITY_DAYS = "3650"
_REAUTH_MS = "60000"


@dataclass(frozen=True)
class SecurityMaterial:
    """The security folder's files and secrets (``security.json``)."""

    folder: str
    store_password: str
    user_password: str

    def path(self, name: str) -> str:
        return str(Path(self.folder) / name)

    @property
    def ca_pem(self) -> str:
        """The CA certificate, PEM: librdkafka's ``ssl.ca.location``."""
        return self.path("ca.pem")

    @property
    def client_keystore(self) -> str:
        """The client's key and certificate (PKCS#12): librdkafka's ``ssl.keystore.location``."""
        return self.path("client.p12")


def security_ports(port: int) -> dict[str, int]:
    """The secure listeners' ports beside a broker on ``port``."""
    return {"SASL_PLAINTEXT": port + 1, "SASL_SSL": port + 2, "SSL": port + 3}


def ensure_material(folder: Path, java: Path, progress: ProgressCallback) -> SecurityMaterial:
    """The security folder's material, made on first use (certificates take a few seconds).

    Raises:
        ToolMissingError: ``keytool`` is not beside ``java``, nor on PATH.
        BrokerError: ``keytool`` failed (its output is in the message).
    """
    record = folder / "security.json"
    if record.exists():
        try:
            return SecurityMaterial(**json.loads(record.read_text()))
        except (ValueError, TypeError):
            pass  # damaged: made again below
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    folder.chmod(0o700)
    material = SecurityMaterial(
        folder=str(folder),
        store_password=secrets.token_urlsafe(18),
        user_password=secrets.token_urlsafe(18),
    )
    progress(f"making a throwaway CA and certificates in {folder}")
    _make_certificates(material, _keytool(java))
    record.write_text(json.dumps(asdict(material), indent=2) + "\n")
    record.chmod(0o600)
    return material


def _keytool(java: Path) -> Path:
    beside = java.resolve().parent / "keytool"
    if beside.exists():
        return beside
    found = shutil.which("keytool")
    if found is None:
        raise ToolMissingError(
            f"keytool was not found beside {java} nor on PATH: `--security` makes its "
            "certificates with the JDK's keytool (install a full JDK, e.g. openjdk-17-jdk-headless)"
        )
    return Path(found)


def _options(**options: str) -> list[str]:
    """keytool options in the order given: ``_options(alias="ca")`` is ``["-alias", "ca"]``."""
    return [part for name, value in options.items() for part in (f"-{name}", value)]


def _make_certificates(material: SecurityMaterial, keytool: Path) -> None:
    password = material.store_password
    path = material.path

    def run(*arguments: str) -> None:
        command = [str(keytool), *arguments]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode != 0:
            raise BrokerError(
                f"keytool {arguments[0]} failed (exit code {done.returncode}) while making the "
                f"development broker's certificates in {material.folder}: "
                + (done.stdout + done.stderr).strip()[-1500:]
            )

    def new_key(alias: str, store: str, name: str) -> None:
        run(
            "-genkeypair",
            *_options(alias=alias, dname=f"CN={name}", keyalg="RSA", keysize="2048"),
            *_options(validity=_VALIDITY_DAYS, keystore=path(store), storetype="PKCS12"),
            *_options(storepass=password),
            *(["-ext", "bc:c"] if alias == "ca" else []),
        )

    def signed(alias: str, store: str, extensions: list[str]) -> None:
        request, certificate = path(f"{alias}.csr"), path(f"{alias}.crt")
        run(
            "-certreq",
            *_options(alias=alias, keystore=path(store), storepass=password, file=request),
        )
        run(
            "-gencert",
            *_options(alias="ca", keystore=path("ca.p12"), storepass=password),
            *_options(infile=request, outfile=certificate),
            "-rfc",
            *_options(validity=_VALIDITY_DAYS),
            *extensions,
        )
        for name, file in (("ca", material.ca_pem), (alias, certificate)):
            run(
                "-importcert",
                *_options(alias=name, file=file, keystore=path(store), storepass=password),
                "-noprompt",
            )
        Path(request).unlink()

    new_key("ca", "ca.p12", "Conveyor development CA")
    run(
        "-exportcert",
        "-rfc",
        *_options(alias="ca", keystore=path("ca.p12"), storepass=password, file=material.ca_pem),
    )
    new_key("broker", "broker.p12", "localhost")
    signed(
        "broker",
        "broker.p12",
        ["-ext", f"SAN=IP:{_HOST},DNS:localhost", "-ext", "EKU=serverAuth,clientAuth"],
    )
    new_key("client", "client.p12", "conveyor-client")
    signed("client", "client.p12", ["-ext", "EKU=clientAuth"])
    run(
        "-importcert",
        *_options(alias="ca", file=material.ca_pem, keystore=path("truststore.p12")),
        *_options(storetype="PKCS12", storepass=password),
        "-noprompt",
    )


def security_properties(material: SecurityMaterial) -> dict[str, str]:
    """The broker settings of the secure listeners (the listeners themselves are added by
    :func:`~conveyor.broker.layout.render_server_properties`)."""
    password = material.store_password
    plain = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_{SECURITY_USER}="{material.user_password}";'
    )
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    oauth = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_sub="broker";'
    )
    settings = {
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "connections.max.reauth.ms": _REAUTH_MS,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": material.path("broker.p12"),
        "ssl.keystore.password": password,
        "ssl.key.password": password,
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": material.path("truststore.p12"),
        "ssl.truststore.password": password,
        "listener.name.ssl.ssl.client.auth": "required",
        # ACLs work (conveyor acls), yet a topic without any stays open to every login, as on
        # a broker without an authorizer; the PLAINTEXT listener (the developer's, and the
        # controller's) is ANONYMOUS, a super user.
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "true",
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        settings[f"listener.name.{listener}.plain.sasl.jaas.config"] = plain
        settings[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] = scram
        settings[f"listener.name.{listener}.oauthbearer.sasl.jaas.config"] = oauth
    return settings


def client_settings(material: SecurityMaterial, port: int) -> dict[str, dict[str, Any]]:
    """librdkafka settings for each way in, by name (what ``start --security`` prints)."""
    ports = security_ports(port)
    login = {"sasl.username": SECURITY_USER, "sasl.password": material.user_password}
    tls = {"ssl.ca.location": material.ca_pem}
    return {
        "SASL_SSL, SCRAM-SHA-512": {
            "bootstrap.servers": f"{_HOST}:{ports['SASL_SSL']}",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            **login,
            **tls,
        },
        "SSL, client certificate": {
            "bootstrap.servers": f"{_HOST}:{ports['SSL']}",
            "security.protocol": "SSL",
            **tls,
            "ssl.keystore.location": material.client_keystore,
            "ssl.keystore.password": material.store_password,
        },
        "SASL_PLAINTEXT, PLAIN": {
            "bootstrap.servers": f"{_HOST}:{ports['SASL_PLAINTEXT']}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            **login,
        },
        "SASL_PLAINTEXT, OAUTHBEARER (unsecured JWT)": {
            "bootstrap.servers": f"{_HOST}:{ports['SASL_PLAINTEXT']}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
        },
    }
