"""The configuration file: SPEC §6's shape loads into agents and models, and every mistake
is an error naming the file and the key a person has to fix.
"""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hookgate import Agent, ScriptedLLM
from hookgate.config import (
    ConfigError,
    HookgateConfig,
    load_config,
    parse_config,
    register_channel_validator,
    unregister_channel_validator,
)
from hookgate.examples import example_path
from hookgate.llm import OpenAICompatibleModel

PAY = "hookgate.examples.purchasing:oa__purchase_pay"
VENDORS = "hookgate.examples.purchasing:oa__list_vendors"

SPEC_EXAMPLE = f"""
database: sqlite+aiosqlite:///hookgate.db
orgs:
  - {{id: acme, name: ACME Corp, read_only: false}}
users:
  - id: alice
    org: acme
    admin: true
    token: ${{ALICE_TOKEN}}
    chat: {{feishu_open_id: ou_1a2b, slack_user_id: U0123, wecom_userid: alice}}
channels:
  - id: ops-feishu
    type: feishu
    org: acme
    config: {{app_id: cli_x, app_secret: ${{FEISHU_APP_SECRET}}, chat_id: oc_x,
             verification_token: ${{FEISHU_VERIFICATION_TOKEN}},
             encrypt_key: ${{FEISHU_ENCRYPT_KEY}}, base_url: https://open.feishu.cn}}
tools:
  - {PAY}
models:
  gpt: {{type: openai, base_url: https://api.example.com/v1, api_key: ${{LLM_API_KEY}},
        model: some-model}}
  script: {{type: scripted, turns: [{{tool_calls: [{{name: oa__purchase_pay,
           args: {{amount: 60000, vendor: ACME}}}}]}}, {{answer: done}}]}}
agents:
  - id: buyer
    name: Purchasing agent
    org: acme
    owner: alice
    model: script
    instructions: You buy what the user asks for.
    tools: [oa__purchase_pay]
    require_confirmation_for_all: false
    confirmation_mode: auto
    confirmation_approver_scope: initiator
    confirmation_timeout_s: 3600
    approval_channel_id: ops-feishu
    model_config_json:
      hooks:
        class_hooks: [audit_log, {{name: result_truncate, params: {{max_chars: 8000}}}}]
"""

SPEC_ENV = {
    "ALICE_TOKEN": "tok-alice",
    "FEISHU_APP_SECRET": "s3cret",
    "FEISHU_VERIFICATION_TOKEN": "vt",
    "FEISHU_ENCRYPT_KEY": "ek",
    "LLM_API_KEY": "sk-llm",
}

