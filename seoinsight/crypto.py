"""Secrets at rest (mailbox passwords, OAuth tokens, service-account keys).

Fernet (AES-128-CBC + HMAC) from ``cryptography``. Keys come from
``SECRETS_KEYS`` (comma-separated Fernet keys, newest first, so a key can be
rotated: new writes use the first, reads try each); without it, one key is
derived from ``SECRET_KEY`` so development needs no setup. Ciphertext is never
rendered back to a user and plaintext is never logged.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class SecretUnreadable(Exception):
    """The stored secret was encrypted with a key this deployment no longer has."""


def _fernet() -> MultiFernet:
    keys = [k.strip() for k in getattr(settings, "SECRETS_KEYS", []) if k.strip()]
    if not keys:
        digest = hashlib.sha256(b"seoinsight-secrets:" + settings.SECRET_KEY.encode()).digest()
        keys = [base64.urlsafe_b64encode(digest).decode()]
    return MultiFernet([Fernet(k) for k in keys])


def encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable("stored secret cannot be decrypted with the configured SECRETS_KEYS") from None
