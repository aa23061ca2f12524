"""The admin: mailboxes (``mailboxes``), requests and attachments (``intake``), folder cursors, deployment grants, with
their display helpers, filters and forms.

The top of the sub-packages: nothing in mailpoll imports it. Admin autodiscovery imports this package,
which imports the modules that register.
"""

from . import grants, intake, mailboxes, post_actions, rules  # noqa: F401  (register their ModelAdmins)
