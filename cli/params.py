"""Click parameter types shared by several commands."""

from __future__ import annotations

import math
from typing import Any

import click

from evalstore.replay.choices import experiment_name


class UnitInterval(click.FloatRange):
    """A number from 0 to 1. ``nan`` passes ``FloatRange``'s comparisons (every one is false) and then
    breaks what the number is written into (a JSON event): refused here, as bad usage."""

    name = "float range"

    def __init__(self) -> None:
        super().__init__(0, 1)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if isinstance(number, float) and math.isnan(number):
            self.fail(f"{value!r} is not a number from 0 to 1.", param, ctx)
        return number


UNIT_INTERVAL = UnitInterval()


class ExperimentName(click.ParamType):
    """``--experiment``: a name AgentV would take (``replay.choices.experiment_name``), else bad usage."""

    name = "name"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return experiment_name(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


EXPERIMENT_NAME = ExperimentName()
