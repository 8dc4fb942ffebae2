"""The follow mirror's outbox becomes the one outbox of ``core`` (``core.OutboxEntry``).

Pending entries are copied over with their kinds (``social.pair``,
``social.user``) so nothing waiting for Redis is lost; applied ones are
history and are left behind with the old table.
"""

from typing import Any

from django.db import migrations


def copy_pending(apps: Any, schema_editor: Any) -> None:
    old = apps.get_model("social", "MirrorOutbox")
    new = apps.get_model("core", "OutboxEntry")
    rows = [
        new(
            kind="social.pair" if entry.kind == "pair" else "social.user",
            subject_id=entry.follower_id,
            object_id=entry.followee_id,
            created_at=entry.created_at,
            attempts=entry.attempts,
        )
        for entry in old.objects.filter(applied_at__isnull=True).order_by("id").iterator()
    ]
    new.objects.bulk_create(rows, batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0001_initial"),
        ("social", "0003_reconcilerun"),
    ]

    operations = [
        migrations.RunPython(copy_pending, migrations.RunPython.noop),
        migrations.DeleteModel(name="MirrorOutbox"),
    ]
