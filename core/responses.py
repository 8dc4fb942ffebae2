"""JSON answers encoded by orjson (``JsonResponse``), for the site's JSON API and the Mastodon API."""

from __future__ import annotations

from typing import Any

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse
from django.http import JsonResponse as DjangoJsonResponse

_ENCODER = DjangoJSONEncoder()


class JsonResponse(DjangoJsonResponse):
    """A JSON answer, ``data`` of any JSON type, encoded by orjson (a page of 40 Statuses is about
    60 KB, which the standard library takes about ten times as long to encode); what orjson does
    not encode itself (dates, decimals, lazy text) as Django's ``JsonResponse`` encodes it. Text is
    UTF-8, not ``\\u`` escapes. A Django ``JsonResponse`` to whatever checks for one.

    :raises TypeError: ``data`` holds a value neither encodes.
    """

    def __init__(self, data: Any, status: int = 200, **kwargs: Any) -> None:
        kwargs.setdefault("content_type", "application/json")
        content = orjson.dumps(data, default=_ENCODER.default, option=orjson.OPT_PASSTHROUGH_DATETIME)
        # HttpResponse's own __init__: Django's JsonResponse would encode with the standard library.
        HttpResponse.__init__(self, content=content, status=status, **kwargs)
