"""``python -m benchmarks [--quick] [--only NAME] [--json FILE] [--compare REV]``: see
:mod:`benchmarks.suite`."""

from benchmarks.suite import main

raise SystemExit(main())
