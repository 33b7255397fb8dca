"""The harvested task's description (harvest/statement.py): the commit message without what
gives the fix away, or the failing tests."""

from __future__ import annotations

from pytest_agentbench.harvest.statement import MAX_CHARS, from_commit, from_tests

FIX = (
    "diff --git a/stats.py b/stats.py\n--- a/stats.py\n+++ b/stats.py\n@@ -1,2 +1,2 @@\n"
    "-    return total / (len(values) - 1)\n+    return total / len(values)\n"
)


def test_refs_hashes_urls_trailers_and_fix_code_are_removed() -> None:
    body = (
        "mean() divided by n - 1, wrong for every input above 2147483647 items.\n"
        "Closes #45, see https://github.com/o/r/issues/45 and GH-77.\n"
        "Introduced in 1a2b3c4d5e and 0123456789abcdef0123456789abcdef01234567.\n\n"
        "    return total / len(values)\n\n"
        "Signed-off-by: Ann <ann@example.org>\nCo-authored-by: Bob <bob@example.org>\n"
        "Fixes: #45"
    )
    text = from_commit("Fix off-by-one in mean (#123)", body, FIX)
    assert text.splitlines()[0] == "Fix off-by-one in mean"
    for leak in ("#", "123", "GH-", "http", "github.com", "1a2b3c4d5e", "0123456789abcdef",
                 "return total / len(values)", "Signed-off-by", "Co-authored-by", "Ann",
                 "Fixes"):
        assert leak not in text, leak
    assert "wrong for every input above 2147483647 items" in text  # a number is no hash


def test_a_message_that_is_all_leaks_gets_a_neutral_statement() -> None:
    assert from_commit("(#12)", "https://x.example/1", FIX) == "Fix the bug the failing tests show."


def test_long_messages_are_capped() -> None:
    assert len(from_commit("x" * 10, "word " * 5000, FIX)) == MAX_CHARS


def test_statement_from_tests_lists_the_failing_tests() -> None:
    tests = tuple(f"tests/test_a.py::test_{i}" for i in range(60))
    text = from_tests(tests)
    assert text.startswith("Make these failing tests pass")
    assert "- tests/test_a.py::test_49" in text and "test_50" not in text
    assert text.endswith("(and 10 more)")
