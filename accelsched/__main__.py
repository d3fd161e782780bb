"""``python -m accelsched``: the same CLI as the ``accelsched`` console script, for environments without it on PATH."""

from accelsched.cli import main

if __name__ == "__main__":
    main()
