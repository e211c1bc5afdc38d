"""Where a command may write: never over what it reads, never over a special file.

``xprof report r.json -o r.json`` is one typo away from the usual command, and an atomic
write replaces whatever the path named: a FIFO, ``/dev/full``, the symlink itself. So an
output path is checked before any work is done: a path that is (or links to) one of the
command's input files is refused, and so is one that names anything but a plain file
(a FIFO, a device, a socket, a folder). A symlink to a plain file is written through: the
link stays, its target gets the new contents.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

from xprof.cli.app import fail


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def checked_output(path: str, inputs: Iterable[str] = (), flag: str = "-o") -> str:
    """``path`` resolved through its symlinks, ready to write; one line and exit 2 when it
    names one of ``inputs`` or something other than a plain file."""
    target = os.path.realpath(path)
    try:
        st = os.stat(target)
    except OSError:
        return target  # nothing there yet (the writer says why when it cannot create it)
    if not stat.S_ISREG(st.st_mode):
        fail(f"cannot write {path}: it is {kind_of(st.st_mode)}, and xprof writes plain files only "
             f"(give {flag} a file path)")
    for given in inputs:
        if _same_file(st, given):
            fail(f"refusing to write {path}: it is {given}, an input of this command "
                 f"(give {flag} another path)")
    return target


def _same_file(st: os.stat_result, path: str) -> bool:
    try:
        other = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (other.st_dev, other.st_ino)
