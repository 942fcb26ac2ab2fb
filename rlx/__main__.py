"""`python -m rlx ...` runs the rlx command line."""
from rlx.cli.main import main

raise SystemExit(main())
