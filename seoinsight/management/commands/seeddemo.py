import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from seoinsight.models import Membership, Org, Site, SiteTarget


class Command(BaseCommand):
    help = "Create the demo org, site and superuser if missing (idempotent) and print the login."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username, **options):
        org, _ = Org.objects.get_or_create(id="demo", defaults={"name": "Demo"})
        site, _ = Site.objects.get_or_create(org=org, domain="example.com")
        SiteTarget.objects.get_or_create(site=site, url_prefix="https://example.com/")

        password_file = settings.BASE_DIR / ".data" / "demo-admin-password"
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None or not password_file.exists():
            password = secrets.token_urlsafe(12)
            if user is None:
                user = User.objects.create_superuser(username=username, email="", password=password)
            else:
                user.set_password(password)
                user.save(update_fields=["password"])
            password_file.parent.mkdir(parents=True, exist_ok=True)
            password_file.write_text(password + "\n")
            password_file.chmod(0o600)
        password = password_file.read_text().strip()
        Membership.objects.get_or_create(user=user, org=org)
        self.stdout.write(f"Demo login: {username} / {password}")
