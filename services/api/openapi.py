"""The OpenAPI document: FastAPI's, plus the request bodies that routes read by hand."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema


def _add_components(doc: dict[str, Any], models: list[type[BaseModel]]) -> None:
    """Put `models` (and every model they use) under components/schemas, so a `$ref` written
    by hand in a route's `openapi_extra` resolves; names FastAPI already defined are kept."""
    _, top = models_json_schema([(m, "validation") for m in models],
                                ref_template="#/components/schemas/{model}")
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in top.get("$defs", {}).items():
        schemas.setdefault(name, schema)


def install_openapi(app: FastAPI, extra_models: list[type[BaseModel]]) -> None:
    """Build the document once, on first request, with `extra_models` among its components."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version, description=app.description,
                              routes=app.routes)
            _add_components(doc, extra_models)
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