MINIMAL = f"""
orgs: [{{id: acme}}]
users: [{{id: alice, org: acme}}]
tools: [{PAY}, {VENDORS}]
models:
  script: {{type: scripted, turns: [{{answer: hi}}]}}
agents:
  - id: buyer
    org: acme
    owner: alice
    model: script
    tools: [oa__purchase_pay]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hookgate.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> HookgateConfig:
    return load_config(write(tmp_path, text), env=env if env is not None else {})


def load_error(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text, env)
    message = str(info.value)
    assert message.startswith(str(tmp_path / "hookgate.yaml") + ": ")
    return info.value


# -- a good file ---------------------------------------------------------------------------


def test_the_spec_example_becomes_agents_with_owner_org_tools_and_hooks(tmp_path):
    config = load(tmp_path, SPEC_EXAMPLE, SPEC_ENV)

    agents = config.build_agents()

    buyer = agents["buyer"]
    assert isinstance(buyer, Agent)
    assert (buyer.owner_user_id, buyer.org_id) == ("alice", "acme")
    assert [t.name for t in buyer.tools] == ["oa__purchase_pay"]
    assert buyer.approval_channel_id == "ops-feishu"
    assert buyer.confirmation_timeout_s == 3600
    assert buyer.model_config_json["hooks"]["class_hooks"][1] == {
        "name": "result_truncate", "params": {"max_chars": 8000}}
    assert config.channel("ops-feishu").config["app_secret"] == "s3cret"
    assert config.user("alice").chat.feishu_open_id == "ou_1a2b"
    # The relative SQLite file follows the configuration file, not the working directory.
    assert config.database == f"sqlite+aiosqlite:///{tmp_path / 'hookgate.db'}"


def test_an_agent_gets_the_model_it_names(tmp_path):
    config = load(tmp_path, SPEC_EXAMPLE, SPEC_ENV)

    assert isinstance(config.model_for("buyer"), ScriptedLLM)
    gpt = config.build_model("gpt")
    assert isinstance(gpt, OpenAICompatibleModel)
    assert (gpt.base_url, gpt.model) == ("https://api.example.com/v1", "some-model")


async def test_a_scripted_model_from_the_file_plays_its_turns(tmp_path):
    config = load(tmp_path, SPEC_EXAMPLE, SPEC_ENV)

    turn = await config.model_for("buyer").complete([{"role": "user", "content": "x"}], [])

    assert turn.tool_calls[0].args == {"amount": 60000, "vendor": "ACME"}


def test_each_build_gives_an_agent_its_own_hook_declaration(tmp_path):
    config = load(tmp_path, SPEC_EXAMPLE, SPEC_ENV)

    first = config.build_agent("buyer")
    first.model_config_json["hooks"]["class_hooks"].clear()

    assert len(config.build_agent("buyer").model_config_json["hooks"]["class_hooks"]) == 2


def test_a_user_is_found_by_token_whether_given_literally_or_as_sha256(tmp_path):
    digest = hashlib.sha256(b"tok-bob").hexdigest()
    config = load(tmp_path, MINIMAL.replace(
        "users: [{id: alice, org: acme}]",
        f"users: [{{id: alice, org: acme, token: tok-alice}},"
        f" {{id: bob, org: acme, token_sha256: {digest.upper()}}}]"))

    assert config.user_for_token("tok-alice").id == "alice"
    assert config.user_for_token("tok-bob").id == "bob"
    assert config.user_for_token("tok-mallory") is None


def test_the_bundled_purchasing_example_loads():
    config = load_config(example_path("purchasing"), env={})

    assert [t.name for t in config.build_agent("buyer").tools] == [
        "oa__purchase_pay", "oa__list_vendors"]


# -- ${VAR} --------------------------------------------------------------------------------


def test_a_variable_reference_is_replaced_anywhere_in_a_string(tmp_path):
    text = MINIMAL.replace("orgs: [{id: acme}]",
                           "orgs: [{id: acme, name: 'ACME ${REGION} ${ENV_NAME}', "
                           "read_only: '${READ_ONLY}'}]")

    config = load(tmp_path, text, {"REGION": "EU", "ENV_NAME": "prod", "READ_ONLY": "true"})

    assert config.org("acme").name == "ACME EU prod"
    assert config.org("acme").read_only is True


def test_a_default_applies_only_when_the_variable_is_unset(tmp_path):
    text = MINIMAL.replace("orgs: [{id: acme}]",
                           "orgs: [{id: acme, name: '${ORG_NAME:-Fallback Inc}'}]")

    assert load(tmp_path, text).org("acme").name == "Fallback Inc"
    assert load(tmp_path, text, {"ORG_NAME": "Set Inc"}).org("acme").name == "Set Inc"


def test_a_double_dollar_keeps_a_literal_reference(tmp_path):
    text = MINIMAL.replace("orgs: [{id: acme}]", "orgs: [{id: acme, name: '$${NOT_A_VAR}'}]")

    assert load(tmp_path, text).org("acme").name == "${NOT_A_VAR}"


def test_an_unset_variable_names_the_key_path_and_the_variable(tmp_path):
    env = dict(SPEC_ENV)
    del env["FEISHU_APP_SECRET"]

    error = load_error(tmp_path, SPEC_EXAMPLE, env)

    assert error.key == "channels[0].config.app_secret"
    assert "FEISHU_APP_SECRET is not set" in str(error)


# -- mistakes ------------------------------------------------------------------------------


def test_an_agent_naming_a_tool_the_file_does_not_import_is_refused(tmp_path):
    text = MINIMAL.replace("tools: [oa__purchase_pay]", "tools: [oa__list_vendors, oa__pay]")

    error = load_error(tmp_path, text)

    assert str(error) == (
        f"{tmp_path / 'hookgate.yaml'}: agents[0].tools[1]: unknown tool 'oa__pay' "
        "(configured tools: oa__purchase_pay, oa__list_vendors)"
    )


def test_invalid_yaml_is_reported_with_its_line(tmp_path):
    error = load_error(tmp_path, "orgs: []\nusers: []\ntools: x: y\n")

    assert error.key is not None and error.key.startswith("line 3")
    assert "invalid YAML" in str(error)


@pytest.mark.parametrize(("text", "where", "said"), [
    # The parser notices only on the next line; the mistake is the bracket left open.
    ("orgs:\n  - {id: acme\nusers: []\n", "line 2, column 5",
     "invalid YAML: this '{' is not closed (expected ',' or '}', but got ':' at line 3, "
     "column 6)"),
    ("orgs: [{id: acme}\nusers: []\n", "line 1, column 7",
     "invalid YAML: this '[' is not closed (expected ',' or ']', but got"),
    ("agents:\n  - id: a\n    model_config_json: {hooks: {class_hooks: [audit_log]}\n"
     "    model: m\n", "line 3, column 24", "this '{' is not closed"),
])
def test_an_unclosed_bracket_is_reported_where_it_was_opened(tmp_path, text, where, said):
    error = load_error(tmp_path, text)

    assert error.key == where
    assert said in str(error)


@pytest.mark.parametrize(("written", "seconds"), [
    ("5m", 300.0), ("90s", 90.0), ("2h", 7200.0), ("1d", 86400.0), ("1.5m", 90.0),
    ("600", 600.0), (600, 600.0),
])
def test_a_duration_is_accepted_as_the_docs_write_it_wherever_one_is_configured(
        tmp_path, written, seconds):
    value = repr(written) if isinstance(written, str) else written
    text = MINIMAL.replace("    model: script\n    tools:",
                           f"    model: script\n    confirmation_timeout_s: {value}\n    tools:")
    text = text.replace("models:\n", f"""worker: {{heartbeat_s: {value}, stalled_after_s: \
{value}, expiry_tick_s: {value}, shutdown_grace_s: {value}}}
models:
  gpt: {{type: openai, base_url: http://127.0.0.1:9/v1, api_key: k, model: m, \
timeout: {value}}}
""")
    if seconds > 3600:  # the worker's bounds are the field's own, whatever the unit
        text = text.replace("heartbeat_s", "concurrency: 2, heartbeat_s").split("worker:")[0] \
            + "models:" + text.split("models:", 1)[1]
    cfg = load(tmp_path, text)

    assert cfg.agent_spec("buyer").confirmation_timeout_s == seconds
    assert cfg.build_agent("buyer").confirmation_timeout_s == seconds
    assert cfg.models["gpt"].timeout == seconds  # type: ignore[union-attr]
    if seconds <= 3600:
        assert (cfg.worker.heartbeat_s, cfg.worker.shutdown_grace_s) == (seconds, seconds)


@pytest.mark.parametrize("written", ["5 minutes", "m5", "-5m", "nan", "1e400s", "5\u00b5s"])
def test_a_duration_that_is_not_one_is_refused_naming_the_key(tmp_path, written):
    text = MINIMAL.replace("    model: script\n    tools:",
                           f"    model: script\n    confirmation_timeout_s: {written!r}\n"
                           "    tools:")
    error = load_error(tmp_path, text)

    assert error.key == "agents[0].confirmation_timeout_s"
    assert "90s, 15m, 2h or 1d" in str(error) or "greater than 0" in str(error)


def test_a_key_written_twice_in_one_mapping_is_refused(tmp_path):
    error = load_error(tmp_path, "database: a\norgs: []\ndatabase: b\n")

    assert error.key == "line 3, column 1"
    assert "duplicate key 'database' (first at line 1)" in str(error)


def test_a_misspelt_key_is_named_with_a_suggestion(tmp_path):
    error = load_error(tmp_path, MINIMAL.replace("    tools: [oa__purchase_pay]",
                                                 "    tool: [oa__purchase_pay]"))

    assert error.key == "agents[0]"
    assert "unknown key 'tool'; did you mean 'tools'?" in error.problem


def test_an_unknown_top_level_section_is_refused(tmp_path):
    error = load_error(tmp_path, MINIMAL + "\nplugins: []\n")

    assert "unknown key 'plugins'" in str(error)


def test_a_value_of_the_wrong_type_names_the_key_and_the_value(tmp_path):
    error = load_error(tmp_path, MINIMAL.replace("orgs: [{id: acme}]",
                                                 "orgs: [{id: acme, read_only: maybe}]"))

    assert error.key == "orgs[0].read_only"
    assert "'maybe'" in error.problem


def test_a_confirmation_mode_outside_the_three_is_refused(tmp_path):
    error = load_error(tmp_path, MINIMAL + "    confirmation_mode: sometimes\n")

    assert error.key == "agents[0].confirmation_mode"
    assert "'auto', 'inline_only' or 'channel_only'" in error.problem


def test_a_missing_required_key_is_named(tmp_path):
    error = load_error(tmp_path, MINIMAL.replace("    model: script\n", ""))

    assert error.key == "agents[0].model"
    assert error.problem == "required key is missing"


def test_an_unknown_model_type_is_named_under_the_model(tmp_path):
    error = load_error(tmp_path, MINIMAL.replace("type: scripted", "type: anthropic"))

    assert error.key == "models.script"
    assert "'anthropic'" in error.problem and "'openai'" in error.problem


def test_a_misspelt_key_inside_a_model_is_named_without_the_type_tag(tmp_path):
    error = load_error(tmp_path, MINIMAL.replace("turns:", "turn:"))

    assert error.key == "models.script"
    assert "unknown key 'turn'; did you mean 'turns'?" in error.problem


def test_a_badly_shaped_scripted_turn_is_found_at_load_time(tmp_path):
    error = load_error(tmp_path, MINIMAL.replace("{answer: hi}", "{say: hi}"))

    assert error.key == "models.script.turns"
    assert "scripted turn 0: unknown keys say" in error.problem


def test_an_openai_model_without_a_key_names_the_setting_and_its_variable(tmp_path):
    text = MINIMAL + "  # gpt\n"
    text = text.replace("  script: {type: scripted, turns: [{answer: hi}]}",
                        "  script: {type: scripted, turns: [{answer: hi}]}\n"
                        "  gpt: {type: openai, base_url: 'http://127.0.0.1:9/v1', model: m}")

    error = load_error(tmp_path, text)
    filled = load(tmp_path, text, {"HOOKGATE_LLM_API_KEY": "sk-env"})

    assert error.key == "models.gpt.api_key"
    assert "HOOKGATE_LLM_API_KEY" in error.problem
    assert isinstance(filled.build_model("gpt"), OpenAICompatibleModel)


def test_a_tool_whose_module_is_missing_names_the_entry_and_the_cause(tmp_path):
    error = load_error(tmp_path, MINIMAL.replace(VENDORS, "nosuchpkg.tools:oa__list_vendors"))

    assert error.key == "tools[1]"
    assert "'nosuchpkg.tools:oa__list_vendors' cannot be imported" in error.problem
    assert "nosuchpkg" in error.problem


def test_a_tool_missing_from_its_module_is_named(tmp_path):
    error = load_error(tmp_path, MINIMAL.replace(
        VENDORS, "hookgate.examples.purchasing:oa__list_vendorz"))

    assert error.key == "tools[1]"
    assert "has no attribute 'oa__list_vendorz'" in error.problem


def test_something_that_is_not_a_tool_is_refused(tmp_path):
    error = load_error(tmp_path, MINIMAL.replace(VENDORS, "os.path:join"))

    assert error.key == "tools[1]"
    assert "is a function, not a Tool" in error.problem


def test_two_tools_with_one_name_are_refused(tmp_path):
    error = load_error(tmp_path, MINIMAL.replace(f"tools: [{PAY}, {VENDORS}]",
                                                 f"tools: [{PAY}, {VENDORS}, {PAY}]"))

    assert error.key == "tools[2]"
    assert "'oa__purchase_pay' is already taken by tools[0]" in error.problem


@pytest.mark.parametrize(
    ("change", "key", "problem"),
    [
        (("    org: acme\n    owner", "    org: acne\n    owner"), "agents[0].org",
         "unknown org 'acne' (orgs: acme)"),
        (("owner: alice", "owner: alicia"), "agents[0].owner",
         "unknown user 'alicia' (users: alice)"),
        (("model: script", "model: gpt"), "agents[0].model",
         "unknown model 'gpt' (models: script)"),
        (("model: script", "model: script\n    approval_channel_id: ops"),
         "agents[0].approval_channel_id", "unknown channel 'ops' (channels: none)"),
        (("users: [{id: alice, org: acme}]", "users: [{id: alice, org: other}]"),
         "users[0].org", "unknown org 'other' (orgs: acme)"),
    ],
)
def test_a_reference_to_something_not_declared_is_named(tmp_path, change, key, problem):
    error = load_error(tmp_path, MINIMAL.replace(*change))

    assert (error.key, error.problem) == (key, problem)


def test_an_owner_from_another_org_is_refused(tmp_path):
    text = MINIMAL.replace("orgs: [{id: acme}]", "orgs: [{id: acme}, {id: globex}]").replace(
        "users: [{id: alice, org: acme}]", "users: [{id: alice, org: globex}]")

    error = load_error(tmp_path, text)

    assert error.key == "agents[0].owner"
    assert "belongs to org 'globex', not the agent's org 'acme'" in error.problem


def test_duplicate_ids_name_both_places(tmp_path):
    error = load_error(tmp_path, MINIMAL.replace("orgs: [{id: acme}]",
                                                 "orgs: [{id: acme}, {id: acme}]"))

    assert (error.key, error.problem) == ("orgs[1].id", "duplicate id 'acme' (first at orgs[0])")


def test_every_problem_found_in_one_pass_is_reported(tmp_path):
    text = MINIMAL.replace("owner: alice", "owner: alicia").replace("model: script",
                                                                    "model: gpt")

    error = load_error(tmp_path, text)

    assert error.key == "agents[0].owner"
    assert len(error.more) == 1 and "agents[0].model: unknown model 'gpt'" in error.more[0]
    assert "unknown model 'gpt'" in str(error)


def test_an_unknown_channel_type_is_refused(tmp_path):
    text = MINIMAL + "channels: [{id: ops, type: matrix, org: acme}]\n"

    error = load_error(tmp_path, text)

    assert error.key == "channels[0].type"
    assert "unknown channel type 'matrix' (known: feishu, slack, wecom" in error.problem


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"nowhere\.yaml: cannot read the file"):
        load_config(tmp_path / "nowhere.yaml")


# -- channel validators --------------------------------------------------------------------


def _teams_config(config: dict[str, Any]) -> dict[str, Any]:
    if not config.get("webhook_secret"):
        raise ValueError("webhook_secret is required")
    return {"region": "global", **config}


@pytest.fixture
def teams_channels():
    register_channel_validator("teams", _teams_config)
    yield
    unregister_channel_validator("teams")


def test_a_registered_validator_rejects_a_channel_config_by_its_key(tmp_path, teams_channels):
    text = MINIMAL + "channels: [{id: ops, type: teams, org: acme, config: {team: t1}}]\n"

    error = load_error(tmp_path, text)

    assert error.key == "channels[0].config"
    assert error.problem == "invalid teams channel: webhook_secret is required"


def test_a_registered_validator_may_fill_in_defaults(tmp_path, teams_channels):
    text = MINIMAL + ("channels: [{id: ops, type: teams, org: acme,"
                      " config: {webhook_secret: '${TEAMS_SECRET}'}}]\n")

    config = load(tmp_path, text, {"TEAMS_SECRET": "shh"})

    assert config.channel("ops").config == {"region": "global", "webhook_secret": "shh"}
    assert config.channel("ops").enabled is True


# -- paths follow the file --------------------------------------------------------------------


@pytest.mark.parametrize(("written", "expected"), [
    ("sqlite+aiosqlite:///data/x.db", "sqlite+aiosqlite:///{dir}/data/x.db"),
    ("sqlite:///x.db?timeout=5", "sqlite:///{dir}/x.db?timeout=5"),
    ("sqlite+aiosqlite:////abs/x.db", "sqlite+aiosqlite:////abs/x.db"),
    ("sqlite+aiosqlite:///:memory:", "sqlite+aiosqlite:///:memory:"),
    ("sqlite+aiosqlite://", "sqlite+aiosqlite://"),
    ("postgresql+asyncpg://u@h/db", "postgresql+asyncpg://u@h/db"),
])
def test_a_relative_sqlite_file_is_read_from_the_files_folder(tmp_path, written, expected):
    config = load(tmp_path, f"database: '{written}'\n")
    assert config.database == expected.format(dir=tmp_path)


def test_a_command_hook_runs_in_the_files_folder_unless_cwd_says_otherwise(tmp_path):
    (tmp_path / "scripts").mkdir()
    config = load(tmp_path, textwrap.dedent("""
        models: {m: {type: scripted, turns: [{answer: ok}]}}
        agents:
          - id: a
            model: m
            model_config_json:
              hooks:
                command_hooks:
                  - {event: PreToolUse, command: "sh check.sh"}
                  - {event: PreToolUse, command: "sh check.sh", cwd: scripts}
                  - {event: PreToolUse, command: "sh check.sh", cwd: /tmp}
    """))
    hooks = config.agent_spec("a").model_config_json["hooks"]["command_hooks"]
    assert [h["cwd"] for h in hooks] == [str(tmp_path), str(tmp_path / "scripts"), "/tmp"]


def test_parsed_text_keeps_paths_as_written():
    config = parse_config("database: sqlite+aiosqlite:///x.db\n", env={})
    assert config.database == "sqlite+aiosqlite:///x.db"


def test_delegates_of_another_org_or_unknown_are_refused_when_the_file_loads() -> None:
    models = {"s": {"type": "scripted", "turns": [{"answer": "x"}]}}

    def doc(delegates: Any) -> dict[str, Any]:
        return {"orgs": [{"id": "acme"}, {"id": "other"}], "models": models,
                "agents": [{"id": "buyer", "org": "acme", "model": "s",
                            "model_config_json": {"delegates": delegates}},
                           {"id": "helper", "org": "acme", "model": "s"},
                           {"id": "spy", "org": "other", "model": "s"}]}

    assert parse_config(doc(["helper"])).agent_spec("buyer")
    with pytest.raises(ConfigError, match=r"delegates\[1\]: agent 'spy' belongs to org "
                                          r"'other', not agent 'buyer''s org 'acme'"):
        parse_config(doc(["helper", "spy"]))
    with pytest.raises(ConfigError, match="unknown agent 'ghost'"):
        parse_config(doc(["ghost"]))
    with pytest.raises(ConfigError, match="must be a list of agent ids"):
        parse_config(doc("helper"))


def test_a_token_expiry_needs_a_time_zone() -> None:
    base = {"orgs": [{"id": "acme"}]}
    cfg = parse_config({**base, "users": [{"id": "a", "org": "acme", "token": "t",
                                           "token_expires_at": "2030-01-01T00:00:00Z"}]})
    assert cfg.users[0].token_expires_at is not None
    with pytest.raises(ConfigError, match="token_expires_at"):
        parse_config({**base, "users": [{"id": "a", "org": "acme", "token": "t",
                                         "token_expires_at": "2030-01-01T00:00:00"}]})
