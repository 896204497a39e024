"""The platform layer: the services the API edge (``api/``, ``web/``, ``cli/``) uses, and the
types it names, re-exported so the edge imports them from here and reaches no deeper layer.
``assembly.py`` builds and closes them (``Platform.open``); ``services.py`` holds them and the
queries that span them.

The types are the domain's values (``Account``, ``Deployment``, ``Run``, ``Event``, ``Page``...:
``domain/``, which storage returns; storage itself exports only its queries) and the engine's
requests and answers (``DeployRequest``, ``InvocationOutcome``, ``Stream``...).
"""

from sluice.domain.accounts import Account, KeyInfo
from sluice.domain.apps import App, ConnectedAccount
from sluice.domain.components import SavedComponent
from sluice.domain.data_stores import DataStore
from sluice.domain.deliveries import Delivery, Webhook
from sluice.domain.deployments import Deployment
from sluice.domain.events import Event, LogLine
from sluice.domain.oauth_clients import OAuthClient
from sluice.domain.paging import Page
from sluice.domain.routing import AutoSubscription, Subscription
from sluice.domain.runs import Run
from sluice.domain.workflows import Workflow
from sluice.engine.auth.logins import SESSION_TTL_S
from sluice.engine.auth.oauth import Opening as OAuthOpening
from sluice.engine.components.actions import ActionRun
from sluice.engine.components.components import ComponentInput
from sluice.engine.components.dynamic_props import PropSet
from sluice.engine.components.options import OptionsPage, OptionsRequest
from sluice.engine.components.registry_import import ComponentReport, PackageReport
from sluice.engine.components.workflow_input import WorkflowInput
from sluice.engine.ingress import IncomingRequest
from sluice.engine.runs.invoker import InvocationOutcome
from sluice.engine.runs.sources import DeployRequest, UpdateRequest
from sluice.engine.streams import Stream
from sluice.platform.assembly import Platform, check_sandbox, create_account_offline

__all__ = [
    "SESSION_TTL_S",
    "Account",
    "ActionRun",
    "App",
    "AutoSubscription",
    "ComponentInput",
    "ComponentReport",
    "ConnectedAccount",
    "DataStore",
    "Delivery",
    "DeployRequest",
    "Deployment",
    "Event",
    "IncomingRequest",
    "InvocationOutcome",
    "KeyInfo",
    "LogLine",
    "OAuthClient",
    "OAuthOpening",
    "OptionsPage",
    "OptionsRequest",
    "PackageReport",
    "Page",
    "Platform",
    "PropSet",
    "Run",
    "SavedComponent",
    "Stream",
    "Subscription",
    "UpdateRequest",
    "Webhook",
    "Workflow",
    "WorkflowInput",
    "check_sandbox",
    "create_account_offline",
]
