"""The portfolio: every site of the operator's org on one page, ``/imports/sites/``.

``sql`` holds its statements (all figures in one, from the counted day sums); ``figures`` runs them;
``ordering``, ``links`` and ``sparkline`` are pure (the order, the site page's address, the drawing);
``openitems`` reads what is open on each site (alerts, failed imports, failing mailboxes); ``asked``
reads the query string, every parameter bounded; ``views`` serves the page and its CSV.
"""
