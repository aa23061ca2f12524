"""Which of an org's sites a host or a file's URLs belong to.

A host belongs to at most one site of an org (``SiteHost``'s UNIQUE), so a host names a site without doubt;
a file's URLs name the site most of them are on. How hosts are spelt and checked is ``seoinsight.hosts``,
whose functions are offered here too so that callers have one module to import.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from .hosts import count_hosts, normalise_domain, normalise_host, prefix_problem, site_hosts
from .models import Site, SiteHost

__all__ = ["normalise_domain", "normalise_host", "prefix_problem", "site_for_host", "site_for_urls", "site_hosts"]


def site_for_host(org_id: str, host: str) -> Site | None:
    """The site of org ``org_id`` served on ``host`` (a host or a URL, in any spelling), or None."""
    try:
        host = normalise_host(host)
    except ValueError:
        return None
    return Site.objects.filter(org_id=org_id, hosts__host=host).first()


def site_for_urls(org_id: str, urls: Iterable[str]) -> Site | None:
    """The site of org ``org_id`` that most of ``urls`` (URLs or hosts) are on; None when none is on any.

    Of two sites with as many URLs, the older one: the answer does not change from one call to the next.
    What the imports say of a file ("this file looks like it is for <site>") and a routing condition rest on it.
    """
    on_host = count_hosts(urls)
    if not on_host:
        return None
    on_site: Counter[int] = Counter()
    rows = SiteHost.objects.filter(org_id=org_id, host__in=list(on_host)).values_list("site_id", "host")
    for site_id, host in rows:
        on_site[site_id] += on_host[host]
    if not on_site:
        return None
    best = max(on_site, key=lambda site_id: (on_site[site_id], -site_id))
    return Site.objects.get(pk=best)
