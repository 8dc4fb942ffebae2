import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import Count


def count_unread(apps, schema_editor):
    """One counter per recipient with notifications, from the rows unread now."""
    Notification = apps.get_model("notifications", "Notification")
    UnreadCounter = apps.get_model("notifications", "UnreadCounter")
    rows = Notification.objects.filter(read_at__isnull=True).values("recipient_id").annotate(n=Count("pk")).values_list("recipient_id", "n")
    UnreadCounter.objects.bulk_create([UnreadCounter(recipient_id=recipient_id, unread=n, version=1) for recipient_id, n in rows], batch_size=1000)


class Migration(migrations.Migration):

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("notifications", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="UnreadCounter",
            fields=[
                ("recipient", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name="+", serialize=False, to=settings.AUTH_USER_MODEL)),
                ("unread", models.PositiveIntegerField(default=0)),
                ("version", models.PositiveBigIntegerField(default=0)),
            ],
        ),
        migrations.RunPython(count_unread, migrations.RunPython.noop),
    ]
