import sys

from gpuwarden.cli import main

sys.exit(main())
