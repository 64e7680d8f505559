"""``Planted(path)``: unpickling it makes the directory ``path``, the proof that bytes from
the wire ran code. The security tests put it where a peer or a client could, then require
that the directory never appears."""

from __future__ import annotations

import os


class Planted:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))
