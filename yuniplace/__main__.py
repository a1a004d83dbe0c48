"""`python -m yuniplace` runs the command-line interface."""

from yuniplace.cli import main

raise SystemExit(main())
