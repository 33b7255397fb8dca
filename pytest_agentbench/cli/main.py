"""`agentbench doctor | gc | image build | report ... | gate ... | --version`.

Test runs go through pytest (`pytest --agentbench-suite NAME`); this covers the rest.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _doctor(args: argparse.Namespace) -> int:
    from pytest_agentbench.cli.doctor import run_doctor

    return run_doctor(build=not args.no_build)


def _gc(args: argparse.Namespace) -> int:
    from pytest_agentbench.sandbox.docker import DockerSandboxFactory

    removed = DockerSandboxFactory().gc(older_than_sec=args.older_than)
    print(f"agentbench gc: removed {removed} container(s)")
    return 0


def _image_build(args: argparse.Namespace) -> int:
    from pytest_agentbench.sandbox.image import ImageBuildError, ensure_image

    try:
        info = ensure_image(base=args.base, force=args.force)
    except ImageBuildError as exc:
        print(f"agentbench image: {exc}", file=sys.stderr)
        return 1
    state = "built" if info.built else "up to date"
    print(f"{info.name} {state} in {info.seconds:.1f}s (base {info.base})")
    print(f"  id:     {info.image_id}")
    print(f"  digest: {info.digest or '(none: built locally, not pushed)'}")
    print(f"  context hash: {info.context_hash}")
    return 0


class _VersionAction(argparse.Action):
    """`--version`: the harness version the records carry (git is asked only when called)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kw: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the harness version (as the run records carry it) and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from pytest_agentbench.version import harness_version

        print(f"agentbench {harness_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentbench", description=__doc__)
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True)
    doctor = sub.add_parser("doctor", help="check Docker, the runner image, disk, isolation")
    doctor.add_argument("--no-build", action="store_true", help="do not build a missing image")
    doctor.set_defaults(func=_doctor)
    gc = sub.add_parser("gc", help="remove leftover agentbench containers")
    gc.add_argument("--older-than", type=float, default=None, metavar="SEC")
    gc.set_defaults(func=_gc)
    image = sub.add_parser("image", help="runner image").add_subparsers(
        dest="image_cmd", required=True
    )
    build = image.add_parser("build", help="build the runner image (no-op when up to date)")
    build.add_argument("--base", choices=["auto", "registry", "local"], default="auto")
    build.add_argument("--force", action="store_true")
    build.set_defaults(func=_image_build)
    from pytest_agentbench.cli.cache import add_cache_command
    from pytest_agentbench.cli.validate import add_validate_command

    add_validate_command(sub)
    add_cache_command(sub)
    try:
        from pytest_agentbench.reporting.cli import add_report_commands
    except ImportError:
        pass
    else:
        add_report_commands(sub)
    try:
        from pytest_agentbench.cli.replay import add_replay_command
    except ImportError:
        pass
    else:
        add_replay_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("agentbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
