"""Links made with the public URL of the moment, not of the day the data was made (issue 16)."""

from __future__ import annotations

import dataclasses

from sluice.engine.mailer import Mailer
from tests.conftest import Api
from tests.integration.test_mailer import smtp_server
from tests.integration.test_workflows import THROWS, create, run


async def test_error_mails_link_to_the_public_url_of_the_moment(api: Api) -> None:
    """The account was made under one public URL; Sluice now runs under another (issue 16)."""
    sends, workflows = api.platform.sends, api.platform.workflows
    before = (sends.mailer, workflows.settings)
    async with smtp_server() as inbox:
        sends.mailer = Mailer(
            dataclasses.replace(before[1], smtp_url=f"smtp://127.0.0.1:{inbox.port}")
        )
        workflows.settings = dataclasses.replace(before[1], public_url="https://moved.example/")
        try:
            failing = await create(api, [THROWS], name="moved-check")
            await run(api, failing["id"], {"x": 1})
            await api.platform.jobs.drain()
        finally:
            sends.mailer, workflows.settings = before
    [message] = [m for m in inbox.messages if m["Subject"].endswith("in moved-check")]
    link = f"https://moved.example/v1/workflows/{failing['id']}/$errors/event_summaries"
    assert f"See: {link}?expand=event" in message.get_content()
