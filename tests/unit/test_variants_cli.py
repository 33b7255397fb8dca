"""`agentbench variants`: bundled variants and built-in or installed agents, one line each."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

import pytest_agentbench.agents.variants as variants
import pytest_agentbench.cli.main as agentbench
from pytest_agentbench.agents.variants import (
    BUILTIN_VARIANT_DIR,
    bundled_variants,
    list_agents,
    list_bundled_variants,
    load_variant,
)


class Described:
    """Solves everything (in its dreams).

    More text that is not the first paragraph."""


class FakeEntryPoint:
    def __init__(self, name: str, factory: Any = None, error: Exception | None = None) -> None:
        self.name, self.factory, self.error = name, factory, error
        self.dist = type("Dist", (), {"name": "acme-agents"})()

    def load(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.factory


def test_every_bundled_variant_has_a_description_and_it_is_not_hashed() -> None:
    rows = {r.name: r for r in list_bundled_variants()}
    assert set(rows) == set(bundled_variants()) >= {"baseline", "local"}
    for name, row in rows.items():
        assert row.description and row.description != "(no description)", name
        assert row.agent == load_variant(name).agent
    v = load_variant("baseline")
    before = v.config_hash()
    v.description = "something else"
    assert v.config_hash() == before  # a description is documentation, not configuration


def test_agents_built_in_installed_and_broken(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = [FakeEntryPoint("described", Described),
           FakeEntryPoint("broken", error=ImportError("no module named acme\nsecond line")),
           FakeEntryPoint("nop", Described)]
    monkeypatch.setattr(variants, "entry_points", lambda group: eps)
    rows = {r.name: r for r in list_agents()}
    assert {"nop", "oracle", "scripted", "llm_v0", "described", "broken"} <= set(rows)
    assert rows["oracle"].agent == "built-in" and "reference solution" in rows["oracle"].description
    assert rows["described"].agent == "installed (acme-agents)"
    assert rows["described"].description == "Solves everything (in its dreams)."
    assert rows["broken"].description == ("cannot be loaded: ImportError: no module named acme "
                                           "second line")
    assert "is ignored" in rows["nop"].description  # a built-in cannot be shadowed


def test_cli_lists_one_line_each(capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    assert agentbench.main(["variants"]) == 0
    out = capsys.readouterr().out.splitlines()
    lines = {line.split()[0]: line for line in out if line.startswith("  ")}
    baseline = lines["baseline"].split(None, 2)
    assert baseline[:2] == ["baseline", "llm_v0"]
    assert baseline[2] == load_variant("baseline").description
    assert lines["local"].split()[1] == "llm_v0" and "nop" in lines
    # a broken bundled file is one line saying why, not a traceback
    bad = tmp_path / "variants"
    bad.mkdir()
    (bad / "broken.yaml").write_text("agent: [\n")
    (bad / "plain.yaml").write_text("agent: nop\n")
    monkeypatch.setattr(variants, "BUILTIN_VARIANT_DIR", bad)
    assert agentbench.main(["variants"]) == 0
    text = capsys.readouterr().out
    assert "  broken  ?    cannot be read: variant file broken:" in text
    assert "  plain   nop  (no description)" in text
    assert BUILTIN_VARIANT_DIR.is_dir()


def test_console_script_subprocess() -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_agentbench.cli.main", "variants"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "baseline" in done.stdout and "built-in" in done.stdout and done.stderr == ""
