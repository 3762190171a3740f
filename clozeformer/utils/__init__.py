"""The bottom layer: what every other part uses, importing nothing else of clozeformer.

errors.py   ClozeformerError: a user's mistake as one `error:` line and exit status 2
io.py       atomic file and directory writes, output-path checks, JSON objects from user files
procs.py    N jobs at a time in workers that die with their parent; a heap that gives memory back
device.py   `--device` -> a checked torch device
configs.py  typed configs' metadata (help, min/max), range checks, the resolved config printed and saved
"""
