"""The web admin: login, CSRF, servers, seeds, the crawl log, the overview, local crawls."""

from __future__ import annotations

import html as html_lib
import io
import re
import subprocess
import time
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from search.models import Crawl, CrawlError, Document, Seed, Server
from search.sitesfile import ServerRegistry
from search.web import jobs, runners
from tests.conftest import Site

PASSWORD = "correct horse battery staple"

# The applications a test made: their local crawls are reaped after it, pass or fail, so
# that no crawl process outlives its test (a Popen collected while its process runs
# warns, and warnings are errors).
_APPS: list[Any] = []


@pytest.fixture(autouse=True)
def _reap_local_crawls() -> Iterator[None]:
    yield
    while _APPS:
        runner = _APPS.pop().extensions.get("spidersite.runner")
        for proc in list(getattr(runner, "processes", {}).values()):
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def make_app(data_dir: Path, database_url: str | None = None, **env: str) -> Any:
    from search.web import create_app
    from search.web.settings import WebSettings

    env.setdefault("SPIDERSITE_ADMIN_PASSWORD", PASSWORD)
    settings = WebSettings.from_env(str(data_dir), database_url, env=env)
    app = create_app(settings)
    _APPS.append(app)
    return app


def token(html: str) -> str:
    m = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert m, html
    return m.group(1)


def login(client: Any) -> str:
    html = client.get("/admin/login").get_data(as_text=True)
    resp = client.post("/admin/login", data={"password": PASSWORD, "csrf_token": token(html)})
    assert resp.status_code == 302, resp.get_data(as_text=True)
    return token(client.get("/admin/servers").get_data(as_text=True))


@pytest.fixture
def app(tmp_path: Path, db_url: str) -> Iterator[Any]:
    app = make_app(tmp_path / "data", db_url)
    yield app
    app.extensions["spidersite.engine"].dispose()


@pytest.fixture
def admin(app: Any) -> tuple[Any, str]:
    client = app.test_client()
    return client, login(client)


def engine_of(app: Any) -> Any:
    return app.extensions["spidersite.engine"]


ADMIN_GETS = [
    "/admin/",
    "/admin/servers",
    "/admin/servers/new",
    "/admin/servers/1",
    "/admin/crawls",
    "/admin/crawls/1",
    "/admin/crawls/1/log",
    "/admin/log",
]


def test_admin_pages_redirect_to_login(tmp_path: Path) -> None:
    client = make_app(tmp_path / "data").test_client()
    for path in ADMIN_GETS:
        resp = client.get(path)
        assert resp.status_code == 302, path
        assert resp.headers["Location"].startswith("/admin/login?next="), path
    # state-changing requests: no token → refused before anything else
    for path in ("/admin/servers/new", "/admin/crawls/start", "/admin/seeds/1/delete"):
        assert client.post(path, data={"url": "http://x.example/"}).status_code == 400


def test_login_password_csrf_and_logout(tmp_path: Path) -> None:
    client = make_app(tmp_path / "data").test_client()
    html = client.get("/admin/login?next=/admin/log").get_data(as_text=True)
    csrf = token(html)
    # no CSRF token, or a wrong one: refused even with the right password
    assert client.post("/admin/login", data={"password": PASSWORD}).status_code == 400
    bad = {"password": PASSWORD, "csrf_token": csrf + "x"}
    assert client.post("/admin/login", data=bad).status_code == 400
    wrong = client.post("/admin/login", data={"password": "guess", "csrf_token": csrf})
    assert wrong.status_code == 401 and "Wrong password" in wrong.get_data(as_text=True)
    assert client.get("/admin/").status_code == 302
    ok = client.post(
        "/admin/login", data={"password": PASSWORD, "csrf_token": csrf, "next": "/admin/log"}
    )
    assert ok.status_code == 302 and ok.headers["Location"] == "/admin/log"
    cookie = ok.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert client.get("/admin/").status_code == 200
    # the session's token changed at login
    new = token(client.get("/admin/").get_data(as_text=True))
    assert new != csrf
    assert client.post("/admin/logout", data={"csrf_token": csrf}).status_code == 400
    assert client.post("/admin/logout", data={"csrf_token": new}).status_code == 302
    assert client.get("/admin/").status_code == 302
    # an open redirect is not followed
    csrf = token(client.get("/admin/login").get_data(as_text=True))
    evil = {"password": PASSWORD, "csrf_token": csrf, "next": "//evil.example/"}
    assert client.post("/admin/login", data=evil).headers["Location"] == "/admin/"


def test_logout_ends_every_session_issued_before_it(tmp_path: Path) -> None:
    """A logout is checked on the server: a copy of the session cookie kept from before it
    is refused, in this process and in another one on the same data folder, and so are
    the other sessions logged in before it; a later login works."""
    app = make_app(tmp_path / "data")
    client = app.test_client()
    other = app.test_client()
    elsewhere = make_app(tmp_path / "data").test_client()  # another process's application
    login(other)
    login(elsewhere)
    new = login(client)
    kept = client.get_cookie("spidersite_session")
    assert kept is not None
    assert client.get("/admin/").status_code == 200
    assert client.post("/admin/logout", data={"csrf_token": new}).status_code == 302
    assert client.get("/admin/").status_code == 302
    client.set_cookie("spidersite_session", kept.value)  # the cookie kept from before
    assert client.get("/admin/").status_code == 302
    assert client.post("/admin/servers/new", data={"csrf_token": new}).status_code == 302
    assert other.get("/admin/").status_code == 302
    assert elsewhere.get("/admin/").status_code == 302
    login(client)
    assert client.get("/admin/").status_code == 200
    login(elsewhere)
    assert elsewhere.get("/admin/").status_code == 200


def test_a_logout_without_a_login_ends_no_session(tmp_path: Path) -> None:
    """Anyone can get a CSRF token (the login form's): a logout that was not logged in
    must not end the admin's session."""
    app = make_app(tmp_path / "data")
    admin_client, stranger = app.test_client(), app.test_client()
    login(admin_client)
    csrf = token(stranger.get("/admin/login").get_data(as_text=True))
    assert stranger.post("/admin/logout", data={"csrf_token": csrf}).status_code == 302
    assert admin_client.get("/admin/").status_code == 200


