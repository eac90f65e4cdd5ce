"""What every view uses: the shared clients, rendering a template (a whole page, or only
its fragment for an htmx request), redirects with a notice."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from logbus.client.admin import Admin
from logbus.console.access import browser_id, console_access, signed_in
from logbus.console.clients import ConsoleClients
from logbus.console.errors import ConsoleError
from logbus.console.forms import iso_utc
from logbus.console.lag import LagHistory
from logbus.console.sessions import CSRF_FIELD, CSRF_HEADER
from logbus.console.sizes import human_bytes


def template_environment() -> Environment:
    env = Environment(
        loader=PackageLoader("logbus.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["utc"] = iso_utc
    env.filters["url"] = lambda text: quote(str(text), safe="")
    env.filters["bytes"] = human_bytes
    return env


def clients(request: Request) -> ConsoleClients:
    """The clients of the signed-in user (SCRAM logins), else the console's own."""
    session = signed_in(request)
    if session is not None and session.clients is not None:
        return session.clients
    found: ConsoleClients = request.app.state.clients
    return found


def lag_history(request: Request) -> LagHistory:
    found: LagHistory = request.app.state.lag_history
    return found


async def admin(request: Request) -> Admin:
    return await clients(request).admin()


def is_fragment(request: Request) -> bool:
    """True for htmx's requests, which want a piece of a page, not a whole one."""
    return request.headers.get("HX-Request") == "true"


def render(
    request: Request, template: str, status_code: int = 200, **context: Any
) -> HTMLResponse:
    env: Environment = request.app.state.templates
    access = console_access(request)
    session = signed_in(request)
    html = env.get_template(template).render(
        request=request,
        notice=request.query_params.get("notice", ""),
        cluster=request.app.state.clients.settings.get("bootstrap.servers", ""),
        user=session.user if session is not None else None,
        login_required=access.login_required,
        read_only=access.read_only,
        schemas_shown=request.app.state.registry is not None,
        csrf_field=CSRF_FIELD,
        csrf_token=access.signer.csrf_token(browser_id(request)),
        **context,
    )
    return HTMLResponse(html, status_code=status_code)


def redirect(path: str, notice: str) -> Response:
    """After a change: back to a page (303, so reloading does not repeat it), which shows
    `notice`."""
    return RedirectResponse(f"{path}?{urlencode({'notice': notice})}", status_code=303)


async def posted_form(request: Request) -> FormData:
    """The fields of a form sent to the console, refused (403) when a browser says it was
    sent from a page of another site, or when the form does not carry the CSRF token of
    this browser's session (a hidden field of every form the console serves, or the
    X-CSRF-Token header): a page elsewhere must not delete topics through a console its
    visitor is signed in to, or that runs on their machine."""
    origin = request.headers.get("origin")
    if origin is not None:
        sent_from = urlsplit(origin).netloc
        if sent_from != request.headers.get("host", ""):
            raise ConsoleError(
                f"Refused: this form was sent from another site ({origin}), not from the "
                "console's own pages.", 403
            )
    form = await request.form()
    token = form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
    if not console_access(request).signer.csrf_matches(
        browser_id(request), token if isinstance(token, str) else None
    ):
        raise ConsoleError(
            "Refused: this form did not carry this session's CSRF token (a form from "
            "another site, or from before you signed in again). Reload the page and send "
            "it again.", 403
        )
    return form
