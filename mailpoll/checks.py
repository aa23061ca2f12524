"""System checks for mail intake settings and mailboxes that would otherwise fail only in a poller or worker.

mailpoll.E001  a MAILPOLL_* environment text is not of the setting's type
mailpoll.E002  a MAILPOLL_* setting is not above zero
mailpoll.E003  an API or OAuth endpoint setting is not an https URL (http only on 127.0.0.1 / localhost), or one
               that the client's parser and the standard library's read differently
mailpoll.W001  MAILPOLL_STUCK_AFTER is shorter than the time the queue counts a silent job as alive
mailpoll.W002  MAILPOLL_POLL_DEADLINE is not longer than MAILPOLL_SOCKET_TIMEOUT
mailpoll.W003  (with --database) a mailbox receives CSV/Excel attachments but has no site target to import into
mailpoll.W004  (with --database) an enabled mailbox lacks what it authenticates with (password, key, client id...)
mailpoll.E004  MAILPOLL_EXTRA_PORTS holds a word that is neither a port nor *
mailpoll.W006  MAILPOLL_ALLOW_PRIVATE_HOSTS is on: org staff may point mailboxes at this server's own network
mailpoll.W007  MAILPOLL_EXTRA_PORTS is *: org staff may point mailboxes at any port
mailpoll.W008  (with --database) an enabled IMAP mailbox's port or address is one the poller now refuses
"""

from __future__ import annotations

from django.core import checks
from django.db import connections
from django.db.migrations.executor import MigrationExecutor

from jobs import conf as jobs_conf
from jobs import registry
from seoinsight import outbound

from . import conf
from .providers import destination

# Every one of them is a count, a size or a duration: zero or less means "never" or "no limit" by accident.
POSITIVE = tuple(setting.name for setting in conf.SETTINGS if setting.type in (int, float))


@checks.register()
def check_values(app_configs=None, **kwargs):
    return conf.SETTINGS.environment_errors("mailpoll.E001") or conf.SETTINGS.not_positive_errors(
        POSITIVE, "mailpoll.E002")


@checks.register()
def check_endpoints(app_configs=None, **kwargs):
    """A token or a client secret must never travel in clear text, nor to something that is no URL."""
    errors = []
    for name in conf.URL_SETTINGS:
        value = str(conf.get(name))
        problem = endpoint_problem(value)
        if problem:
            # The origin only: a key in the URL's path or query is not printed by ``check``.
            errors.append(checks.Error(f"{name} ({outbound.where(value)}): {problem}.",
                                       hint="Use the provider's https URL (the default).", id="mailpoll.E003"))
    return errors


def endpoint_problem(url: str) -> str:
    """Why ``url`` may not receive tokens, or "": ``seoinsight.outbound.endpoint_problem``, the rule every
    client that sends them applies too (https anywhere, plain http to loopback only, and a URL the client's
    parser and the standard library's read alike).

    >>> endpoint_problem("https://oauth2.googleapis.com/token"), endpoint_problem("http://127.0.0.1:8080/token")
    ('', '')
    >>> endpoint_problem("http://example.com/token")
    'http only on 127.0.0.1 or localhost: a credential would cross the network in clear text'
    >>> endpoint_problem("http://127.0.0.2:8080\\\\@127.0.0.1/token")  # urlsplit alone sees 127.0.0.1
    'a backslash, a space or a control character in the URL'
    """
    return outbound.endpoint_problem(url)


@checks.register()
def check_destinations(app_configs=None, **kwargs):
    """Where org staff may make the server connect: said at every deploy when the deployment opened more."""
    if conf.SETTINGS.unparsable():
        return []  # check_values reports them
    found = []
    ports = str(conf.get("MAILPOLL_EXTRA_PORTS"))
    bad = destination.bad_port_words(ports)
    if bad:
        found.append(checks.Error(
            f"MAILPOLL_EXTRA_PORTS ({ports!r}) holds {', '.join(repr(word) for word in bad)}, neither a port "
            "(1-65535) nor *: left out.", hint="List port numbers separated by commas, e.g. 995,1143.",
            id="mailpoll.E004"))
    if destination.allow_private():
        found.append(checks.Warning(
            "MAILPOLL_ALLOW_PRIVATE_HOSTS is on: an org's staff may point an IMAP mailbox (and Test connection) at "
            "loopback, private, link-local and reserved addresses, this server's own network included.",
            hint="Keep it for a mail server on the premises or for tests; turn it off otherwise.",
            id="mailpoll.W006"))
    if destination.extra_ports() is None:
        found.append(checks.Warning(
            "MAILPOLL_EXTRA_PORTS is *: an org's staff may point an IMAP mailbox (and Test connection) at any port.",
            hint="List the ports your mail servers use instead (993 and 143 are always allowed).",
            id="mailpoll.W007"))
    return found


