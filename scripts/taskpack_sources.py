"""Source of the bundled taskpacks: the correct `minilib` and, per task, the change that breaks it.

Used by make_taskpacks.py. A value of None in a task's `bug` deletes that file. The files only
the tasks add (a tomli test, the flaky tests, the tags module): taskpack_minilib_extras.py.
"""

from __future__ import annotations

from taskpack_minilib_extras import (
    FLAKY_TEST,
    FLAKY_TEST_PER_CHECKOUT,
    TAGS_BUGGY,
    TAGS_SORTED_BUGGY,
    TAGS_TEST_SET_ORDER,
    TAGS_TEST_SORTED,
    TOML_TEST,
    fixed_tags,
)

INIT = '''"""minilib: a tiny library the agentbench taskpacks break and fix."""

from minilib.mathx import clamp, mean, median
from minilib.text import slugify, title_case, truncate_words

try:  # an extension point: a deployment may drop in overrides
    from minilib import _overrides  # noqa: F401
except ImportError:
    pass

__all__ = ["clamp", "mean", "median", "slugify", "title_case", "truncate_words"]
'''

MATHX = '''def clamp(value, low, high):
    """Limit value to the closed interval [low, high]."""
    if low > high:
        raise ValueError("low must not exceed high")
    return max(low, min(value, high))


def mean(values):
    values = list(values)
    if not values:
        raise ValueError("mean of an empty sequence")
    return sum(values) / len(values)


def median(values):
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median of an empty sequence")
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2
'''

TEXT = '''import re


def slugify(text):
    """Lower-case words joined by single dashes."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(words)


def title_case(text):
    """Capitalize each word; small words stay lower case unless first."""
    small = {"a", "an", "and", "of", "the", "to"}
    words = text.split()
    out = []
    for i, word in enumerate(words):
        out.append(word.lower() if i and word.lower() in small else word.capitalize())
    return " ".join(out)


def truncate_words(text, limit, ellipsis="..."):
    """At most `limit` words; an ellipsis marks that words were dropped."""
    words = text.split()
    if len(words) <= limit:
        return " ".join(words)
    return " ".join(words[:limit]) + ellipsis
'''

UNITS = '''UNITS = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}
'''

CONFIG = '''from minilib.units import UNITS

TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off"}


def parse_bool(text):
    value = text.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise ValueError(f"not a boolean: {text!r}")


def parse_size(text):
    """'10k' -> 10240; units k, m, g are powers of 1024."""
    text = text.strip().lower()
    number = text.rstrip("kmg")
    unit = text[len(number):]
    return int(number) * UNITS[unit]
'''

SLUG = '''from minilib.text import slugify


def unique_slug(text, taken):
    """slugify(text), with -2, -3, ... appended until it is not in `taken`."""
    base = slugify(text)
    slug, n = base, 1
    while slug in taken:
        n += 1
        slug = f"{base}-{n}"
    return slug
'''

TOMLCFG = '''import tomli


def get_setting(text, dotted_key, default=None):
    """Look up 'a.b.c' in a TOML document."""
    node = tomli.loads(text)
    for part in dotted_key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node
'''

TESTS = {
    "tests/test_mathx.py": '''import pytest

from minilib.mathx import clamp, mean, median


def test_clamp():
    assert clamp(5, 0, 3) == 3
    assert clamp(-1, 0, 3) == 0
    assert clamp(2, 0, 3) == 2


def test_clamp_rejects_bad_interval():
    with pytest.raises(ValueError):
        clamp(1, 3, 0)


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5


def test_median():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
''',
    "tests/test_text.py": '''from minilib import truncate_words
from minilib.text import slugify, title_case


def test_slugify():
    assert slugify("Hello, World!") == "hello-world"


def test_title_case():
    assert title_case("the lord of the rings") == "The Lord of the Rings"


def test_truncate_words():
    assert truncate_words("a b c d", 2) == "a b..."
    assert truncate_words("a b", 2) == "a b"
''',
    "tests/test_config.py": '''import pytest

from minilib.config import parse_bool, parse_size


def test_parse_bool():
    assert parse_bool("Yes") is True
    assert parse_bool("off") is False
    with pytest.raises(ValueError):
        parse_bool("maybe")


def test_parse_size():
    assert parse_size("10k") == 10240
    assert parse_size("2M") == 2 * 1024 ** 2
    assert parse_size("512") == 512
''',
    "tests/test_slug.py": '''from minilib.slug import unique_slug


def test_unique_slug():
    assert unique_slug("Hello World", set()) == "hello-world"
    assert unique_slug("Hello World", {"hello-world"}) == "hello-world-2"
''',
}

