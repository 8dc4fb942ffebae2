"""Display filters: compact counts (12.3k, rounded toward zero) and relative times (3 min ago)."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.template import Context, Template

from core.templatetags.formatting import (
    avatar_hue_filter,
    compact_count,
    relative_time,
    utc_title_filter,
)

NOW = datetime(2024, 3, 4, 12, 0, 0, tzinfo=UTC)

# (count, shown): the table the browser test also checks site.js against.
COMPACT_CASES = [
    (0, "0"),
    (7, "7"),
    (999, "999"),
    (1000, "1k"),
    (1001, "1k"),
    (1049, "1k"),
    (1099, "1k"),
    (1100, "1.1k"),
    (1234, "1.2k"),
    (1999, "1.9k"),
    (9999, "9.9k"),
    (10000, "10k"),
    (12345, "12.3k"),
    (99999, "99.9k"),
    (100000, "100k"),
    (123456, "123k"),
    (999999, "999k"),
    (1000000, "1M"),
    (1250000, "1.2M"),
    (12345678, "12.3M"),
    (999999999, "999M"),
    (1000000000, "1B"),
    (2500000000, "2.5B"),
    (1234567890123, "1234B"),
]

# (seconds before NOW, shown)
RELATIVE_CASES = [
    (-30, "just now"),
    (0, "just now"),
    (9, "just now"),
    (10, "10 s ago"),
    (59, "59 s ago"),
    (60, "1 min ago"),
    (3 * 60 + 59, "3 min ago"),
    (3599, "59 min ago"),
    (3600, "1 h ago"),
    (86399, "23 h ago"),
    (86400, "1 d ago"),
    (7 * 86400 - 1, "6 d ago"),
    (7 * 86400, "Feb 26"),
    (70 * 86400, "Dec 25, 2023"),
]


class TestCompactCount:
    @pytest.mark.parametrize(("count", "shown"), COMPACT_CASES)
    def test_shortens_to_three_significant_digits_rounding_toward_zero(self, count, shown):
        assert compact_count(count) == shown

    def test_never_shows_more_than_the_exact_count(self):
        for count, shown in COMPACT_CASES:
            number, suffix = (shown[:-1], shown[-1]) if shown[-1] in "kMB" else (shown, "")
            scale = {"": 1, "k": 1000, "M": 10**6, "B": 10**9}[suffix]

            assert float(number) * scale <= count

    def test_accepts_digit_strings_and_leaves_other_values_alone(self):
        assert compact_count("12345") == "12.3k"
        assert compact_count(None) == ""
        assert compact_count("n/a") == "n/a"
        assert compact_count(-5) == "-5"

    def test_the_template_filter_renders_it(self):
        html = Template("{% load formatting %}{{ n|compact_count }}").render(Context({"n": 12345}))

        assert html == "12.3k"


class TestRelativeTime:
    @pytest.mark.parametrize(("seconds", "shown"), RELATIVE_CASES)
    def test_says_how_long_ago_rounding_down(self, seconds, shown):
        assert relative_time(NOW - timedelta(seconds=seconds), now=NOW) == shown

    def test_a_naive_datetime_is_taken_as_utc(self):
        assert relative_time(datetime(2024, 3, 4, 11, 57, 0), now=NOW) == "3 min ago"  # noqa: DTZ001 - naive on purpose

    def test_none_gives_an_empty_string(self):
        assert relative_time(None, now=NOW) == ""

    def test_the_date_form_uses_the_utc_date(self):
        late_evening_utc = datetime(2024, 2, 1, 23, 30, tzinfo=UTC)
        eastern = late_evening_utc.astimezone(timezone(timedelta(hours=9)))  # Feb 2 in Tokyo

        assert relative_time(eastern, now=NOW) == "Feb 1"


class TestOtherFilters:
    def test_utc_title_is_the_exact_moment_in_utc(self):
        moment = datetime(2024, 3, 4, 21, 5, 9, tzinfo=timezone(timedelta(hours=9)))

        assert utc_title_filter(moment) == "2024-03-04 12:05:09 UTC"
        assert utc_title_filter(None) == ""

    def test_avatar_hue_is_stable_and_in_range(self):
        hues = [avatar_hue_filter(pk) for pk in range(1, 200)]

        assert hues == [avatar_hue_filter(pk) for pk in range(1, 200)]
        assert all(0 <= hue < 360 for hue in hues)
        assert len(set(hues[:8])) == 8  # neighbours get different colours
        assert avatar_hue_filter("x") == 210
