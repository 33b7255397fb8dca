"""`agentbench doctor | gc | image build | variants | report ... | gate ... | --version`.

Test runs go through pytest (`pytest --agentbench-suite NAME`); this covers the rest.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


def _engines(parser: argparse.ArgumentParser, values: list[str] | None) -> list[Any]:
    """The --engine values as EngineSpecs (default: `default`); a usage error, one line, else."""
    from pytest_agentbench.sandbox.docker.engine_spec import check_unique, parse_engine

    try:
        specs = [parse_engine(value) for value in values or ["default"]]
        check_unique(specs)
    except ValueError as exc:
        parser.error(f"--engine: {exc}")
    return specs


def _doctor(args: argparse.Namespace) -> int:
    from pytest_agentbench.cli.doctor import run_doctor

    return run_doctor(build=not args.no_build, engines=_engines(args.parser, args.engine))


def _gc(args: argparse.Namespace) -> int:
    from pytest_agentbench.cli.doctor_engines import gc_engine
    from pytest_agentbench.sandbox.docker.engines import EngineUnreachable

    labels: dict[str, str] = {}
    for value in args.label or []:
        key, sep, val = value.partition("=")
        if not sep or not key:
            args.parser.error(f"--label {value!r}: expected KEY=VALUE")
        labels[key] = val
    failed = 0
    for spec in _engines(args.parser, args.engine):
        try:
            print(f"agentbench gc: {gc_engine(spec, args.older_than, args.force, labels)}")
        except (EngineUnreachable, ValueError) as exc:
            print(f"agentbench gc: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def _image_build(args: argparse.Namespace) -> int:
    from pytest_agentbench.sandbox.docker.image import ImageBuildError, ensure_image

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


def _variants(args: argparse.Namespace) -> int:
    """Bundled variants and built-in or installed agents, one line each."""
    from pytest_agentbench.agents.variants import list_agents, list_bundled_variants

    def show(title: str, rows: list[Any]) -> None:
        print(title)
        width = max((len(r.name) for r in rows), default=0)
        agent_width = max((len(r.agent) for r in rows), default=0)
        for r in rows:
            print(f"  {r.name:<{width}}  {r.agent:<{agent_width}}  {r.description}")

    show("Bundled variants (--agentbench-variant NAME): name, agent, description",
         [_with_install_state(row) for row in list_bundled_variants()])
    show("Agents (--agentbench-variant NAME, or `agent:` in a variant YAML): name, origin, "
         "description", list_agents())
    return 0


def _with_install_state(row: Any) -> Any:
    """A command agent's variant says whether its program is installed (and where)."""
    import dataclasses

    from pytest_agentbench.agents.variants import VariantError, load_variant
    from pytest_agentbench.core.program_install import installed_dirs

    if row.agent != "command":
        return row
    try:
        install = load_variant(row.name).params.get("install")
    except VariantError:
        return row
    if not isinstance(install, str):
        return row
    found = installed_dirs(install)
    state = (f"installed: {found[-1]}" if found
             else "not installed yet: installed by the first run, with the network")
    return dataclasses.replace(row, description=f"{row.description} [{state}]")


ENGINE_HELP = ("a Docker engine, repeatable (default: default, what the docker CLI uses): "
               "default, a Docker context name, or a unix://, tcp:// (TLS) or ssh:// URL, "
               "optionally ,slots=N ,tls=off ,transfer=bind|archive|auto")


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
    doctor.add_argument("--no-build", action="store_true",
                        help="do not build a missing image (nor copy it to another engine)")
    doctor.add_argument("--engine", action="append", metavar="SPEC", help=ENGINE_HELP)
    doctor.set_defaults(func=_doctor, parser=doctor)
    gc = sub.add_parser("gc", help="remove leftover agentbench containers and volumes "
                        "(never a live run's, unless --force)")
    gc.add_argument("--older-than", type=float, default=None, metavar="SEC")
    gc.add_argument("--force", action="store_true",
                    help="also remove the containers and volumes of runs still alive")
    gc.add_argument("--label", action="append", metavar="KEY=VALUE",
                    help="only what carries this label (repeatable), e.g. "
                         "agentbench.run_id=RUN")
    gc.add_argument("--engine", action="append", metavar="SPEC", help=ENGINE_HELP)
    gc.set_defaults(func=_gc, parser=gc)
    image = sub.add_parser("image", help="runner image").add_subparsers(
        dest="image_cmd", required=True
    )
    build = image.add_parser("build", help="build the runner image (no-op when up to date)")
    build.add_argument("--base", choices=["auto", "registry", "local"], default="auto")
    build.add_argument("--force", action="store_true")
    build.set_defaults(func=_image_build)
    variants = sub.add_parser("variants", help="list bundled variants and installed agents")
    variants.set_defaults(func=_variants)
    from pytest_agentbench.cli.cache import add_cache_command
    from pytest_agentbench.cli.harvest import add_harvest_command
    from pytest_agentbench.cli.validate import add_validate_command
    from pytest_agentbench.cli.view import add_view_command

    add_validate_command(sub)
    add_view_command(sub)
    add_cache_command(sub)
    add_harvest_command(sub)
    from pytest_agentbench.cli.task_new import add_task_command

    add_task_command(sub)
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
    # a command started as a background job of a shell without job control inherits SIGINT
    # ignored, and Ctrl-C or `kill -INT` would be lost (a harvest ran to its end): take it back,
    # as a pytest run does (run/sigterm.py)
    from pytest_agentbench.run.sigterm import sigint_as_interrupt

    sigint_as_interrupt()
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("agentbench: interrupted", file=sys.stderr)
        return 130
    except ModuleNotFoundError as exc:  # a report without the `reports` extra: one line
        from pytest_agentbench.reporting.extra import REPORT_MODULES, install_hint

        if (exc.name or "").partition(".")[0] not in REPORT_MODULES:
            raise
        print(f"agentbench: {install_hint([exc.name or ''])}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
