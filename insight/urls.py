from django.urls import path

from . import annotation_views
from .alerts import views as alert_views
from .portfolio import views as portfolio_views
from .sitepage import views as site_views

app_name = "insight"
urlpatterns = [
    path("sites/", portfolio_views.portfolio, name="portfolio"),
    path("sites/<int:site_id>/", site_views.site_page, name="site"),
    path("sites/<int:site_id>/annotations/", annotation_views.add, name="annotation-add"),
    path("sites/<int:site_id>/annotations/<int:pk>/delete/", annotation_views.delete, name="annotation-delete"),
    path("alerts/", alert_views.alerts_page, name="alerts"),
    path("alerts/<int:alert_id>/acknowledge/", alert_views.acknowledge_alert, name="alert-acknowledge"),
    path("alerts/digest/", alert_views.digest_choice, name="alert-digest"),
]
