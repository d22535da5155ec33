"""Click parameter types shared by several commands."""

from __future__ import annotations

import math
from typing import Any

import click

from evalstore.replay.choices import experiment_name


class NumberRange(click.FloatRange):
    """A number in a range. ``nan`` passes ``FloatRange``'s comparisons (every one is false) and then
    breaks what the number is written into (a JSON event): refused here, as bad usage."""

    name = "float range"

    def __init__(self, low: float, high: float | None, described: str) -> None:
        super().__init__(low, high)
        self.described = described

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if isinstance(number, float) and math.isnan(number):
            self.fail(f"{value!r} is not {self.described}.", param, ctx)
        return number


UNIT_INTERVAL = NumberRange(0, 1, "a number from 0 to 1")
NON_NEGATIVE = NumberRange(0, None, "a number of 0 or more")


class ExperimentName(click.ParamType):
    """``--experiment``: a name AgentV would take (``replay.choices.experiment_name``), else bad usage."""

    name = "name"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return experiment_name(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


EXPERIMENT_NAME = ExperimentName()
