"""Create the "moderators" group: view accounts, view and delete follows.

The note permissions (view_note, hide_note) are added by 0003 once the
feed's Note model exists. The group's permissions are *set*, not added to,
so re-running leaves exactly this list.

Permissions normally appear in ``post_migrate``, after every migration, so
on a fresh database they do not exist yet here; ``create_permissions`` (the
same function ``post_migrate`` runs) creates them first, with the
migration's historical models.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP_NAME = "moderators"
PERMISSIONS = [
    ("users", "user", "view_user"),
    ("social", "follow", "view_follow"),
    ("social", "follow", "delete_follow"),
]


def ensure_permissions(apps, app_labels):
    for label in app_labels:
        app_config = apps.get_app_config(label)
        # create_permissions skips app configs without a models module,
        # which a migration's historical app configs never have.
        original = getattr(app_config, "models_module", None)
        app_config.models_module = original or True
        try:
            create_permissions(app_config, apps=apps, verbosity=0)
        finally:
            app_config.models_module = original


def set_group_permissions(apps, schema_editor, permissions):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    ensure_permissions(apps, sorted({label for label, _, _ in permissions}))
    group, _ = Group.objects.get_or_create(name=GROUP_NAME)
    chosen = [
        Permission.objects.get(content_type__app_label=label, content_type__model=model, codename=codename)
        for label, model, codename in permissions
    ]
    group.permissions.set(chosen)


def create_group(apps, schema_editor):
    set_group_permissions(apps, schema_editor, PERMISSIONS)


def delete_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=GROUP_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("users", "0001_initial"),
        ("social", "0002_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_group, delete_group)]
