"""The synthetic histories of the harvest's end-to-end tests (tests/e2e/test_harvest_*.py):
each commit is made for one case and the expected reason is recorded beside it, so a test can
compare the funnel's reason for every commit with what the history was made to show.

`shapes`: the shapes a change comes in (a merge, a fix and its test apart, a renamed test file,
binary test data, the same fix twice, a release, docs). `verdicts`: what the sandbox decides (a
feature, a flaky test, a setup that cannot work offline, then the walk going on).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tests.support.harvest_history import History

PYPROJECT = '[project]\nname = "calc"\nversion = "0.{minor}"\n'
CALC = {
    "add": "def add(a, b):\n    return a - b\n",
    "mul": "def mul(a, b):\n    return a + b\n",
    "neg": "def neg(a):\n    return a\n",
    "checksum": "def checksum(data):\n    return sum(data) % 7\n",
}
FIXED = {
    "add": "def add(a, b):\n    return a + b\n",
    "mul": "def mul(a, b):\n    return a * b\n",
    "neg": "def neg(a):\n    return -a\n",
    "checksum": "def checksum(data):\n    return sum(data) % 251\n",
}
DOUBLE_BROKEN = "def double(a):\n    return a + a + 1\n"
DOUBLE_FIXED = "def double(a):\n    return a + a\n"
BLOB = b"\x00\xff\x10\x80" * 16 + b"\x00binary test data\xfe"


def calc(**fixed: bool) -> str:
    return "\n\n".join((FIXED if fixed.get(name) else CALC)[name] for name in CALC)


def test_module(*names: str) -> str:
    checks = {
        "sub": "def test_sub_of_zero():\n    assert calc.add(0, 0) == 0\n",
        "add": "def test_add():\n    assert calc.add(2, 3) == 5\n",
        "mul": "def test_mul():\n    assert calc.mul(3, 4) == 12\n",
        "neg": "def test_neg():\n    assert calc.neg(2) == -2\n",
    }
    return "import calc\n\n\n" + "\n\n".join(checks[n] for n in names)


@dataclass
class Made:
    history: History
    expected: dict[str, str] = field(default_factory=dict)  # sha -> reason
    kinds: dict[str, str] = field(default_factory=dict)  # sha -> kind of a validated task

    def add(self, sha: str, reason: str, kind: str | None = None) -> str:
        self.expected[sha] = reason
        if kind:
            self.kinds[sha] = kind
        return sha


def shapes(repo: Path) -> Made:
    h = History(repo)
    made = Made(h)
    made.add(h.commit("Initial import", {
        "pyproject.toml": PYPROJECT.format(minor=1), "calc.py": calc(), "dbl.py": DOUBLE_BROKEN,
        "tests/test_calc.py": test_module("sub")}), "ROOT_COMMIT")
    made.add(h.merge_branch("Merge pull request #3 from dev/fix-add", [
        ("add subtracted", {"calc.py": calc(add=True)}),
        ("test add", {"tests/test_calc.py": test_module("sub", "add")})]), "VALIDATED", "bugfix")
    made.add(h.commit("mul adds instead of multiplying", {"calc.py": calc(add=True, mul=True)}),
             "NO_TEST_PART")
    made.add(h.commit("test mul", {"tests/test_calc.py": test_module("sub", "add", "mul")}),
             "NO_SOURCE_PART")
    made.add(h.rename("neg returns its argument; tests renamed to test_arith",
                      "tests/test_calc.py", "tests/test_arith.py", {
                          "calc.py": calc(add=True, mul=True, neg=True),
                          "tests/test_arith.py": test_module("sub", "add", "mul", "neg")}),
             "VALIDATED", "bugfix")
    made.add(h.commit("checksum of binary data wraps at the wrong modulus", {
        "calc.py": calc(add=True, mul=True, neg=True, checksum=True),
        "tests/data/blob.bin": BLOB,
        "tests/test_checksum.py": (
            "from pathlib import Path\n\nimport calc\n\n\ndef test_checksum_of_blob():\n"
            "    data = (Path(__file__).parent / 'data' / 'blob.bin').read_bytes()\n"
            f"    assert calc.checksum(data) == {sum(BLOB) % 251}\n")}), "VALIDATED", "bugfix")
    # the same fix twice (a refactor put the bug back): harvested once, from the newer commit
    made.add(h.commit("double added one", {
        "dbl.py": DOUBLE_FIXED,
        "tests/test_dbl.py": "from dbl import double\n\n\ndef test_double():\n"
                             "    assert double(2) == 4\n"}), "DUPLICATE_FIX")
    made.add(h.commit("inline double", {"dbl.py": DOUBLE_BROKEN}), "NO_TEST_PART")
    made.add(h.commit("double added one, again", {
        "dbl.py": DOUBLE_FIXED,
        "tests/test_dbl.py": "from dbl import double\n\n\ndef test_double():\n"
                             "    assert double(2) == 4\n\n\ndef test_double_zero():\n"
                             "    assert double(0) == 0\n"}), "VALIDATED", "bugfix")
    made.add(h.commit("Release 0.2", {"pyproject.toml": PYPROJECT.format(minor=2)}), "RELEASE")
    made.add(h.commit("Document checksum", {"README.md": "# calc\n\nchecksum: mod 251\n"}),
             "DOCS_CI_PACKAGING_ONLY")
    return made


CLAMP_BROKEN = "def clamp(x, lo, hi):\n    return x\n"
CLAMP_HI = "def clamp(x, lo, hi):\n    return min(x, hi)\n"
CLAMP_BOTH = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
# fails on every other run of the same checkout: before the fix and after it
FLAKY_TEST = (
    "from pathlib import Path\n\nimport retry\n\n\ndef test_retry_gives_up():\n"
    "    runs = Path(__file__).with_name('.runs')\n"
    "    count = int(runs.read_text()) + 1 if runs.exists() else 1\n"
    "    runs.write_text(str(count))\n"
    "    assert retry.attempts() == 3 and count % 2 == 0\n"
)
MISSING_PACKAGE = "no-such-package-agentbench-harvest"
# pip's configuration in the harvest's HOME (the local sandbox passes HOME on): no index at all
OFFLINE_PIP_CONF = "[global]\nno-index = true\n"


def verdicts(repo: Path) -> Made:
    h = History(repo)
    made = Made(h)
    made.add(h.commit("Initial import", {
        "pyproject.toml": PYPROJECT.format(minor=1), "mathx.py": CLAMP_BROKEN,
        "retry.py": "def attempts():\n    return 2\n",
        "tests/test_mathx.py": "from mathx import clamp\n\n\ndef test_inside():\n"
                               "    assert clamp(1, 0, 2) == 1\n"}), "ROOT_COMMIT")
    made.add(h.commit("Add strutil.shout", {
        "strutil.py": "def shout(text):\n    return text.upper() + '!'\n",
        "tests/test_strutil.py": "from strutil import shout\n\n\ndef test_shout():\n"
                                 "    assert shout('hi') == 'HI!'\n"}), "VALIDATED", "feature")
    made.add(h.commit("retry three times", {
        "retry.py": "def attempts():\n    return 3\n", "tests/test_retry.py": FLAKY_TEST}),
        "FLAKY_TESTS")
    made.add(h.commit("Depend on a package no index has", {"pyproject.toml": PYPROJECT.format(
        minor=1) + f'dependencies = ["{MISSING_PACKAGE}==1.0"]\n'}), "DOCS_CI_PACKAGING_ONLY")
    made.add(h.commit("clamp ignored its upper bound", {
        "mathx.py": CLAMP_HI,
        "tests/test_mathx.py": "from mathx import clamp\n\n\ndef test_inside():\n"
                               "    assert clamp(1, 0, 2) == 1\n\n\ndef test_above():\n"
                               "    assert clamp(5, 0, 2) == 2\n"}), "SETUP_FAILED")
    made.add(h.commit("Drop the dependency", {"pyproject.toml": PYPROJECT.format(minor=1)}),
             "DOCS_CI_PACKAGING_ONLY")
    made.add(h.commit("clamp ignored its lower bound", {
        "mathx.py": CLAMP_BOTH,
        "tests/test_mathx.py": "from mathx import clamp\n\n\ndef test_inside():\n"
                               "    assert clamp(1, 0, 2) == 1\n\n\ndef test_above():\n"
                               "    assert clamp(5, 0, 2) == 2\n\n\ndef test_below():\n"
                               "    assert clamp(-5, 0, 2) == 0\n"}), "VALIDATED", "bugfix")
    return made


def small(repo: Path) -> Made:
    """Two fixes, the newer one on a parent whose declared dependency no index has."""
    h = History(repo)
    made = Made(h)
    test_inside = ("from mathx import clamp\n\n\ndef test_inside():\n"
                   "    assert clamp(1, 0, 2) == 1\n")
    above = "\n\ndef test_above():\n    assert clamp(5, 0, 2) == 2\n"
    below = "\n\ndef test_below():\n    assert clamp(-5, 0, 2) == 0\n"
    made.add(h.commit("Initial import", {"pyproject.toml": PYPROJECT.format(minor=1),
                                         "mathx.py": CLAMP_BROKEN,
                                         "tests/test_mathx.py": test_inside}), "ROOT_COMMIT")
    made.add(h.commit("clamp ignored its upper bound", {
        "mathx.py": CLAMP_HI, "tests/test_mathx.py": test_inside + above}), "VALIDATED", "bugfix")
    made.add(h.commit("Depend on a package no index has", {"pyproject.toml": PYPROJECT.format(
        minor=1) + f'dependencies = ["{MISSING_PACKAGE}==1.0"]\n'}), "DOCS_CI_PACKAGING_ONLY")
    made.add(h.commit("clamp ignored its lower bound", {
        "mathx.py": CLAMP_BOTH, "tests/test_mathx.py": test_inside + above + below}),
        "SETUP_FAILED")
    return made
