#!/usr/bin/env python3
"""Writes results/report.md and the PNG plots from results.csv (bench/suite.py's output)."""

# The code is in bench/idembench/ (data, plots, flame, report). This file stays the command line
# bench/run-all.sh calls, with the same arguments.
from idembench.report import main  # bench/ is on sys.path: the script's folder

if __name__ == "__main__":
    main()
