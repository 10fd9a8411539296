"""Load a configuration file: YAML → ``${VAR}`` expansion → typed sections → cross-checks.

Every problem becomes a ConfigError naming the file and the key path; tools are imported
here, so a missing module is found when the file is loaded, not when an agent first runs.
Paths in a file follow the file, not the process: its directory is on the import path, a
relative SQLite file and a command hook's working directory are read from it.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from hookgate.catalog.catalog import import_target
from hookgate.channels.validators import channel_validator
from hookgate.config.environment import (
    References,
    UnsetVariable,
    expand,
    is_hook_command,
    key_path,
)
from hookgate.config.errors import ConfigError
from hookgate.config.mcp_servers import check_access
from hookgate.config.policies import anchor_policy_paths, check_policies
from hookgate.config.schema import AgentSpec, HookgateConfig, OpenAIModelSpec
from hookgate.escalation_policy import ESCALATION_GROUPS
from hookgate.llm.openai_compat import ENV_API_KEY, ENV_BASE_URL, ENV_MODEL
from hookgate.tools.tool import Tool
from hookgate.workflows.schema import AgentNode

Problem = tuple[str, str]  # (key path, what is wrong)


def load_config(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None,
                data_dir: str | os.PathLike[str] | None = None) -> HookgateConfig:
    """Read, check and resolve the configuration file at ``path``.

    ``env`` replaces ``os.environ`` for ``${VAR}`` references and model settings. The file's
    directory goes on the import path (for its tools and hook modules) and is where command
    hooks run; a relative SQLite file lives there too, or in ``data_dir`` when given.
    """
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(source, None, f"cannot read the file: {exc.strerror or exc}") from exc
    directory = Path(source).resolve().parent
    return parse_config(text, source=source, env=env, directory=directory,
                        data_dir=Path(data_dir).resolve() if data_dir else directory)


def parse_config(document: str | Mapping[str, Any], *, source: str = "<config>",
                 env: Mapping[str, str] | None = None, directory: Path | None = None,
                 data_dir: Path | None = None) -> HookgateConfig:
    """Like `load_config`, from YAML text or an already parsed mapping.

    Relative paths are resolved against ``directory`` (``data_dir`` for the SQLite file);
    without it they are left as written, relative to the working directory.
    """
    environ = os.environ if env is None else env
    refs = References()
    raw = (_parse_yaml(refs.hide(document), source) if isinstance(document, str)
           else dict(document))
    if not isinstance(raw, dict):
        raise ConfigError(source, None, "the file must be a YAML mapping with keys such as "
                                        "database, orgs, users, channels, tools, models, agents")
    try:
        data = expand(raw, environ, refs, verbatim=is_hook_command)
    except UnsetVariable as exc:
        raise ConfigError(source, exc.key or None, str(exc)) from None
    _load_channel_plugins()
    try:
        config = HookgateConfig.model_validate(data)
    except ValidationError as exc:
        raise _from_validation(source, exc, data) from None
    config._source = source
    if directory is not None:
        _importable(directory)
        _anchor_paths(config, directory, data_dir or directory)
    _Resolver(config, environ).run()
    return config


# -- paths ---------------------------------------------------------------------------------


def _importable(directory: Path) -> None:
    # Modules next to the file import. Appended, not put first: a file there cannot shadow
    # the standard library or an installed package that hookgate imports later.
    entry = str(directory)
    if entry not in sys.path:
        sys.path.append(entry)


def sqlite_file_url(url: str, base: Path) -> str:
    """``url`` with a relative SQLite file made absolute against ``base``; others unchanged."""
    scheme, sep, rest = url.partition(":///")
    if not sep or not scheme.startswith("sqlite"):
        return url
    file, query_sep, query = rest.partition("?")
    if not file or file.startswith(("/", ":memory:", "file:")):
        return url
    return f"{scheme}:///{base / file}{query_sep}{query}"


def _anchor_paths(config: HookgateConfig, directory: Path, data_dir: Path) -> None:
    config.database = sqlite_file_url(config.database, data_dir)
    anchor_policy_paths(config, directory)
    # A command hook's relative script or cwd means the file's folder, wherever the process
    # started; the entry is rewritten here so the declarative hooks need not know the file.
    for agent in config.agents:
        hooks = agent.model_config_json.get("hooks")
        entries = hooks.get("command_hooks") if isinstance(hooks, Mapping) else None
        if not isinstance(entries, list):
            continue
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            cwd = entry.get("cwd")
            if cwd is None:
                entry["cwd"] = str(directory)
            elif isinstance(cwd, str):
                entry["cwd"] = str(directory / os.path.expanduser(cwd))


# -- YAML ----------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key repeated in one mapping (PyYAML keeps the last)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key}' (first at line {seen[key] + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        except TypeError:  # an unhashable key: let PyYAML report it
            break
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


_UNCLOSED = {"while parsing a flow mapping": "{", "while parsing a flow sequence": "["}


def _at(mark: yaml.Mark) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


def _yaml_problem(exc: yaml.MarkedYAMLError) -> tuple[str | None, str]:
    """(where, what) of a YAML error. An unclosed ``{`` or ``[`` is found only lines later,
    where the parser first meets something else: the place named is the bracket's own."""
    opened = _UNCLOSED.get(exc.context or "")
    if opened and exc.context_mark is not None and exc.problem_mark is not None and (
            exc.problem_mark.line != exc.context_mark.line):
        return (_at(exc.context_mark), f"invalid YAML: this '{opened}' is not closed "
                                       f"({exc.problem} at {_at(exc.problem_mark)})")
    mark = exc.problem_mark or exc.context_mark
    what = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
    return (_at(mark) if mark else None), f"invalid YAML: {what}"


def _parse_yaml(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as exc:
        raise ConfigError(source, *_yaml_problem(exc)) from None
    except yaml.YAMLError as exc:
        raise ConfigError(source, None, f"invalid YAML: {exc}") from None


def _load_channel_plugins() -> None:
    # The channels package registers its per-type config validators when imported.
    try:
        importlib.import_module("hookgate.channels")
    except ModuleNotFoundError as exc:
        if exc.name != "hookgate.channels":
            raise


# -- pydantic errors -----------------------------------------------------------------------


def _from_validation(source: str, exc: ValidationError, data: Any) -> ConfigError:
    problems = [(key_path(_file_loc(err["loc"], data)), _describe(err))
                for err in exc.errors()]
    return _error(source, problems)


def _file_loc(loc: tuple[str | int, ...], data: Any) -> tuple[str | int, ...]:
    """The error's location as keys of the file: drop the union tags pydantic inserts."""
    out: list[str | int] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part not in node and node.get("type") == part:
            continue  # ('models', 'gpt', 'openai', ...): 'openai' is the tag, not a key
        out.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            node = None
    return tuple(out)


def _describe(err: Any) -> str:
    kind, msg, ctx = err["type"], str(err["msg"]), err.get("ctx") or {}
    if kind == "missing":
        return "required key is missing"
    if kind == "unknown_key":
        return msg
    if kind == "union_tag_invalid":
        return (f"unknown {ctx.get('discriminator', 'type')} '{ctx.get('tag')}' "
                f"(expected one of {ctx.get('expected_tags')})")
    if kind == "union_tag_not_found":
        return f"missing {ctx.get('discriminator', 'type')}"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    value = err.get("input")
    if isinstance(value, dict | list):
        return f"{msg} (got a {'mapping' if isinstance(value, dict) else 'list'})"
    return f"{msg} (got {value!r})"


def _error(source: str, problems: list[Problem]) -> ConfigError:
    key, problem = problems[0]
    more = [f"{source}: {k}: {p}" if k else f"{source}: {p}" for k, p in problems[1:]]
    return ConfigError(source, key or None, problem, more)


# -- cross-checks and resolution -----------------------------------------------------------


def _listing(ids: Any) -> str:
    names = list(ids)
    return ", ".join(names) if names else "none"


def _import_hint(exc: ImportError) -> str:
    if not isinstance(exc, ModuleNotFoundError):
        return ""
    return (" (modules are looked for on the Python path, then next to the configuration "
            "file; check the name, or install the package that has it)")


class _Resolver:
    """Checks what one section says about another, and imports the tools."""

    def __init__(self, config: HookgateConfig, env: Mapping[str, str]) -> None:
        self.config = config
        self.env = env
        self.problems: list[Problem] = []

    def run(self) -> None:
        self._unique_ids()
        self._users()
        self._channels()
        tools_ok = self._tools()
        self._models()
        self._agents(check_tools=tools_ok)
        self._delegates()
        self._workflows()
        if tools_ok and not self.problems:
            self.problems.extend(check_policies(self.config))
        if self.problems:
            raise _error(self.config.source, self.problems)

    def fail(self, key: str, problem: str) -> None:
        self.problems.append((key, problem))

    def _unique_ids(self) -> None:
        c = self.config
        sections: dict[str, list[str]] = {
            "orgs": [o.id for o in c.orgs], "users": [u.id for u in c.users],
            "channels": [ch.id for ch in c.channels], "agents": [a.id for a in c.agents],
            "mcp_servers": [m.id for m in c.mcp_servers],
        }
        for section, ids in sections.items():
            first: dict[str, int] = {}
            for i, ident in enumerate(ids):
                if ident in first:
                    self.fail(f"{section}[{i}].id", f"duplicate id '{ident}' "
                                                    f"(first at {section}[{first[ident]}])")
                else:
                    first[ident] = i

    def _org_known(self, key: str, org: str) -> bool:
        if self.config.org(org) is None:
            known = _listing(o.id for o in self.config.orgs)
            self.fail(key, f"unknown org '{org}' (orgs: {known})")
            return False
        return True

    def _users(self) -> None:
        for i, user in enumerate(self.config.users):
            self._org_known(f"users[{i}].org", user.org)

    def _channels(self) -> None:
        for i, channel in enumerate(self.config.channels):
            self._org_known(f"channels[{i}].org", channel.org)
            validate = channel_validator(channel.type)
            if validate is None:
                continue
            try:
                normalised = validate(dict(channel.config))
            except ValidationError as exc:
                for err in exc.errors():
                    where = key_path((f"channels[{i}].config", *err["loc"]))
                    self.fail(where, _describe(err))
                continue
            except ValueError as exc:
                self.fail(f"channels[{i}].config", f"invalid {channel.type} channel: {exc}")
                continue
            except Exception as exc:  # a validator's own error type: still the file's fault
                self.fail(f"channels[{i}].config",
                          f"invalid {channel.type} channel: {type(exc).__name__}: {exc}")
                continue
            if isinstance(normalised, Mapping):
                channel.config = dict(normalised)

    def _tools(self) -> bool:
        resolved: dict[str, Tool] = {}
        origin: dict[str, int] = {}
        ok = True
        for i, target in enumerate(self.config.tools):
            key = f"tools[{i}]"
            try:
                obj = import_target(target)
            except ImportError as exc:
                self.fail(key, f"'{target}' cannot be imported: {exc}{_import_hint(exc)}")
                ok = False
                continue
            except Exception as exc:
                self.fail(key, f"importing '{target}' raised {type(exc).__name__}: {exc}")
                ok = False
                continue
            if not isinstance(obj, Tool):
                self.fail(key, f"'{target}' is a {type(obj).__name__}, not a Tool (decorate "
                               "the function with @hookgate.tool, or point at a Tool)")
                ok = False
                continue
            if obj.name in resolved:
                first = origin[obj.name]
                self.fail(key, f"tool name '{obj.name}' is already taken by "
                               f"tools[{first}] ('{self.config.tools[first]}')")
                continue
            resolved[obj.name] = obj
            origin[obj.name] = i
        self.config._tool_objects = resolved
        return ok

    def _models(self) -> None:
        for name, spec in self.config.models.items():
            if not isinstance(spec, OpenAIModelSpec):
                continue
            for field, env_var in (("base_url", ENV_BASE_URL), ("api_key", ENV_API_KEY),
                                   ("model", ENV_MODEL)):
                if getattr(spec, field):
                    continue
                if self.env.get(env_var):
                    setattr(spec, field, self.env[env_var])
                else:
                    self.fail(f"models.{name}.{field}", f"missing (give it here, or set {env_var})")

    def _agents(self, *, check_tools: bool) -> None:
        c = self.config
        for i, agent in enumerate(c.agents):
            at = f"agents[{i}]"
            org_ok = agent.org is not None and self._org_known(f"{at}.org", agent.org)
            if agent.owner is not None:
                owner = c.user(agent.owner)
                if owner is None:
                    self.fail(f"{at}.owner", f"unknown user '{agent.owner}' "
                                             f"(users: {_listing(u.id for u in c.users)})")
                elif org_ok and owner.org != agent.org:
                    self.fail(f"{at}.owner", f"user '{owner.id}' belongs to org '{owner.org}', "
                                             f"not the agent's org '{agent.org}'")
                elif owner.kind == "service":
                    self.fail(f"{at}.owner", f"user '{owner.id}' is a service identity: an "
                                             "agent's owner decides its calls, so it must be "
                                             "a person")
            if agent.model not in c.models:
                self.fail(f"{at}.model", f"unknown model '{agent.model}' "
                                         f"(models: {_listing(c.models)})")
            if agent.approval_channel_id is not None:
                self._agent_channel(f"{at}.approval_channel_id", agent.approval_channel_id,
                                    agent.org if org_ok else None)
            for j, channel_id in enumerate(agent.approval_channel_ids):
                self._agent_channel(f"{at}.approval_channel_ids[{j}]", channel_id,
                                    agent.org if org_ok else None)
            self._followup(at, agent)
            if check_tools:
                self._agent_tools(at, agent.tools)
            if agent.mcp is not None:
                self.problems.extend(
                    check_access(at, agent.mcp, {m.id: m for m in c.mcp_servers}))

    def _followup(self, at: str, agent: AgentSpec) -> None:
        # Escalating to someone who cannot be found or belongs to another org would wait
        # for nobody: refused at load, as an unknown approval channel is.
        c = self.config
        for j, name in enumerate(agent.escalate_to):
            if name in ESCALATION_GROUPS:
                continue
            user = c.user(name)
            if user is None:
                self.fail(f"{at}.escalate_to[{j}]",
                          f"unknown user '{name}' (users: {_listing(u.id for u in c.users)}; "
                          f"groups: {', '.join(ESCALATION_GROUPS)})")
            elif agent.org is not None and user.org != agent.org:
                self.fail(f"{at}.escalate_to[{j}]", f"user '{name}' belongs to org "
                                                    f"'{user.org}', not the agent's org "
                                                    f"'{agent.org}'")
            elif user.kind == "service":
                self.fail(f"{at}.escalate_to[{j}]", f"user '{name}' is a service identity "
                                                    "and never decides: escalate to a person")
        if agent.escalation_channel_id is not None:
            self._agent_channel(f"{at}.escalation_channel_id", agent.escalation_channel_id,
                                agent.org)

    def _agent_channel(self, key: str, channel_id: str, org: str | None) -> None:
        """``channel_id`` must be declared, and be a channel of ``org`` (when known)."""
        channel = self.config.channel(channel_id)
        if channel is None:
            self.fail(key, f"unknown channel '{channel_id}' "
                           f"(channels: {_listing(ch.id for ch in self.config.channels)})")
        elif org is not None and channel.org != org:
            self.fail(key, f"channel '{channel.id}' belongs to org '{channel.org}', "
                           f"not the agent's org '{org}'")

    def _same_org_agent(self, key: str, agent_id: Any, org: str | None, whose: str) -> None:
        # An agent may hand work only to agents of its own org: a delegate or an agent node
        # of another org would act for this org's user under that org's rules.
        target = next((a for a in self.config.agents if a.id == agent_id), None)
        if target is None:
            known = _listing(a.id for a in self.config.agents)
            self.fail(key, f"unknown agent {agent_id!r} (agents: {known})")
        elif target.org != org:
            self.fail(key, f"agent '{target.id}' belongs to org '{target.org}', not {whose} "
                           f"org '{org}'")

    def _delegates(self) -> None:
        for i, agent in enumerate(self.config.agents):
            raw = agent.model_config_json.get("delegates")
            at = f"agents[{i}].model_config_json.delegates"
            if raw is None:
                continue
            if not isinstance(raw, list):
                self.fail(at, "must be a list of agent ids")
                continue
            for j, name in enumerate(raw):
                self._same_org_agent(f"{at}[{j}]", name, agent.org, f"agent '{agent.id}''s")

    def _workflows(self) -> None:
        c = self.config
        for i, workflow in enumerate(c.workflows):
            at = f"workflows[{i}]"
            runner = next((a for a in c.agents if a.id == workflow.as_agent), None)
            if runner is None:
                continue  # the run fails with the reason (a file may declare agents later)
            for j, node in enumerate(workflow.nodes):
                if isinstance(node, AgentNode):
                    self._same_org_agent(f"{at}.nodes[{j}].agent", node.agent, runner.org,
                                         f"the workflow's as_agent '{runner.id}''s")

    def _agent_tools(self, at: str, names: list[str]) -> None:
        known = self.config.tool_objects
        seen: set[str] = set()
        for j, name in enumerate(names):
            if name not in known:
                self.fail(f"{at}.tools[{j}]", f"unknown tool '{name}' "
                                              f"(configured tools: {_listing(known)})")
            elif name in seen:
                self.fail(f"{at}.tools[{j}]", f"tool '{name}' is listed twice")
            seen.add(name)
