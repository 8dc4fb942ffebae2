"""Parsing of request input at the edge: every value a view or the API takes is parsed here once.

Services and selectors receive typed values; every failure is an ``InvalidInput`` (400) with a
message written for people. The rules (ids, limits, flags, JSON bodies, text, usernames):
docs/behaviours.md#input-limits-and-headers; cursors are ``core.paging``'s.
"""

from __future__ import annotations

import json
import re
import unicodedata
from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError

from .errors import InvalidInput
from .paging import MAX_MILLISECONDS

# The largest id a BIGINT column holds.
MAX_ID = 2**63 - 1
# ASCII digits only, no leading zero.
_ID = re.compile(r"[1-9][0-9]{0,18}")
_NUMBER = re.compile(r"0|[1-9][0-9]{0,18}")

JSON_MAX_BYTES = 16 * 1024
JSON_MAX_DEPTH = 20

USERNAME_PATTERN = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,28}[A-Za-z0-9_])?"
USERNAME_HELP = (
    "1 to 30 characters: letters, digits and underscores, with dots and dashes allowed between them. "
    "Names are unique whatever their case."
)
RESERVED_USERNAMES = frozenset(
    {
        "admin",
        "administrator",
        "api",
        "static",
        "media",
        "login",
        "logout",
        "signup",
        "settings",
        "home",
        "notes",
        "n",
        "u",
        "root",
        "support",
        "help",
        "about",
        "followfeed",
        "moderator",
        "moderators",
        "staff",
        "system",
        "null",
        "none",
        "undefined",
        "me",
        "www",
    }
)
_USERNAME = re.compile(USERNAME_PATTERN)
# Control characters a note may keep (line breaks and tabs).
_ALLOWED_CONTROLS = {"\n", "\r", "\t"}


def parse_id(raw: object, *, name: str = "id") -> int:
    """A positive integer id (1 to 2**63 - 1) from a JSON integer or a string of ASCII digits without
    a leading zero or spaces (``str.isdigit`` and ``int`` accept far more).

    :raises InvalidInput: anything else (``"abc"``, ``"-1"``, ``"1.5"``, ``True``, ``"²"``,
        ``"000011"``, ``"13 "``).
    """
    message = f"{name} must be a positive integer."
    if isinstance(raw, bool):
        raise InvalidInput(message)
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, str) and _ID.fullmatch(raw):
        value = int(raw)
    else:
        raise InvalidInput(message)
    if not 1 <= value <= MAX_ID:
        raise InvalidInput(message)
    return value


def id_or_none(raw: str | bytes | None) -> int | None:
    """The id in ``raw`` when it is one by ``parse_id``'s rules, else None (for search terms and
    values read back from Redis, where "not an id" is an answer, not an error)."""
    if isinstance(raw, bytes):
        raw = raw.decode("ascii", "replace")
    if raw is None or not _ID.fullmatch(raw):
        return None
    value = int(raw)
    return value if value <= MAX_ID else None


def parse_number(raw: str | None, *, name: str, minimum: int, maximum: int, default: int | None = None) -> int:
    """A whole number from ``minimum`` to ``maximum`` written in ASCII digits (``default`` when absent).

    :raises InvalidInput: absent without a default, not plain digits, or out of range.
    """
    message = f"{name} must be a whole number from {minimum} to {maximum}."
    if raw is None or raw == "":
        if default is None:
            raise InvalidInput(message)
        return default
    if not _NUMBER.fullmatch(raw):
        raise InvalidInput(message)
    value = int(raw)
    if not minimum <= value <= maximum:
        raise InvalidInput(message)
    return value


def parse_limit(raw: str | None, *, default: int, maximum: int) -> int:
    """A page size from 1 to ``maximum`` (``default`` when absent).

    :raises InvalidInput: anything else.
    """
    return parse_number(raw, name="limit", minimum=1, maximum=maximum, default=default)


def parse_flag(raw: str, *, name: str) -> bool:
    """``true`` or ``false``.

    :raises InvalidInput: anything else.
    """
    if raw == "true":
        return True
    if raw == "false":
        return False
    raise InvalidInput(f"{name} must be true or false.")


def parse_decision(raw: str) -> bool:
    """A follow request's decision: ``approve`` (True) or ``reject`` (False).

    :raises InvalidInput: anything else.
    """
    if raw in ("approve", "reject"):
        return raw == "approve"
    raise InvalidInput("The decision must be approve or reject.")


# The mute durations offered (None: until unmuted).
MUTE_DURATIONS: dict[str, timedelta | None] = {"1d": timedelta(days=1), "7d": timedelta(days=7), "forever": None}


def parse_mute_duration(raw: object) -> timedelta | None:
    """A mute's duration: ``1d``, ``7d`` or ``forever`` (None: until unmuted).

    :raises InvalidInput: anything else.
    """
    if isinstance(raw, str) and raw in MUTE_DURATIONS:
        return MUTE_DURATIONS[raw]
    raise InvalidInput("The duration must be 1d, 7d or forever.")


# How many notes at one millisecond a scroll client may say it has seen.
MAX_SCROLL_OFFSET = 100_000


