"""The host's reading of a held wrapper shell's answer (sandbox/docker/held_shell.py,
HeldShell): the marks are found wherever the engine's frames split them, nothing after a mark is
taken for this request, and an answer that ends early says whether the request ran."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_agentbench.sandbox.capture import OutputBuffer
from pytest_agentbench.sandbox.docker import policy
from pytest_agentbench.sandbox.docker.exec_stream import STDERR, STDOUT
from pytest_agentbench.sandbox.docker.held_shell import GO_MARK, OUT_MARK, REFUSE_MARK, HeldShell

NONCE = "0123456789abcdef"
N = NONCE.encode()
OUT = GO_MARK + N + b"\nhello \x1eagentbench-out:fff\nworld" + OUT_MARK + N + b"\n"
ERR = (b"warn\n\n\x1eagentbench-epilogue:" + N + b" +abc\n" + policy.TRAILER + N
       + b" 3 0 0 - 1200\n")


class Frames:
    def __init__(self, frames: list[tuple[int, bytes]], fail_send: bool = False) -> None:
        self.list, self.sent, self.fail_send = frames, b"", fail_send

    def frames(self) -> Iterator[tuple[int, bytes]]:
        yield from self.list

    def sendall(self, data: bytes) -> None:
        if self.fail_send:
            raise BrokenPipeError("gone")
        self.sent += data

    def close(self) -> None:
        pass


def _exchange(frames: list[tuple[int, bytes]], **kw: bool) -> tuple[str, bytes, bytes, list]:
    stream = Frames(frames, **kw)
    held = HeldShell(stream, "exec-id")  # type: ignore[arg-type]
    out, err, errors, outcome = OutputBuffer(1 << 20), OutputBuffer(1 << 20), [], []
    held.exchange(b"request", NONCE, out, err, errors, outcome)
    return outcome[0], out.data(), err.data(), errors


def _split(data: bytes, at: int, kind: int) -> list[tuple[int, bytes]]:
    return [(kind, piece) for piece in (data[:at], data[at:]) if piece]


@pytest.mark.parametrize("at", range(0, len(OUT) + 1, 3))
def test_stdout_split_anywhere(at: int) -> None:
    outcome, out, err, errors = _exchange(_split(OUT, at, STDOUT) + [(STDERR, ERR)])
    assert (outcome, errors) == ("done", [])
    assert out == b"hello \x1eagentbench-out:fff\nworld" and err == ERR


@pytest.mark.parametrize("at", range(0, len(ERR) + 1, 3))
def test_stderr_split_anywhere_and_interleaved(at: int) -> None:
    frames = [(STDERR, ERR[:at]), (STDOUT, OUT), (STDERR, ERR[at:])]
    outcome, out, err, _ = _exchange([f for f in frames if f[1]])
    assert outcome == "done" and err == ERR and out.endswith(b"world")


def test_one_byte_frames() -> None:
    frames = [(STDOUT, OUT[i:i + 1]) for i in range(len(OUT))]
    frames += [(STDERR, ERR[i:i + 1]) for i in range(len(ERR))]
    assert _exchange(frames)[:3] == ("done", b"hello \x1eagentbench-out:fff\nworld", ERR)


def test_a_trailer_for_another_nonce_does_not_end_the_answer() -> None:
    other = policy.TRAILER + b"ffffffffffffffff 0 0 0 - 1\n"
    outcome, _, err, _ = _exchange([(STDOUT, OUT), (STDERR, other)])
    assert outcome == "ended" and err == other  # the stream ended: the shell died


@pytest.mark.parametrize("frames,expected", [
    ([], "unsent"),
    ([(STDOUT, GO_MARK[:5])], "ended"),  # a part of a GO mark: it may have run
    ([(STDOUT, REFUSE_MARK + N + b"\n")], "refused"),
    ([(STDOUT, GO_MARK + N + b"\npartial")], "ended"),
])
def test_an_answer_that_ends_early_says_whether_the_request_ran(frames: list,
                                                               expected: str) -> None:
    assert _exchange(frames)[0] == expected


def test_a_request_the_shell_could_not_receive_did_not_run() -> None:
    assert _exchange([(STDOUT, OUT), (STDERR, ERR)], fail_send=True)[0] == "unsent"


@pytest.mark.parametrize("frames", [
    [(STDOUT, GO_MARK + b"ffffffffffffffff\n")],  # another request's answer
    [(STDOUT, OUT + b"more"), (STDERR, ERR)],  # past the end mark
    [(STDOUT, OUT), (STDERR, ERR + b"more")],  # past the trailer
])
def test_a_broken_answer_is_an_error(frames: list) -> None:
    outcome, _, _, errors = _exchange(frames)
    assert outcome == "ended" and len(errors) == 1


@pytest.mark.parametrize("env,args,ok", [
    ({"FOO": "1", "PATH": "/bin", "TZ": "UTC", "AGENTBENCH_EXCL_00000": "x"}, ["a"], True),
    ({"FUNCNEST": "1"}, [], False),
    ({"GLOBSORT": "-name"}, [], False),
    ({"HISTFILE": "x"}, [], False),
    ({"COMP_WORDS": "x"}, [], False),
    ({"Foo": "1"}, [], False),
    ({"FOO": "a\0b"}, [], False),
    ({}, ["echo a\0b"], False),
    ({}, ["echo \udc80"], False),  # a lone surrogate, as a model's JSON can hold
    ({"FOO": "\udc80"}, [], False),
])
def test_what_the_held_shell_takes(env: dict[str, str], args: list[str], ok: bool) -> None:
    from pytest_agentbench.sandbox.docker.held_shell import takes

    assert takes(env, args) is ok