def test_wrong_password_keeps_next(tmp_path: Path) -> None:
    client = make_app(tmp_path / "data").test_client()
    first = client.get("/admin/crawls")
    assert first.headers["Location"] == "/admin/login?next=/admin/crawls"
    csrf = token(client.get(first.headers["Location"]).get_data(as_text=True))
    wrong = client.post(
        "/admin/login", data={"password": "guess", "csrf_token": csrf, "next": "/admin/crawls"}
    )
    assert wrong.status_code == 401
    assert 'name="next" value="/admin/crawls"' in wrong.get_data(as_text=True)
    right = client.post(
        "/admin/login", data={"password": PASSWORD, "csrf_token": csrf, "next": "/admin/crawls"}
    )
    assert right.headers["Location"] == "/admin/crawls"
    # what is re-rendered is escaped, and still checked when it is posted
    client = make_app(tmp_path / "data").test_client()
    evil = _login_response(client, password="x", next='//evil"><b>')
    assert 'value="//evil&#34;&gt;&lt;b&gt;"' in evil.get_data(as_text=True)
    assert _login_response(client, next='//evil"><b>').headers["Location"] == "/admin/"


def test_admin_disabled_without_password(tmp_path: Path) -> None:
    client = make_app(tmp_path / "data", SPIDERSITE_ADMIN_PASSWORD="").test_client()
    html = client.get("/admin/login").get_data(as_text=True)
    assert "The admin is disabled" in html
    csrf = token(client.get("/").get_data(as_text=True) + html) if "csrf_token" in html else ""
    resp = client.post("/admin/login", data={"password": "", "csrf_token": csrf})
    assert resp.status_code in (400, 403)


def test_password_file_with_hash_and_secret_key_file(tmp_path: Path) -> None:
    from search.web.settings import WebSettings, hash_password

    pw = tmp_path / "pw"
    pw.write_text(hash_password("s3cret") + "\n")
    settings = WebSettings.from_env(
        str(tmp_path / "data"), env={"SPIDERSITE_ADMIN_PASSWORD_FILE": str(pw)}
    )
    assert settings.admin_password_hash and "s3cret" not in settings.admin_password_hash
    key = tmp_path / "data" / "web-secret-key"
    assert key.stat().st_mode & 0o777 == 0o600
    again = WebSettings.from_env(str(tmp_path / "data"), env={})
    assert again.secret_key == settings.secret_key and again.admin_password_hash is None
    client = make_app(
        tmp_path / "data", SPIDERSITE_ADMIN_PASSWORD_FILE=str(pw), SPIDERSITE_ADMIN_PASSWORD=""
    ).test_client()
    csrf = token(client.get("/admin/login").get_data(as_text=True))
    resp = client.post("/admin/login", data={"password": "s3cret", "csrf_token": csrf})
    assert resp.status_code == 302


def server_form(**values: Any) -> dict[str, Any]:
    form = {"url": "http://docs.example/", "userobots": "on"}
    form.update(values)
    return form


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("url", "", "empty URL"),
        ("url", "notaurl", "is not an http, https, ftp, news or nntp URL"),
        ("maxhops", "-1", "must be ≥ 0"),
        ("maxhops", "2.5", "must be a whole number"),
        ("titleweight", "heavy", "must be a number"),
        ("bodyweight", "-0.5", "must be ≥ 0"),
        ("read_timeout", "0", "must be > 0"),
        ("period", "soon", "is not a duration"),
        ("max_period", "later", "is not a duration"),
        ("max_size", "huge", "is not a size"),
        ("max_pages", "-2", "must be ≥ 0"),
        ("proxy", "nohostport", 'is not "host:port"'),
        ("basic_auth", "nocolon", 'must be "user:password"'),
        ("language", "klingon", "is not a language"),
        ("allow", "([unclosed", "is not a valid regular expression"),
        ("concurrency", "0", "must be ≥ 1"),
        ("url", "file:///etc/", "is not an http, https, ftp, news or nntp URL"),
        ("url", "data:text/html,x", "is not an http, https, ftp, news or nntp URL"),
        ("url", "\x01file:///etc/", "contains control characters"),
        ("proxy", "file://proxy.example:3128", "is not an http or https proxy"),
    ],
)
def test_bad_server_field_is_named_and_not_stored(
    tmp_path: Path, field: str, value: str, message: str
) -> None:
    app = make_app(tmp_path / "data")
    client = app.test_client()
    csrf = login(client)
    resp = client.post(
        "/admin/servers/new", data={**server_form(**{field: value}), "csrf_token": csrf}
    )
    assert resp.status_code == 400
    html = resp.get_data(as_text=True)
    assert f"field '{field}'" in html
    error = re.search(rf'id="error-{field}">([^<]*)<', html)
    assert error and message in html_lib.unescape(error.group(1)), html
    with Session(engine_of(app)) as s:
        assert s.scalars(select(Server)).all() == []


