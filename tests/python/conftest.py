"""Tier 3: the numpy API. test_*.py here run in one process and launch
`mpirun -np K python -m pytest ranks/` for several K; the files in ranks/
(check_*.py) run on every rank under mpirun."""

collect_ignore = ["ranks"]
