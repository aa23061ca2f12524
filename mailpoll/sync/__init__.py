"""Getting mail in: ``poller`` (the pollmail loop), one mailbox's poll, folder and change syncs, live
watches, ``store`` (dedup insert), its SQL and the attachment watchdog.

Above the providers and oauth it drives. The cursor's pure rules are not in here but at the top
(``mailpoll.cursor``): the models store a ``CursorState`` and the providers report a ``FolderStatus``,
so the three share it from below. Logger names are those from before this package (``mailpoll.poller``).
"""
