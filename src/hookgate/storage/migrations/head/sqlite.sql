-- revision: 0032
-- Rendered by scripts/render_head_schema.py from the migrations; do not edit.

CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);

CREATE TABLE channel_callbacks_seen (
	channel_id VARCHAR(128) NOT NULL, 
	dedupe_key VARCHAR(512) NOT NULL, 
	seen_at DATETIME NOT NULL, 
	PRIMARY KEY (channel_id, dedupe_key)
);

CREATE TABLE orgs (
	id VARCHAR(128) NOT NULL, 
	name VARCHAR(256) NOT NULL, 
	read_only BOOLEAN NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id)
);

CREATE TABLE tool_executions (
	run_id VARCHAR(64) NOT NULL, 
	tool_call_id VARCHAR(128) NOT NULL, 
	tool_name VARCHAR(256) NOT NULL, 
	args_sha256 VARCHAR(64) NOT NULL, 
	started_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	observation TEXT, 
	ok BOOLEAN, 
	PRIMARY KEY (run_id, tool_call_id)
);

CREATE TABLE agents (
	id VARCHAR(128) NOT NULL, 
	org_id VARCHAR(128), 
	name VARCHAR(256) NOT NULL, 
	owner_user_id VARCHAR(128), 
	definition JSON NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(org_id) REFERENCES orgs (id)
);

CREATE INDEX ix_agents_org_id ON agents (org_id);

CREATE TABLE channels (
	id VARCHAR(128) NOT NULL, 
	org_id VARCHAR(128) NOT NULL, 
	type VARCHAR(32) NOT NULL, 
	enabled BOOLEAN NOT NULL, 
	config_encrypted TEXT NOT NULL, 
	position INTEGER NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(org_id) REFERENCES orgs (id)
);

CREATE INDEX ix_channels_org_id ON channels (org_id);

CREATE TABLE audit_chain_heads (
	chain VARCHAR(128) NOT NULL, 
	last_seq BIGINT NOT NULL, 
	last_hash VARCHAR(64) NOT NULL, 
	PRIMARY KEY (chain)
);

CREATE TABLE rate_limit_counters (
	"key" VARCHAR(512) NOT NULL, 
	window_start BIGINT NOT NULL, 
	count INTEGER NOT NULL, 
	PRIMARY KEY ("key")
);

CREATE TABLE revoked_tokens (
	token_sha256 VARCHAR(64) NOT NULL, 
	user_id VARCHAR(128) NOT NULL, 
	revoked_by VARCHAR(128), 
	revoked_at DATETIME NOT NULL, 
	PRIMARY KEY (token_sha256)
);

CREATE TABLE approval_rules (
	id VARCHAR(64) NOT NULL, 
	org_id VARCHAR(128), 
	agent_id VARCHAR(128) NOT NULL, 
	tool_name VARCHAR(256) NOT NULL, 
	scope VARCHAR(16) NOT NULL, 
	run_id VARCHAR(64), 
	user_id VARCHAR(128), 
	"when" TEXT, 
	created_by VARCHAR(128) NOT NULL, 
	created_at DATETIME NOT NULL, 
	expires_at DATETIME, 
	from_request_id VARCHAR(64), 
	revoked_at DATETIME, 
	revoked_by VARCHAR(128), 
	uses INTEGER DEFAULT '0' NOT NULL, 
	last_used_at DATETIME, suspended_at DATETIME, suspended_reason TEXT, mode VARCHAR(16) DEFAULT 'enforce' NOT NULL, 
	PRIMARY KEY (id)
);

CREATE INDEX ix_approval_rules_lookup ON approval_rules (org_id, agent_id, tool_name);

CREATE TABLE approval_votes (
	id INTEGER NOT NULL, 
	request_id VARCHAR(64) NOT NULL, 
	user_id VARCHAR(128) NOT NULL, 
	decision VARCHAR(16) NOT NULL, 
	via VARCHAR(16), 
	channel_identity VARCHAR(256), 
	reason TEXT, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_approval_vote_person UNIQUE (request_id, user_id)
);

