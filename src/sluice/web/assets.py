"""The UI's front-end packages: installed from the npm registry into a cache folder by the
project's own setup (``bin/_venv`` runs ``python -m sluice.web.assets``; ``sluice serve`` does
it too when the folder is missing), never copied into the repository.

The folder is named for a hash of ``package.json``, so a version bump installs beside the old
set, and an install that is cut off never leaves a half folder (it is renamed into place).

    python -m sluice.web.assets    # install (or find) them; prints the folder
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

from sluice import errors
from sluice.config import Settings

log = logging.getLogger(__name__)

#: URL prefix → folder inside node_modules: what ``/assets/vendor/<name>/`` serves.
VENDOR = {
    "htmx": "htmx.org/dist",
    "ace": "ace-builds/src-min-noconflict",
    "ace-css": "ace-builds/css",
    "swagger": "swagger-ui-dist",
}


def _manifest() -> bytes:
    return resources.files("sluice.web").joinpath("package.json").read_bytes()


def folder(settings: Settings) -> Path:
    """Where this version set lives (present or not)."""
    digest = hashlib.sha256(_manifest()).hexdigest()[:12]
    return settings.ui_assets_dir / digest


def installed(settings: Settings) -> Path | None:
    target = folder(settings)
    return target if (target / "node_modules").is_dir() else None


def ensure(settings: Settings) -> Path:
    """The installed packages' folder, installing them with npm first when missing."""
    found = installed(settings)
    if found is not None:
        return found
    target = folder(settings)
    target.parent.mkdir(parents=True, exist_ok=True)
    log.info("installing the web UI's packages", extra={"action": "ui_assets", "dir": str(target)})
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".install-") as tmp:
        staging = Path(tmp) / "set"
        staging.mkdir()
        (staging / "package.json").write_bytes(_manifest())
        # --ignore-scripts: no package's install script runs (swagger-ui-dist's dependency has
        # a telemetry one); every file we serve is in the published tarballs.
        command = [settings.npm, "install", "--no-audit", "--no-fund", "--ignore-scripts"]
        done = subprocess.run(
            [*command, "--omit=dev", "--no-package-lock"],
            cwd=staging,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        if done.returncode != 0:
            raise errors.DependencyInstallFailed(
                f"npm could not install the web UI's packages: {done.stderr.strip()[-2000:]}"
            )
        try:
            os.rename(staging, target)
        except OSError:
            # Another process installed the same set meanwhile: theirs is as good.
            if installed(settings) is None:
                raise
            shutil.rmtree(staging, ignore_errors=True)
    return target


if __name__ == "__main__":
    print(ensure(Settings.from_env()))
    sys.exit(0)