@checks.register()
def check_limits_agree(app_configs=None, **kwargs):
    if conf.SETTINGS.unparsable() or jobs_conf.SETTINGS.unparsable():
        return []  # check_values (and jobs') report them; the values cannot be compared

    return limit_warnings(
        stuck_after=float(conf.get("MAILPOLL_STUCK_AFTER")),
        job_stale_after=registry.get("process_attachment").stale_after,
        poll_deadline=float(conf.get("MAILPOLL_POLL_DEADLINE")),
        socket_timeout=float(conf.get("MAILPOLL_SOCKET_TIMEOUT")),
    )


def limit_warnings(*, stuck_after: float, job_stale_after: float, poll_deadline: float,
                   socket_timeout: float) -> list:
    """Pairs of settings that contradict each other."""
    warnings = []
    if stuck_after < job_stale_after:
        # The watchdog's rule and the zombie sweep's disagree about a silent worker.
        warnings.append(checks.Warning(
            f"MAILPOLL_STUCK_AFTER ({stuck_after:g}s) is shorter than the {job_stale_after:g}s the queue waits "
            "before it counts a silent process_attachment job as dead: the watchdog gives up on an attachment's "
            "worker sooner than the queue does, and may release one still being processed (it runs twice).",
            hint="Raise MAILPOLL_STUCK_AFTER above JOBS_STALE_AFTER (or the job type's stale_after).",
            id="mailpoll.W001",
        ))
    if poll_deadline <= socket_timeout:
        warnings.append(checks.Warning(
            f"MAILPOLL_POLL_DEADLINE ({poll_deadline:g}s) is not longer than MAILPOLL_SOCKET_TIMEOUT "
            f"({socket_timeout:g}s): one slow read uses a mailbox's whole poll, and the socket timeout never "
            "fires first to say which step hung.",
            hint="Keep MAILPOLL_POLL_DEADLINE several times MAILPOLL_SOCKET_TIMEOUT.",
            id="mailpoll.W002",
        ))
    return warnings


def migrated(databases) -> list[str]:
    """The database aliases a database check may query: `migrate` runs the checks before it applies what
    their queries read, so an alias with migrations still to apply is passed over."""
    aliases = []
    for alias in databases or ():
        executor = MigrationExecutor(connections[alias])
        if not executor.migration_plan(executor.loader.graph.leaf_nodes()):
            aliases.append(alias)
    return aliases


@checks.register(checks.Tags.database)
def check_mailboxes_have_targets(app_configs=None, databases=None, **kwargs):
    """A CSV or Excel attachment of a mailbox without a site target fails; better said before it arrives."""
    from .models import Attachment, Mailbox

    found = []
    for alias in migrated(databases):
        untargeted = (
            Mailbox.objects.using(alias)
            .filter(enabled=True, site_target__isnull=True)
            .filter(pk__in=Attachment.objects.using(alias).filter(document_type__in=("csv", "xlsx"))
                    .values("request__mailbox"))
            .only("pk", "name", "org_id")
            .order_by("pk")
        )
        found += [
            checks.Warning(
                f"Mailbox {mailbox.pk} ({mailbox.name!r}, org {mailbox.org_id}) receives CSV/Excel attachments "
                "but has no site target: each of them fails instead of being imported.",
                hint="Set the mailbox's site target in the admin.",
                obj=mailbox,
                id="mailpoll.W003",
            )
            for mailbox in untargeted
        ]
    return found


@checks.register(checks.Tags.database)
def check_mailboxes_can_authenticate(app_configs=None, databases=None, **kwargs):
    """A mailbox without its credentials fails at every poll; better said by ``check`` at deploy time."""
    from .models import Mailbox
    from .oauth.apps import credentials_problem

    found = []
    for alias in migrated(databases):
        for mailbox in Mailbox.objects.using(alias).filter(enabled=True).order_by("pk"):
            problem = credentials_problem(mailbox)
            if problem:
                found.append(checks.Warning(
                    f"Mailbox {mailbox.pk} ({mailbox.name!r}, {mailbox.get_provider_display()}, "
                    f"{mailbox.get_auth_display()}) cannot authenticate: {problem}.",
                    hint="Complete it in the admin, or disable the mailbox.", obj=mailbox, id="mailpoll.W004"))
    return found


@checks.register(checks.Tags.database)
def check_mailboxes_may_connect(app_configs=None, databases=None, **kwargs):
    """A mailbox saved before the destination rules, or under wider settings, fails at every poll: said at
    deploy time. Hosts are judged without DNS (an IP address, localhost); the poller resolves the rest."""
    from .models import Mailbox, Provider

    found = []
    for alias in migrated(databases):
        for mailbox in Mailbox.objects.using(alias).filter(enabled=True, provider=Provider.IMAP).order_by("pk"):
            problem = destination.literal_problem(mailbox.host, mailbox.port)
            if problem:
                found.append(checks.Warning(
                    f"Mailbox {mailbox.pk} ({mailbox.name!r}, org {mailbox.org_id}) cannot be polled: {problem}.",
                    hint="Point it at the mail server's public name and port 993 or 143, or set "
                         "MAILPOLL_EXTRA_PORTS / MAILPOLL_ALLOW_PRIVATE_HOSTS for a server on the premises.",
                    obj=mailbox, id="mailpoll.W008"))
    return found
