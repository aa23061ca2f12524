from django.core.management.base import BaseCommand, CommandError

from seoinsight import crypto


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored secret (mailbox passwords, service-account keys) with the newest key: the "
        "first of SECRETS_KEYS, or the key derived from SECRET_KEY without them. Safe to run again, and "
        "while the web server, workers and pollers run."
    )

    def handle(self, *args, **options):
        unreadable = []
        for column in crypto.COLUMNS:
            result = crypto.rotate_column(column)
            self.stdout.write(f"{column}: {result.rotated} rotated, {result.current} already on the newest key"
                              + (f", {result.replaced} replaced meanwhile" if result.replaced else ""))
            unreadable += [f"{column.model_label} {pk}" for pk in result.unreadable]
        if unreadable:
            raise CommandError(
                f"{len(unreadable)} secret(s) no configured key can decrypt, left as they are: "
                f"{', '.join(unreadable)}. Add the key they were written with to SECRETS_KEYS (or the old "
                "SECRET_KEY to SECRET_KEY_FALLBACKS) and run again, or type them again in the admin."
            )
