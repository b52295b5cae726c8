"""`cachedoctor clean`: planning (`plan`), running the tool's own command (`command`), carrying
the plan out and measuring it (`execute`, `steps`), and the scheduled job's settings and log
(`scheduled`). Nothing here prints."""

from cachedoctor.clean.execute import execute_plan
from cachedoctor.clean.model import (
    CleanPlan,
    CleanResult,
    CommandRun,
    Item,
    Measured,
    Mode,
    PlannedGarbage,
    PlannedUnit,
    Policy,
    Refusal,
    Target,
    TargetResult,
)
from cachedoctor.clean.plan import freed_bytes, plan_clean
from cachedoctor.clean.scheduled import (
    DEFAULT_SCHEDULE_KINDS,
    RESULT_MARK,
    ScheduledPolicy,
    last_run,
    load_scheduled_policy,
    log_path,
    log_scheduled_run,
    save_scheduled_policy,
    schedule_config_path,
)

__all__ = [
    "DEFAULT_SCHEDULE_KINDS",
    "RESULT_MARK",
    "CleanPlan",
    "CleanResult",
    "CommandRun",
    "Item",
    "Measured",
    "Mode",
    "PlannedGarbage",
    "PlannedUnit",
    "Policy",
    "Refusal",
    "ScheduledPolicy",
    "Target",
    "TargetResult",
    "execute_plan",
    "freed_bytes",
    "last_run",
    "load_scheduled_policy",
    "log_path",
    "log_scheduled_run",
    "plan_clean",
    "save_scheduled_policy",
    "schedule_config_path",
]
