"""Settings of the web application, read once from options and the environment.

| variable | meaning |
|---|---|
| ``SPIDERSITE_ADMIN_PASSWORD`` | the admin password (hashed at start; the clear text is not kept) |
| ``SPIDERSITE_ADMIN_PASSWORD_FILE`` | a file holding the password, or its hash |
| ``SPIDERSITE_SECRET_KEY`` / ``SPIDERSITE_SECRET_KEY_FILE`` | key that signs session cookies |
| ``SPIDERSITE_SCRAPYD_URL`` | run crawls as Scrapyd jobs there (else as local processes) |
| ``SPIDERSITE_SCRAPYD_USERNAME`` / ``SPIDERSITE_SCRAPYD_PASSWORD`` | Scrapyd's credentials |
| ``SPIDERSITE_SCRAPYD_PROJECT`` | Scrapyd project name (default ``spidersite``) |
| ``SPIDERSITE_COOKIE_SECURE`` | ``1``: session cookie only over HTTPS |
| ``SPIDERSITE_LOGIN_ATTEMPTS`` | login attempts per client address and minute (default 10) |
| ``SPIDERSITE_STEM_CACHE_MB`` | megabytes of the searcher's cache of stems (default 32) |

The ranking's parameters (:attr:`WebSettings.ranking`) are ``serve``'s options, the same
as ``query``'s and ``eval``'s (``--k1``, ``--fb-min-words`` …), not environment variables;
an application built for another WSGI server gives them to :meth:`WebSettings.from_env`::

    create_app(WebSettings.from_env(ranking=Params(k1=0.9, fb_min_words=1)))
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from werkzeug.security import generate_password_hash

from search import config
from search.ranking import DEFAULT as DEFAULT_RANKING
from search.ranking import Params

#: Prefixes of the hashes ``werkzeug.security.generate_password_hash`` produces.
HASH_PREFIXES = ("scrypt:", "pbkdf2:")


class SettingsError(ValueError):
    """A setting cannot be used (the message is meant for users)."""


def hash_password(password: str) -> str:
    return generate_password_hash(password)


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SettingsError(f"cannot read the {what} file {path}: {exc.strerror}") from None


def admin_password_hash(env: Mapping[str, str]) -> str | None:
    """The hash of the admin password, or None when no password is configured."""
    password = env.get("SPIDERSITE_ADMIN_PASSWORD")
    path = env.get("SPIDERSITE_ADMIN_PASSWORD_FILE")
    if not password and path:
        password = _read(path, "admin password")
        if not password:
            raise SettingsError(f"the admin password file {path} is empty")
    if not password:
        return None
    if password.startswith(HASH_PREFIXES) and "$" in password:
        return password  # already hashed (python -m search serve --hash-password)
    return hash_password(password)


def secret_key(env: Mapping[str, str], data_dir: Path) -> str | None:
    """The session signing key: from the environment, else kept in ``<data dir>/web-secret-key``
    (created once).  None when there is none and the data folder cannot be written (a
    read-only deployment): the caller then signs with a key of its own process."""
    key = env.get("SPIDERSITE_SECRET_KEY")
    if key:
        return key
    path = env.get("SPIDERSITE_SECRET_KEY_FILE")
    if path:
        key = _read(path, "secret key")
        if not key:
            raise SettingsError(f"the secret key file {path} is empty")
        return key
    stored = data_dir / "web-secret-key"
    if stored.exists():
        return stored.read_text(encoding="utf-8").strip()
    key = secrets.token_urlsafe(48)
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(stored, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process's won
        return stored.read_text(encoding="utf-8").strip()
    except OSError:  # a read-only data folder
        return None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(key + "\n")
    return key


def writable(folder: Path) -> bool:
    """Whether files can be made in *folder* (or, when it does not exist yet, in the
    nearest folder above it that does)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return os.access(folder, os.W_OK | os.X_OK)


def _positive(env: Mapping[str, str], name: str, default: int) -> int:
    """The whole number ≥ 1 of environment variable *name* (*default* when unset)."""
    raw = (env.get(name) or "").strip() or str(default)
    try:
        value = int(raw)
        if value < 1:
            raise ValueError
    except ValueError:
        raise SettingsError(f"{name} must be a whole number ≥ 1, not {raw!r}") from None
    return value


def _flag(env: Mapping[str, str], name: str) -> bool:
    """Environment variable *name* as a switch: ``1``, ``true``, ``yes`` or ``on`` (any
    case) is on; unset, empty, ``0``, ``false``, ``no`` or ``off`` is off."""
    raw = (env.get(name) or "").strip()
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("", "0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name} must be 1 or 0 (true/false, yes/no, on/off), not {raw!r}")


