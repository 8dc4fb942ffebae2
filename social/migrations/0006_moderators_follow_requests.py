"""Let the "moderators" group view follow requests (``social.view_followrequest``); blocks and
mutes stay with superusers (who blocks or mutes whom is private).

As in ``users`` 0002/0003, ``create_permissions`` makes sure the permission
exists on a fresh database, where ``post_migrate`` has not run yet.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP_NAME = "moderators"


def _permission(apps):
    app_config = apps.get_app_config("social")
    # create_permissions skips app configs without a models module, which a
    # migration's historical app configs never have.
    original = getattr(app_config, "models_module", None)
    app_config.models_module = original or True
    try:
        create_permissions(app_config, apps=apps, verbosity=0)
    finally:
        app_config.models_module = original
    Permission = apps.get_model("auth", "Permission")
    return Permission.objects.get(content_type__app_label="social", content_type__model="followrequest", codename="view_followrequest")


def forwards(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    group, _ = Group.objects.get_or_create(name=GROUP_NAME)
    group.permissions.add(_permission(apps))


def backwards(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    group = Group.objects.filter(name=GROUP_NAME).first()
    if group is not None:
        group.permissions.remove(_permission(apps))


class Migration(migrations.Migration):
    dependencies = [
        ("social", "0005_block_mute_follow_request"),
        ("users", "0005_approve_followers"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
