"""Routes of the CDC app, mounted at ``/cdc`` by the Airflow plugin.

Airflow does not authenticate a plugin's app (a Starlette mount inherits none of the core API's
dependencies), so every route here resolves the caller from Airflow's own JWT (the UI's ``_token``
cookie, or an ``Authorization: Bearer`` header for tools) and asks Airflow's auth manager what that
user may see: a pipeline is listed only to users who may read its DAG, and re-snapshotted only by
users who may trigger it. Handlers are plain ``def``: FastAPI runs them in its thread pool, where
the blocking PyMySQL reads belong.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote, urlsplit

from fastapi import Depends, FastAPI, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

from ..run_params import RunParamError, replay_range
from ..capture.filters import TableFilter
from ..pipeline_config import PipelineConfigError
from .data import configured_pipelines, read_pipeline
from .page import render_page

app = FastAPI(title="MySQL CDC pipelines", description="Lag, batch history and verification of mysql-cdc pipelines")


async def current_user(request: Request):
    """Airflow's user of this request, or 401 (the page redirects to Airflow's login instead)."""
    from airflow.api_fastapi.core_api.security import resolve_user_from_token

    header = request.headers.get("authorization", "")
    token = header[7:] if header.lower().startswith("bearer ") else request.cookies.get("_token")
    if not token:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "log in to Airflow first")
    return await resolve_user_from_token(token)


User = Annotated[object, Depends(current_user)]


def _may(user, dag_id: str, method: str) -> bool:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    entity = DagAccessEntity.RUN if method == "POST" else None
    return get_auth_manager().is_authorized_dag(method=method, user=user, access_entity=entity,
                                                details=DagDetails(id=dag_id))


def _pipelines():
    """The pipelines file as the DAGs read it; a mistake in it is answered with its own message
    (the one the DAG import error shows), not a bare 500."""
    try:
        return configured_pipelines()
    except PipelineConfigError as exc:
        raise HTTPException(status.HTTP_500_INTERNAL_SERVER_ERROR, str(exc)) from None


def _visible(user):
    return [c for c in _pipelines() if _may(user, c.name, "GET")]


@app.exception_handler(HTTPException)
async def _login_first(request: Request, exc: HTTPException):
    # a person opening the page is sent to Airflow's login and back; a tool gets the JSON error
    if exc.status_code == status.HTTP_401_UNAUTHORIZED and "text/html" in request.headers.get("accept", ""):
        from airflow.api_fastapi.app import get_auth_manager

        return RedirectResponse(get_auth_manager().get_url_login(next_url=str(request.url)), status.HTTP_303_SEE_OTHER)
    return JSONResponse({"detail": exc.detail}, exc.status_code)


@app.get("/api/pipelines")
def api_pipelines(user: User) -> list[dict]:
    """Per pipeline: ``name``, ``checkpoint_position``, ``leader_position``, ``bytes_behind``,
    ``seconds_behind``, ``last_batch``, ``verification`` (and ``error`` when its servers cannot be
    read), read from the servers now."""
    return [read_pipeline(c).to_json() for c in _visible(user)]


@app.get("/", response_class=HTMLResponse)
def page(user: User, message: str | None = None, bad: bool = False) -> str:
    return render_page([read_pipeline(c) for c in _visible(user)], message, bad)


def _same_origin(request: Request) -> None:
    """Refuse a form post that another site made the browser send (the cookie is SameSite=Lax,
    this is the second lock)."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if origin and urlsplit(origin).netloc != request.url.netloc:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "cross-site request refused")


def _may_trigger(name: str, request: Request, user) -> None:
    _same_origin(request)
    if name not in {c.name for c in _pipelines()}:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no pipeline {name!r}")
    if not _may(user, name, "POST"):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"you may not trigger runs of {name}")


def _back(message: str, bad: bool = False) -> RedirectResponse:
    """To the page (two levels up from /pipelines/<name>/<action>), saying what happened."""
    return RedirectResponse(f"../../?{'bad=true&' if bad else ''}message={quote(message)}", status.HTTP_303_SEE_OTHER)


@app.post("/pipelines/{name}/replay")
def replay(name: str, request: Request, user: User, start: Annotated[str, Form()] = "",
           end: Annotated[str, Form()] = ""):
    """Trigger a manual run that replays ``[start, end)`` (the DAG's params, checked here first)."""
    _may_trigger(name, request, user)
    conf = {"start": start.strip(), "end": end.strip()}
    try:
        replay_range(conf)
    except RunParamError as exc:
        return _back(f"Not replayed: {exc}", bad=True)
    run_id = _trigger(name, conf, user)
    return _back(f"Triggered {name} run {run_id} replaying {conf['start']} → {conf['end']}")


@app.post("/pipelines/{name}/resnapshot")
def resnapshot(name: str, request: Request, user: User, tables: Annotated[str, Form()] = ""):
    """Trigger a manual run of the pipeline's DAG with conf ``{"resnapshot": [globs]}``."""
    _may_trigger(name, request, user)
    globs = [t.strip() for t in tables.split(",") if t.strip()]
    try:
        TableFilter(include=tuple(g if g != "*" else "*.*" for g in globs) or ("?",))
    except ValueError as exc:
        return _back(f"Not re-snapshotted: {exc}", bad=True)
    run_id = _trigger(name, {"resnapshot": globs}, user)
    return _back(f"Triggered {name} run {run_id} re-copying {', '.join(globs)}")


def _trigger(dag_id: str, conf: dict, user) -> str:
    from airflow.api.common.trigger_dag import trigger_dag
    from airflow.utils.types import DagRunTriggeredByType

    run = trigger_dag(dag_id, triggered_by=DagRunTriggeredByType.UI, triggering_user_name=user.get_name(),
                      conf=conf, note="triggered from the CDC pipelines page")
    return run.run_id
