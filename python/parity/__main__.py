"""`python -m parity ARGS`: the parity CLI bundled in the package (as the `parity` command)."""
import sys

if sys.argv[1:2] == ["problem"]:  # benchmark problems are judged in Python (parity/problems.py)
    from .problems import main as problem_main
    sys.exit(problem_main(sys.argv[2:]))

from ._cli import main

sys.exit(main())