def test_add_fix_edit_server_and_seeds(admin: tuple[Any, str], app: Any) -> None:
    client, csrf = admin
    bad = client.post("/admin/servers/new", data={**server_form(maxhops="-3"), "csrf_token": csrf})
    assert bad.status_code == 400
    # the form keeps what was typed
    assert 'value="-3"' in bad.get_data(as_text=True)
    good = client.post(
        "/admin/servers/new",
        data={
            **server_form(
                maxhops="3",
                period="12h",
                titleweight="5.5",
                basic_auth="me:pw",
                min_period="2h",
                max_period="30d",
                max_size="10MB",
                max_pages="250",
            ),
            "allow": "^http://docs\\.example/manual/\n\n/guide/",
            "csrf_token": csrf,
        },
    )
    assert good.status_code == 302
    with Session(engine_of(app)) as s:
        server = s.scalars(select(Server)).one()
        assert server.url == "http://docs.example/"
        config = server.admin_config
    assert config["maxhops"] == 3 and config["period"] == 43200
    assert config["titleweight"] == 5.5 and config["userobots"] is True
    # every field of the sites file, the adaptive re-crawl's bounds and the caps included
    assert config["min_period"] == 7200 and config["max_period"] == 30 * 86400
    assert config["max_size"] == 10 << 20 and config["max_pages"] == 250
    assert config["allow"] == ["^http://docs\\.example/manual/", "/guide/"]
    page = client.get(good.headers["Location"]).get_data(as_text=True)
    assert "me:pw" not in page  # the password is never shown
    # edit: a bad value keeps the stored one
    edit = client.post(
        good.headers["Location"],
        data={**server_form(maxhops="x"), "csrf_token": csrf},
    )
    assert edit.status_code == 400
    with Session(engine_of(app)) as s:
        assert s.scalars(select(Server)).one().admin_config["maxhops"] == 3
    edit = client.post(
        good.headers["Location"],
        data={**server_form(maxhops="5"), "csrf_token": csrf},
    )
    assert edit.status_code == 302
    with Session(engine_of(app)) as s:
        server = s.scalars(select(Server)).one()
        assert server.admin_config["maxhops"] == 5
        assert server.admin_config["basic_auth"] == "me:pw"  # kept when left empty
        assert "allow" not in server.admin_config
        server_id = server.id
    # a second server with the same URL is refused
    dup = client.post("/admin/servers/new", data={**server_form(), "csrf_token": csrf})
    assert dup.status_code == 400 and "exists already" in dup.get_data(as_text=True)

    seeds = f"/admin/servers/{server_id}/seeds"
    assert client.post(seeds, data={"url": "http://docs.example/a.html"}).status_code == 400
    for bad_seed, message in [
        ("nope", "is not an http, https, ftp, news or nntp URL"),
        ("http://other.example/", "is not on the server"),
    ]:
        resp = client.post(seeds, data={"url": bad_seed, "csrf_token": csrf})
        assert resp.status_code == 400 and message in resp.get_data(as_text=True)
    assert (
        client.post(
            seeds, data={"url": "http://docs.example/a.html", "csrf_token": csrf}
        ).status_code
        == 302
    )
    again = client.post(seeds, data={"url": "http://docs.example/a.html", "csrf_token": csrf})
    assert again.status_code == 400 and "is a seed already" in again.get_data(as_text=True)
    with Session(engine_of(app)) as s:
        seed = s.scalars(select(Seed)).one()
        assert seed.server_id == server_id
    assert "http://docs.example/a.html" in client.get(f"/admin/servers/{server_id}").get_data(
        as_text=True
    )

    # the sites file the admin writes validates, and carries every field
    path, _ = jobs.write_sites_file(engine_of(app), app.config["SPIDERSITE"].data_dir / "admin")
    data = tomllib.loads(path.read_text())
    server = data["server"][0]
    assert server["seeds"] == ["http://docs.example/a.html"]
    assert server["maxhops"] == 5 and server["basic_auth"] == "me:pw"
    registry = ServerRegistry()
    registry.load_file(path)
    assert [s.url for s in registry] == ["http://docs.example/"]

    resp = client.post(f"/admin/seeds/{seed.id}/delete", data={"csrf_token": csrf})
    assert resp.status_code == 302
    with Session(engine_of(app)) as s:
        assert s.scalars(select(Seed)).all() == []
    assert client.get("/admin/servers").status_code == 200


def test_sitemaps_field_in_the_admin(admin: tuple[Any, str], app: Any) -> None:
    client, csrf = admin
    url = "http://docs.example/"
    elsewhere = client.post(
        "/admin/servers/new",
        data={**server_form(), "sitemaps": "http://other.example/m.xml", "csrf_token": csrf},
    )
    assert elsewhere.status_code == 400
    assert "is not on the server" in elsewhere.get_data(as_text=True)
    listed = client.post(
        "/admin/servers/new",
        data={**server_form(), "sitemaps": f"{url}m.xml\n{url}n.xml.gz", "csrf_token": csrf},
    )
    assert listed.status_code == 302
    page = client.get(listed.headers["Location"]).get_data(as_text=True)
    assert f'name="sitemaps" rows="2">{url}m.xml\n{url}n.xml.gz</textarea>' in page
    edit = client.post(
        listed.headers["Location"],
        data={**server_form(), "sitemaps": "false", "csrf_token": csrf},
    )
    assert edit.status_code == 302
    with Session(engine_of(app)) as s:
        assert s.scalars(select(Server)).one().admin_config["sitemaps"] is False
    path, _ = jobs.write_sites_file(engine_of(app), app.config["SPIDERSITE"].data_dir / "admin")
    assert tomllib.loads(path.read_text())["server"][0]["sitemaps"] is False
    registry = ServerRegistry()
    registry.load_file(path)
    assert [s.sitemaps for s in registry] == [False]


def test_ftp_and_news_servers_and_seeds(admin: tuple[Any, str], app: Any) -> None:
    # The admin takes every scheme a crawl fetches: ftp, news and nntp servers and seeds
    # go into the sites file it writes, which the crawl reads back.
    client, csrf = admin
    servers = {
        "ftp://files.example/": "ftp://files.example/pub/docs/",
        "news://news.example/": "news://news.example/comp.lang.python",
        "nntp://nntp.example:1119/": "nntp://nntp.example:1119/alt.test",
    }
    for url, seed in servers.items():
        resp = client.post("/admin/servers/new", data={**server_form(url=url), "csrf_token": csrf})
        assert resp.status_code == 302, resp.get_data(as_text=True)
        seeds = resp.headers["Location"] + "/seeds"
        resp = client.post(seeds, data={"url": seed, "csrf_token": csrf})
        assert resp.status_code == 302, resp.get_data(as_text=True)
    path, _ = jobs.write_sites_file(engine_of(app), app.config["SPIDERSITE"].data_dir / "admin")
    written = {s["url"]: s["seeds"] for s in tomllib.loads(path.read_text())["server"]}
    assert written == {url: [seed] for url, seed in servers.items()}
    registry = ServerRegistry()
    registry.load_file(path)
    assert {s.url: list(s.seeds) for s in registry} == {u: [seed] for u, seed in servers.items()}


