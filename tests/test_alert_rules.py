"""The alert rules in deploy/prometheus: promtool accepts them, and recorded series make each alert fire
when it should (deploy/prometheus/followfeed-rules.test.yml). Every alert has a section in
docs/operations.md saying what to do.

promtool comes with Debian's prometheus package (scripts/bootstrap.sh installs it for the dev set).
Outside CI a machine without it skips; in CI (``CI`` set) a missing promtool fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "deploy" / "prometheus" / "followfeed-rules.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "followfeed-rules.test.yml"
OPERATIONS = ROOT / "docs" / "operations.md"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing in CI: scripts/bootstrap.sh dev installs Debian's prometheus package")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return found


def alerts() -> list[dict[str, object]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_checks_the_rules() -> None:
    result = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60, check=False)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 13 rules found" in result.stdout


def test_recorded_series_fire_each_alert() -> None:
    result = subprocess.run(
        [promtool(), "test", "rules", str(RULE_TESTS)], capture_output=True, text=True, timeout=120, check=False, cwd=RULES.parent
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_is_tested_to_fire() -> None:
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    fired = {case["alertname"] for test in tests for case in test["alert_rule_test"] if case["exp_alerts"]}

    assert fired == {str(rule["alert"]) for rule in alerts()}


def test_every_alert_says_what_to_do() -> None:
    sections = set(re.findall(r"^### (Followfeed\w+)$", OPERATIONS.read_text(), re.MULTILINE))

    for rule in alerts():
        name = str(rule["alert"])
        assert name in sections
        assert rule["annotations"]["runbook"] == f"docs/operations.md#{name.lower()}"  # type: ignore[index]
