from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from . import health, metrics, org_switch

urlpatterns = [
    path("", RedirectView.as_view(url="/imports/", permanent=False)),
    path("admin/", admin.site.urls),
    path("jobs/", include("jobs.urls")),
    # /imports/sites/…: the site page and the portfolio live in insight, under the imports' address they always had.
    path("imports/", include("insight.urls")),
    path("imports/", include("imports.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("org/", org_switch.switch, name="org-switch"),
    path("health/live", health.live, name="health-live"),
    path("health/ready", health.ready, name="health-ready"),
    path("metrics", metrics.metrics, name="metrics"),
]