CREATE TABLE "confirmation_requests" (
	id VARCHAR(64) NOT NULL, 
	run_id VARCHAR(64) NOT NULL, 
	tool_call_id VARCHAR(128) NOT NULL, 
	agent_id VARCHAR(128) NOT NULL, 
	requested_by VARCHAR(128), 
	org_id VARCHAR(128), 
	mode VARCHAR(16) NOT NULL, 
	channel_id VARCHAR(128), 
	approver_scope VARCHAR(32) NOT NULL, 
	agent_owner_id VARCHAR(128), 
	status VARCHAR(16) NOT NULL, 
	tool_name VARCHAR(256) NOT NULL, 
	args JSON NOT NULL, 
	args_sha256 VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	expires_at DATETIME NOT NULL, 
	responded_at DATETIME, 
	responded_by VARCHAR(128), 
	responder_channel_identity VARCHAR(256), 
	reason TEXT, 
	delivery_ref JSON, 
	context JSON, 
	decided_via VARCHAR(16), 
	approvals_required INTEGER DEFAULT '1' NOT NULL, 
	allow_self_approval BOOLEAN DEFAULT 1 NOT NULL, 
	approvals JSON, followup JSON, reminders_sent INTEGER DEFAULT '0' NOT NULL, last_reminded_at DATETIME, escalated_at DATETIME, escalated_to JSON, escalation_refs JSON, unreachable TEXT, edited_args JSON, edited_args_sha256 VARCHAR(64), message TEXT, root_run_id VARCHAR(64), 
	PRIMARY KEY (id), 
	CONSTRAINT uq_confirmation_run_call UNIQUE (run_id, tool_call_id)
);

CREATE INDEX ix_confirmation_org_status ON confirmation_requests (org_id, status);

CREATE INDEX ix_confirmation_status_expires ON confirmation_requests (status, expires_at);

CREATE INDEX ix_confirmation_responded_at ON confirmation_requests (responded_at);

CREATE INDEX ix_confirmation_root_run ON confirmation_requests (root_run_id);

CREATE TABLE "connector_call_logs" (
	id INTEGER NOT NULL, 
	chain VARCHAR(128) NOT NULL, 
	seq BIGINT NOT NULL, 
	created_at DATETIME NOT NULL, 
	tool_name VARCHAR(256) NOT NULL, 
	connector VARCHAR(128), 
	agent_id VARCHAR(128), 
	user_id VARCHAR(128), 
	org_id VARCHAR(128), 
	run_id VARCHAR(64), 
	tool_call_id VARCHAR(128), 
	execution_path VARCHAR(32), 
	args_json TEXT NOT NULL, 
	args_sha256 VARCHAR(64) NOT NULL, 
	outcome VARCHAR(16) NOT NULL, 
	blocked_by VARCHAR(256), 
	detail TEXT, 
	result_chars BIGINT, 
	result_sha256 VARCHAR(64), 
	latency_us BIGINT NOT NULL, 
	prev_hash VARCHAR(64) NOT NULL, 
	row_hash VARCHAR(64) NOT NULL, 
	hash_v SMALLINT DEFAULT 2 NOT NULL, approver TEXT, request_id VARCHAR(64), wait_us BIGINT, parent_session TEXT, depth SMALLINT, session_id TEXT, acting_service VARCHAR(128), 
	PRIMARY KEY (id), 
	CONSTRAINT uq_call_log_chain_seq UNIQUE (chain, seq)
);

CREATE INDEX ix_call_log_org_agent ON connector_call_logs (org_id, agent_id);

CREATE INDEX ix_call_log_org_created ON connector_call_logs (org_id, created_at);

CREATE INDEX ix_call_log_org_user ON connector_call_logs (org_id, user_id);

CREATE INDEX ix_call_log_org_tool ON connector_call_logs (org_id, tool_name);

CREATE TABLE "runs" (
	id VARCHAR(64) NOT NULL, 
	agent_id VARCHAR(128) NOT NULL, 
	org_id VARCHAR(128), 
	user_id VARCHAR(128), 
	conversation_id VARCHAR(128), 
	engine VARCHAR(32) NOT NULL, 
	status VARCHAR(32) NOT NULL, 
	state_json TEXT NOT NULL, 
	answer TEXT, 
	error TEXT, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	fence BIGINT DEFAULT '0' NOT NULL, 
	followed BOOLEAN DEFAULT 0 NOT NULL, 
	PRIMARY KEY (id)
);

CREATE INDEX ix_runs_status ON runs (status);

CREATE INDEX ix_runs_org_id ON runs (org_id);

