from django.urls import path

from . import views

app_name = "imports"
urlpatterns = [
    path("", views.index, name="index"),
    path("<int:pk>/", views.detail, name="detail"),
    path("<int:pk>/retry/", views.retry, name="retry"),
    path("map/<str:sha256>/", views.map_columns, name="map_columns"),
]
