from django.core.management.base import BaseCommand, CommandError
from django.db import IntegrityError

from seoinsight.models import ApiToken, Org


class Command(BaseCommand):
    help = "Create an API token for ORG named NAME and print it once (only its hash is stored)."

    def add_arguments(self, parser):
        parser.add_argument("org", help="Org id, e.g. demo")
        parser.add_argument("name", help="A name for the client, unique within the org")

    def handle(self, *args, org, name, **options):
        try:
            org_obj = Org.objects.get(pk=org)
        except Org.DoesNotExist:
            raise CommandError(f"no org {org!r}") from None
        try:
            _, raw = ApiToken.issue(org_obj, name)
        except IntegrityError:
            raise CommandError(f"org {org!r} already has a token named {name!r}") from None
        self.stdout.write(raw)
        self.stderr.write("Store this token now: it cannot be shown again.")