CREATE TABLE "users" (
	id VARCHAR(128) NOT NULL, 
	org_id VARCHAR(128) NOT NULL, 
	name VARCHAR(256) NOT NULL, 
	admin BOOLEAN NOT NULL, 
	token_sha256 VARCHAR(64), 
	feishu_open_id VARCHAR(128), 
	slack_user_id VARCHAR(128), 
	wecom_userid VARCHAR(128), 
	created_at DATETIME NOT NULL, 
	disabled BOOLEAN DEFAULT 0 NOT NULL, 
	declared BOOLEAN DEFAULT 0 NOT NULL, 
	token_expires_at DATETIME, 
	service BOOLEAN DEFAULT 0 NOT NULL, telegram_user_id VARCHAR(128), teams_aad_object_id VARCHAR(128), discord_user_id VARCHAR(128), email_address VARCHAR(320), ntfy_topic VARCHAR(128), 
	PRIMARY KEY (id), 
	UNIQUE (token_sha256), 
	FOREIGN KEY(org_id) REFERENCES orgs (id)
);

CREATE INDEX ix_users_wecom_userid ON users (wecom_userid);

CREATE INDEX ix_users_org_id ON users (org_id);

CREATE INDEX ix_users_feishu_open_id ON users (feishu_open_id);

CREATE INDEX ix_users_slack_user_id ON users (slack_user_id);

CREATE INDEX ix_call_log_org_session ON connector_call_logs (org_id, session_id);

CREATE INDEX ix_users_telegram_user_id ON users (telegram_user_id);

CREATE INDEX ix_users_teams_aad_object_id ON users (teams_aad_object_id);

CREATE INDEX ix_users_discord_user_id ON users (discord_user_id);

CREATE INDEX ix_users_email_address ON users (email_address);

CREATE INDEX ix_users_ntfy_topic ON users (ntfy_topic);

CREATE TABLE session_facts (
	id INTEGER NOT NULL, 
	session VARCHAR(256) NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	trusted BOOLEAN NOT NULL, 
	source VARCHAR(256) NOT NULL, 
	call_id VARCHAR(128), 
	text TEXT NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id)
);

CREATE INDEX ix_session_facts_session ON session_facts (session, id);

CREATE TABLE oidc_logins (
	state VARCHAR(128) NOT NULL, 
	nonce VARCHAR(128) NOT NULL, 
	code_verifier VARCHAR(128) NOT NULL, 
	binding_sha256 VARCHAR(64) NOT NULL, 
	return_to VARCHAR(512) NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (state)
);

CREATE TABLE oidc_identities (
	issuer VARCHAR(512) NOT NULL, 
	subject VARCHAR(255) NOT NULL, 
	user_id VARCHAR(128) NOT NULL, 
	email VARCHAR(320), 
	groups JSON NOT NULL, 
	updated_at DATETIME NOT NULL, 
	refused_at DATETIME, 
	PRIMARY KEY (issuer, subject), 
	FOREIGN KEY(user_id) REFERENCES users (id), 
	UNIQUE (user_id)
);

CREATE TABLE oidc_sessions (
	id_sha256 VARCHAR(64) NOT NULL, 
	user_id VARCHAR(128) NOT NULL, 
	issuer VARCHAR(512) NOT NULL, 
	subject VARCHAR(255) NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	csrf_token VARCHAR(64) NOT NULL, 
	refresh_token TEXT, 
	created_at DATETIME NOT NULL, 
	expires_at DATETIME NOT NULL, 
	checked_at DATETIME NOT NULL, 
	ended_at DATETIME, 
	ended_reason VARCHAR(512), 
	PRIMARY KEY (id_sha256), 
	FOREIGN KEY(user_id) REFERENCES users (id)
);

CREATE INDEX ix_oidc_sessions_user_id ON oidc_sessions (user_id);

CREATE TABLE limit_claims (
	id INTEGER NOT NULL, 
	limit_key VARCHAR(512) NOT NULL, 
	call_key VARCHAR(512) NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	amount BIGINT NOT NULL, 
	at FLOAT NOT NULL, 
	PRIMARY KEY (id)
);

CREATE INDEX ix_limit_claims_key_at ON limit_claims (limit_key, at);

CREATE INDEX ix_limit_claims_call ON limit_claims (call_key);

CREATE TABLE "run_events" (
	run_id VARCHAR(64) NOT NULL, 
	seq INTEGER NOT NULL, 
	type VARCHAR(64) NOT NULL, 
	data JSON NOT NULL, 
	created_at DATETIME NOT NULL, 
	CONSTRAINT run_events_pkey PRIMARY KEY (run_id, seq)
);

CREATE INDEX ix_session_facts_requests ON session_facts (session) WHERE kind = 'request';

