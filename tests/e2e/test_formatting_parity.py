"""site.js formats counts and times exactly as the server's template filters do.

The follow toggle rewrites the followers count and the page refreshes
relative times in the browser, so both implementations must agree on every
case of the unit tests' tables (tests/users/test_formatting.py).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from core.templatetags.formatting import compact_count, relative_time
from tests.core.test_formatting import COMPACT_CASES, NOW, RELATIVE_CASES

SITE_JS = Path(__file__).resolve().parents[2] / "static" / "js" / "site.js"


@pytest.fixture
def page(browser):
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_content("<!doctype html><title>formats</title><main></main>")
    page.add_script_tag(path=str(SITE_JS))
    yield page
    context.close()
    assert errors == []


class TestSameFormatsInTheBrowser:
    def test_compact_counts_match_the_template_filter(self, page):
        counts = [count for count, _ in COMPACT_CASES] + [1_050, 54_321, 7_654_321, 3_000_000_001]

        shown = page.evaluate("counts => counts.map(n => window.followfeed.compactCount(n))", counts)

        assert shown == [compact_count(count) for count in counts]
        assert shown[: len(COMPACT_CASES)] == [text for _, text in COMPACT_CASES]

    def test_relative_times_match_the_template_filter(self, page):
        now_ms = int(NOW.timestamp() * 1000)
        moments = [now_ms - seconds * 1000 for seconds, _ in RELATIVE_CASES]

        shown = page.evaluate("([moments, now]) => moments.map(m => window.followfeed.relativeTime(m, now))", [moments, now_ms])

        assert shown == [relative_time(NOW - timedelta(seconds=seconds), now=NOW) for seconds, _ in RELATIVE_CASES]
        assert shown == [text for _, text in RELATIVE_CASES]