def test_sites_toml_escapes_strings(tmp_path: Path) -> None:
    text = jobs.sites_toml(
        [
            (
                "http://x.example/",
                {
                    "allow": ['^http://x\\.example/"quoted"/', "é\t€"],
                    "titleweight": 2.5,
                    "userobots": False,
                    "language": None,
                },
                ["http://x.example/ä?q=1"],
            )
        ]
    )
    data = tomllib.loads(text)["server"][0]
    assert data["allow"] == ['^http://x\\.example/"quoted"/', "é\t€"]
    assert data["titleweight"] == 2.5 and data["userobots"] is False and "language" not in data


def test_crawl_log_overview_and_crawl_pages(admin: tuple[Any, str], app: Any) -> None:
    client, _ = admin
    now = datetime.now(UTC)
    with Session(engine_of(app)) as s, s.begin():
        a = Server(url="http://a.example/", settings={}, net_errors=0, disabled=False)
        b = Server(url="http://b.example/", settings={}, net_errors=0, disabled=False)
        s.add_all([a, b])
        s.flush()
        crawl = Crawl(
            spider="site",
            args={},
            started_at=now,
            finished_at=now,
            finish_reason="finished",
            stats={"site/pages": 7},
        )
        s.add(crawl)
        s.flush()
        s.add_all(
            [
                CrawlError(
                    server_id=a.id,
                    crawl_id=crawl.id,
                    url="http://a.example/x",
                    time=now,
                    kind="http",
                    message="HTTP 404",
                ),
                CrawlError(
                    server_id=a.id,
                    url="http://a.example/<script>",
                    time=now,
                    kind="timeout",
                    message="<b>slow</b>",
                ),
                CrawlError(
                    server_id=b.id,
                    url="http://b.example/y",
                    time=now,
                    kind="http",
                    message="HTTP 500",
                ),
            ]
        )
        s.add(
            Document(
                url="http://a.example/x.html",
                server_id=a.id,
                kind="page",
                status=200,
                content_type="text/html",
                size=1234,
                crawled_at=now,
            )
        )
        a_id = a.id
        crawl_id = crawl.id
    html = client.get("/admin/log").get_data(as_text=True)
    assert "3 errors" in html and "<b>slow</b>" not in html and "&lt;b&gt;slow" in html
    html = client.get(f"/admin/log?server={a_id}").get_data(as_text=True)
    assert "2 errors" in html and "b.example/y" not in html
    html = client.get(f"/admin/log?server={a_id}&kind=http").get_data(as_text=True)
    assert "1 errors" in html and "HTTP 404" in html
    assert "HTTP 500" in client.get("/admin/log?kind=http").get_data(as_text=True)
    assert client.get("/admin/log?server=x' OR 1=1 --&kind=';DROP").status_code == 200
    # Digits that are no database id are no filter: never a database error.
    for odd in ("server=%C2%B2", "server=99999999999999999999", "page=99999999999999999999"):
        assert client.get(f"/admin/log?{odd}").status_code == 200, odd
    assert client.get("/admin/crawls/99999999999999999999").status_code == 404
    assert client.get("/admin/servers/99999999999999999999").status_code == 404
    html = client.get("/admin/").get_data(as_text=True)
    assert "http://a.example/" in html and 'id="by-status"' in html
    assert "Documents crawled per hour" in html and html.count("<rect ") == 1
    assert "<td>text/html</td><td>1</td>" in html
    html = client.get("/admin/crawls").get_data(as_text=True)
    assert f"#{crawl_id}" in html and "finished" in html
    html = client.get(f"/admin/crawls/{crawl_id}").get_data(as_text=True)
    assert "site/pages" in html and "7" in html
    html = client.get(f"/admin/crawls/{crawl_id}/log").get_data(as_text=True)
    assert "not started from the admin" in html
    assert client.get("/admin/crawls/99999").status_code == 404
    # A crawl run from the command line wrote its log in the data folder: shown.
    logs = app.config["SPIDERSITE"].data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "crawl-cli.log").write_text("Spider closed (finished) <from the command line>\n")
    with Session(engine_of(app)) as s, s.begin():
        cli = Crawl(spider="site", args={}, started_at=now, log_file=str(logs / "crawl-cli.log"))
        s.add(cli)
        s.flush()
        cli_id = cli.id
    html = client.get(f"/admin/crawls/{cli_id}/log").get_data(as_text=True)
    assert "Spider closed (finished) &lt;from the command line&gt;" in html


def _crawl_lists(client: Any) -> tuple[str, str]:
    """The Crawls page's lists: the running crawls' table, the finished ones'."""
    html = client.get("/admin/crawls").get_data(as_text=True)
    running = html.split('id="running"')[1].split("</table>")[0]
    finished = html.split('id="finished"')[1].split("</table>")[0]
    return running, finished


