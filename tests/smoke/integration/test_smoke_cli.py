"""`lwsflow smoke` and `lwsflow engine-stub` from the command line: output, exit codes, secrets."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from lwsflow.cli import main
from tests.smoke.smoke_helpers import MODEL

ROOT = Path(__file__).resolve().parents[3]


def test_json_report_carries_every_check_and_exit_0(engine, tmp_path, capsys):
    p, d, a = engine("prefill"), engine("decode"), engine()
    out_file = tmp_path / "r" / "smoke.json"
    rc = main(["smoke", "--url", a.url, "--prefill-url", p.url, "--decode-url", d.url, "--model", MODEL,
               "--json", "--report", str(out_file), "--timeout", "2"])
    printed = json.loads(capsys.readouterr().out)
    assert rc == 0 and printed["passed"] is True
    assert json.loads(out_file.read_text()) == printed
    names = [c["name"] for c in printed["checks"]]
    assert names.count("health") == 3 and names[-3:] == ["pd-prefill", "pd-decode", "pd-metrics"]
    for c in printed["checks"]:
        assert {"name", "target", "passed", "detail", "duration_s"} <= set(c)


def test_failed_check_exit_1_and_table_says_expected_and_got(engine, capsys):
    h = engine(modes="wrong-model")
    rc = main(["smoke", "--url", h.url, "--model", MODEL, "--timeout", "2"])
    cap = capsys.readouterr()
    assert rc == 1
    assert "FAIL" in cap.out and f"expected {MODEL}" in cap.out and "skip" in cap.out
    assert cap.err.startswith("error: smoke failed: 1 of ") and "(models)" in cap.err


@pytest.mark.parametrize(("argv", "field"), [
    (["smoke"], "targets"),
    (["smoke", "--url", "127.0.0.1:8000"], "--url"),
    (["smoke", "bogus/x"], "TARGET"),
    (["smoke", "--prefill-url", "http://127.0.0.1:1"], "prefill_url"),
    (["smoke", "--url", "http://127.0.0.1:1", "--token-env", "LWSFLOW_TEST_UNSET_VAR"], "--token-env"),
    (["smoke", "--url", "http://127.0.0.1:1", "--token-file", "/nonexistent/token"], "--token-file"),
    (["smoke", "--url", "http://127.0.0.1:1", "--timeout", "0"], "--timeout"),
    (["engine-stub", "--role", "router", "--port", "0", "--exit-after", "0"], "role"),
    (["engine-stub", "--mode", "explode", "--port", "0", "--exit-after", "0"], "--mode"),
])
def test_bad_input_is_one_line_exit_2(argv, field, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and "Traceback" not in err


def test_token_only_from_env_or_file_never_argv(engine, tmp_path, capsys, monkeypatch):
    h = engine(api_key="tok-123")
    assert main(["smoke", "--url", h.url, "--token", "tok-123"]) == 2  # no such option exists
    capsys.readouterr()
    monkeypatch.setenv("SMOKE_TOKEN", "tok-123")
    assert main(["smoke", "--url", h.url, "--model", MODEL, "--token-env", "SMOKE_TOKEN", "--json"]) == 0
    report = capsys.readouterr().out
    assert "tok-123" not in report  # the token is a SecretStr: never in the report
    token_file = tmp_path / "token"
    token_file.write_text("wrong\n")
    assert main(["smoke", "--url", h.url, "--model", MODEL, "--token-file", str(token_file)]) == 1
    assert "401" in capsys.readouterr().out


def test_engine_stub_command_serves_until_terminated(tmp_path):
    """The console script as a subprocess: binds 127.0.0.1, prints its URL, stops on SIGTERM."""
    env = {**os.environ, "STUB_KEY": "k"}
    argv = [str(ROOT / ".venv/bin/lwsflow"), "engine-stub", "--role", "decode", "--port", "0", "--model", "m",
            "--api-key-env", "STUB_KEY", "--exit-after", "30"]
    proc = subprocess.Popen(argv,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        assert "engine-stub decode serving m on http://127.0.0.1:" in line
        url = line.rsplit(" ", 1)[1].strip()
        r = httpx.get(url + "/v1/models", headers={"Authorization": "Bearer k"}, timeout=5)
        assert r.json()["data"][0]["id"] == "m"
        proc.terminate()
        t0 = time.monotonic()
        assert proc.wait(timeout=10) == 0 and time.monotonic() - t0 < 5
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


def test_tls_verified_by_default(engine, tmp_path, capsys):
    h = engine(tls=True)
    assert h.url.startswith("https://")
    base = ["smoke", "--url", h.url, "--model", MODEL, "--timeout", "2", "--warmup", "0.2", "--json"]
    assert main(base) == 1  # self-signed: refused unless trusted
    assert "CERTIFICATE_VERIFY_FAILED" in capsys.readouterr().out
    ca = tmp_path / "ca.pem"
    ca.write_bytes(h.ca_pem)
    assert main([*base, "--ca-file", str(ca)]) == 0
    assert main([*base, "--insecure"]) == 0
    capsys.readouterr()
    assert main([*base, "--ca-file", str(tmp_path / "missing.pem")]) == 2
    (tmp_path / "junk.pem").write_text("not a certificate")
    assert main([*base, "--ca-file", str(tmp_path / "junk.pem")]) == 2
    assert "--ca-file" in capsys.readouterr().err
