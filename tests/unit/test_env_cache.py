"""The environment cache's entries, locks and eviction (core/envcache.py), its size option
(run/envcaches.py) and `agentbench cache ls|prune` (cli/cache.py), on plain directories.

Issue 10 item 3: two workers that miss one key build it once (the other waits and uses it), an
entry in use is never evicted, and the cache stays within its cap as it fills.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from pytest_agentbench.cli.main import main as cli_main
from pytest_agentbench.core.envcache import EnvCache
from pytest_agentbench.run.envcaches import parse_size

MB = 1 << 20


def make_state(root: Path, size: int, name: str = "x") -> tuple[Path, Path]:
    repo, env = root / "repo", root / "env"
    repo.mkdir(parents=True)
    env.mkdir(parents=True)
    (repo / name).write_bytes(os.urandom(size))
    (env / "marker").write_text(name)
    return repo, env


def build(cache: EnvCache, key: str, tmp: Path, size: int = MB) -> None:
    claim = cache.claim(key, wait_sec=5)
    assert claim.building
    repo, env = make_state(tmp / key, size, key)
    hold, why = cache.publish(claim, key, repo, env, [], {"task": key})
    assert hold is not None, why
    hold.close()


def test_published_entries_are_found_and_hold_the_state(tmp_path: Path) -> None:
    cache = EnvCache(tmp_path / "cache", max_bytes=100 * MB)
    assert cache.open("k1") is None
    build(cache, "k1", tmp_path)
    hold = cache.open("k1")
    assert hold is not None and (hold.env / "marker").read_text() == "k1"
    assert hold.meta["task"] == "k1" and hold.meta["bytes"] >= MB
    hold.close()


def test_lru_eviction_keeps_the_cache_within_its_cap(tmp_path: Path) -> None:
    cache = EnvCache(tmp_path / "cache", max_bytes=int(3.5 * MB))
    for i in range(6):
        build(cache, f"k{i}", tmp_path)
        if i == 2:  # k0 used again: k1 is now the least recently used
            time.sleep(0.05)
            held = cache.open("k0")
            assert held is not None
            held.close()
        _, size = cache.footprint()
        assert size <= cache.max_bytes, f"over the cap after k{i}"
        time.sleep(0.05)
    assert sorted(e.key for e in cache.entries()) == ["k3", "k4", "k5"]


def test_an_entry_in_use_is_never_evicted(tmp_path: Path) -> None:
    cache = EnvCache(tmp_path / "cache", max_bytes=100 * MB)
    build(cache, "busy", tmp_path)
    build(cache, "idle", tmp_path)
    hold = cache.open("busy")
    assert hold is not None
    removed = cache.prune(everything=True)
    assert [e.key for e in removed] == ["idle"]
    assert (hold.env / "marker").read_text() == "busy"
    assert [e.in_use for e in cache.entries()] == [True]
    hold.close()
    assert [e.key for e in cache.prune(everything=True)] == ["busy"]


def test_an_entry_larger_than_the_cap_is_not_kept(tmp_path: Path) -> None:
    cache = EnvCache(tmp_path / "cache", max_bytes=MB // 2)
    claim = cache.claim("big", wait_sec=1)
    repo, env = make_state(tmp_path / "big", MB)
    hold, why = cache.publish(claim, "big", repo, env, [], {})
    assert hold is None and "larger than the cache cap" in str(why)
    assert cache.entries() == [] and not [p for p in cache.root.iterdir() if p.name != ".locks"]
    claim.release()


def _racer(root: str, key: str, tmp: str, out: str) -> None:
    cache = EnvCache(Path(root), max_bytes=100 * MB)
    hold = cache.open(key)
    verdict = "hit"
    if hold is None:
        claim = cache.claim(key, wait_sec=30)
        hold = claim.hold
        verdict = "waited" if hold is not None else "built"
        if claim.building:
            time.sleep(0.5)  # a setup that takes a while
            repo, env = make_state(Path(tmp) / f"{os.getpid()}", MB // 4, key)
            hold, _ = cache.publish(claim, key, repo, env, [], {})
    assert hold is not None
    marker = (hold.env / "marker").read_text()
    Path(out).write_text(json.dumps({"verdict": verdict, "marker": marker}))
    hold.close()


def test_two_workers_missing_one_key_build_it_once(tmp_path: Path) -> None:
    """Repeated: each round is two processes that miss the same fresh key at the same time."""
    ctx = multiprocessing.get_context("fork")
    for round_ in range(10):
        key = f"race{round_}"
        outs = [tmp_path / f"{key}-{i}.json" for i in range(2)]
        procs = [ctx.Process(target=_racer, args=(str(tmp_path / "cache"), key,
                                                   str(tmp_path / "states"), str(out)))
                 for out in outs]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(60)
            assert proc.exitcode == 0
        results = [json.loads(out.read_text()) for out in outs]
        assert sorted(r["verdict"] for r in results) in (["built", "waited"], ["built", "hit"])
        assert all(r["marker"] == key for r in results)


def test_a_build_that_dies_lets_the_waiter_build(tmp_path: Path) -> None:
    cache = EnvCache(tmp_path / "cache", max_bytes=100 * MB)
    first = cache.claim("k", wait_sec=1)
    assert first.building
    assert not cache.claim("k", wait_sec=0.3).building  # timed out while the first builds
    first.release()  # the first build failed (or its process died: the kernel drops the lock)
    second = cache.claim("k", wait_sec=1)
    assert second.building
    second.release()


@pytest.mark.parametrize(("text", "size"), [("500M", 500 * MB), ("20G", 20 << 30),
                                            ("1.5GiB", int(1.5 * (1 << 30))), ("4096", 4096)])
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text, "x") == size


def test_a_bad_size_names_its_option() -> None:
    with pytest.raises(ValueError, match="^--agentbench-env-cache-max-size: expected a size"):
        parse_size("20 gigs", "--agentbench-env-cache-max-size")


def test_cache_ls_and_prune(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = EnvCache(tmp_path / "cache", max_bytes=100 * MB)
    for key in ("a", "b"):
        build(cache, key, tmp_path)
        time.sleep(0.05)
    root = ["--env-cache", str(cache.root)]
    assert cli_main(["cache", "ls", *root]) == 0
    out = capsys.readouterr().out
    assert "2 entries" in out and "?/a" in out
    assert cli_main(["cache", "prune", "--max-size", "1.5M", *root]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert [e.key for e in cache.entries()] == ["b"]
    assert cli_main(["cache", "prune", "--max-size", "lots", *root]) == 2
    assert "--max-size: expected a size" in capsys.readouterr().err


def test_the_fast_test_file_matcher_agrees_with_the_glob_matcher() -> None:
    """core/protection.py matches the harness's `**/<name>` patterns on file names (a large
    .venv made protection take 1.7 s); it must protect exactly what the glob matcher does."""
    from pytest_agentbench.core.protection import (
        PYTEST_TEST_FILES,
        UNITTEST_TEST_FILES,
        _basename_matcher,
    )
    from pytest_agentbench.paths.globs import matches_any

    paths = ["test_a.py", "tests/test_b.py", "a/b/c_test.py", "x_test.pyc", "test.py",
             "testing/helpers.py", ".venv/lib/python3.11/site-packages/numpy/tests/test_x.py",
             "src/test_dir/mod.py", "tests/.test_hidden.py", "test_[x].py", "TEST_a.py",
             "a/testfoo.py", "a/b/test"]
    for patterns in (list(PYTEST_TEST_FILES), list(UNITTEST_TEST_FILES)):
        fast = _basename_matcher(patterns)
        assert [fast(p) for p in paths] == [matches_any(p, patterns) for p in paths]
