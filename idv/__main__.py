import sys

try:
    from idv.cli import main
except KeyboardInterrupt:       # a Ctrl-C while idv and numpy load: as one later, quietly
    sys.exit(130)

sys.exit(main())
