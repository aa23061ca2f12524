"""Installing and configuring the private Dovecot of the mail tests (tests/support/dovecot.py runs it).

Which binary (Debian's ``dovecot-imapd``, ``scripts/install_dovecot.sh``), which
users its processes and the mail run as, and the config it reads: its own port,
sockets, state, log and Maildirs in a temporary directory; nothing under
/etc/dovecot is read.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
from pathlib import Path

from tests.support.loopback import HOST

# Debian's package creates these system users; in root mode login processes run as
# the first, Dovecot's internals as the second, and mail is owned by 'nobody' (the
# docs advise against using the internal user for mail).
LOGIN_USER, INTERNAL_USER, MAIL_USER = "dovenull", "dovecot", "nobody"


class DovecotUnavailable(RuntimeError):
    """Dovecot is not installed (or cannot run here); the message says how to fix it."""


def dovecot_binary() -> str:
    path = shutil.which("dovecot") or ("/usr/sbin/dovecot" if os.access("/usr/sbin/dovecot", os.X_OK) else None)
    if path is None:
        raise DovecotUnavailable(
            "dovecot is not installed: run `sh scripts/install_dovecot.sh` (Debian's dovecot-imapd)")
    return path


def run_as() -> tuple[str, str, int, int]:
    """``(login user, internal user, mail uid, mail gid)``: the system users as root, else the caller throughout."""
    if os.geteuid() == 0:
        ensure_system_users()
        mail = pwd.getpwnam(MAIL_USER)
        return LOGIN_USER, INTERNAL_USER, mail.pw_uid, mail.pw_gid
    me = pwd.getpwuid(os.geteuid()).pw_name
    return me, me, os.geteuid(), os.getegid()


def ensure_system_users() -> None:
    """The package creates its users; recreate them if someone removed them."""
    for name in (LOGIN_USER, INTERNAL_USER):
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                           check=True, capture_output=True)


def config_text(root: Path, port: int, login_user: str, internal_user: str, mail_uid: int, mail_gid: int,
                oauth2_args: Path | None = None) -> str:
    """The whole config; with ``oauth2_args`` (``oauth2_text``'s file) bearer tokens log in too."""
    # Without root Dovecot can neither chroot nor hand sockets to other users or
    # groups: every process runs as the caller.
    as_root = os.geteuid() == 0
    internal_group = "" if as_root else f"default_internal_group = {grp.getgrgid(os.getegid()).gr_name}\n"
    chroot = "" if as_root else "chroot ="
    return f"""\
# Written by tests/support/dovecot_setup.py: a throw-away server for the test suite.
protocols = imap
listen = {HOST}
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login{" xoauth2 oauthbearer" if oauth2_args else ""}
# Tests log in with wrong passwords on purpose: answer at once.
auth_failure_delay = 0
default_internal_user = {internal_user}
default_login_user = {login_user}
{internal_group}first_valid_uid = {mail_uid}
first_valid_gid = {mail_gid}
mail_location = maildir:{root}/mail/%u
# Tests throw the data away: no need to fsync it.
mail_fsync = never
# One passwd-file per user: Dovecot stats a passwd-file at most once a second, so a
# user appended to a shared file could be refused for up to a second; a new file is
# read on its first lookup.
passdb {{
  driver = passwd-file
  mechanisms = plain login
  args = scheme=PLAIN {root}/users/%u
}}
{_oauth2_passdb(oauth2_args) if oauth2_args else ""}userdb {{
  driver = passwd-file
  args = {root}/users/%u
  default_fields = uid={mail_uid} gid={mail_gid} home={root}/home/%u
}}
protocol imap {{
  # Several pollers (and the test itself) may hold sessions of one user at once.
  mail_max_userip_connections = 100
}}
service imap-login {{
  inet_listener imap {{
    address = {HOST}
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
  {chroot}
}}
service anvil {{
  {chroot}
}}
"""


def _oauth2_passdb(args: Path) -> str:
    return f"""\
# Bearer tokens (XOAUTH2, OAUTHBEARER) are checked at the introspection endpoint only: a password never
# reaches it, nor a token the passwd-file.
passdb {{
  driver = oauth2
  mechanisms = xoauth2 oauthbearer
  args = {args}
}}
"""


def oauth2_text(introspection_url: str) -> str:
    """The oauth2 passdb's settings: every token is introspected (RFC 7662, POST) at ``introspection_url``."""
    return f"""\
# Written by tests/support/dovecot_setup.py.
introspection_mode = post
introspection_url = {introspection_url}
username_attribute = username
active_attribute = active
active_value = true
# A hung endpoint fails the login within the tests' socket timeouts.
timeout_msecs = 5000
"""
