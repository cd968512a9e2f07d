"""The admin's servers and seeds: the server list, a server's form (new or edited; the
form's parsing and validation are :mod:`search.web.forms`), its seeds added and removed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import abort, flash, redirect, render_template, request, url_for
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from search.models import Seed, Server
from search.urls import check_url, origin
from search.web import security
from search.web.adminbase import bp, get_or_404
from search.web.forms import FIELDS, ServerForm
from search.web.views import engine


@bp.get("/servers")
@security.login_required
def servers() -> Any:
    with Session(engine()) as s:
        rows = s.scalars(select(Server).order_by(Server.url)).all()
        seeds = dict(s.execute(select(Seed.server_id, func.count()).group_by(Seed.server_id)).all())
    return render_template("admin_servers.html", servers=rows, seeds=seeds)


def _save_server(form: ServerForm, server_id: int | None) -> int | None:
    """Store the form; on a URL conflict, record the error in the form and return None."""
    now = datetime.now(UTC)
    try:
        with Session(engine()) as s, s.begin():
            found = Server(url=form.url, settings={}, net_errors=0, disabled=False)
            if server_id is None:
                s.add(found)
            else:
                existing = s.get(Server, server_id)
                if existing is None:
                    abort(404)
                found = existing
            server = found
            server.url = form.url
            server.admin_config = form.config
            server.updated_at = now
            s.flush()
            return server.id
    except IntegrityError:
        form.errors["url"] = f"the server {form.url} exists already"
        return None


def _form_config(server: Server) -> dict[str, Any]:
    """What a server's form starts from: the fields entered in the admin, or for a server
    the crawler found, its effective settings (without its credentials)."""
    if server.admin_config is not None:
        return server.admin_config
    return {k: v for k, v in (server.settings or {}).items() if k != "basic_auth"}


def _seeds(s: Session, server_id: int) -> Any:
    return s.scalars(select(Seed).where(Seed.server_id == server_id).order_by(Seed.id)).all()


@bp.route("/servers/new", methods=["GET", "POST"])
@security.login_required
def server_new() -> Any:
    form = ServerForm.from_config("", {})
    if request.method == "POST":
        form = ServerForm.from_request(request.form)
        if not form.errors:
            server_id = _save_server(form, None)
            if server_id is not None:
                flash(f"Server {form.url} added.")
                return redirect(url_for("admin.server_edit", server_id=server_id))
    status = 400 if form.errors else 200
    return render_template("admin_server.html", form=form, fields=FIELDS, server=None), status


@bp.route("/servers/<int:server_id>", methods=["GET", "POST"])
@security.login_required
def server_edit(server_id: int) -> Any:
    with Session(engine()) as s:
        server = get_or_404(s, Server, server_id, f"No server #{server_id}.")
        seeds = _seeds(s, server_id)
        s.expunge_all()
    form = ServerForm.from_config(server.url, _form_config(server))
    if request.method == "POST":
        form = ServerForm.from_request(request.form, server.admin_config)
        if not form.errors and _save_server(form, server_id) is not None:
            flash(f"Server {form.url} saved.")
            return redirect(url_for("admin.server_edit", server_id=server_id))
    status = 400 if form.errors else 200
    return (
        render_template(
            "admin_server.html",
            form=form,
            fields=FIELDS,
            server=server,
            seeds=seeds,
            seed_error=None,
            seed_value="",
        ),
        status,
    )


@bp.post("/servers/<int:server_id>/seeds")
@security.login_required
def seed_add(server_id: int) -> Any:
    raw = (request.form.get("url") or "").strip()
    error = None
    with Session(engine()) as s:
        server = get_or_404(s, Server, server_id, f"No server #{server_id}.")
        try:
            url = check_url(raw)
        except ValueError as exc:
            error = f"invalid seed: {exc}"
        else:
            if origin(url) != server.url:
                error = f"invalid seed: {url} is not on the server {server.url}"
        if error is None:
            try:
                with Session(engine()) as writer, writer.begin():
                    writer.add(Seed(url=url, server_id=server_id, created_at=datetime.now(UTC)))
            except IntegrityError:
                error = f"{url} is a seed already"
        if error is None:
            flash(f"Seed {url} added.")
            return redirect(url_for("admin.server_edit", server_id=server_id))
        return (
            render_template(
                "admin_server.html",
                form=ServerForm.from_config(server.url, _form_config(server)),
                fields=FIELDS,
                server=server,
                seeds=_seeds(s, server_id),
                seed_error=error,
                seed_value=raw,
            ),
            400,
        )


@bp.post("/seeds/<int:seed_id>/delete")
@security.login_required
def seed_delete(seed_id: int) -> Any:
    with Session(engine()) as s, s.begin():
        seed = get_or_404(s, Seed, seed_id, f"No seed #{seed_id}.")
        server_id = seed.server_id
        url = seed.url
        s.delete(seed)
    flash(f"Seed {url} removed.")
    if server_id is None:
        return redirect(url_for("admin.servers"))
    return redirect(url_for("admin.server_edit", server_id=server_id))
