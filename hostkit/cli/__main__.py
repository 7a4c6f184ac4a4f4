"""``python -m hostkit.cli``: the ``hostkit`` command."""

from hostkit.cli.main import main

raise SystemExit(main())
