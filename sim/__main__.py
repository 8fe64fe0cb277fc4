"""`python -m sim ...` is the `colosim` command."""

from sim.cli import main

raise SystemExit(main())
