"""The `yuniplace` command: one entry point, one subcommand per process or tool; and the same commands as
a kubectl plugin (`kubectl-yuniplace` on PATH: `kubectl yuniplace status`), with kubectl's own flags."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from yuniplace import __version__
from yuniplace.cliargs import add_cluster_arguments
from yuniplace.controller import command as controller_command
from yuniplace.tools import explain, status, validate
from yuniplace.webhook import command as webhook_command
from yuniplace.webhook import ready as webhook_ready

PROG = "yuniplace"
KUBECTL_PROG = "kubectl yuniplace"
# kubectl's flags that take a value, as they may come before the command: `kubectl yuniplace --context prod status`.
KUBECTL_VALUE_FLAGS = ("--kubeconfig", "--context", "-n", "--namespace")


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Gang scheduling beside the stock kube-scheduler: reserves room for a whole application "
            "with placeholder pods, then swaps the real pods in, all or nothing."
        ),
    )
    parser.add_argument("--version", action="version", version=f"yuniplace {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    controller_command.register(commands)
    webhook_command.register(commands)
    webhook_ready.register(commands)
    validate.register(commands)
    status.register(commands)
    explain.register(commands)
    return parser


def commands_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The command's subcommands, by name, in the order they were registered."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def kubectl_flags() -> argparse.ArgumentParser:
    """kubectl's flags, read before the command as kubectl reads them before its own."""
    parser = argparse.ArgumentParser(prog=KUBECTL_PROG, add_help=False, allow_abbrev=False)
    add_cluster_arguments(
        parser, namespace_help="the namespace (default: the context's, as kubectl's)", all_namespaces=True
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return int(args.run(args))


def _command_at(argv: Sequence[str], commands: Sequence[str]) -> int | None:
    """Where the command is among kubectl's flags before it (a flag's value is no command)."""
    index = 0
    while index < len(argv):
        token = argv[index]
        if token in KUBECTL_VALUE_FLAGS:
            index += 2
            continue
        if not token.startswith("-") and token in commands:
            return index
        index += 1
    return None


def kubectl_main(argv: Sequence[str] | None = None) -> int:
    """`kubectl yuniplace ...`: kubectl runs `kubectl-yuniplace` with the words after `yuniplace`. Its
    flags `--kubeconfig`, `--context`, `-n/--namespace` and `-A/--all-namespaces` may come before the
    command or after it; a command that reads the cluster without -n or -A reads the context's
    namespace, as kubectl does. A command that reads no cluster (validate) leaves them aside."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(KUBECTL_PROG)
    at = _command_at(argv, list(commands_of(parser)))
    if at is None:
        if not any(flag in argv for flag in ("-h", "--help", "--version")):
            parser.print_help(sys.stderr)
            return 2
        parser.parse_args(argv)
        return 0
    given = kubectl_flags().parse_args(argv[:at])
    args = parser.parse_args(argv[at:])
    for name, value in vars(given).items():
        if value not in (None, False) and hasattr(args, name) and getattr(args, name) in (None, False):
            setattr(args, name, value)
    args.kubectl = True
    return int(args.run(args))
