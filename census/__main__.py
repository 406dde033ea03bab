"""`python -m census` runs the command line."""

from census.cli import main

if __name__ == "__main__":  # worker processes re-import this module under another name
    main()
