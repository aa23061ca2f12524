from django.urls import path

from .sitepage import views as site_views

app_name = "insight"
urlpatterns = [
    path("sites/<int:site_id>/", site_views.site_page, name="site"),
]
