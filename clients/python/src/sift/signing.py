"""Signed messages: Ed25519 signatures that a publisher adds and a subscriber checks end to end.

A signature covers the topic, the properties, the metadata and the payload
(never the broker's stamps, which change on the way) and travels in two
string properties, so that it crosses every door, broker link and multicast
group unchanged: `sift.signer` names the key and `sift.signature` holds the
64 signature bytes as base64url without padding. A broker whose users file
lists signed topics refuses unsigned or forged messages on them at ingress;
a subscriber that verifies needs to trust no broker at all.

What is signed is `canonical()`, byte for byte the encoding the broker and
the `sift` command use (docs/SECURITY.md, "What a signature covers"):

    "sift-signature-v1\\0"
    u64 length + topic (UTF-8)
    u32 count, then each property other than sift.signature, encoded as
        u64 length + name, then a type byte and value:
        b"b" + u8 (bool) | b"i" + i64 | b"f" + IEEE-754 bits as u64 | b"s" + u64 length + UTF-8
      sorted bytewise as whole encodings
    u8 1 and u64 length + metadata, or u8 0 and u64 0 when there is none
    u64 length + payload

(all integers big-endian). Keys are the ones `sift token keygen` makes: a
PKCS#8 PEM private key, and a public key as base64 of its 32 bytes or a PEM
`PUBLIC KEY`. Signing needs the `cryptography` package (`pip install
sift-client[signing]`); it is imported only when a key is made.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import SiftError
from .types import PropertyValue

if TYPE_CHECKING:
    from .message import Delivery

#: The property naming the key that signed a message.
SIGNER_PROPERTY = "sift.signer"
#: The property holding the signature (base64url, no padding).
SIGNATURE_PROPERTY = "sift.signature"
#: Signatures a `Verifier` remembers, so that the copies a subscriber gets
#: once per matching subscription are checked by one Ed25519 verification.
VERIFIED_RECENT_MAX = 4096

_CANONICAL_PREFIX = b"sift-signature-v1\0"
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


class SignatureError(SiftError):
    """A message's signature does not hold: `reason` is `unsigned`, `unknown_signer`, `forged` or `malformed`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("signed messages need the cryptography package: pip install sift-client[signing]") from error
    return serialization, ed25519


class SigningKey:
    """A private Ed25519 key with the name receivers know it by (`sift.signer`)."""

    def __init__(self, name: str, pem: str | bytes) -> None:
        _, ed25519 = _crypto()
        text = pem.decode("ascii", "replace") if isinstance(pem, bytes) else pem
        try:
            seed = _pkcs8_ed25519_seed(_pem_body(text))
        except ValueError as error:
            raise ValueError(f"signing key {name!r}: not a PKCS#8 PEM private key ({error})") from error
        self.name = name
        self._key = ed25519.Ed25519PrivateKey.from_private_bytes(seed)

    @classmethod
    def from_file(cls, name: str, path: str) -> SigningKey:
        """The key in the PEM file at `path` (as `sift token keygen` writes it)."""
        with open(path, "rb") as file:
            return cls(name, file.read())

    def __repr__(self) -> str:
        return f"SigningKey(name={self.name!r})"


#: How every PKCS#8 Ed25519 key starts after its version: the algorithm
#: identifier (OID 1.3.101.112) and the private key, an OCTET STRING that
#: holds the 32-byte seed as another OCTET STRING (RFC 8410 §7).
_ED25519_PKCS8_MIDDLE = bytes.fromhex("300506032b657004220420")


def _pem_body(text: str) -> bytes:
    lines = text.strip().splitlines()
    if not lines or not lines[0].startswith("-----BEGIN"):
        raise ValueError("no PEM block")
    body = "".join(line.strip() for line in lines[1:] if not line.startswith("-----"))
    return base64.b64decode(body, validate=True)


def _pkcs8_ed25519_seed(der: bytes) -> bytes:
    """The seed of a PKCS#8 Ed25519 key, v1 (openssl) or v2 with its public key (`sift token keygen`).

    The cryptography package reads only v1, so the fixed layout is read here.
    """
    if len(der) < 2 or der[0] != 0x30 or der[1] >= 0x80 or der[1] + 2 != len(der):
        raise ValueError("not a DER SEQUENCE")
    if der[2:4] != b"\x02\x01" or der[4] not in (0, 1):
        raise ValueError("unknown PKCS#8 version")
    seed_at = 5 + len(_ED25519_PKCS8_MIDDLE)
    if der[5:seed_at] != _ED25519_PKCS8_MIDDLE or len(der) < seed_at + 32:
        raise ValueError("not an Ed25519 key")
    return der[seed_at:seed_at + 32]


class VerifyingKey:
    """A public Ed25519 key a subscriber accepts signatures of, by the signer's name."""

    def __init__(self, name: str, public_key: str | bytes) -> None:
        serialization, ed25519 = _crypto()
        text = public_key.decode("ascii") if isinstance(public_key, bytes) else public_key
        text = text.strip()
        try:
            if text.startswith("-----BEGIN PUBLIC KEY-----"):
                key = serialization.load_pem_public_key(text.encode("ascii"))
                if not isinstance(key, ed25519.Ed25519PublicKey):
                    raise ValueError("the PEM public key is not an Ed25519 key")
            else:
                padded = text + "=" * (-len(text) % 4)
                raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
                key = ed25519.Ed25519PublicKey.from_public_bytes(raw)
        except ValueError as error:
            raise ValueError(f"verifying key {name!r}: {error}") from error
        self.name = name
        self._key = key

    def __repr__(self) -> str:
        return f"VerifyingKey(name={self.name!r})"


