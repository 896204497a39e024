"""Names vulture (the dead-code check in .ci/run, configured in pyproject.toml) cannot see used.

Each is used, but not by a call in src/ or bench/: a framework calls it by name, or it is a test
double or test hook shipped in the package on purpose. Add a name here only with its reason;
anything else vulture reports is dead and is deleted.
"""

# Called by frameworks by name.
_.data_received  # asyncio.Protocol (runtime/protocol.LineChannel)
_.eof_received  # asyncio.Protocol
_.pause_writing  # asyncio.Protocol
_.resume_writing  # asyncio.Protocol
_.readable  # io.RawIOBase (runtime/npm_jail._Capped)
_.readinto  # io.RawIOBase
_.connect_unix_socket  # httpcore.AsyncNetworkBackend (engine/outbound/http_clients)
_._pool  # httpx.AsyncHTTPTransport reads its own _pool (engine/outbound/http_clients replaces it)
_.response_complete  # uvicorn's protocol reads it of its cycle (api/connections.DirectCycle)
_.total_requests  # uvicorn's ServerState counter (api/connections' on_response_complete keeps it as uvicorn's does)
_.handle_RCPT  # aiosmtpd's handler hook (engine/mail_in)
_.handle_DATA  # aiosmtpd's handler hook
rcpt_options  # aiosmtpd's handle_RCPT signature
_.load_dialect_impl  # SQLAlchemy TypeDecorator (storage/columns)
_.process_bind_param  # SQLAlchemy TypeDecorator
_.process_result_value  # SQLAlchemy TypeDecorator
impl  # SQLAlchemy TypeDecorator
cache_ok  # SQLAlchemy TypeDecorator
should_evaluate_none  # SQLAlchemy TypeDecorator
_.invalidate_pool_on_disconnect  # SQLAlchemy's ExceptionContext, read after the handler
model_config  # pydantic
custom_fields  # pydantic field: a request body's key
dynamic_props_id  # pydantic field: a request body's key
secret_names  # read by the Jinja templates (props.html, action_props.html)
icon  # read by the Jinja template workflow_edit.html (web/pickers.AppGroup)
exc_type  # __aexit__'s signature
tb  # __aexit__'s signature
upgraded_step  # called by migration 0017 (migrations are not scanned)
_.VENV  # bench/ab_webhook sets the side-by-side script's module attribute

# Test doubles and hooks the package ships for its tests (and for anyone testing against it).
FakeClock  # clock.py
_.advance  # FakeClock
_.until_sleeping  # FakeClock
_.skew_ms  # SystemClock, read by tests/unit/test_clock.py
FakeRunner  # runtime/port.py
StaticResolver  # runtime/egress.py
STEP_STATUS  # domain/flow.py's table, checked by tests/unit/test_flow_decisions.py
_.heartbeat  # JobWorker: one renewal round, driven by tests with a fake clock
_.set_password  # engine/auth/logins: the tests' way to give an account a password
complete  # storage/jobs: tests finish a job without a worker
delete_for  # storage/jobs: tests remove a hung job
forget_all  # public_url: tests reset the remembered URLs

