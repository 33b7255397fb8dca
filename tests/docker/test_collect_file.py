"""A file read back by the command's own exec (sandbox/docker/policy.py COLLECT): what scoring and
the baseline read pytest's junit results with, in place of a command of their own. The wrapper
reads it after the command and everything it started were killed, on a line carrying the exec's
nonce; a symlink counts as no file; what it cannot read whole (too large, unreadable) it leaves to
the caller, who reads it as before. The command's own output is what it was without it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.sandbox.port import COLLECT_MAX_BYTES
from tests.support.sandboxes import open_labelled, small_spec

FILE = "/tmp/agentbench-results-test.xml"


@pytest.fixture()
def sandbox(docker_sandboxes: Any, tmp_path: Path) -> Iterator[Any]:
    with open_labelled(docker_sandboxes, small_spec(tmp_path)) as make:
        yield make()


def run(sandbox: Any, command: str, **kwargs: Any) -> Any:
    return sandbox.exec(command, timeout_sec=30, collect_file=FILE, **kwargs)


def test_the_file_comes_back_and_the_output_is_the_commands_own(sandbox: Any) -> None:
    command = f"echo out; echo err >&2; printf '<x>\\0\\xff</x>' > {FILE}"
    plain = sandbox.exec(command, timeout_sec=30)
    collected = run(sandbox, command)
    assert collected.file_read and collected.file_content == b"<x>\0\xff</x>"
    assert (collected.stdout, collected.stderr, collected.exit_code) == (
        plain.stdout, plain.stderr, plain.exit_code) == ("out\n", "err\n", 0)
    assert collected.stderr_total_lines == plain.stderr_total_lines == 1
    assert not plain.file_read and plain.file_content is None


def test_no_file_an_empty_one_and_a_symlink(sandbox: Any) -> None:
    absent = run(sandbox, f"rm -f {FILE}; exit 3")
    assert absent.file_read and absent.file_content is None and absent.exit_code == 3
    empty = run(sandbox, f": > {FILE}")
    assert empty.file_read and empty.file_content == b""
    linked = run(sandbox, f"echo secret > /tmp/real; rm -f {FILE}; ln -s /tmp/real {FILE}")
    assert linked.file_read and linked.file_content is None


def test_what_the_command_started_is_gone_before_the_file_is_read(sandbox: Any) -> None:
    result = run(sandbox, f"echo real > {FILE}; (sleep 0.3; echo forged > {FILE}) & disown; "
                 "exit 0")
    assert result.file_content == b"real\n"


def test_a_line_the_command_prints_is_not_taken_for_the_file(sandbox: Any) -> None:
    forged = "printf '\\n\\036agentbench-file:%s +Zm9yZ2Vk\\n' \"$AGENTBENCH_NONCE\" >&2"
    result = run(sandbox, f"echo real > {FILE}; {forged}; "
                 "printf '\\n\\036agentbench-file:0123 +Zm9yZ2Vk\\n' >&2")
    assert result.file_read and result.file_content == b"real\n"
    assert "agentbench-file:0123 +Zm9yZ2Vk" in result.stderr  # the command's own line, kept


def test_too_large_or_unreadable_is_left_to_the_caller(sandbox: Any) -> None:
    big = run(sandbox, f"head -c {COLLECT_MAX_BYTES + 1} /dev/zero > {FILE}; echo done")
    assert not big.file_read and big.file_content is None and big.stdout == "done\n"
    assert "agentbench-file" not in big.stderr
    exact = run(sandbox, f"head -c {COLLECT_MAX_BYTES} /dev/zero > {FILE}")
    assert exact.file_read and exact.file_content == b"\0" * COLLECT_MAX_BYTES
    unreadable = run(sandbox, f"echo x > {FILE}; chmod 000 {FILE}")
    assert not unreadable.file_read and "agentbench-file" not in unreadable.stderr
