"""``python -m sparsekern``: the ``sparsekern`` command (check / bench / profile / kron)."""
from .cli import main

raise SystemExit(main())
