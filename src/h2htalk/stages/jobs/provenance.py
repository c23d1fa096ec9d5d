"""The stage that writes the run's provenance. It is declared here, not at ``h2htalk.provenance.write_provenance``:
that module is one of a run's inputs, a layer below the stage declarations, which every product reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from h2htalk.stages.declare import stage
from h2htalk.stages.spec import Done, One


def package_checkout() -> str:
    """The checkout this package runs from (the workflow puts its own ``src`` first), for its git revision; else the
    working folder."""
    root = Path(__file__).resolve().parents[4]
    return str(root) if (root / ".git").exists() else "."


@stage(
    "provenance", "write the run's provenance (git, config, data, versions, hardware)",
    reads=("*",), options=("root",), inputs={"manifest": One("manifest")}, outputs={"provenance": One("provenance")},
)  # fmt: skip
def provenance(manifest: str, provenance: str, config: dict[str, Any], options: Any) -> Done:
    from h2htalk.provenance import write_provenance

    root = getattr(options, "root", None) or package_checkout()
    record = write_provenance(config, manifest, provenance, root)
    return Done(f"git {record['git']['revision']}, config sha256 {record['config_sha256'][:12]}", out=provenance)
