"""The doctor's end-to-end check: a tiny task through the real pipeline.

It makes a throwaway repository with one bug and one test, then runs the oracle through the same
attempt factory and AttemptPipeline that pytest uses (mirror, sandbox, setup, baseline twice, tools,
scoring, records), and the nop agent to prove the task really fails without the fix: the same
oracle+nop validation as `agentbench validate-tasks --run`.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from pytest_agentbench.core.attempt_config import SharedAttemptConfig
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.run.validation import validate_task
from pytest_agentbench.sandbox.port import SandboxFactory
from pytest_agentbench.tasks.loader import load_task

TASK_YAML = """task_spec_version: 1
id: doctor-hello
suite: doctor
repo: {{url: "{url}", commit: "{commit}"}}
environment: {{network_policy: none, timeout_sec: 120, tool_timeout_sec: 60}}
validation:
  failing_command: python -m pytest -q -p no:cacheprovider test_hello.py
  passing_command: python -m pytest -q -p no:cacheprovider test_hello.py
  expected_exit_codes: [1]
"""
ORACLE = """--- a/hello.py
+++ b/hello.py
@@ -1,2 +1,2 @@
 def greet(name):
-    return "hello " + name.upper()
+    return "hello " + name
"""


def _make_repo(root: Path) -> tuple[str, str]:
    repo = root / "hello-repo"
    repo.mkdir()
    (repo / "hello.py").write_text('def greet(name):\n    return "hello " + name.upper()\n')
    (repo / "test_hello.py").write_text(
        "from hello import greet\n\n\ndef test_greet():\n    assert greet('you') == 'hello you'\n")
    env = {"GIT_AUTHOR_NAME": "doctor", "GIT_AUTHOR_EMAIL": "doctor@agentbench.invalid",
           "GIT_COMMITTER_NAME": "doctor", "GIT_COMMITTER_EMAIL": "doctor@agentbench.invalid",
           "PATH": "/usr/bin:/bin:/usr/local/bin"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "hello"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    return f"file://{repo}", commit


def hello_task(sandboxes: SandboxFactory, image: str, owner: int | None) -> tuple[bool, str]:
    """The oracle+nop validation (run/validation.py) of a throwaway one-bug task, the
    workspace handed to `owner` (hostenv.owner_uid); no environment or pip cache is used."""
    with tempfile.TemporaryDirectory(prefix="agentbench-doctor-") as tmp:
        root = Path(tmp)
        url, commit = _make_repo(root)
        task_dir = root / "doctor" / "doctor-hello"
        task_dir.mkdir(parents=True)
        (task_dir / "task.yaml").write_text(TASK_YAML.format(url=url, commit=commit))
        (task_dir / "oracle.patch").write_text(ORACLE)
        task = load_task(task_dir / "task.yaml", check_layout=False)
        shared = SharedAttemptConfig(
            run_id="doctor", run_dir=root / "run", work_root=root / "work", variant="doctor",
            variant_config_hash="doctor", image=image, harness_version="doctor",
            owner_uid=owner)
        result = validate_task(task, shared, sandboxes, MirrorCache(root / "git"))
    if not result.ok:
        return False, result.detail
    oracle = result.oracle
    return True, (f"oracle passed in {oracle['duration_sec']:.1f}s, nop failed with TESTS_FAILED "
                  f"(baseline ran {len(oracle['baseline_validation']['runs'])} times)")
