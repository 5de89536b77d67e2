"""The web UI serves the app's metrics at /metrics when they are enabled."""

from __future__ import annotations

from starlette.testclient import TestClient

from conveyor import App


def test_metrics_in_the_web_ui() -> None:
    app = App(kafka={"bootstrap.servers": "127.0.0.1:1"})
    client = TestClient(app.web.asgi())
    missing = client.get("/metrics")
    assert missing.status_code == 404
    assert "app.metrics.enable()" in missing.text
    app.metrics.enable()
    served = client.get("/metrics")
    assert served.status_code == 200
    assert served.headers["content-type"].startswith("text/plain")
    assert "messaging_client_consumed_messages" in served.text
