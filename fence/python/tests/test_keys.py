"""KeyFetcher against a real HTTPS server on 127.0.0.1:0 with its own CA:
keys come over TLS, an unknown key id triggers a (rate-limited) refetch,
and plain HTTP off loopback is refused."""

from __future__ import annotations

import datetime
import http.server
import ssl
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.x509.oid import NameOID
import ipaddress

from fencepost_fence import KeyFetcher
from fencepost_fence.sign import key_id, raw_public


def _cert(tmp_path):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    (tmp_path / "c.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "k.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    return tmp_path / "c.pem", tmp_path / "k.pem"


def _doc(*privs):
    import base64
    import json
    return json.dumps({"keys": [{"id": key_id(raw_public(p.public_key())), "alg": "Ed25519",
                                 "public_key": base64.b64encode(raw_public(p.public_key())).decode()} for p in privs]}).encode()


@pytest.fixture
def key_server(tmp_path):
    cert, key = _cert(tmp_path)
    state = {"doc": b"", "hits": 0}

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            state["hits"] += 1
            body = state["doc"] if self.path == "/v1/keys" else b"{}"
            self.send_response(200 if self.path == "/v1/keys" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(cert, key)
    srv.socket = sctx.wrap_socket(srv.socket, server_side=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    cctx = ssl.create_default_context(cafile=str(cert))
    yield f"https://127.0.0.1:{srv.server_address[1]}", cctx, state
    srv.shutdown()
    srv.server_close()
    t.join(10)


def test_fetch_and_refetch_on_unknown_key(key_server):
    url, ctx, state = key_server
    a, b = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    state["doc"] = _doc(a)
    now = [0.0]
    f = KeyFetcher(url, ssl_context=ctx, min_interval=10, clock=lambda: now[0])
    ida, idb = key_id(raw_public(a.public_key())), key_id(raw_public(b.public_key()))
    assert f.public_key(ida) is not None and state["hits"] == 1
    state["doc"] = _doc(b, a)  # rotation: the new key is published first
    assert f.public_key(idb) is None, "refetch is rate-limited"
    assert state["hits"] == 1
    now[0] = 11
    assert f.public_key(idb) is not None and state["hits"] == 2
    assert f.public_key(ida) is not None and state["hits"] == 2


def test_tls_is_verified(key_server):
    url, _, state = key_server
    state["doc"] = _doc(Ed25519PrivateKey.generate())
    with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):
        KeyFetcher(url, ssl_context=ssl.create_default_context())


def test_plain_http_refused_off_loopback():
    with pytest.raises(ValueError, match="TLS"):
        KeyFetcher("http://cluster.example:7000")
