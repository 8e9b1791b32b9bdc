"""Wire details the loopback servers share (``lwsflow.sim.httpserver``): request bodies, answers."""

from __future__ import annotations

import http.client
import json

from lwsflow.sim.engine import start_engine


def test_a_negative_content_length_is_an_empty_body_not_a_read_to_eof() -> None:
    with start_engine(model="m") as eng:
        conn = http.client.HTTPConnection(eng.host, eng.port, timeout=5)
        conn.putrequest("POST", "/v1/completions")
        conn.putheader("Content-Length", "-1")
        conn.endheaders()  # the connection stays open: a read to EOF would hang until the timeout
        resp = conn.getresponse()
        body = json.loads(resp.read())
        conn.close()
    assert resp.status == 400
    assert resp.getheader("Content-Type") == "application/json"
    assert "body must be a JSON object" in json.dumps(body)