def test_a_dead_crawl_run_from_the_command_line_is_shown_abandoned(
    admin: tuple[Any, str], app: Any, db_url: str
) -> None:
    """A crawl run from the command line has no job the admin can ask about: killed
    before it recorded its end, its row stayed unfinished, and the Crawls page listed it
    as running until the next crawl started.  The admin closes it as a crawl starting
    would (its crawl lock free: ``abandoned``, the admin its finder); a crawl running
    (its lock held, by another connection or process) stays running."""
    from search import db
    from search.store import DocumentStore

    client, _ = admin
    crawls = db.connect(db_url)  # the crawls' own engine, apart from the admin's
    live = DocumentStore(crawls)
    dead = DocumentStore(crawls)
    try:
        now = datetime.now(UTC)
        live_id = live.start_crawl("site", {"seeds": "live"}, now)
        dead_id = dead.start_crawl("site", {"seeds": "dead"}, now)
        assert dead.abandoned == []  # the live crawl's lock is held
        assert dead.crawl_locks is not None
        dead.crawl_locks.release()  # its process died: the lock goes, no end recorded

        running, finished = _crawl_lists(client)
        assert f"#{live_id}<" in running and f"#{live_id}<" not in finished
        assert f"#{dead_id}<" in finished and f"#{dead_id}<" not in running
        assert "abandoned" in finished
        with Session(engine_of(app)) as s:
            rows = {c.id: c for c in s.scalars(select(Crawl))}
        assert rows[dead_id].finish_reason == "abandoned"
        assert rows[dead_id].finished_at is not None
        assert rows[dead_id].stats == {"abandoned_found_by": jobs.FOUND_BY_ADMIN}
        assert rows[live_id].finished_at is None and rows[live_id].finish_reason is None
        html = client.get(f"/admin/crawls/{live_id}").get_data(as_text=True)
        assert runners.RUNNING in html and "abandoned" not in html
        # The live crawl records its end: its own, not the admin's.
        live.finish_crawl("finished", {"site/pages": 3}, datetime.now(UTC))
        running, finished = _crawl_lists(client)
        assert "No crawl running." in running and f"#{live_id}<" in finished
        with Session(engine_of(app)) as s:
            assert s.get(Crawl, live_id).stats == {"site/pages": 3}  # type: ignore[union-attr]
    finally:
        for store in (live, dead):
            if store.crawl_locks is not None:
                store.crawl_locks.release()
        crawls.dispose()


def test_the_admin_closes_only_dead_crawls_without_a_job(db_url: str) -> None:
    """The admin closes the rows of dead crawls without a job only: a crawl it started
    (its job set, a placeholder too) is its runner's to follow, and a SQLite database in
    memory has no crawl lock, so none of its rows is closed."""
    from search import db

    now = datetime.now(UTC)
    for url in (db_url, "sqlite://"):
        engine = db.connect(url)
        try:
            with Session(engine, expire_on_commit=False) as s, s.begin():
                cli = Crawl(spider="site", args={}, started_at=now, stats={})
                job = Crawl(spider="site", args={}, started_at=now, stats={}, job_id="a")
                placeholder = Crawl(
                    spider="site",
                    args={"placeholder": True},
                    started_at=now,
                    stats={},
                    job_id="b",
                )
                s.add_all([cli, job, placeholder])
            closed = jobs.close_dead_cli_crawls(engine, now)
            with Session(engine) as s:
                reasons = {c.id: c.finish_reason for c in s.scalars(select(Crawl))}
        finally:
            engine.dispose()
        if url == "sqlite://":
            assert closed == [] and set(reasons.values()) == {None}
        else:
            assert closed == [cli.id]
            assert reasons == {cli.id: "abandoned", job.id: None, placeholder.id: None}


def test_start_topic_needs_words_and_server(admin: tuple[Any, str]) -> None:
    client, csrf = admin
    resp = client.post(
        "/admin/crawls/start", data={"mode": "normal", "csrf_token": csrf}, follow_redirects=True
    )
    assert "no server to crawl" in resp.get_data(as_text=True)
    resp = client.post(
        "/admin/crawls/start", data={"mode": "topic", "csrf_token": csrf}, follow_redirects=True
    )
    assert "give one or more words" in resp.get_data(as_text=True)
    resp = client.post(
        "/admin/crawls/start",
        data={"mode": "topic", "topic": "x", "topic_threshold": "-1", "csrf_token": csrf},
        follow_redirects=True,
    )
    assert "topic_threshold: must be a number ≥ 0" in resp.get_data(as_text=True)


