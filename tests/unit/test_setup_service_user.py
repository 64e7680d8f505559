"""scripts/setup.sh --check-service-user USER: one warning line when USER (the systemd units'
user) cannot run the venv's interpreter, run on a copy of the script over a made-up venv (the
check alone: nothing is installed)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "setup.sh")
PYTHON = next((p for p in ("/usr/bin/python3.11", "/usr/bin/python3") if os.access(p, os.X_OK)),
              None)


def _other_user() -> str | None:
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        return None
    if os.geteuid() == 0 and shutil.which("runuser"):
        return "nobody"
    sudo = shutil.which("sudo")
    if sudo and subprocess.run([sudo, "-n", "-u", "nobody", "true"],
                               capture_output=True).returncode == 0:
        return "nobody"
    return None


USER = _other_user()
pytestmark = [
    pytest.mark.skipif(USER is None, reason="needs root (runuser) or passwordless sudo, and the "
                       "user nobody, to run commands as another user"),
    pytest.mark.skipif(PYTHON is None, reason="no /usr/bin/python3 to make a venv's link to"),
]


@pytest.fixture
def repo():
    """A copy of scripts/setup.sh in a directory every user may enter (pytest's tmp_path is
    owner-only), with no .venv yet."""
    top = tempfile.mkdtemp(prefix="squall-setup-")
    os.chmod(top, 0o755)
    os.makedirs(os.path.join(top, "scripts"))
    shutil.copy(SCRIPT, os.path.join(top, "scripts", "setup.sh"))
    os.makedirs(os.path.join(top, ".venv", "bin"))
    yield top
    shutil.rmtree(top)


def check(repo: str, user: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", os.path.join(repo, "scripts", "setup.sh"),
                           "--check-service-user", user],
                          capture_output=True, text=True, timeout=60)


def test_a_system_interpreter_passes(repo):
    os.symlink(PYTHON, os.path.join(repo, ".venv", "bin", "python"))
    done = check(repo, USER)
    assert done.returncode == 0, done.stderr
    assert f"service user {USER} can run .venv/bin/python ({os.path.realpath(PYTHON)})" \
        in done.stdout
    assert done.stderr == ""
    assert sorted(os.listdir(repo)) == [".venv", "scripts"]  # the check alone ran


def test_an_interpreter_behind_a_closed_directory_is_one_warning(repo):
    private = os.path.join(repo, "private")  # as /root is for pyenv's pythons
    os.makedirs(os.path.join(private, "bin"))
    os.chmod(private, 0o700)
    os.symlink(PYTHON, os.path.join(private, "bin", "python3.11"))
    os.symlink(os.path.join(private, "bin", "python3.11"), os.path.join(repo, ".venv", "bin", "python"))
    done = check(repo, USER)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith(f"[setup] WARNING: service user {USER} cannot run .venv/bin/python: "
                           f"{USER} cannot enter {private} (on the way to {private}/bin/python3.11)")
    assert f"rm -rf {repo}/.venv && PYTHON=" in line  # says what to do
    assert done.stdout == ""


def test_a_missing_user_is_named(repo):
    os.symlink(PYTHON, os.path.join(repo, ".venv", "bin", "python"))
    done = check(repo, "squall-no-such-user")
    assert done.returncode == 1
    assert "service user squall-no-such-user does not exist" in done.stderr


def test_the_option_needs_a_user(repo):
    done = subprocess.run(["bash", os.path.join(repo, "scripts", "setup.sh"), "--service-user"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--service-user needs a user name" in done.stderr
