from django.urls import path, re_path

from . import views

app_name = "jobs"
urlpatterns = [
    path("<str:job_id>", views.job_detail, name="detail"),
    # Anything else under /jobs/ answers in JSON too, never an HTML 404.
    re_path(r"^.*$", views.not_found),
]
