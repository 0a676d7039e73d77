"""The options of the pipeline, below its command line: their declarations (declared), the
checks of their values (checks) and the Python API's argument checks (arguments). The command
line (pipeline/cli) and the API (pipeline/api.py) both build on this package; it imports
neither."""
