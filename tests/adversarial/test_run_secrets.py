"""Issue 8 item 8 (secrets): credentials in a task file never reach a file the harness writes.

On 4a9ba26 a token in `repo.url` or in a setup command was written as is to the frozen task.yaml,
attempts.jsonl, logs/setup_*.txt and report.html. The run's redactor (Redactor.for_tasks) now
knows every credential a task file reveals, and the pattern set covers the usual shapes: userinfo
in any URL, scp-like `user:pw@host:path`, `NAME=value` with a secret-looking NAME, `--password X`,
`Authorization:` headers, credentials in pip index URLs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentbench.text.redaction import Redactor
from tests.support.run_dirs import run_dirs
from tests.support.tiny_pack import Pack

# --------------------------------------------------------------------------- the patterns

LEAKS = [  # (text, the secret that must go, what must stay)
    ("git clone https://alice:Tok3n-abcdef@example.com/r.git", "Tok3n-abcdef", "example.com/r.git"),
    ("git clone https://alice:p@ss@word-123@example.com/r", "ss@word-123", "@example.com/r"),
    ("pip install 'p @ git+https://ghTok-1234567@github.com/o/r@v1'", "ghTok-1234567", "@v1"),
    ("git clone oauth2:glpat-abcdefgh12345@gitlab.com:group/repo.git", "glpat-abc",
     "@gitlab.com:group/repo.git"),
    ("export GITHUB_TOKEN=abcdef123456 && make", "abcdef123456", "&& make"),
    ("DB_PASSWORD='two words' AWS_SECRET_ACCESS_KEY=k3y-k3y-k3y ./run", "two words", "./run"),
    ("AWS_SECRET_ACCESS_KEY=k3y-k3y-k3y ./run", "k3y-k3y-k3y", "./run"),
    ("tool --password hunter2long --verbose", "hunter2long", "--verbose"),
    ("tool --api-key=abc123456789 x", "abc123456789", " x"),
    ("curl -H 'Authorization: Basic dXNlcjpwYXNz' https://x", "dXNlcjpwYXNz", "https://x"),
    ("curl -u alice:s3cretpw https://x", "s3cretpw", "https://x"),
    ("mysql -u root -psecretpw db", "secretpw", " db"),
    ("pip install --index-url https://__token__:pypi-AgEIcHlw@pypi.example/simple p",
     "pypi-AgEIcHlw", "pypi.example/simple"),
    ("pip install --extra-index-url=https://u:IdxPw-998877@idx.example/simple p",
     "IdxPw-998877", "idx.example/simple"),
]

KEPT = [  # ordinary text that looks a little like a credential and must stay as it is
    "docker run -u 1000:1000 img; mkdir -p dir; pytest -p no:cacheprovider",
    "git clone git@github.com:org/repo.git",
    "pip install git+https://github.com/org/repo@v1.2",
    "GIT_AUTHOR_NAME=bob MAX_TOKENS=100 PWD=/home/x",
    'password = self.password; token = tokenize(x); h = {"Authorization": f"Bearer {t}"}',
    "meeting at 12:30, ratio a:b",
]


@pytest.mark.parametrize(("text", "secret", "kept"), LEAKS)
def test_credential_shapes_are_redacted(text: str, secret: str, kept: str) -> None:
    out = Redactor(environ={}).redact(text)
    assert secret not in out, out
    assert kept in out, out
    assert "[REDACTED]" in out


@pytest.mark.parametrize("text", KEPT)
def test_ordinary_text_is_kept(text: str) -> None:
    assert Redactor(environ={}).redact(text) == text


def test_a_redactor_for_a_task_knows_the_bare_secrets_of_its_file() -> None:
    from pytest_agentbench.schemas.task import TaskSpec

    spec = TaskSpec.model_validate({
        "task_spec_version": 1, "id": "t", "suite": "s",
        "repo": {"url": "https://alice:RepoTok3n-abcdef99@example.com/r.git", "commit": "abc1234"},
        "setup": {"commands": ["export DEPLOY_TOKEN=DeployTok-31337abc", "echo $MY_API_KEY"]},
        "validation": {"failing_command": "false", "passing_command": "true"},
        "artifacts": {"redact": ["EXTRA_VAR"]},
    })
    env = {"MY_API_KEY": "from-the-env-12345", "EXTRA_VAR": "extra-value-6789"}
    redactor = Redactor.for_task(spec, environ=env)
    # a git error or a program printing just the value, with no pattern around it
    text = "fatal: RepoTok3n-abcdef99 rejected; got DeployTok-31337abc, from-the-env-12345 ok"
    out = redactor.redact(text + " extra-value-6789")
    for secret in ("RepoTok3n-abcdef99", "DeployTok-31337abc", "from-the-env-12345",
                   "extra-value-6789"):
        assert secret not in out, out
    assert "[REDACTED:MY_API_KEY]" in out and "[REDACTED:EXTRA_VAR]" in out


# --------------------------------------------------------------------------- a whole run

SECRETS = {
    "repo": "RepoTok3n-abcdef99",
    "index": "IdxSecret-5551212",
    "deploy": "DeployTok-31337abc",
    "header": "HdrSecret-7890abcd",
    "password": "PwSecret-42424242",
    "token": "TokSecret-8675309x",
}
SETUP = [
    f"echo 'Looking in https://bob:{SECRETS['index']}@pypi.example/simple'",
    f"export DEPLOY_TOKEN={SECRETS['deploy']} && echo \"deploying with $DEPLOY_TOKEN\"",
    f"echo 'Authorization: token {SECRETS['header']}' >&2",
    f"echo --password {SECRETS['password']}",
    f"false --token={SECRETS['token']}",  # fails: the command lands in the record's summary
]


def _task(root: Path, task_id: str, url: str, commit: str, setup: list[str]) -> None:
    path = root / "synth" / task_id / "task.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({  # JSON is YAML
        "task_spec_version": 1, "id": task_id, "suite": "synth",
        "description": f"needs GITHUB_TOKEN={SECRETS['token']} to fetch",
        "repo": {"url": url, "commit": commit},
        "setup": {"commands": setup},
        "validation": {"failing_command": "grep -qx good value.txt",
                       "passing_command": "grep -qx good value.txt"},
    }, indent=1))


@pytest.fixture
def leaky_run(pytester: pytest.Pytester) -> tuple[Path, str]:
    pack = Pack(pytester.path)
    root, commit = pack.root, pack.commit
    # unreachable (port 9 refuses at once): a SETUP_FAILED whose task.yaml still holds the URL
    _task(root, "leaky-url", f"https://alice:{SECRETS['repo']}@127.0.0.1:9/x.git", commit, [])
    _task(root, "leaky-setup", "../../_repos/tiny", commit, SETUP)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--agentbench-suite", "synth", "--agentbench-sandbox", "local",
        f"--junitxml={pytester.path / 'junit.xml'}",
    )
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 1, text  # two ERRORs (SETUP_FAILED)
    (run_dir,) = run_dirs(pytester.path / "reports" / "runs")
    return run_dir, text


def _leaks(run_dir: Path, junit: Path) -> list[str]:
    found = []
    for path in sorted([*run_dir.rglob("*"), junit]):
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text("utf-8", "replace").splitlines(), 1):
            found += [f"{path.relative_to(run_dir.parent)}:{number}: {name}: {line[:160]}"
                      for name, secret in SECRETS.items() if secret in line]
    return found


def _is_command_echo(leak: str) -> bool:
    """A `$ <command>` header line of logs/setup_*.txt (written by core/pipeline.py)."""
    where, _, rest = leak.partition(": ")
    return "/logs/" in where and rest.split(": ", 1)[1].startswith("$ ")


def test_no_file_of_the_run_holds_a_task_secret(
    pytester: pytest.Pytester, leaky_run: tuple[Path, str]
) -> None:
    run_dir, text = leaky_run
    for name in ("report.html", "report_summary.md", "run.json", "attempts.jsonl",
                 "events.jsonl"):
        assert (run_dir / name).is_file(), name
    for task_id in ("leaky-url", "leaky-setup"):
        assert (run_dir / "tasks" / task_id / "task.yaml").is_file()
    leaks = [x for x in _leaks(run_dir, pytester.path / "junit.xml") if not _is_command_echo(x)]
    assert not leaks, "\n".join(leaks)
    assert not [name for name, secret in SECRETS.items() if secret in text], text
    assert "[REDACTED]" in (run_dir / "tasks" / "leaky-url" / "task.yaml").read_text()
    records = (run_dir / "attempts.jsonl").read_text()
    assert "--token=[REDACTED]" in records  # the summary still says which command failed


def test_the_command_headers_of_the_setup_logs_are_redacted(
    pytester: pytest.Pytester, leaky_run: tuple[Path, str]
) -> None:
    run_dir, _ = leaky_run
    leaks = [x for x in _leaks(run_dir, pytester.path / "junit.xml") if _is_command_echo(x)]
    assert not leaks, "\n".join(leaks)
