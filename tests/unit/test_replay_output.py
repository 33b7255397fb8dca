"""What `agentbench replay` prints of a result: the reason whole, never cut mid-word (issue 22
polish: a 120-character cut turned "failing_command" into "failing_comm")."""

from __future__ import annotations

from pytest_agentbench.cli.replay_attempt import _describe, clip_words

REASON = ("failing_command output does not match expected_failure_regex 'ZeroDivisionError' "
          "after the agent's change to minilib/mathx.py; the tests that failed: "
          "tests/test_mathx.py::test_mean")


def test_a_typical_reason_is_shown_whole() -> None:
    line = _describe({"passed": False, "failure_reason": "SETUP_FAILED",
                      "sub_reason": "EXPECTED_FAILURE_NOT_SEEN", "summary": REASON})
    assert len(REASON) > 120
    assert line == ("passed=False failure_reason=SETUP_FAILED/EXPECTED_FAILURE_NOT_SEEN "
                    f"({REASON})")


def test_a_long_reason_is_cut_at_a_word_boundary() -> None:
    text = " ".join(["word"] * 100) + "\nnext line"
    clipped = clip_words(text, 42)
    assert clipped == "word word word word word word word word …"
    assert "\n" not in clip_words("a\nb") and clip_words("a\nb") == "a b"
    assert clip_words("x" * 50, 10) == "x" * 10 + " …"  # one long word: cut, marked
