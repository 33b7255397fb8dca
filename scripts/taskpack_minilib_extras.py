"""Files that only the bundled minilib tasks add (taskpack_sources.py's TASKS): a test that needs
tomli, the flaky tests and the custom-verifier suite's tags module with its tests."""

from __future__ import annotations

TOML_TEST = '''from minilib.tomlcfg import get_setting

DOC = """
[server]
port = 8080
[server.tls]
enabled = true
"""


def test_get_setting_nested():
    assert get_setting(DOC, "server.port") == 8080
    assert get_setting(DOC, "server.tls.enabled") is True
    assert get_setting(DOC, "server.missing", 7) == 7
'''

FLAKY_TEST = '''from pathlib import Path

COUNTER = Path("/tmp/minilib-flaky-counter")


def _run_number():
    n = int(COUNTER.read_text()) + 1 if COUNTER.exists() else 1
    COUNTER.write_text(str(n))
    return n


RUN = _run_number()


def test_first_half():
    assert RUN % 2 == 0, "fails on odd runs"


def test_second_half():
    assert RUN % 2 == 1, "fails on even runs"
'''


# The flaky-baseline task's second commit: one run counter per checkout, so concurrent attempts in
# the unisolated local sandbox (which share /tmp) cannot advance each other's run numbers.
FLAKY_TEST_PER_CHECKOUT = '''import hashlib
import tempfile
from pathlib import Path

# One counter per checkout: concurrent attempts that share a /tmp (the unisolated local
# sandbox) must not advance each other's run numbers.
_CHECKOUT = str(Path(__file__).resolve().parent.parent)
COUNTER = Path(tempfile.gettempdir()) / (
    "minilib-flaky-" + hashlib.sha256(_CHECKOUT.encode()).hexdigest()[:16]
)
''' + FLAKY_TEST[FLAKY_TEST.index("\n\ndef _run_number"):]

# custom-verifier (issue 14.3, --agentbench-regrade): minilib/tags.py is new on these branches.
# parse_tags keeps case (the bug); format_tags joins a set in iteration order (flaky-verifier:
# its test passes under PYTHONHASHSEED=0 only) or sorted (stable-verifier: under every seed).
TAGS_BUGGY = '''"""Tags: the distinct labels of a comma-separated list."""


def parse_tags(text):
    """The distinct tags of `text`: stripped, lower-cased, empty ones dropped."""
    return {tag.strip() for tag in text.split(",") if tag.strip()}


def format_tags(tags):
    """The tags as one comma-separated line."""
    return ", ".join(tags)
'''
TAGS_TEST_SET_ORDER = '''from minilib.tags import format_tags, parse_tags


def test_parse_tags():
    assert parse_tags("Red, green,, BLUE, red") == {"red", "green", "blue"}


def test_format_tags():
    assert format_tags(parse_tags("Red, green, BLUE, red")) == "red, blue, green"
'''
TAGS_SORTED_BUGGY = TAGS_BUGGY.replace(
    '''"""The tags as one comma-separated line."""
    return ", ".join(tags)''',
    '''"""The tags as one comma-separated line, sorted."""
    return ", ".join(sorted(tags))''')
TAGS_TEST_SORTED = TAGS_TEST_SET_ORDER.replace('"red, blue, green"', '"blue, green, red"')


def fixed_tags(source: str) -> str:
    """The tags module with its bug fixed: parse_tags lower-cases."""
    return source.replace("{tag.strip() for", "{tag.strip().lower() for")
