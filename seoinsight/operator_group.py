"""The "Operator" group: the permissions an org's staff member needs to run intake day to day, declared once.

What the group may do is ``GRANTED``; every other model with an admin page is in ``LEFT_OUT`` with the reason,
so a new admin page is a decision, not an accident, and its admin is superuser-only (``SuperuserOnlyAdmin``), so
no permission given by hand opens it either (tests/core/test_operator_group.py holds both lists to the admin's
registry and the seeded group to ``GRANTED``). Deleting is nobody's in the group: rows tie imports, jobs
and mail together, and removing them is a superuser's call. Two exceptions: a saved column mapping is a
preference (deleting it only means the next file with those headers is asked about again), and a note on a site's
timeline is the operator's own words.

The permissions only open admin pages; which rows show on them is the user's orgs (``seoinsight.orgscope``):
an operator sees and changes only the orgs they are a member of. Apps are named by label, not imported (this
module is the ground floor).

Migration 0008 seeds the group with ``sync``. A change to ``GRANTED`` needs a migration that runs ``sync``
again (``RunPython(operator_group.sync_migration)``), after the migrations of the models it names.
"""

from __future__ import annotations

NAME = "Operator"

# model label -> the actions granted on it.
GRANTED: dict[str, tuple[str, ...]] = {
    # Set up intake: where mail comes from and where it goes.
    "mailpoll.mailbox": ("view", "add", "change"),
    "mailpoll.mailrule": ("view", "add", "change"),
    "seoinsight.site": ("view", "add", "change"),
    "seoinsight.sitetarget": ("view", "add", "change"),
    "imports.import": ("view", "add", "change"),
    # Fix a wrong column mapping: it decides how the org's next files with those headers are read.
    "imports.columnmapping": ("view", "change", "delete"),
    # Notes on a site's timeline ("moved to HTTPS"): the operator's own words, theirs to add, correct and remove.
    "insight.annotation": ("view", "add", "change", "delete"),
    # Work the queues: route, ignore, retry (the actions need change; nothing there is edited by hand).
    "mailpoll.attachment": ("view", "change"),
    "mailpoll.postaction": ("view", "change"),
    "mailpoll.request": ("view", "change"),
    # Retry what failed, and see whether workers run (the job actions need change; no field is edited).
    "jobs.job": ("view", "change"),
    "jobs.zombiejob": ("view",),
    "jobs.process": ("view",),
    # Look, not touch: what was imported, what the downstream has.
    # Acknowledge what the drop detector found (the action and the button need change; no field is edited).
    "insight.alert": ("view", "change"),
    "imports.urlmetric": ("view",),
    "outbox.entry": ("view",),
}

# model label -> why an org's operator gets nothing on it.
LEFT_OUT: dict[str, str] = {
    "auth.user": "a staff user who may edit users can make himself a superuser: superusers only",
    "auth.group": "the groups are what users may do: superusers only",
    "seoinsight.org": "orgs are the tenants: created and named by a superuser",
    "seoinsight.membership": "who belongs to an org decides what they see: a superuser's decision",
    "seoinsight.apitoken": "machine credentials, issued with manage.py createapitoken",
    "mailpoll.deploymentgrant": "lets an org read mail with the deployment's own identity: superusers only",
    "jobs.schedule": "periodic jobs serve every org: superusers only",
    "insight.alertthresholds": "how far clicks must fall for an alert is an org setting: a superuser's, like the org",
}


def codenames() -> list[tuple[str, str]]:
    """(app label, permission codename) of every granted permission, in a stable order."""
    found = []
    for label, actions in GRANTED.items():
        app_label, model = label.split(".")
        found.extend((app_label, f"{action}_{model}") for action in actions)
    return sorted(found)


def sync(apps) -> list[tuple[str, str]]:
    """Make the group hold exactly the granted permissions that exist; returns those that do not exist yet.

    Idempotent: creates the group if missing, adds what is missing, removes what is not granted. ``apps`` is a
    migration's state or ``django.apps.apps``. A permission missing here is a model whose migration has not run
    yet; the migration that adds it runs ``sync`` again.
    """
    from django.db.models import Q

    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    wanted = codenames()
    match = Q()
    for app_label, codename in wanted:
        match |= Q(content_type__app_label=app_label, codename=codename)
    found = Permission.objects.filter(match).values_list("pk", "content_type__app_label", "codename")
    group, _ = Group.objects.get_or_create(name=NAME)
    group.permissions.set([pk for pk, _, _ in found])
    return sorted(set(wanted) - {(app_label, codename) for _, app_label, codename in found})


def sync_migration(apps, schema_editor) -> None:
    """``sync`` as a migration step, after creating the permissions Django would create only once all have run."""
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True  # what create_permissions checks; the state's configs have none
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    sync(apps)
