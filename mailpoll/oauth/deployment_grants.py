"""Which mailboxes a deployment-wide service identity may read for an org (``DeploymentGrant``).

The settings' identities reach far more than one org's mail: ``MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE`` (a
Workspace key with domain-wide delegation) signs for any user of its domains, ``MAILPOLL_MICROSOFT_CLIENT_ID`` /
``_SECRET`` (application permission Mail.Read) reads any mailbox of any tenant that consented. So the username an
org's editor types is no authority: only a superuser's grant to that org is, naming the addresses or domains
(and, for Microsoft, the tenant) it covers. The mailbox form asks before anything is saved, and every poll asks
again before anything is signed or sent, so narrowing or removing a grant stops the mailboxes it no longer
covers at their next poll. Orgs without a grant bring their own key or app, or use a user's consent (Connect).

The rules here are pure; ``problem`` reads the org's grants and words the answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..models import Auth, DeploymentGrant, DeploymentIdentity, Provider

# A decision: "" (allowed) or why not.
ALLOWED = ""
NO_GRANT = "no grant"
NOT_AN_ADDRESS = "not an address"
OTHER_TENANT = "other tenant"
NOT_LISTED = "not listed"

# Conservative on purpose: what a grant can name, and what cannot mean two things to two parsers (no "%", "/",
# quotes, a second "@" or non-ASCII; an internationalized domain is written in its xn-- form).
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DOMAIN = re.compile(rf"(?:{_LABEL}\.)+{_LABEL}")
_LOCAL = re.compile(r"[a-z0-9!#$&'*+=?^_`{|}~-]+(?:\.[a-z0-9!#$&'*+=?^_`{|}~-]+)*")

REMEDY = {
    DeploymentIdentity.GOOGLE_SERVICE_ACCOUNT: "bring the mailbox's own key (its service account's JSON key as "
                                               "its app secret), or use OAuth (user consent) and Connect",
    DeploymentIdentity.MICROSOFT_APP: "bring the mailbox's own app (its client id and secret), or use OAuth "
                                      "(user consent) and Connect",
}


@dataclass(frozen=True)
class Rule:
    """One grant as the decision sees it: its tenant ("" for Google) and its addresses and domains, lower case."""

    tenant: str
    allowed: tuple[str, ...]


def identity_of(provider: str, auth: str, *, own_key: bool, own_client_id: bool) -> str:
    """The deployment identity a mailbox reads with, or "" (its own key or app, a user's consent, a password).

    >>> identity_of("gmail", "service", own_key=False, own_client_id=False)
    'google_service_account'
    >>> identity_of("graph", "service", own_key=False, own_client_id=True), identity_of("graph", "oauth",
    ...     own_key=False, own_client_id=False)
    ('', '')
    """
    if auth != Auth.SERVICE:
        return ""
    if provider == Provider.GMAIL and not own_key:
        return DeploymentIdentity.GOOGLE_SERVICE_ACCOUNT.value
    if provider == Provider.GRAPH and not own_client_id:
        return DeploymentIdentity.MICROSOFT_APP.value
    return ""


def mailbox_address(text: str) -> tuple[str, str] | None:
    """``(local, domain)`` of a plain mailbox address, lower case; None for anything else.

    >>> mailbox_address("CEO@Operator.Example"), mailbox_address("a@b@c.example"), mailbox_address("x%y@c.example")
    (('ceo', 'operator.example'), None, None)
    """
    local, at, domain = text.lower().partition("@")
    if not at or not _LOCAL.fullmatch(local) or not _DOMAIN.fullmatch(domain) or len(text) > 254:
        return None
    return local, domain


def decide(rules: Iterable[Rule], address: str, tenant: str = "") -> str:
    """Whether the org holding ``rules`` may read ``address`` (in ``tenant``): ``ALLOWED`` or why not.

    An entry with an ``@`` names one mailbox; one without names a domain, exactly (a subdomain is listed on its
    own). A Microsoft grant covers only its own tenant, compared without case.

    >>> google = [Rule("", ("client.example",))]
    >>> decide(google, "ana@client.example"), decide(google, "ceo@operator.example"), decide([], "ana@client.example")
    ('', 'not listed', 'no grant')
    >>> decide([Rule("contoso.test", ("intake@contoso.test",))], "intake@contoso.test", "fabrikam.test")
    'other tenant'
    """
    rules = list(rules)
    if not rules:
        return NO_GRANT
    parts = mailbox_address(address)
    if parts is None:
        return NOT_AN_ADDRESS
    in_tenant = [rule for rule in rules if rule.tenant.lower() == tenant.strip().lower()]
    if not in_tenant:
        return OTHER_TENANT
    wanted = {f"{parts[0]}@{parts[1]}", parts[1]}
    return ALLOWED if any(wanted.intersection(rule.allowed) for rule in in_tenant) else NOT_LISTED


def parse_allowed(text: str) -> list[str]:
    """The addresses and domains of a grant, typed one per line or comma-separated; ``ValueError`` names a bad one.

    >>> parse_allowed("Client.example, hr@Contoso.test\\nclient.example")
    ['client.example', 'hr@contoso.test']
    """
    entries: list[str] = []
    for entry in re.split(r"[,\s]+", text.strip().lower()):
        if not entry:
            continue
        if "@" in entry and mailbox_address(entry) is None or "@" not in entry and not _DOMAIN.fullmatch(entry):
            raise ValueError(f"{entry!r} is neither a mailbox address (name@domain) nor a domain (client.example; "
                             "an internationalized domain in its xn-- form).")
        if entry not in entries:
            entries.append(entry)
    return entries


def explain(decision: str, identity: str, *, org_id: str, address: str, tenant: str = "") -> str:
    """The refusal in words, for the form and the mailbox's recorded error (it names no grant's content)."""
    label = DeploymentIdentity(identity).label
    why = {
        NO_GRANT: f"no superuser granted it to org {org_id}",
        NOT_AN_ADDRESS: "a grant names mailboxes by address (name@domain) or domain, and this is neither",
        OTHER_TENANT: f"org {org_id} holds no grant of it for tenant {tenant or 'none'}",
        NOT_LISTED: f"this address is not among the addresses and domains granted to org {org_id}",
    }[decision]
    more = "ask a superuser to extend the grant, or " if decision in (NOT_LISTED, OTHER_TENANT) else ""
    return f"the deployment's {label} may not read {address!r}: {why}; {more}{REMEDY[identity]}"


def problem(org_id: str, identity: str, address: str, tenant: str = "") -> str:
    """Why the org may not read ``address`` with ``identity`` (its grants read now), or "" when a grant allows it."""
    rules = [Rule(tenant=grant.tenant, allowed=tuple(str(entry).lower() for entry in grant.allowed or ()))
             for grant in DeploymentGrant.objects.of(org_id, identity)]
    decision = decide(rules, address, tenant)
    if decision == ALLOWED:
        return ""
    return explain(decision, identity, org_id=org_id, address=address, tenant=tenant)
