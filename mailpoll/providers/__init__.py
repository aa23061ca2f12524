"""Mail providers behind one small boundary, chosen by ``Mailbox.provider``.

Each lives in its own module, imported only when a mailbox needs it (the Google and
Microsoft client libraries are heavy): ``imap``, ``gmail_mailbox``, ``graph_mailbox``.

Above ``oauth`` (they ask it for tokens) and the app's base (a folder's ``FolderStatus`` and the search
kinds are ``mailpoll.cursor``'s, whose rules read them); below ``sync``, which drives them. A provider that
refreshes a grant its own way sets that on oauth (``graph_mailbox``: msal), so oauth imports no provider.
"""

import importlib

from .base import (ChangesProvider, FolderError, MailProvider, MessageArrivedTooLarge, MessageTooLarge,
                   PollInterrupted, ProviderError)

MODULES = {"imap": "imap", "gmail": "gmail_mailbox", "graph": "graph_mailbox"}
_providers: dict[str, type[MailProvider] | type[ChangesProvider]] = {}


def register(name: str):
    def decorate(cls):
        _providers[name] = cls
        return cls

    return decorate


def for_mailbox(mailbox) -> MailProvider | ChangesProvider:
    module = MODULES.get(mailbox.provider)
    if module is None:
        raise ProviderError(f"no provider {mailbox.provider!r} (known: {', '.join(sorted(MODULES))})")
    importlib.import_module(f"{__name__}.{module}")  # registers itself
    return _providers[mailbox.provider](mailbox)


__all__ = ["ChangesProvider", "FolderError", "MailProvider", "MessageArrivedTooLarge", "MessageTooLarge",
           "PollInterrupted", "ProviderError", "for_mailbox", "register"]
