"""What comes out of the data the other apps bring in: the site page, the portfolio, alerts and annotations.

The top floor: it reads ``imports`` (and ``mailpoll`` for a site's failing mailboxes); no app imports it.
"""
