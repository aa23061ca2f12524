"""The site page: what was imported for one site, over a chosen period.

``periods`` (which days, and the period they are compared with) and ``listing``
(the top pages' order, paging and links) are pure; ``sql`` holds the statements,
each aggregating in PostgreSQL over the covering index of migration 0004;
``figures`` runs them; ``asked`` reads the query string, every parameter bounded
(``seoinsight.query_params``); ``views`` serves the page and its CSV (``seoinsight.csvexport``).
"""
