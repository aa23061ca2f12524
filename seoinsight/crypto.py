"""Secrets at rest (mailbox passwords, service-account keys).

Fernet (AES-128-CBC + HMAC) from ``cryptography``. New secrets are encrypted
with the first key of ``SECRETS_KEYS`` (comma-separated Fernet keys, newest
first); reading tries every key we know, newest first:

1. the ``SECRETS_KEYS``;
2. a key derived from ``SECRET_KEY``, then one derived from each of
   ``SECRET_KEY_FALLBACKS``.

Without ``SECRETS_KEYS`` the derived key also encrypts, so development needs no
setup — but then a database dump plus ``SECRET_KEY`` reads every secret, and
``check --deploy`` says so (``seoinsight.W001``). The derived keys stay readable
after ``SECRETS_KEYS`` is first set, so nothing is orphaned; ``manage.py
rotatesecrets`` re-encrypts every stored secret with the newest key, after which
an old key can be removed (README, "Secrets"). Ciphertext is never rendered
back to a user and plaintext is never logged.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from dataclasses import dataclass, field

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.apps import apps
from django.conf import settings


class SecretUnreadable(Exception):
    """The stored secret was encrypted with a key this deployment no longer has."""


def derived_key(secret_key: str) -> str:
    digest = hashlib.sha256(b"seoinsight-secrets:" + secret_key.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode()


def configured_keys() -> list[str]:
    return [k.strip() for k in getattr(settings, "SECRETS_KEYS", []) if k.strip()]


def uses_derived_key() -> bool:
    """True when new secrets are encrypted with the key derived from SECRET_KEY."""
    return not configured_keys()


def _fernets() -> tuple[MultiFernet, Fernet]:
    """(every key's Fernet, newest first; the newest alone), built once per key set."""
    return _fernets_of(tuple(configured_keys()), settings.SECRET_KEY,
                       tuple(getattr(settings, "SECRET_KEY_FALLBACKS", [])))


@functools.lru_cache(maxsize=8)
def _fernets_of(configured: tuple, secret_key: str, fallbacks: tuple) -> tuple[MultiFernet, Fernet]:
    # The key that encrypts first, then those that only decrypt; a key listed twice is tried once.
    derived = [derived_key(k) for k in [secret_key, *fallbacks] if k]
    fernets = [Fernet(k) for k in dict.fromkeys([*configured, *derived])]
    return MultiFernet(fernets), fernets[0]


def encrypt(plaintext: str) -> str:
    return _fernets()[0].encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernets()[0].decrypt(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable(
            "stored secret cannot be decrypted with the configured SECRETS_KEYS or SECRET_KEY"
        ) from None


def is_current(token: str) -> bool:
    """True when ``token`` is encrypted with the key new secrets get (nothing to rotate)."""
    try:
        _fernets()[1].decrypt(token.encode())
    except InvalidToken:
        return False
    return True


def rotate(token: str) -> str:
    """``token`` re-encrypted with the newest key; raises SecretUnreadable if no key reads it."""
    try:
        return _fernets()[0].rotate(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable("stored secret cannot be decrypted with any configured key") from None


@dataclass(frozen=True)
class Column:
    """A model field holding Fernet tokens (empty: no secret)."""

    model_label: str
    field: str

    @property
    def model(self):
        return apps.get_model(self.model_label)

    def __str__(self):
        return f"{self.model_label}.{self.field}"


# Every column that stores a secret, registered by the app that owns it; rotatesecrets walks them.
COLUMNS: list[Column] = []


def register_column(model_label: str, field: str) -> None:
    column = Column(model_label, field)
    if column not in COLUMNS:
        COLUMNS.append(column)


@dataclass
class Rotation:
    """What ``rotate_column`` did to one column."""

    rotated: int = 0
    current: int = 0  # already encrypted with the newest key
    replaced: int = 0  # rewritten by someone else meanwhile (so with the newest key): left alone
    unreadable: list = field(default_factory=list)  # pks of secrets no configured key decrypts


def rotate_column(column: Column) -> Rotation:
    """Re-encrypt every secret of ``column`` with the newest key."""
    model, name = column.model, column.field
    result = Rotation()
    for pk, token in list(model._base_manager.exclude(**{name: ""}).values_list("pk", name)):
        if is_current(token):
            result.current += 1
            continue
        try:
            fresh = rotate(token)
        except SecretUnreadable:
            result.unreadable.append(pk)
            continue
        # Compare-and-set: a secret typed in the admin meanwhile is never overwritten by the
        # rotation of the one it replaced.
        if model._base_manager.filter(pk=pk, **{name: token}).update(**{name: fresh}):
            result.rotated += 1
        else:
            result.replaced += 1
    return result
