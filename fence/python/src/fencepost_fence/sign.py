"""Ed25519 token signatures (fence/SPEC.md section 3): the signed message,
key ids, the header's strict syntax, key documents and fetching them from
the lease cluster's GET /v1/keys over TLS, with a rate-limited refetch when
an unknown key id shows up."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import ssl
import threading
import time
import urllib.parse
import urllib.request

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from .problems import BadSignature, UnknownKey

KEYS_PATH = "/v1/keys"
_SIG_RE = re.compile(rb"ed25519=([0-9a-f]{16}):([A-Za-z0-9_-]{86})")
_B64URL_LAST = b"AQgw"  # the only last characters whose unused low bits are zero


class KeyDocumentError(ValueError):
    """A key document that is not valid; the whole document is refused."""


def signing_message(task: bytes, epoch: int, holder: bytes) -> bytes:
    """b"fencepost-token-v1\\n" + task + b"\\n" + decimal epoch + b"\\n" + holder."""
    return b"fencepost-token-v1\n" + task + b"\n" + str(epoch).encode() + b"\n" + holder


def key_id(raw_public_key: bytes) -> str:
    """First 8 bytes of SHA-256 over the 32-byte key, lowercase hex."""
    return hashlib.sha256(raw_public_key).hexdigest()[:16]


def raw_public(pub: Ed25519PublicKey) -> bytes:
    return pub.public_bytes(Encoding.Raw, PublicFormat.Raw)


def sign(priv: Ed25519PrivateKey, task: bytes, epoch: int, holder: bytes) -> str:
    """The X-Fencing-Signature value for a token (tests and tools)."""
    sig = priv.sign(signing_message(task, epoch, holder))
    return "ed25519=" + key_id(raw_public(priv.public_key())) + ":" + base64.urlsafe_b64encode(sig).rstrip(b"=").decode()


def parse_signature_header(v: bytes) -> tuple[str, bytes]:
    """Split b"ed25519=<keyID>:<sig>" strictly into key id and 64 bytes."""
    m = _SIG_RE.fullmatch(v)
    if not m or m.group(2)[-1] not in _B64URL_LAST:
        raise BadSignature("fence: bad token signature: want ed25519=<16 lowercase hex>:<86 chars of unpadded base64url>")
    return m.group(1).decode(), base64.urlsafe_b64decode(m.group(2) + b"==")


class StaticKeys:
    """A fixed key set: key id -> Ed25519 public key."""

    def __init__(self, keys: dict[str, Ed25519PublicKey] | None = None):
        self._keys = dict(keys or {})

    @classmethod
    def of(cls, *raw_keys: bytes) -> "StaticKeys":
        return cls({key_id(r): Ed25519PublicKey.from_public_bytes(r) for r in raw_keys})

    def public_key(self, kid: str) -> Ed25519PublicKey | None:
        return self._keys.get(kid)

    def ids(self) -> list[str]:
        return sorted(self._keys)


def parse_keys(document: bytes | str) -> StaticKeys:
    """Decode {"keys":[{"id","alg":"Ed25519","public_key":<std base64>}]};
    any inconsistent entry fails the whole document."""
    try:
        doc = json.loads(document)
        entries = doc["keys"]
        if not isinstance(entries, list):
            raise TypeError("keys is not a list")
    except (ValueError, TypeError, KeyError) as e:
        raise KeyDocumentError(f"fence: key document: {e}") from None
    keys = {}
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or e.get("alg") != "Ed25519":
            raise KeyDocumentError(f"fence: key {i}: alg must be Ed25519")
        try:
            raw = base64.b64decode(str(e.get("public_key", "")), validate=True)
        except binascii.Error:
            raw = b""
        if len(raw) != 32:
            raise KeyDocumentError(f"fence: key {i}: public_key is not 32 bytes of standard base64")
        if e.get("id") != key_id(raw):
            raise KeyDocumentError(f"fence: key {i}: id does not match the key (want {key_id(raw)})")
        keys[e["id"]] = Ed25519PublicKey.from_public_bytes(raw)
    return StaticKeys(keys)


def verify_signature(keys, header: bytes, task: bytes, epoch: int, holder: bytes) -> None:
    """Raise BadSignature or UnknownKey unless header signs (task, epoch, holder)."""
    kid, sig = parse_signature_header(header)
    pub = keys.public_key(kid) if keys is not None else None
    if pub is None:
        raise UnknownKey(f"fence: unknown signing key: key id {kid}")
    try:
        pub.verify(sig, signing_message(task, epoch, holder))
    except InvalidSignature:
        raise BadSignature(f"fence: bad token signature: does not verify with key {kid}") from None


class KeyFetcher:
    """Keys from the lease cluster's GET /v1/keys: fetched at construction
    and again, at most once per ``min_interval`` seconds, when a lookup
    meets an unknown key id (the cluster publishes a key before signing
    with it). Only https URLs, unless the host is loopback (development);
    pass ``ssl_context`` to trust the cluster's CA. Thread-safe. A refetch
    blocks the calling thread (bounded by ``timeout``); under ASGI that is
    the event loop, at most once per ``min_interval``."""

    def __init__(self, cluster_url: str, ssl_context: ssl.SSLContext | None = None,
                 min_interval: float = 10.0, timeout: float = 5.0, clock=time.monotonic):
        url = cluster_url.rstrip("/")
        if not url.endswith(KEYS_PATH):
            url += KEYS_PATH
        u = urllib.parse.urlsplit(url)
        if u.scheme != "https" and u.hostname not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError(f"fence: keys URL {url!r}: keys must come over TLS (https), or from loopback")
        self.url, self._ctx, self._timeout = url, ssl_context, timeout
        self._min, self._clock = min_interval, clock
        self._lock = threading.Lock()
        self._keys = self._fetch()
        self._at = clock()

    def _fetch(self) -> StaticKeys:
        with urllib.request.urlopen(self.url, timeout=self._timeout, context=self._ctx) as r:
            return parse_keys(r.read(1 << 20))

    def public_key(self, kid: str) -> Ed25519PublicKey | None:
        k = self._keys.public_key(kid)
        if k is not None:
            return k
        with self._lock:
            k = self._keys.public_key(kid)
            if k is None and self._clock() - self._at >= self._min:
                self._at = self._clock()
                try:
                    self._keys = self._fetch()
                except (OSError, KeyDocumentError):
                    return None  # keep the old keys; the write is refused as unknown-key
                k = self._keys.public_key(kid)
        return k
