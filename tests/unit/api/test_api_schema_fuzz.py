"""Property-based requests generated from the OpenAPI schema: no input may cause a 5xx."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import schemathesis
from api_doubles import parsing_loader
from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from schemathesis.checks import not_a_server_error

from kernelband.config import Settings
from kernelband.db import Base, make_engine, make_session_factory, session_scope
from services.api.app import create_app
from services.api.teams import create_token

# schemathesis needs the schema when the module is collected, so the app is built here,
# on its own SQLite file, with the parsing test loader (no sandbox child per example).
_DIR = Path(tempfile.mkdtemp(prefix="kb-api-fuzz-"))
_ENGINE = make_engine(f"sqlite:///{_DIR / 'fuzz.sqlite'}")
Base.metadata.create_all(_ENGINE)
_FACTORY = make_session_factory(_ENGINE)
with session_scope(_FACTORY) as _session:
    TOKEN = create_token(_session, "fuzz")


atexit.register(shutil.rmtree, _DIR, ignore_errors=True)
_APP = create_app(Settings(data_dir=_DIR, broker_url=""), session_factory=_FACTORY,
                  problem_loader=parsing_loader, embedded=True)
schema = schemathesis.openapi.from_asgi("/openapi.json", _APP)


@schema.parametrize()
@hsettings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_generated_request_causes_a_server_error(case: schemathesis.Case) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"},
                           checks=[not_a_server_error])
