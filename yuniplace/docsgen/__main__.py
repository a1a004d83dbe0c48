"""`python -m yuniplace.docsgen [--write | --check]`: write the docs site's generated pages, or check that
they say what the code says (CI runs the check)."""

from __future__ import annotations

import argparse
import sys

from yuniplace.docsgen import PAGES, REGENERATE, stale, write


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m yuniplace.docsgen", description=__doc__)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="write the pages that changed")
    action.add_argument("--check", action="store_true", help="exit 1 if a page differs from the code (default)")
    args = parser.parse_args()
    if args.write:
        changed = write()
        print(f"wrote {', '.join(changed)}" if changed else f"all {len(PAGES)} generated pages are up to date")
        return 0
    outdated = stale()
    if outdated:
        print(
            f"generated docs out of date with the code: {', '.join(outdated)}; run {REGENERATE}",
            file=sys.stderr,
        )
        return 1
    print(f"all {len(PAGES)} generated pages say what the code says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
