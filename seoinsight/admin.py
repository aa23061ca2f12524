from django.contrib import admin

from .models import ApiToken, Membership, Org, Site, SiteTarget


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Org)
class OrgAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "created_at"]
    search_fields = ["id", "name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "org", "created_at"]
    list_filter = ["org"]
    search_fields = ["user__username", "org__id"]
    autocomplete_fields = ["user", "org"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created with ``manage.py createapitoken``: the raw value is shown once, there."""

    list_display = ["name", "org", "created_at", "last_used_at"]
    list_filter = ["org"]
    search_fields = ["name", "org__id"]
    readonly_fields = ["org", "name", "created_at", "last_used_at"]
    fields = readonly_fields

    def has_add_permission(self, request):
        return False


class SiteTargetInline(admin.TabularInline):
    model = SiteTarget
    extra = 0


@admin.register(Site)
class SiteAdmin(admin.ModelAdmin):
    list_display = ["domain", "org", "created_at"]
    list_filter = ["org"]
    search_fields = ["domain"]
    autocomplete_fields = ["org"]
    inlines = [SiteTargetInline]


@admin.register(SiteTarget)
class SiteTargetAdmin(admin.ModelAdmin):
    list_display = ["__str__", "site", "created_at"]
    list_filter = ["site__org"]
    search_fields = ["url_prefix", "search_console_property", "site__domain"]
    autocomplete_fields = ["site"]
