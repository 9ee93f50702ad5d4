"""What a report may hold: the plugin's own privacy switches (Coiled's aliases included),
read in the process that makes the report."""

from __future__ import annotations

from .. import config

CODE_SWITCH = "analytics.computation.code.transmit"
PROFILE_SWITCH = "analytics.profile.transmit"
NO_CODE = f"(not recorded: {CODE_SWITCH} is false)"


def privacy_switches() -> dict[str, bool]:
    """{"code": ..., "profile": ...}: whether this process's config lets reports hold the
    calling code and a profile."""
    return {
        "code": config.value(CODE_SWITCH),
        "profile": config.value(PROFILE_SWITCH),
    }


def recorded_switches(cluster: dict) -> dict[str, bool]:
    """What a report of this stored cluster may hold: code and profile each need this
    process's switch on and the cluster not to have recorded with it off."""
    recorded = cluster.get("settings")
    settings = recorded if isinstance(recorded, dict) else {}
    mine = privacy_switches()
    return {
        "code": mine["code"] and settings.get("code_transmit") is not False,
        "profile": mine["profile"] and settings.get("profile_transmit") is not False,
    }
