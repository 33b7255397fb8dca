"""The harness's scripts around a command (port.EpilogueRunning), one protocol on every sandbox:
the Docker wrapper's PROLOGUE, EPILOGUE and COLLECT (sandbox/docker/policy.py), the local
sandbox's subprocesses (sandbox/local_scripts.py). The recording toolbox, the baseline and
scoring take one path on both, so what they read must come back the same way."""

from __future__ import annotations

import re
import uuid
from typing import Any, cast

from pytest_agentbench.sandbox.port import PROLOGUE_MARK, EpilogueRunning, Sandbox

SNAPSHOT_LIKE = "printf 'tree\\n\\n\\nEND 1.000000\\nfp1\\nfp2\\n'"


def around(sandbox: Sandbox) -> EpilogueRunning:
    assert sandbox.runs_prologues and sandbox.runs_epilogues  # type: ignore[attr-defined]
    return cast(EpilogueRunning, sandbox)


def test_the_prologue_comes_first_and_whole_and_its_chain_reaches_the_epilogue(
        sandbox: Sandbox) -> None:
    box = around(sandbox)
    result = box.exec("echo command", timeout_sec=30, prologue=SNAPSHOT_LIKE,
                      epilogue='printf "%s" "$AGENTBENCH_CHAIN"', inline_scripts=True)
    block = "tree\n\n\nEND 1.000000\nfp1\nfp2"
    head = re.match(re.escape(PROLOGUE_MARK) + r"(\d+) (\d+)\n", result.stdout)
    assert head is not None and int(head[1]) == len(block), result.stdout
    assert result.stdout[head.end():] == block + "\ncommand\n"
    if box.epilogues_read:  # Docker without its execute-only shell reads no epilogue
        started, rest = (result.epilogue_output or "").split("\n", 1)
        assert re.fullmatch(r"\d+[.,]\d{6}", started), result.epilogue_output
        assert rest == "tree\nEND 1.000000\nfp1\nfp2"  # the first line, and after the third


def test_a_failed_prologue_runs_neither_the_command_nor_the_epilogue(sandbox: Sandbox) -> None:
    box = around(sandbox)
    failed = box.exec("echo ran > ran.txt", timeout_sec=30, prologue="echo partial; exit 3",
                      epilogue="echo after > after.txt", inline_scripts=True)
    assert re.fullmatch(re.escape(PROLOGUE_MARK) + r"defer 3 \d+\n\n", failed.stdout)
    # one that exited 0 but said too much defers with what follows its fourth line
    big = "printf 'a\\nb\\nc\\nd\\nfingerprint\\n'; head -c 20000 /dev/zero | tr '\\0' x"
    deferred = box.exec("echo ran > ran.txt", timeout_sec=30, prologue=big,
                        inline_scripts=True)
    assert re.fullmatch(re.escape(PROLOGUE_MARK) + r"defer 0 \d+\nfingerprint\nx{20000}\n",
                        deferred.stdout)
    left = sandbox.exec("[ -e ran.txt ] || [ -e after.txt ] && echo found || echo none",
                        timeout_sec=30)
    assert left.stdout == "none\n"


def test_the_scripts_variables_reach_the_scripts_alone(sandbox: Sandbox) -> None:
    box = around(sandbox)
    env = {"AGENTBENCH_EXCL_00000": "secret-rules"}
    result = box.exec('echo "cmd=${AGENTBENCH_EXCL_00000:-none}"', timeout_sec=30, env=env,
                      prologue='echo "pro=$AGENTBENCH_EXCL_00000"',
                      epilogue='echo "epi=$AGENTBENCH_EXCL_00000"', inline_scripts=True)
    assert result.stdout.endswith("\npro=secret-rules\ncmd=none\n"), result.stdout
    if box.epilogues_read:
        assert result.epilogue_output == "epi=secret-rules\n"


def test_a_file_is_read_back_after_the_command_and_a_link_reads_as_none(
        sandbox: Sandbox) -> None:
    box = around(sandbox)
    if not box.collects_files:
        return
    path = f"/tmp/agentbench-contract-{uuid.uuid4().hex}.xml"
    wrote = box.exec(f"rm -f {path}; printf '<xml/>' > {path}", timeout_sec=30,
                     collect_file=path)
    linked = box.exec(f"rm -f {path}; ln -s /etc/passwd {path}", timeout_sec=30,
                      collect_file=path)
    missing = box.exec(f"rm -f {path}", timeout_sec=30, collect_file=path)
    results: list[Any] = [(r.file_read, r.file_content) for r in (wrote, linked, missing)]
    if getattr(box, "epilogues_read", True):  # lines the wrapper alone can have written
        assert results == [(True, b"<xml/>"), (True, None), (True, None)]
