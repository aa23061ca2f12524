"""Mail providers behind one small interface, chosen by ``Mailbox.provider``."""

from .base import FolderError, MailProvider, MessageArrivedTooLarge, MessageTooLarge, PollInterrupted, ProviderError

_providers: dict[str, type[MailProvider]] = {}


def register(name: str):
    def decorate(cls):
        _providers[name] = cls
        return cls

    return decorate


def for_mailbox(mailbox) -> MailProvider:
    from . import imap  # noqa: F401  (registers itself)

    try:
        cls = _providers[mailbox.provider]
    except KeyError:
        raise ProviderError(f"no provider {mailbox.provider!r} (known: {', '.join(sorted(_providers))})") from None
    return cls(mailbox)


__all__ = ["FolderError", "MailProvider", "MessageArrivedTooLarge", "MessageTooLarge", "PollInterrupted",
           "ProviderError", "for_mailbox", "register"]
