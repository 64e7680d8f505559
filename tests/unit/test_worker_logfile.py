"""worker/logfile.py: a worker's stderr file rotates by size; nothing written is lost."""

import os
import subprocess
import sys

from squall.worker.logfile import RotatingFile


def test_rotation_keeps_the_newest_files_and_every_byte_of_them(tmp_path):
    path = str(tmp_path / "w.log")
    f = RotatingFile(path, max_bytes=100, backups=2)
    for i in range(10):
        f.write(f"{i:02d}".encode() * 25)  # 50 bytes each: a file holds two writes
    f.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["w.log", "w.log.1", "w.log.2"]
    assert (tmp_path / "w.log").read_bytes() == b"08" * 25 + b"09" * 25
    assert (tmp_path / "w.log.1").read_bytes() == b"06" * 25 + b"07" * 25
    assert (tmp_path / "w.log.2").read_bytes() == b"04" * 25 + b"05" * 25


def test_a_chunk_of_many_lines_is_cut_after_a_newline_and_a_long_line_is_split(tmp_path):
    path = str(tmp_path / "w.log")
    f = RotatingFile(path, max_bytes=100, backups=10)
    lines = b"".join(f"line {i:02d} ".encode() + b"." * 30 + b"\n" for i in range(8))
    f.write(lines)  # 8 lines of 39 bytes in one chunk, as a busy pipe delivers them
    f.write(b"y" * 250)  # one line longer than the limit
    f.close()
    sizes = {p.name: p.stat().st_size for p in tmp_path.iterdir()}
    assert max(sizes.values()) <= 100, sizes
    order = sorted(sizes, key=lambda n: -int(n.rsplit(".", 1)[1]) if n != "w.log" else 0)
    text = b"".join((tmp_path / n).read_bytes() for n in order)
    assert text == lines + b"y" * 250  # nothing lost or reordered (all within the backups)
    assert [(tmp_path / n).read_bytes().count(b"\n") for n in order[:4]] == [2, 2, 2, 2]


def test_without_backups_the_file_starts_over(tmp_path):
    path = str(tmp_path / "w.log")
    f = RotatingFile(path, max_bytes=100, backups=0)
    for i in range(5):
        f.write(b"x" * 60)
    f.close()
    assert [p.name for p in tmp_path.iterdir()] == ["w.log"]
    assert os.path.getsize(path) == 60


CHILD = r"""
import os, sys, subprocess
from squall.worker.logfile import bound_log
finish = bound_log(4096, 1)
for i in range(200):
    print(f"py line {i:03d} " + "x" * 40, file=sys.stderr)
os.write(2, b"raw fd write\n")
subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('from a child\\n')"])
print("last words", file=sys.stderr, flush=True)
finish()
os._exit(3)
"""


def test_a_process_stderr_goes_through_the_rotation_up_to_its_last_words(tmp_path):
    log = tmp_path / "worker.log"
    with open(log, "ab") as fh:
        r = subprocess.run([sys.executable, "-c", CHILD], stderr=fh, stdout=fh, timeout=60)
    assert r.returncode == 3
    current, old = log.read_text(), (tmp_path / "worker.log.1").read_text()
    assert not (tmp_path / "worker.log.2").exists()
    # However the pipe's reads coalesced the writes, no file passes the limit.
    assert os.path.getsize(log) <= 4096 and os.path.getsize(tmp_path / "worker.log.1") <= 4096
    assert current.rstrip().endswith("last words")  # drained before os._exit
    assert "from a child" in current + old and "raw fd write" in current + old
