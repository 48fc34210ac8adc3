"""The ``idv`` console script's entry point, outside the idv package: importing anything in
the package runs idv/__init__.py first (numpy, the Cython modules: a few tenths of a second),
so that a Ctrl-C in those first moments would end in a traceback. Here it exits as a Ctrl-C
later does (idv.cli.main): quietly, with the shell's code for it, 130."""
import sys


def main():
    try:
        from idv.cli import main as run
    except KeyboardInterrupt:
        return 130
    return run()


if __name__ == "__main__":
    sys.exit(main())