BASE_FILES: dict[str, str | None] = {
    "README.md": "# minilib\n\nA tiny library used by the agentbench taskpacks.\n",
    ".gitignore": "__pycache__/\n.pytest_cache/\n*.egg-info/\n",
    "minilib/__init__.py": INIT,
    "minilib/mathx.py": MATHX,
    "minilib/text.py": TEXT,
    "minilib/units.py": UNITS,
    "minilib/config.py": CONFIG,
    "minilib/slug.py": SLUG,
    **TESTS,
}

TASKS: dict[str, dict] = {
    "fix-mean-off-by-one": {
        "suite": "custom-dev", "title": "mean divides by n - 1",
        "bug": {"minilib/mathx.py": MATHX.replace("sum(values) / len(values)",
                                                   "sum(values) / (len(values) - 1)")},
    },
    "fix-parse-size-units": {
        "suite": "custom-dev", "title": "parse_size: wrong unit table and case handling",
        "bug": {
            "minilib/units.py": UNITS.replace('"m": 1024 ** 2', '"m": 1000 ** 2'),
            "minilib/config.py": CONFIG.replace("    text = text.strip().lower()\n",
                                                "    text = text.strip()\n"),
        },
    },
    "restore-slug-module": {
        "suite": "custom-dev", "title": "minilib.slug went missing",
        "bug": {"minilib/slug.py": None},
    },
    "remove-stale-override": {
        "suite": "custom-dev", "title": "a stale override breaks truncate_words",
        "bug": {"minilib/_overrides.py": '''"""Legacy override kept from an old deployment."""

from minilib import text


def _truncate_words(text_, limit, ellipsis="..."):
    return " ".join(text_.split()[:limit]) + ellipsis


text.truncate_words = _truncate_words
import minilib  # noqa: E402

minilib.truncate_words = _truncate_words
'''},
    },
    "fix-toml-nested-lookup": {
        "suite": "custom-dev", "title": "get_setting ignores nesting (needs tomli from PyPI)",
        "bug": {
            "requirements.txt": "tomli==2.0.1\n",
            "minilib/tomlcfg.py": TOMLCFG.replace(
                '    for part in dotted_key.split("."):\n',
                '    for part in dotted_key.split(".")[:1]:\n'),
            "tests/test_tomlcfg.py": TOML_TEST,
        },
        "fix": {"minilib/tomlcfg.py": TOMLCFG},
    },
    "baseline-already-passes": {
        "suite": "custom-dev", "title": "an invalid task: nothing is broken", "oracle": False,
        "bug": {"NOTES.md": "This task is invalid on purpose: its failing_command passes.\n"},
    },
    "flaky-baseline": {
        "suite": "custom-dev", "title": "a deliberately flaky test", "oracle": False,
        "bug": {"tests/test_flaky.py": FLAKY_TEST},
        "then": [("one run counter per checkout, so concurrent local attempts cannot share it",
                  {"tests/test_flaky.py": FLAKY_TEST_PER_CHECKOUT})],
    },
    "fix-title-case-small-words": {
        "suite": "custom-dev", "title": "title_case capitalizes small words",
        "bug": {"minilib/text.py": TEXT.replace('small = {"a", "an", "and", "of", "the", "to"}',
                                                "small = set()")},
    },
    "fix-median-even-length": {
        "suite": "custom-heldout", "title": "median of an even-length list",
        "bug": {"minilib/mathx.py": MATHX.replace(
            "return (ordered[mid - 1] + ordered[mid]) / 2", "return ordered[mid]")},
    },
    "fix-parse-bool-words": {
        "suite": "custom-heldout", "title": "parse_bool rejects yes/on",
        "bug": {"minilib/config.py": CONFIG.replace('TRUE = {"1", "true", "yes", "on"}',
                                                    'TRUE = {"1", "true"}')},
    },
    "fix-truncate-ellipsis": {
        "suite": "custom-heldout", "title": "truncate_words adds an ellipsis to short texts",
        "bug": {"minilib/text.py": TEXT.replace("    if len(words) <= limit:\n",
                                                "    if len(words) < limit:\n")},
    },
    "flaky-verifier": {
        "suite": "custom-verifier",
        "title": "parse_tags keeps case; the formatting test depends on set order",
        "bug": {"minilib/tags.py": TAGS_BUGGY, "tests/test_tags.py": TAGS_TEST_SET_ORDER},
        "fix": {"minilib/tags.py": fixed_tags(TAGS_BUGGY)},
    },
    "stable-verifier": {
        "suite": "custom-verifier", "title": "parse_tags keeps case",
        "bug": {"minilib/tags.py": TAGS_SORTED_BUGGY, "tests/test_tags.py": TAGS_TEST_SORTED},
        "fix": {"minilib/tags.py": fixed_tags(TAGS_SORTED_BUGGY)},
    },
}