def wait_finished(client: Any, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        html = client.get("/admin/crawls").get_data(as_text=True)
        running = html.split('id="running"')[1].split("</table>")[0]
        if "No crawl running." in running:
            return html
        time.sleep(0.5)
    raise AssertionError("the crawl did not finish")


def test_local_crawl_from_the_admin(tmp_path: Path, site: Site) -> None:
    site.page("/", "Start page", "about quokkas", ["/q.html", "/out.html"])
    site.page("/q.html", "Quokka", "The quokka smiles at tourists", [])
    site.page("/out.html", "Out", "beyond the hop limit", ["/far.html"])
    site.page("/far.html", "Far", "never reached wombat", [])
    app = make_app(tmp_path / "data")
    client = app.test_client()
    csrf = login(client)
    resp = client.post(
        "/admin/servers/new",
        data={"url": site.url, "maxhops": "1", "userobots": "on", "csrf_token": csrf},
    )
    assert resp.status_code == 302
    server_id = int(resp.headers["Location"].rsplit("/", 1)[1])
    resp = client.post(
        f"/admin/servers/{server_id}/seeds", data={"url": site.url, "csrf_token": csrf}
    )
    assert resp.status_code == 302
    resp = client.post(
        "/admin/crawls/start",
        data={"mode": "normal", "server": str(server_id), "csrf_token": csrf},
        follow_redirects=True,
    )
    assert "Crawl started" in resp.get_data(as_text=True)
    html = wait_finished(client)
    finished = html.split('id="finished"')[1]
    assert "finished" in finished
    with Session(engine_of(app)) as s:
        crawl = s.scalars(select(Crawl)).one()  # the placeholder was merged into it
    assert crawl.job_id and crawl.finish_reason == "finished", crawl.finish_reason
    assert crawl.stats.get("site/pages") == 3
    # The crawl is finished once its statistics are stored, in the spider_closed signal;
    # Scrapy writes its last log line after that, so read the log once the process is gone.
    app.extensions["spidersite.runner"].wait(60)
    log = client.get(f"/admin/crawls/{crawl.id}/log").get_data(as_text=True)
    assert "Spider closed (finished)" in log
    data = client.get("/api/search?q=quokka").get_json()
    assert [h["url"] for h in data["hits"]][:1] == [site.url + "q.html"]
    assert client.get("/api/search?q=wombat").get_json()["total"] == 0


def test_stop_a_local_crawl_and_start_it_again_to_resume_it(tmp_path: Path, site: Site) -> None:
    """A crawl stopped from the admin (Scrapy's graceful shutdown) and started again with
    the same servers and seeds resumes, as the same ``scrapy crawl`` command does: the
    pages it stored are not fetched again."""
    # A tree of slow pages: a few of its links are known at any time, so that a stop
    # leaves some to fetch (Scrapy's graceful shutdown finishes the downloads begun).
    site.page("/", "Slow start", "slow pages", ["/p0.html"])
    for i in range(14):
        children = [f"/p{c}.html" for c in (2 * i + 1, 2 * i + 2) if c < 14]
        site.page(f"/p{i}.html", "Slow page", f"a slow page number{i}", children, delay=0.3)
    app = make_app(tmp_path / "data")
    client = app.test_client()
    csrf = login(client)
    form = {"url": site.url, "userobots": "on", "concurrency": "1", "csrf_token": csrf}
    assert client.post("/admin/servers/new", data=form).status_code == 302
    client.post("/admin/crawls/start", data={"mode": "normal", "csrf_token": csrf})
    engine = engine_of(app)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait for the spider's own row
        client.get("/admin/crawls")  # reconciles the placeholder with the spider's row
        with Session(engine) as s:
            # Between that page and this read the spider may have written its row beside
            # the placeholder: wait for the next reconciliation then.
            rows = s.scalars(select(Crawl)).all()
        crawl = rows[0]
        if len(rows) == 1 and not crawl.args.get("placeholder") and len(site.paths()) > 2:
            break
        time.sleep(0.3)
    resp = client.post(
        f"/admin/crawls/{crawl.id}/stop", data={"csrf_token": csrf}, follow_redirects=True
    )
    assert f"Stopping crawl #{crawl.id}" in resp.get_data(as_text=True)
    wait_finished(client, 60)
    with Session(engine) as s:
        crawl = s.get(Crawl, crawl.id)
        assert crawl is not None
    assert crawl.finish_reason == "shutdown"
    app.extensions["spidersite.runner"].wait(60)
    with Session(engine) as s:
        stored = set(s.scalars(select(Document.url)))
    assert site.url in stored and len(stored) < 15
    site.hits.clear()
    resp = client.post(
        "/admin/crawls/start", data={"mode": "normal", "csrf_token": csrf}, follow_redirects=True
    )
    assert "Crawl started" in resp.get_data(as_text=True)
    time.sleep(1)  # the placeholder's crawl shows as running until the spider's row is in
    wait_finished(client, 90)
    app.extensions["spidersite.runner"].wait(60)
    with Session(engine) as s:
        again = s.scalars(select(Crawl).order_by(Crawl.id.desc())).first()
        urls = set(s.scalars(select(Document.url)))
    assert again is not None and again.id != crawl.id
    assert again.finish_reason == "finished", again.finish_reason
    assert again.stats.get("resume/requests", 0) > 0, again.stats
    assert len(urls) == 15
    fetched = {site.url + path.lstrip("/") for path in site.paths()}
    assert not fetched & stored, fetched & stored  # nothing stored was fetched again


def test_topic_crawl_from_the_admin(tmp_path: Path, site: Site) -> None:
    site.page("/", "Marsupials", "quokka quokka wallaby", ["/q.html", "/other.html"])
    site.page("/q.html", "Quokka", "The quokka is a small marsupial; quokka quokka", [])
    site.page("/other.html", "Cars", "engines and wheels and brakes", [])
    app = make_app(tmp_path / "data")
    client = app.test_client()
    csrf = login(client)
    form = {"url": site.url, "userobots": "on", "csrf_token": csrf}
    assert client.post("/admin/servers/new", data=form).status_code == 302
    start = {"mode": "topic", "topic": "quokka", "topic_threshold": "1", "csrf_token": csrf}
    resp = client.post("/admin/crawls/start", data=start, follow_redirects=True)
    assert "Crawl started" in resp.get_data(as_text=True)
    wait_finished(client)
    with Session(engine_of(app)) as s:
        crawl = s.scalars(select(Crawl)).one()
    assert crawl.finish_reason == "finished"
    assert crawl.args["topic"] == "quokka" and crawl.args["topic_threshold"] == "1.0"
    urls = {h["url"] for h in client.get("/api/search?q=quokka").get_json()["hits"]}
    assert site.url + "q.html" in urls
    assert client.get("/api/search?q=engines").get_json()["total"] == 0
    app.extensions["spidersite.runner"].wait(60)


# -- hardening ----------------------------------------------------------------------------


def test_session_cookie_flags(tmp_path: Path) -> None:
    client = make_app(tmp_path / "data").test_client()
    first = client.get("/admin/login")  # the CSRF token starts the session
    for cookie in (first.headers["Set-Cookie"], _login_response(client).headers["Set-Cookie"]):
        assert cookie.startswith("spidersite_session=")
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
    secure = make_app(tmp_path / "data", SPIDERSITE_COOKIE_SECURE="1").test_client()
    assert "Secure" in secure.get("/admin/login").headers["Set-Cookie"]


def _login_response(client: Any, password: str = PASSWORD, **extra: str) -> Any:
    csrf = token(client.get("/admin/login").get_data(as_text=True))
    return client.post("/admin/login", data={"password": password, "csrf_token": csrf, **extra})


@pytest.mark.parametrize(
    "target",
    [
        "//evil.example/",
        "/\\evil.example/",
        "/\\/evil.example/",
        "\\\\evil.example/",
        "/\t/evil.example/",
        "/\n/evil.example/",
        " //evil.example/",
        "https://evil.example/",
        "HTTPS://evil.example/admin/",
        "javascript:alert(1)",
        "data:text/html,x",
        "evil.example",
        "admin/log",
        "",
    ],
)
def test_no_open_redirect_after_login(tmp_path: Path, target: str) -> None:
    client = make_app(tmp_path / "data").test_client()
    resp = _login_response(client, next=target)
    assert resp.status_code == 302 and resp.headers["Location"] == "/admin/"


def test_login_redirects_to_a_local_path(tmp_path: Path) -> None:
    client = make_app(tmp_path / "data").test_client()
    target = "/admin/log?server=1&kind=http"
    assert _login_response(client, next=target).headers["Location"] == target


def test_login_attempts_are_rate_limited_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(tmp_path / "data", SPIDERSITE_LOGIN_ATTEMPTS="3")
    client = app.test_client()
    caplog.set_level("INFO", logger="search.web.admin")
    for _ in range(3):
        assert _login_response(client, "guess").status_code == 401
    refused = _login_response(client, "guess")
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert "Too many login attempts" in refused.get_data(as_text=True)
    # the right password is refused too while the address is over the limit
    assert _login_response(client).status_code == 429
    assert client.get("/admin/").status_code == 302
    # another address has its own count
    other = app.test_client()
    csrf = token(other.get("/admin/login").get_data(as_text=True))
    resp = other.post(
        "/admin/login",
        data={"password": PASSWORD, "csrf_token": csrf},
        environ_base={"REMOTE_ADDR": "192.0.2.7"},
    )
    assert resp.status_code == 302
    messages = [r.getMessage() for r in caplog.records if r.name == "search.web.admin"]
    assert messages.count("admin login from 127.0.0.1 failed: wrong password") == 3
    over = [m for m in messages if "over the limit" in m]
    assert len(over) == 1 and over[0].startswith("admin login attempts from 127.0.0.1")
    assert "admin login from 192.0.2.7" in messages
    assert all(r.args for r in caplog.records if r.name == "search.web.admin")  # %-style


def test_login_attempts_setting_is_checked(tmp_path: Path) -> None:
    from search.web.settings import SettingsError, WebSettings

    for bad in ("0", "-1", "ten"):
        with pytest.raises(SettingsError, match="SPIDERSITE_LOGIN_ATTEMPTS"):
            WebSettings.from_env(str(tmp_path), env={"SPIDERSITE_LOGIN_ATTEMPTS": bad})


def test_cookie_secure_setting_is_read_and_checked(tmp_path: Path) -> None:
    from search.web.settings import SettingsError, WebSettings

    for on in ("1", "true", "TRUE", "yes", "On"):
        env = {"SPIDERSITE_COOKIE_SECURE": on}
        assert WebSettings.from_env(str(tmp_path), env=env).cookie_secure, on
    for off in ("", "0", "false", "No", "off"):
        env = {"SPIDERSITE_COOKIE_SECURE": off}
        assert not WebSettings.from_env(str(tmp_path), env=env).cookie_secure, off
    with pytest.raises(SettingsError, match="SPIDERSITE_COOKIE_SECURE"):
        WebSettings.from_env(str(tmp_path), env={"SPIDERSITE_COOKIE_SECURE": "secure"})


def test_stem_cache_setting_is_read_and_checked(tmp_path: Path) -> None:
    from search.web.settings import SettingsError, WebSettings

    assert WebSettings.from_env(str(tmp_path), env={}).stem_cache_bytes == 32 << 20
    settings = WebSettings.from_env(str(tmp_path), env={"SPIDERSITE_STEM_CACHE_MB": "64"})
    assert settings.stem_cache_bytes == 64 << 20
    for bad in ("0", "-1", "lots"):
        with pytest.raises(SettingsError, match="SPIDERSITE_STEM_CACHE_MB"):
            WebSettings.from_env(str(tmp_path), env={"SPIDERSITE_STEM_CACHE_MB": bad})


def test_serve_caps_its_stem_cache_before_it_warms_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve`` gives the analyzers the size of SPIDERSITE_STEM_CACHE_MB before it builds
    the application (stopped there)."""
    from search import analysis
    from search.cli import build_parser
    from search.commands import serve

    class Stop(Exception):
        pass

    def stop(*args: object) -> None:
        raise Stop(analysis.STEM_CACHE_BYTES)

    monkeypatch.setattr(analysis, "STEM_CACHE_BYTES", analysis.STEM_CACHE_BYTES)  # restored
    monkeypatch.setattr("search.web.create_app", stop)
    monkeypatch.setenv("SPIDERSITE_STEM_CACHE_MB", "48")
    args = build_parser().parse_args(
        ["serve", "--threads", "2", "--data-dir", str(tmp_path / "data")]
    )
    with pytest.raises(Stop) as stopped:
        serve.run(args, io.StringIO())
    assert stopped.value.args == (48 << 20,)


def test_rate_limiter_window_and_bounded_table() -> None:
    from search.web.security import RateLimiter

    now = [1000.0]
    limiter = RateLimiter(2, window=60, max_clients=3, clock=lambda: now[0])
    assert limiter.hit("10.0.0.1") == (1, 0.0)
    assert limiter.hit("10.0.0.1") == (2, 0.0)
    now[0] += 15
    assert limiter.hit("10.0.0.1") == (3, 45.0)
    now[0] += 45  # the window is over: a fresh count
    assert limiter.hit("10.0.0.1") == (1, 0.0)
    # old windows expire; the table never holds more than max_clients
    for i in range(100):
        limiter.hit(f"10.1.{i // 256}.{i % 256}")
        assert len(limiter) <= 3
    now[0] += 61
    limiter.hit("10.0.0.9")
    assert len(limiter) == 1
    # one IPv6 /64 is one client; an IPv4-mapped address is its IPv4 address
    assert RateLimiter.key("2001:db8::1") == RateLimiter.key("2001:db8::ffff:2")
    assert RateLimiter.key("2001:db8:0:1::1") != RateLimiter.key("2001:db8::1")
    assert RateLimiter.key("::ffff:10.0.0.1") == "10.0.0.1"


@pytest.mark.parametrize(
    "seed",
    [
        "file:///etc/passwd",
        "FILE://localhost/etc/passwd",
        "data:text/html,x",
        "s3://bucket/key",
        "javascript:alert(1)",
        "\x00http://docs.example/a.html",
        "http://docs.example/\x0bfile:",
    ],
)
def test_seed_form_refuses_non_network_urls(admin: tuple[Any, str], app: Any, seed: str) -> None:
    client, csrf = admin
    client.post("/admin/servers/new", data={**server_form(), "csrf_token": csrf})
    with Session(engine_of(app)) as s:
        server_id = s.scalars(select(Server.id)).one()
    resp = client.post(f"/admin/servers/{server_id}/seeds", data={"url": seed, "csrf_token": csrf})
    assert resp.status_code == 400 and "invalid seed" in resp.get_data(as_text=True)
    with Session(engine_of(app)) as s:
        assert s.scalars(select(Seed)).all() == []


def _record_crawls_started(app: Any) -> list[dict[str, str]]:
    """Give *app* a runner that starts no crawl and records each one's spider arguments
    (in the list returned), its jobs running."""
    data_dir = app.config["SPIDERSITE"].data_dir
    started: list[dict[str, str]] = []

    class Recorder:
        name = "local"

        def start(self, job_id: str, spider_args: Any) -> runners.Started:
            started.append(dict(spider_args))
            return runners.Started(job_id, str(data_dir / "logs" / f"crawl-{job_id}.log"), "x", 0)

        def state(self, crawl: Crawl) -> str:
            return runners.RUNNING

    app.extensions["spidersite.runner"] = Recorder()
    return started


def test_the_crawl_form_offers_every_recrawl_mode(admin: tuple[Any, str], app: Any) -> None:
    """Every re-crawl mode the spider takes (``recrawl=reanalyze`` too) is a choice of the
    admin's crawl form, and starts the spider with it; a mode it does not take is refused."""
    from search.crawlargs import RECRAWL_MODES

    client, csrf = admin
    client.post("/admin/servers/new", data={**server_form(), "csrf_token": csrf})
    started = _record_crawls_started(app)
    page = client.get("/admin/crawls").get_data(as_text=True)
    assert "re-analyze all pages" in page
    for mode in RECRAWL_MODES:
        assert f'name="mode" value="recrawl-{mode}"' in page, mode
        resp = client.post(
            "/admin/crawls/start", data={"mode": f"recrawl-{mode}", "csrf_token": csrf}
        )
        assert resp.status_code == 302
    assert [args.get("recrawl") for args in started] == list(RECRAWL_MODES)
    assert "reanalyze" in RECRAWL_MODES
    resp = client.post(
        "/admin/crawls/start",
        data={"mode": "recrawl-sometimes", "csrf_token": csrf},
        follow_redirects=True,
    )
    assert "unknown crawl mode &#39;recrawl-sometimes&#39;" in resp.get_data(as_text=True)
    assert len(started) == len(RECRAWL_MODES)


def test_admin_writes_only_inside_the_data_folder(admin: tuple[Any, str], app: Any) -> None:
    client, csrf = admin
    data_dir = app.config["SPIDERSITE"].data_dir
    client.post("/admin/servers/new", data={**server_form(), "csrf_token": csrf})

    started = _record_crawls_started(app)
    for topic in ("../../../../tmp/evil", "/etc/cron.d/x", "a\x00b"):
        resp = client.post(
            "/admin/crawls/start",
            data={"mode": "topic", "topic": topic, "csrf_token": csrf, "server": "../1"},
        )
        assert resp.status_code == 302
    assert len(started) == 3
    for args in started:
        sites = Path(args["sites"])
        assert sites.resolve().parent == data_dir / "admin" and sites.name.startswith("sites-")
    assert sorted(p.name for p in data_dir.iterdir()) == [
        "admin",
        "web-secret-key",
        "web-session-epoch",
    ]


def test_a_crawl_cannot_start_from_a_read_only_data_folder(tmp_path: Path) -> None:
    """The database elsewhere (writable), the data folder read-only: the admin's servers
    can be edited, and starting a crawl says why it cannot (its sites file goes into the
    data folder), with nothing written."""
    from tests.conftest import read_only_tree

    data = tmp_path / "data"
    app = make_app(data, f"sqlite:///{tmp_path / 'spidersite.db'}")
    client = app.test_client()
    csrf = login(client)
    form = {"url": "http://a.example/", "userobots": "on", "csrf_token": csrf}
    assert client.post("/admin/servers/new", data=form).status_code == 302
    before = sorted(p.name for p in data.iterdir())
    with read_only_tree(data):
        resp = client.post(
            "/admin/crawls/start",
            data={"mode": "normal", "csrf_token": csrf},
            follow_redirects=True,
        )
        page = resp.get_data(as_text=True)
        assert "cannot write the crawl&#39;s sites file in" in page, page
        assert "crawls cannot be started from a data folder that cannot be written" in page
        assert sorted(p.name for p in data.iterdir()) == before
    with Session(engine_of(app)) as s:
        assert s.scalars(select(Crawl)).all() == []


def test_crawl_log_reads_only_the_data_folder(tmp_path: Path) -> None:
    from search.web.settings import WebSettings

    settings = WebSettings.from_env(str(tmp_path / "data"), env={})
    (tmp_path / "data" / "logs").mkdir()
    (tmp_path / "data" / "logs" / "crawl-a.log").write_text("INFO: fine\n")
    (tmp_path / "secret").write_text("not for the admin\n")
    runner = runners.LocalRunner(settings)
    inside = Crawl(job_id="a", log_file=str(tmp_path / "data" / "logs" / "crawl-a.log"))
    assert runner.log(inside) == "INFO: fine\n"
    for path in (
        str(tmp_path / "secret"),
        str(tmp_path / "data" / "logs" / ".." / ".." / "secret"),
        "/etc/passwd",
    ):
        with pytest.raises(runners.JobError, match="is not in"):
            runner.log(Crawl(job_id="b", log_file=path))
    (tmp_path / "data" / "logs" / "link.log").symlink_to(tmp_path / "secret")
    with pytest.raises(runners.JobError, match="is not in"):
        runner.log(Crawl(job_id="c", log_file=str(tmp_path / "data" / "logs" / "link.log")))
