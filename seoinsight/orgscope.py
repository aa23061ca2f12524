"""The admin, scoped by org.

A staff user who is not a superuser reaches only the rows of the orgs they are a
member of (``Membership``); a superuser reaches everything. One mechanism serves
every ModelAdmin: ``org_path`` knows the lookup from any model to its org, and
``OrgScopedAdmin`` filters by it at every door the admin has:

* the list, its search, date hierarchy and actions (actions run on the list's queryset);
* the object views (change, delete, history): another org's object is a 404, exactly
  like an unknown one, so nothing tells a foreign id from a free one;
* the choices of every model-choice field of its forms and inlines' forms, declared
  fields included (a mailbox's site target), so neither the page nor a forged POST
  reaches another org's row;
* list filters on relations, and the autocomplete, which reads the remote model's
  admin queryset.

Models that belong to no org (users, groups), and those that decide what an org is
(the org itself, its memberships, its API tokens: ``operator_group.LEFT_OUT``), are
superuser-only (``SuperuserOnlyAdmin``): a staff user who may edit users can make himself a
superuser, so that right is never delegated to an org. ``seoinsight.checks``
refuses (admin ``seoinsight.E001``) any registered admin that is neither.
"""

from __future__ import annotations

import functools

from django.contrib import admin
from django.contrib.admin.utils import get_fields_from_path
from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.forms import ModelChoiceField
from django.http import Http404

from .models import Membership, Org

MAX_DEPTH = 4  # the longest chain today is UrlMetric -> site_target -> site -> org
USER_PATH = "memberships__org"  # the one multi-valued path: a user may be a member of several orgs


@functools.cache
def org_path(model) -> str | None:
    """The lookup from ``model`` to its org's id, or None when its rows belong to no org.

    An org is its own ``pk``; then a non-null foreign key to ``Org``; then a plain
    ``org_id`` column (the jobs table keeps the seed's ``org_id TEXT``); then the
    shortest chain of non-null foreign keys to a model that has one of those. Nullable
    keys are never followed: a row whose key is empty would drop out of its own org.
    Users belong to orgs through their memberships.
    """
    if model is get_user_model():
        return USER_PATH
    frontier = [(model, "")]
    seen = set()
    for _ in range(MAX_DEPTH + 1):
        following = []
        for current, prefix in frontier:
            direct = _direct_org_path(current)
            if direct is not None:
                return prefix + direct
            seen.add(current)
            for field in current._meta.concrete_fields:
                if field.many_to_one and not field.null and field.related_model not in seen:
                    following.append((field.related_model, f"{prefix}{field.name}__"))
        frontier = following
    return None


def _direct_org_path(model) -> str | None:
    if issubclass(model, Org):
        return "pk"
    for field in model._meta.concrete_fields:
        if field.many_to_one and not field.null and issubclass(field.related_model, Org):
            return field.name
    try:
        column = model._meta.get_field("org_id")
    except FieldDoesNotExist:
        return None
    return "org_id" if not column.is_relation else None


def reachable_orgs(request):
    """The ids of the orgs ``request.user`` may reach, as a subquery; None for a superuser (all of them)."""
    user = request.user
    if user.is_active and user.is_superuser:
        return None
    return Membership.objects.filter(user_id=user.pk).values("org_id")


def scope_queryset(queryset, orgs):
    """``queryset`` limited to rows of ``orgs`` (None: unlimited). A model with no org gives nothing."""
    if orgs is None:
        return queryset
    path = org_path(queryset.model)
    if path is None:
        return queryset.none()
    if path == USER_PATH:
        # Through a subquery, so a user in two orgs is still one row.
        return queryset.filter(pk__in=Membership.objects.filter(org_id__in=orgs).values("user_id"))
    return queryset.filter(**{f"{path}__in": orgs})


def scoped_form(form_class, request):
    """``form_class`` whose model-choice fields (declared ones too) offer only the user's orgs' rows."""
    orgs = reachable_orgs(request)
    if orgs is None:
        return form_class

    class OrgScopedForm(form_class):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            scope_choices(self, orgs)

    OrgScopedForm.__name__ = OrgScopedForm.__qualname__ = form_class.__name__
    return OrgScopedForm


def scope_choices(form, orgs) -> None:
    for field in form.fields.values():
        if isinstance(field, ModelChoiceField):  # ModelMultipleChoiceField included
            field.queryset = scope_queryset(field.queryset, orgs)


