# Written by hand: the "Operator" group, as seoinsight.operator_group declares it.

from django.db import migrations

from seoinsight.operator_group import sync_migration


class Migration(migrations.Migration):
    # After every migration that creates a model the group is granted something on: their permissions must exist.
    dependencies = [
        ("seoinsight", "0006_target_pull_schedule"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("jobs", "0007_lean_indexes"),
        ("imports", "0003_import_sha256"),
        ("outbox", "0001_initial"),
        ("mailpoll", "0014_constraint_messages"),
    ]

    operations = [
        # Backwards leaves the group: it may have members by then, and nothing in the schema needs it gone.
        migrations.RunPython(sync_migration, migrations.RunPython.noop),
    ]
