"""JSON answers encoded by orjson (``JsonResponse``), for the site's JSON API and the Mastodon API."""

from __future__ import annotations

import json
from typing import Any

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse
from django.http import JsonResponse as DjangoJsonResponse

_ENCODER = DjangoJSONEncoder()


class JsonResponse(DjangoJsonResponse):
    """A JSON answer, ``data`` of any JSON type (``safe`` is False by default), encoded by orjson (a
    page of 40 Statuses is about 60 KB, which the standard library takes about ten times as long to
    encode); what orjson does not encode itself (dates, decimals, lazy text) as Django's
    ``JsonResponse`` encodes it, and what it refuses (a lone surrogate, keys that are not strings),
    or another ``encoder`` or ``json_dumps_params``, by the standard library as Django does. Text is
    UTF-8, not ``\\u`` escapes. A Django ``JsonResponse`` to whatever checks for one.

    :raises TypeError: ``data`` holds a value neither encodes; ``safe`` and ``data`` not a dict.
    """

    def __init__(
        self,
        data: Any,
        encoder: type[json.JSONEncoder] = DjangoJSONEncoder,
        safe: bool = False,
        json_dumps_params: dict[str, Any] | None = None,
        status: int = 200,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("content_type", "application/json")
        if safe and not isinstance(data, dict):
            raise TypeError("In order to allow non-dict objects to be serialized set the safe parameter to False.")
        content: bytes | str | None = None
        if encoder is DjangoJSONEncoder and not json_dumps_params:
            try:
                content = orjson.dumps(data, default=_ENCODER.default, option=orjson.OPT_PASSTHROUGH_DATETIME)
            except TypeError:
                pass  # a lone surrogate, keys that are not strings: as Django's JsonResponse writes them
        if content is None:
            content = json.dumps(data, cls=encoder, **(json_dumps_params or {}))
        # HttpResponse's own __init__: Django's JsonResponse would encode with the standard library.
        HttpResponse.__init__(self, content=content, status=status, **kwargs)
