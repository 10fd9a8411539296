"""An eval suite (YAML): cases with a message and what the answer and tool calls must be::

    name: purchasing
    agent: buyer                       # default agent of the cases
    cases:
      - name: pays a small invoice
        message: pay ACME 100
        turns:                         # optional: a scripted model instead of the agent's
          - {tool_calls: [{name: oa__purchase_pay, args: {amount: 100, vendor: ACME}}]}
          - {answer: Paid ACME 100.}
        expect:
          answer_contains: Paid        # a substring of the answer
          tool_calls:                  # the calls made, in order; args must include these
            - {name: oa__purchase_pay, args: {vendor: ACME}}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class EvalSuiteError(ValueError):
    """The suite file cannot be read or has the wrong shape."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExpectedCall(_Strict):
    name: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)


class Expectation(_Strict):
    answer_contains: str | None = None
    tool_calls: list[ExpectedCall] | None = None

    @model_validator(mode="after")
    def _something(self) -> Expectation:
        if self.answer_contains is None and self.tool_calls is None:
            raise ValueError("expect needs 'answer_contains' and/or 'tool_calls'")
        return self


class EvalCase(_Strict):
    name: str = Field(min_length=1)
    message: str = Field(min_length=1)
    agent: str | None = None
    turns: list[dict[str, Any]] | None = None
    expect: Expectation


class EvalSuite(_Strict):
    name: str | None = None
    agent: str | None = None
    cases: list[EvalCase] = Field(min_length=1)

    @model_validator(mode="after")
    def _every_case_has_an_agent(self) -> EvalSuite:
        for case in self.cases:
            if case.agent is None and self.agent is None:
                raise ValueError(f"case '{case.name}' names no agent and the suite has none")
        return self


def load_suite(path: str | Path) -> EvalSuite:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        return EvalSuite.model_validate(data)
    except (OSError, yaml.YAMLError) as exc:
        raise EvalSuiteError(f"{path}: cannot read the suite: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'suite'}: {e['msg']}"
                             for e in exc.errors())
        raise EvalSuiteError(f"{path}: {problems}") from None
