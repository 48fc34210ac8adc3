import sys

from idv.cli import main

sys.exit(main())
