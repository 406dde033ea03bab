"""`python -m census` runs the command line."""

from census.cli import main

main()
