"""The table of the database cache (``core_cache``) the abuse limits count in while Redis is down."""

from typing import Any

from django.core.management import call_command
from django.db import migrations


def create_table(apps: Any, schema_editor: Any) -> None:
    call_command("createcachetable", "core_cache", database=schema_editor.connection.alias, verbosity=0)


def drop_table(apps: Any, schema_editor: Any) -> None:
    schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name('core_cache')}")


class Migration(migrations.Migration):
    dependencies = [("core", "0002_redis_watch")]

    operations = [migrations.RunPython(create_table, drop_table)]
