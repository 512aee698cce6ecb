"""`python -m parity ARGS`: the parity CLI bundled in the package (as the `parity` command)."""
import sys

from ._cli import main

sys.exit(main())
