"""Mail intake: mailboxes polled for documents, each stored message and attachment, and their pipeline.

Rooms, lowest first; each imports only from those before it (``tests/test_layers.py`` holds the order):

* ``message/`` reads one message, pure;
* the app's base at the top: ``conf``, ``cursor`` (the sync cursor's pure rules), ``models``,
  ``attachments`` (an attachment's guarded transitions), ``health``;
* ``oauth/`` a grant's tokens, its apps, Connect and the deployment grants;
* ``providers/`` one module per kind of server behind one small boundary;
* ``sync/`` getting mail in: the poller, one mailbox's poll, folder and change syncs, live watches, the store;
* ``admin/`` the admin, its display helpers, filters and forms;
* the app's wiring at the top: ``apps``, ``checks``, ``grant_checks``, ``handlers`` (job handlers),
  ``metrics``, ``management/``.
"""
