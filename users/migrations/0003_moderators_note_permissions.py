"""Give the "moderators" group the note permissions: view notes and hide them.

The group then has exactly: users.view_user, social.view_follow,
social.delete_follow, feed.view_note and feed.hide_note (the custom
permission declared on ``feed.Note``). No note delete: that stays with
authors and superusers. Reversing goes back to 0002's list.

As in 0002, ``create_permissions`` makes sure the permissions exist on a
fresh database, where ``post_migrate`` has not run yet.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP_NAME = "moderators"
WITHOUT_NOTES = [
    ("users", "user", "view_user"),
    ("social", "follow", "view_follow"),
    ("social", "follow", "delete_follow"),
]
WITH_NOTES = WITHOUT_NOTES + [
    ("feed", "note", "view_note"),
    ("feed", "note", "hide_note"),
]


def set_group_permissions(apps, permissions):
    """Make the group hold exactly ``permissions`` (also callable with the live app registry)."""
    for label in sorted({label for label, _, _ in permissions}):
        app_config = apps.get_app_config(label)
        # create_permissions skips app configs without a models module,
        # which a migration's historical app configs never have.
        original = getattr(app_config, "models_module", None)
        app_config.models_module = original or True
        try:
            create_permissions(app_config, apps=apps, verbosity=0)
        finally:
            app_config.models_module = original
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name=GROUP_NAME)
    group.permissions.set(
        [
            Permission.objects.get(content_type__app_label=label, content_type__model=model, codename=codename)
            for label, model, codename in permissions
        ]
    )


def forwards(apps, schema_editor):
    set_group_permissions(apps, WITH_NOTES)


def backwards(apps, schema_editor):
    set_group_permissions(apps, WITHOUT_NOTES)


class Migration(migrations.Migration):
    dependencies = [
        ("users", "0002_moderators_group"),
        ("feed", "0001_initial"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
