"""``python -m search``: see :mod:`search.cli`."""

import sys

from search.cli import main

if __name__ == "__main__":
    sys.exit(main())
