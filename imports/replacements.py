"""What an import's page says about replaced figures: whose it took over, and who took over its own.

Read from ImportReplacement (migration 0012's trigger counts them). The other import is named only when it
is in the caller's org; one deleted since, or of another org, is said so without a name or a link.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Sum

from .models import Import, ImportReplacement


@dataclass(frozen=True)
class Replaced:
    """``figures`` figures of ``other`` (None: see ``deleted``) replaced by, or replacing, the import shown."""

    figures: int
    other: Import | None
    deleted: bool


def _lines(pairs: list[tuple[int | None, int]], org_id) -> list[Replaced]:
    ids = {other for other, _ in pairs if other is not None}
    found = {imp.pk: imp for imp in Import.objects.for_org(org_id).filter(pk__in=ids)}
    return [Replaced(figures, found.get(other), other is None) for other, figures in pairs]


def of(imp: Import, org_id) -> dict[str, list[Replaced]]:
    """``replaced``: the figures ``imp`` wrote over other imports'; ``replaced_by``: its own, written over since."""
    took = (ImportReplacement.objects.filter(source_import=imp).values("replaced_import")
            .annotate(n=Sum("figures")).order_by("replaced_import"))
    lost = (ImportReplacement.objects.filter(replaced_import=imp).values("source_import")
            .annotate(n=Sum("figures")).order_by("source_import"))
    return {"replaced": _lines([(row["replaced_import"], row["n"]) for row in took], org_id),
            "replaced_by": _lines([(row["source_import"], row["n"]) for row in lost], org_id)}