@dataclass(slots=True)
class WebSettings:
    database_url: str
    index_dir: Path
    data_dir: Path
    secret_key: str
    admin_password_hash: str | None = None
    scrapyd_url: str | None = None
    scrapyd_username: str | None = None
    scrapyd_password: str | None = None
    scrapyd_project: str = "spidersite"
    cookie_secure: bool = False
    per_page: int = 10
    login_attempts: int = 10
    #: Bytes of the searcher's cache of stems (``SPIDERSITE_STEM_CACHE_MB``).
    stem_cache_bytes: int = 32 << 20
    #: Whether files can be made in the data folder (not on a read-only deployment: see
    #: :meth:`read_only_notes`).
    data_writable: bool = True
    #: Whether :attr:`secret_key` is this process's own, made at start (no key set, none
    #: stored, and the data folder cannot be written).
    secret_key_ephemeral: bool = False
    #: The ranking's parameters of every search the application answers (``serve``'s
    #: ranking options, README "Ranking").
    ranking: Params = DEFAULT_RANKING

    def read_only_notes(self, database_read_only: bool) -> list[str]:
        """What cannot work on a data folder that cannot be written (none when it can),
        one line each, for ``serve`` to say as it starts."""
        if self.data_writable:
            return []
        cannot = ["crawls cannot be started from the admin (their sites file and log go there)"]
        if database_read_only:
            cannot.insert(
                0, "the admin cannot change servers and seeds (the database is read-only)"
            )
        notes = [
            f"the data folder {self.data_dir} cannot be written: searching works; "
            + "; ".join(cannot)
        ]
        if self.secret_key_ephemeral:
            notes.append(
                "session cookies are signed with a key of this process (none is stored in "
                "the data folder): logins end when it stops and are not shared with other "
                "processes; set SPIDERSITE_SECRET_KEY or SPIDERSITE_SECRET_KEY_FILE"
            )
        notes.append(
            "a logout ends the admin sessions of this process only (the session epoch "
            "cannot be replaced in the data folder): other processes serving it keep "
            "theirs; to end every session, change SPIDERSITE_SECRET_KEY and restart them"
        )
        return notes

    @classmethod
    def from_env(
        cls,
        data_dir: str | None = None,
        database_url: str | None = None,
        index_dir: str | None = None,
        env: Mapping[str, str] | None = None,
        ranking: Params = DEFAULT_RANKING,
    ) -> WebSettings:
        """The settings of the options given (storage; *ranking*, the ranking's
        parameters) and of the environment *env* (``os.environ`` by default)."""
        env = os.environ if env is None else env
        data = config.data_dir(data_dir or env.get("SPIDERSITE_DATA_DIR")).resolve()
        url = database_url or env.get("DATABASE_URL") or config.database_url(None, data)
        if url.startswith(("postgresql://", "postgres://")):
            url = "postgresql+psycopg://" + url.split("://", 1)[1]
        if index_dir:
            index = Path(index_dir)
        elif env.get("SPIDERSITE_INDEX_DIR"):
            index = Path(env["SPIDERSITE_INDEX_DIR"])
        else:
            index = data / "index"
        scrapyd = (env.get("SPIDERSITE_SCRAPYD_URL") or "").strip() or None
        if scrapyd and not scrapyd.startswith(("http://", "https://")):
            raise SettingsError(f"SPIDERSITE_SCRAPYD_URL {scrapyd!r} is not an http(s) URL")
        attempts = _positive(env, "SPIDERSITE_LOGIN_ATTEMPTS", 10)
        stem_cache_mb = _positive(env, "SPIDERSITE_STEM_CACHE_MB", 32)
        key = secret_key(env, data)
        return cls(
            database_url=url,
            index_dir=index.resolve(),
            data_dir=data,
            secret_key=key or secrets.token_urlsafe(48),
            secret_key_ephemeral=key is None,
            data_writable=writable(data),
            admin_password_hash=admin_password_hash(env),
            scrapyd_url=scrapyd.rstrip("/") + "/" if scrapyd else None,
            scrapyd_username=env.get("SPIDERSITE_SCRAPYD_USERNAME") or None,
            scrapyd_password=env.get("SPIDERSITE_SCRAPYD_PASSWORD") or None,
            scrapyd_project=env.get("SPIDERSITE_SCRAPYD_PROJECT") or "spidersite",
            cookie_secure=_flag(env, "SPIDERSITE_COOKIE_SECURE"),
            login_attempts=attempts,
            stem_cache_bytes=stem_cache_mb << 20,
            ranking=ranking,
        )