class OrgScopedRelatedFilter(admin.RelatedFieldListFilter):
    """A relation's list filter offering only the related rows of the user's orgs."""

    def field_choices(self, field, request, model_admin):
        related = field.remote_field.model
        to_field = field.remote_field.get_related_field().attname
        rows = scope_queryset(related._default_manager.all(), reachable_orgs(request))
        ordering = self.field_admin_ordering(field, request, model_admin)
        if ordering:
            rows = rows.order_by(*ordering)
        return [(getattr(row, to_field), str(row)) for row in rows]


class _ViewableAutocompletes:
    """Shared by the admin and the inline mixins: autocompletes only towards admins the user may view."""

    def get_autocomplete_fields(self, request):
        return viewable_relations(self, request, super().get_autocomplete_fields(request))


class OrgScopedAdmin(_ViewableAutocompletes):
    """Mix in before ``admin.ModelAdmin``; the path to the org is ``org_path(model)``.

    A subclass that overrides ``get_queryset`` without calling ``super()`` must pass its rows
    through ``self.scope(request, rows)``.
    """

    def scope(self, request, queryset):
        return scope_queryset(queryset, reachable_orgs(request))

    def get_queryset(self, request):
        return self.scope(request, super().get_queryset(request))

    def get_object(self, request, object_id, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is None:
            # Out of scope and unknown look the same: nothing says another org's id exists.
            raise Http404(f"No {self.opts.verbose_name} with this id.")
        return obj

    def get_form(self, request, obj=None, change=False, **kwargs):
        return scoped_form(super().get_form(request, obj, change=change, **kwargs), request)

    def get_list_filter(self, request):
        return [scoped_list_filter(self.model, item) for item in super().get_list_filter(request)]


def viewable_relations(model_admin, request, names):
    """``names`` without the relations whose admin the user may not view (users, for a staff user).

    Those become plain, scoped selects: their autocomplete view would refuse the user.
    """
    kept = []
    for name in names:
        related = model_admin.model._meta.get_field(name).remote_field.model
        related_admin = model_admin.admin_site._registry.get(related)
        if related_admin is not None and related_admin.has_view_permission(request):
            kept.append(name)
    return kept


def scoped_list_filter(model, item):
    """A list filter item, with a plain relation filter replaced by ``OrgScopedRelatedFilter``."""
    if not isinstance(item, str):
        return item
    field = get_fields_from_path(model, item)[-1]
    if isinstance(field, models.ForeignKey):
        return (item, OrgScopedRelatedFilter)
    return item


class OrgScopedInline(_ViewableAutocompletes):
    """Mix in before an ``InlineModelAdmin``: its rows follow the parent's scope, its choices are scoped here."""

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        orgs = reachable_orgs(request)
        if orgs is None:
            return formset

        class OrgScopedFormSet(formset):
            def add_fields(self, form, index):
                # After the formset's own fields (the hidden pk is one), so those are scoped too.
                super().add_fields(form, index)
                scope_choices(form, orgs)

        OrgScopedFormSet.__name__ = OrgScopedFormSet.__qualname__ = formset.__name__
        return OrgScopedFormSet


class SuperuserOnlyAdmin:
    """Mix in before the ModelAdmin of a model of no org, or of one that decides what an org is: superusers only.

    A staff user holding every permission gets a 403 on each page and no entry in the index.
    """

    def has_module_permission(self, request):
        return request.user.is_superuser and super().has_module_permission(request)

    def has_view_permission(self, request, obj=None):
        return request.user.is_superuser and super().has_view_permission(request, obj)

    def has_add_permission(self, request, *args, **kwargs):
        return request.user.is_superuser and super().has_add_permission(request, *args, **kwargs)

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser and super().has_delete_permission(request, obj)


class ReadOnly:
    """Mix in first: rows nobody adds, edits or deletes through the admin (their own code writes them)."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(ReadOnly, OrgScopedAdmin, admin.ModelAdmin):
    """An org-scoped list of rows that are only looked at (and acted on through actions)."""


def unscoped_admins(site=admin.site) -> list[str]:
    """Registered admins (and their inlines) that are neither org-scoped nor superuser-only, by name."""
    found = []
    for model, model_admin in site._registry.items():
        name = f"{type(model_admin).__module__}.{type(model_admin).__qualname__}"
        if isinstance(model_admin, SuperuserOnlyAdmin):
            continue
        if getattr(model_admin, "shows_no_org_data", ""):  # why its rows, as shown to staff, say nothing of an org
            continue
        if not isinstance(model_admin, OrgScopedAdmin):
            found.append(f"{name} (admin of {model._meta.label})")
            continue
        if org_path(model) is None:
            found.append(f"{name} ({model._meta.label} has no path to an org)")
        for inline in model_admin.inlines:
            if not issubclass(inline, OrgScopedInline):
                found.append(f"{inline.__module__}.{inline.__qualname__} (inline of {name})")
    return found
