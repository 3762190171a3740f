"""User-facing errors.

Anything a *user* can cause (a bad file, a wrong flag, a mismatched vocab) raises
`ClozeformerError` with one line that names the file / line / field. The CLI catches it,
prints ``error: <message>`` and exits with status 2; programming errors keep their
tracebacks.
"""

from __future__ import annotations


class ClozeformerError(Exception):
    """A clear, one-line error caused by user input (files, flags, data)."""

    exit_code = 2