def parse_scroll(last_id: str | None, offset: str | None) -> tuple[int | None, int]:
    """The scroll contract's ``lastId`` (a publish time in ms, None for the top) and ``offset``.

    :raises InvalidInput: not plain whole numbers, ``lastId`` past what a datetime can hold,
        or an ``offset`` without a ``lastId``.
    """
    parsed_last = None if last_id in (None, "") else parse_number(last_id, name="lastId", minimum=0, maximum=MAX_MILLISECONDS)
    parsed_offset = parse_number(offset, name="offset", minimum=0, maximum=MAX_SCROLL_OFFSET, default=0)
    if parsed_last is None and parsed_offset:
        raise InvalidInput("offset needs lastId.")
    return parsed_last, parsed_offset


def _depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (strings skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def parse_json_object(body: bytes) -> dict[str, Any]:
    """A request body that is a JSON object, at most ``JSON_MAX_BYTES`` and ``JSON_MAX_DEPTH`` deep.

    :raises InvalidInput: too big, not UTF-8, not JSON, too deep, or not an object.
    """
    if len(body) > JSON_MAX_BYTES:
        raise InvalidInput(f"The request body must be at most {JSON_MAX_BYTES // 1024} KB.")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("The request body must be UTF-8 text.") from None
    if _depth(text) > JSON_MAX_DEPTH:
        raise InvalidInput(f"The request body is nested more than {JSON_MAX_DEPTH} levels deep.")
    try:
        data = json.loads(text or "null")
    except ValueError:
        raise InvalidInput("The request body is not valid JSON.") from None
    if not isinstance(data, dict):
        raise InvalidInput("The request body must be a JSON object.")
    return data


# Letters by category that render as nothing: Hangul fillers, the blank
# Braille pattern, the Khmer inherent vowels and the Mongolian vowel separator.
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u17b4\u17b5\u180e")


def _visible(char: str) -> bool:
    category = unicodedata.category(char)
    # Separators (spaces), controls and format characters (zero-width
    # spaces and joiners, bidirectional marks) show nothing; combining marks
    # show only on a visible character before them.
    return not (category[0] in "ZCM" or char.isspace()) and char not in _BLANK_LETTERS


def parse_text(raw: object, *, name: str, max_length: int) -> str:
    """Text a person wrote (a note's body): trimmed, at most ``max_length`` characters.

    :raises InvalidInput: absent (None); not a string; a NUL or another control character
        (newline, carriage return and tab are allowed); a lone surrogate; nothing visible
        (spaces, format characters, combining marks, blank letters such as U+3164); too long.
    """
    if raw is None:
        raise InvalidInput(f"{name} is required.")
    if not isinstance(raw, str):
        raise InvalidInput(f"{name} must be text.")
    text = raw.strip()
    if any(unicodedata.category(char) == "Cc" and char not in _ALLOWED_CONTROLS for char in text):
        raise InvalidInput(f"{name} must not contain control characters.")
    # A lone surrogate (JSON allows "\ud800") cannot be stored or encoded as UTF-8.
    if any(unicodedata.category(char) == "Cs" for char in text):
        raise InvalidInput(f"{name} must be valid Unicode text (it holds a lone surrogate).")
    if not any(_visible(char) for char in text):
        raise InvalidInput(f"{name} cannot be empty.")
    if len(text) > max_length:
        raise InvalidInput(f"{name} can have at most {max_length} characters.")
    return text


def parse_label(raw: object, *, name: str, max_length: int) -> str:
    """A one-line name a person gives something (a list's title): ``parse_text``'s rules, and, as
    display names, no control, format (bidi overrides, zero-width) or surrogate characters.

    :raises InvalidInput: as ``parse_text``; such a character, or a line break (newline, U+2028, U+2029).
    """
    text = parse_text(raw, name=name, max_length=max_length)
    if any(unicodedata.category(char) in _LABEL_CATEGORIES_REFUSED for char in text):
        raise InvalidInput(f"{name} cannot hold line breaks, control, formatting or direction characters.")
    return text


# Unicode categories a name may not hold: controls, formats (bidi overrides, zero-width), surrogates.
_NAME_CATEGORIES_REFUSED = ("Cc", "Cf", "Cs")
# A label is one line: nor the line and paragraph separators (U+2028, U+2029).
_LABEL_CATEGORIES_REFUSED = (*_NAME_CATEGORIES_REFUSED, "Zl", "Zp")


def validate_display_name(value: str) -> None:
    """Validator of display names: no control, format (bidi overrides, zero-width) or surrogate
    characters, which could disguise or reorder the names beside it.

    :raises django.core.exceptions.ValidationError: such a character is in ``value``.
    """
    if any(unicodedata.category(char) in _NAME_CATEGORIES_REFUSED for char in value):
        raise ValidationError("A display name cannot hold control, formatting or direction characters.", code="invalid")


def username_problem(raw: str) -> str | None:
    """Why ``raw`` cannot be a username, or None when it can (the pattern and the reserved names)."""
    if not _USERNAME.fullmatch(raw):
        return USERNAME_HELP
    if raw.lower() in RESERVED_USERNAMES:
        return "That name is reserved; choose another."
    return None


def validate_username(value: str) -> None:
    """The model and form validator of usernames: the one rule of sign-up, the admin and imports
    (``username_problem``).

    :raises django.core.exceptions.ValidationError: ``value`` cannot be a username.
    """
    problem = username_problem(value)
    if problem is not None:
        raise ValidationError(problem, code="invalid")


def parse_username(raw: str) -> str:
    """A username as written in a URL or a form (its case kept; lookups ignore case).

    :raises InvalidInput: it does not match ``USERNAME_PATTERN`` or is reserved.
    """
    problem = username_problem(raw)
    if problem is not None:
        raise InvalidInput(problem)
    return raw