def keys_from_toml(path: str) -> list[VerifyingKey]:
    """The `[[signing_key]]` entries (name, public_key) of a TOML file: a keys file or a users file."""
    try:
        import tomllib
    except ImportError as error:  # pragma: no cover - Python 3.10
        raise ImportError("reading keys from TOML needs Python 3.11 (tomllib)") from error

    with open(path, "rb") as file:
        document = tomllib.load(file)
    entries = document.get("signing_key", [])
    if not isinstance(entries, list):
        raise ValueError(f"{path}: signing_key must be an array of tables ([[signing_key]])")
    keys = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or "name" not in entry or "public_key" not in entry:
            raise ValueError(f"{path}: signing_key {index + 1} needs name and public_key")
        keys.append(VerifyingKey(entry["name"], entry["public_key"]))
    return keys


Properties = Mapping[str, PropertyValue] | Iterable[tuple[str, PropertyValue]]


def _items(properties: Properties | None) -> list[tuple[str, PropertyValue]]:
    if properties is None:
        return []
    return list(properties.items() if isinstance(properties, Mapping) else properties)


def _put_bytes(out: bytearray, data: bytes) -> None:
    out += _U64.pack(len(data))
    out += data


def _encode_property(name: str, value: PropertyValue) -> bytes:
    out = bytearray()
    _put_bytes(out, name.encode("utf-8"))
    if value is True or value is False:
        out += b"b" + bytes((1 if value else 0,))
    elif isinstance(value, int):
        out += b"i" + _I64.pack(value)
    elif isinstance(value, float):
        out += b"f" + _F64.pack(value)
    elif isinstance(value, str):
        out += b"s"
        _put_bytes(out, value.encode("utf-8"))
    else:
        raise TypeError(f"property {name!r}: {type(value).__name__} is not bool, int, float or str")
    return bytes(out)


def canonical(topic: str, payload: bytes, properties: Properties | None = None, metadata: bytes | None = None) -> bytes:
    """The bytes a signature covers (see the module's documentation)."""
    encoded = sorted(_encode_property(name, value) for name, value in _items(properties) if name != SIGNATURE_PROPERTY)
    out = bytearray(_CANONICAL_PREFIX)
    _put_bytes(out, topic.encode("utf-8"))
    out += _U32.pack(len(encoded))
    for entry in encoded:
        out += entry
    out += b"\x01" if metadata is not None else b"\x00"
    _put_bytes(out, metadata or b"")
    _put_bytes(out, payload)
    return bytes(out)


def sign(
    topic: str,
    payload: bytes,
    properties: Properties | None,
    metadata: bytes | None,
    key: SigningKey,
) -> list[tuple[str, PropertyValue]]:
    """The properties to publish: `properties` without any earlier signature, plus `key`'s signer and signature."""
    signed: list[tuple[str, PropertyValue]] = [
        (name, value) for name, value in _items(properties) if name not in (SIGNER_PROPERTY, SIGNATURE_PROPERTY)
    ]
    signed.append((SIGNER_PROPERTY, key.name))
    signature = key._key.sign(canonical(topic, payload, signed, metadata))
    signed.append((SIGNATURE_PROPERTY, base64.urlsafe_b64encode(signature).rstrip(b"=").decode("ascii")))
    return signed


def verify(delivery: Delivery, keys: Iterable[VerifyingKey]) -> VerifyingKey:
    """The key that signed `delivery`, or `SignatureError` saying why none did.

    A delivery holds the first of repeated property names only, so a
    message signed with a property name given twice does not verify here.
    """
    return _verify(delivery, keys, _canonical_of(delivery))


def _canonical_of(delivery: Delivery) -> bytes:
    return canonical(delivery.topic, delivery.payload, delivery.properties, delivery.metadata)


def _verify(delivery: Delivery, keys: Iterable[VerifyingKey], signed: bytes) -> VerifyingKey:
    from cryptography.exceptions import InvalidSignature

    signer = delivery.properties.get(SIGNER_PROPERTY)
    signature = delivery.properties.get(SIGNATURE_PROPERTY)
    if not isinstance(signer, str) or not isinstance(signature, str):
        raise SignatureError("unsigned", "the message is not signed")
    key = next((key for key in keys if key.name == signer), None)
    if key is None:
        raise SignatureError("unknown_signer", f"signer {signer!r} is not accepted here")
    try:
        raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
    except ValueError as error:
        raise SignatureError("malformed", f"malformed signature: {error}") from error
    try:
        key._key.verify(raw, signed)
    except InvalidSignature:
        raise SignatureError("forged", f"the signature of {signer!r} does not verify: forged or changed") from None
    return key


@dataclass
class Verifier:
    """Verifies deliveries with `keys`, remembering the last `VERIFIED_RECENT_MAX` it verified.

    A subscriber whose subscriptions overlap receives a message once per
    matching subscription; a copy whose signed bytes equal those of one
    verified before needs no second Ed25519 check, and a copy that differs
    in any way is verified in full. `refused` counts the deliveries that did
    not verify.
    """

    keys: list[VerifyingKey]
    refused: int = 0
    _recent: dict[bytes, tuple[VerifyingKey, bytes]] = field(default_factory=dict, repr=False)

    def verify(self, delivery: Delivery) -> VerifyingKey:
        """As `verify()`; counts a refusal before raising it."""
        signed = _canonical_of(delivery)
        signature = delivery.properties.get(SIGNATURE_PROPERTY)
        if isinstance(signature, str):
            known = self._recent.get(signature.encode())
            if known is not None and known[1] == signed:
                return known[0]
        try:
            key = _verify(delivery, self.keys, signed)
        except SignatureError:
            self.refused += 1
            raise
        if isinstance(signature, str):
            self._recent[signature.encode()] = (key, signed)
            if len(self._recent) > VERIFIED_RECENT_MAX:
                del self._recent[next(iter(self._recent))]
        return key
