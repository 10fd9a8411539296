"""Span, attribute and metric names: the GenAI conventions' and hookgate's own.

The ``gen_ai.*`` names are those of the OpenTelemetry GenAI semantic conventions (status
"development"); tests/telemetry checks them against the installed semconv package, which is
not a runtime dependency. Everything about hooks and approvals is ``hookgate.*``
(docs: Deployment → Telemetry).
"""

from __future__ import annotations

from typing import Final

# -- GenAI semantic conventions -----------------------------------------------------------
OPERATION_NAME: Final = "gen_ai.operation.name"
PROVIDER_NAME: Final = "gen_ai.provider.name"
AGENT_ID: Final = "gen_ai.agent.id"
AGENT_NAME: Final = "gen_ai.agent.name"
AGENT_DESCRIPTION: Final = "gen_ai.agent.description"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
WORKFLOW_NAME: Final = "gen_ai.workflow.name"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_ID: Final = "gen_ai.response.id"
RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
TOKEN_TYPE: Final = "gen_ai.token.type"
ERROR_TYPE: Final = "error.type"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"

OP_INVOKE_AGENT: Final = "invoke_agent"
OP_INVOKE_WORKFLOW: Final = "invoke_workflow"
OP_EXECUTE_TOOL: Final = "execute_tool"
OP_CHAT: Final = "chat"

# -- hookgate's own -----------------------------------------------------------------------
RUN_ID: Final = "hookgate.run.id"
RUN_ENGINE: Final = "hookgate.run.engine"
RUN_STATUS: Final = "hookgate.run.status"
ORG_ID: Final = "hookgate.org.id"
EXECUTION_PATH: Final = "hookgate.execution_path"
PARENT_AGENT_ID: Final = "hookgate.delegation.parent_agent_id"
DEPTH: Final = "hookgate.delegation.depth"

TOOL_OUTCOME: Final = "hookgate.tool.outcome"
TOOL_BLOCKED_BY: Final = "hookgate.tool.blocked_by"
TOOL_CONNECTOR: Final = "hookgate.tool.connector"
TOOL_WRITES: Final = "hookgate.tool.writes"

HOOK_SPAN: Final = "hookgate.hook"
HOOK_NAME: Final = "hookgate.hook.name"
HOOK_POINT: Final = "hookgate.hook.point"
HOOK_OUTCOME: Final = "hookgate.hook.outcome"
HOOK_FAIL_MODE: Final = "hookgate.hook.fail_mode"
HOOK_REASON: Final = "hookgate.hook.reason"

APPROVAL_SPAN: Final = "hookgate.approval.wait"
APPROVAL_REQUEST_ID: Final = "hookgate.approval.request_id"
APPROVAL_OUTCOME: Final = "hookgate.approval.outcome"
APPROVAL_DECIDED_BY: Final = "hookgate.approval.decided_by"
APPROVAL_CHANNEL_IDENTITY: Final = "hookgate.approval.channel_identity"
APPROVAL_MODE: Final = "hookgate.approval.mode"
APPROVAL_CHANNEL_ID: Final = "hookgate.approval.channel_id"
APPROVAL_WAIT_S: Final = "hookgate.approval.wait_s"
APPROVAL_RESUMED: Final = "hookgate.approval.resumed"
#: Why nobody can be reached: ``no_approver`` or ``delivery_failed``.
APPROVAL_UNREACHABLE_CAUSE: Final = "hookgate.approval.unreachable.cause"
#: A follow-up sent: ``reminder`` or ``escalation``.
APPROVAL_FOLLOWUP_KIND: Final = "hookgate.approval.followup.kind"

CHANNEL_PLATFORM: Final = "hookgate.channel.platform"
HTTP_STATUS: Final = "http.response.status_code"

# -- metrics ------------------------------------------------------------------------------
M_TOOL_CALLS: Final = "hookgate.tool.calls"
M_HOOK_DURATION: Final = "hookgate.hook.duration"
M_APPROVALS_PENDING: Final = "hookgate.approval.pending"
M_APPROVAL_WAIT: Final = "hookgate.approval.wait.duration"
M_DELIVERY_FAILURES: Final = "hookgate.channel.delivery.failures"
M_APPROVALS_UNREACHABLE: Final = "hookgate.approval.unreachable"
M_APPROVAL_FOLLOWUPS: Final = "hookgate.approval.followups"
M_CLIENT_DURATION: Final = "gen_ai.client.operation.duration"
M_CLIENT_TOKENS: Final = "gen_ai.client.token.usage"
M_MCP_CLIENT_DURATION: Final = "mcp.client.operation.duration"
M_MCP_SERVER_DURATION: Final = "mcp.server.operation.duration"

#: The run key under which a run remembers the trace it belongs to (W3C traceparent), so a
#: run resumed after a restart goes on in the same trace.
STATE_TRACEPARENT: Final = "otel_traceparent"
