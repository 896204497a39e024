"""The platform layer: the services the API edge (``api/``, ``web/``, ``cli/``) uses, and the
types it names, re-exported so the edge reaches no deeper layer. ``assembly.py`` builds and
closes them (``Platform.open``); ``services.py`` holds them and the queries that span them.
"""

from sluice.domain.apps import App
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
from sluice.storage.accounts import Account, KeyInfo
from sluice.storage.apps import ConnectedAccount
from sluice.storage.components import SavedComponent
from sluice.storage.data_stores import DataStore
from sluice.storage.deliveries import Delivery
from sluice.storage.events import Event, LogLine
from sluice.storage.oauth_clients import Client as OAuthClient
from sluice.storage.paging import Page
from sluice.storage.runs import Run
from sluice.storage.sources import Deployment
from sluice.storage.subscriptions import AutoSubscription, Subscription
from sluice.storage.webhooks import Webhook
from sluice.storage.workflows import Workflow

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
