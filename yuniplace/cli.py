"""The `yuniplace` command: one entry point, one subcommand per process or tool."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from yuniplace import __version__
from yuniplace.controller import command as controller_command
from yuniplace.tools import status, validate
from yuniplace.webhook import command as webhook_command
from yuniplace.webhook import ready as webhook_ready


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="yuniplace",
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return int(args.run(args))
